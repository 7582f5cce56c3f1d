"""
PyStruct's snakes: edge features on pixel grids
===============================================

PyStruct's ``plot_snakes`` example labels every pixel of the snakes images (Nowozin et
al.'s data: a snake of ten segments on a background, the label of a pixel its segment's
position from the head, or 0). It one-hot codes the colours of each pixel's 3 × 3
neighbourhood as node features, builds the 4-connected grid graph, and trains an
``EdgeFeatureGraphCRF`` with ``OneSlackSSVM(C=0.1, tol=0.1)`` twice: with edge features
that only give an edge's direction (``qpbo`` inference), and with edge features that hold
the node features at both ends of the edge, per direction (``qpbo``, switching to ``ad3``).
It warns that learning takes 5 to 20 minutes.

The dualstruct port is the gallery's :doc:`../plot_snakes`:
:func:`~dualstruct.datasets.fetch_snakes` reads the images,
:func:`~dualstruct.datasets.snakes.snakes_graphs` builds the graphs (``edge_features=
"direction"`` or ``"colours"``, PyStruct's two variants), and the model is
:class:`~dualstruct.models.EdgeFeatureGraphCRF` under :class:`~dualstruct.SSVM`. There
is no inference method to choose: the oracle searches for the exact maximum by branch and
bound over the LP relaxation's bounds, and the duality gap printed is certified by its
bound.

This page trains the first variant, with PyStruct's ``C=0.1`` and 10 BCFW passes; the
second is the full example.

.. list-table::
   :header-rows: 1

   * - test pixel accuracy
     - PyStruct (its documentation)
     - dualstruct
   * - direction edge features
     - 0.829
     - printed below
   * - colour edge features
     - 0.997 (5–20 minutes of training, PyStruct says)
     - printed on :doc:`../plot_snakes` (10 BCFW passes)
"""

from dualstruct import SSVM
from dualstruct.datasets import fetch_snakes
from dualstruct.datasets.snakes import snakes_graphs
from dualstruct.models import EdgeFeatureGraphCRF

images_train, maps_train = fetch_snakes("train")
images_test, maps_test = fetch_snakes("test")
graphs = snakes_graphs(images_train + images_test, edge_features="direction")
X_train, X_test = graphs[: len(images_train)], graphs[len(images_train) :]
Y_train = [m.ravel() for m in maps_train]  # one label per pixel, row-major
Y_test = [m.ravel() for m in maps_test]

nodes, edges, edge_features = X_train[0]
model = EdgeFeatureGraphCRF(
    n_states=11, n_features=nodes.shape[1], n_edge_features=edge_features.shape[1], directed=True
)
svm = SSVM(model, C=0.1, max_iter=10, tol=0.03, random_state=0).fit(X_train, Y_train)
gap = svm.history_.last_checked().relative_gap
print(f"direction edge features: test pixel accuracy {svm.score(X_test, Y_test):.4f}")
print(f"({svm.n_iter_} passes, certified relative duality gap {gap:.1%})")
