"""
Snakes: a grid CRF on pixel images
==================================

Label every pixel of the snakes images (PyStruct's grid-CRF task) with
:class:`~dualstruct.models.EdgeFeatureGridCRF`. Each image shows a snake of ten segments on a
blue background; the label of a pixel is the segment's position from the head (1–10) or 0.
Colours alone cannot tell segment 4 from segment 8: the position has to travel along the
snake through the pairwise potentials. With pair tables that depend on the colours at both
ends of an edge and on its direction, the model learns that; with one table per direction
(:class:`~dualstruct.models.DirectionalGridCRF`) it does not.

The grids are loopy. The oracle finds the exact loss-augmented labelling by branch and bound
over the bounds of the LP relaxation (the LP alone is not tight on these images), so the
duality gap printed certifies the structural SVM itself, and training stops when it is
below ``tol`` (here 2%, at C = 0.1 as in PyStruct's example; at C = 10 the gap closes much
more slowly, BENCHMARKS.md).

    DUALSTRUCT_DATA=../shared/data python examples/plot_snakes.py
"""

import matplotlib.pyplot as plt

import dualstruct
from dualstruct.datasets import fetch_snakes
from dualstruct.datasets.snakes import snakes_graphs
from dualstruct.models import EdgeFeatureGridCRF

images_train, maps_train = fetch_snakes("train")
images_test, maps_test = fetch_snakes("test")
images = images_train + images_test
# per pixel: the one-hot colours of the pixel and its four neighbours; per grid edge (in
# grid_edges order): the colours at both ends and the direction
graphs = snakes_graphs(images, edge_features="colours")
X = [(nodes.reshape(*im.shape[:2], -1), z) for (nodes, _, z), im in zip(graphs, images)]
X_train, X_test = X[: len(images_train)], X[len(images_train) :]

image, edge_features = X_train[0]
model = EdgeFeatureGridCRF(
    n_states=11, n_features=image.shape[2], n_edge_features=edge_features.shape[1]
)
svm = dualstruct.SSVM(model, C=0.1, max_iter=50, tol=0.02, check_every=5, verbose=1, random_state=0)
svm.fit(X_train, maps_train, validation_data=(X_test, maps_test))
last = svm.history_.last_checked()
print(f"{svm.n_iter_} passes, certified relative gap {last.relative_gap:.2%}")
print(f"test pixel accuracy: {svm.score(X_test, maps_test):.4f}")
calls, loose = svm.solver_.data.kernel.lp_stats
nodes = svm.solver_.data.kernel.search_stats[0]
print(f"oracle calls: {calls}, certified exact: {1 - loose / calls:.1%}, search nodes: {nodes}")

# %%
# The primal (an upper bound, from the oracle's certified maxima) and the dual close in on
# the optimum.
dualstruct.plot_history(svm, x="passes")
plt.show()

# %%
# A test image, its true segment labels and the predicted ones (an (H, W) label image).
predicted = svm.predict(X_test[:1])[0]
fig, axes = plt.subplots(1, 3, figsize=(7, 2.6), constrained_layout=True)
for ax, picture, title in zip(
    axes, (images_test[0], maps_test[0], predicted), ("image", "true labels", "predicted")
):
    if picture.ndim == 3:
        ax.imshow(picture)
    else:
        ax.imshow(picture, cmap="tab20", vmin=0, vmax=19)
    ax.set_title(title)
    ax.axis("off")
plt.show()
