"""``GraphCRF`` and ``EdgeFeatureGraphCRF``: every example is a graph of its own (node features
and an edge list, optionally edge features), labelled node by node."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from ..._pystruct import refuse_pystruct_model_keywords, resolve_inference_method
from ...data import BlockData
from ...data.blocks import integer_labels, state_codes
from ...inference.graph import is_forest
from ..base import KernelModel
from ..support import (
    FULL_ROWS_FROM,
    check_support,
    kernel_support,
    support_from_pairs,
    support_matrix,
)
from .kernels import BRANCH, ENUMERATE, FOREST, LP, GraphKernel

INFERENCE = ("auto", "exact", "lp")


class EdgeFeatureGraphCRF(KernelModel):
    """Pairwise CRF on per-example graphs whose pairwise potentials depend on edge features:
    ``θ_e(a, b) = Σ_f z_{e,f} W_P[f, a, b]`` (directed tables, or symmetric ones with
    ``directed=False``), node potentials ``⟨W_U[:, a], x_u⟩``, weighted Hamming loss.

    An example ``x`` is ``(node_features, edges, edge_features)``: an (n, d) array or sparse
    matrix, an (E, 2) integer array of node pairs (u, v) (the table is indexed
    ``[label of u, label of v]``) and an (E, F) array. PyTorch Geometric's layouts, edges
    as (2, E) and edge features as (F, E), are accepted where the shape tells them apart
    (E ≠ 2, E ≠ F; otherwise the layout above is read); no edges is an empty array. Edges
    must be whole numbers naming nodes ``0 … n − 1``. A labelling is an (n,) int array.

    Parameters
    ----------
    n_states, n_features, n_edge_features : int
    directed : bool, default True
        One K × K table per edge feature; ``False``: symmetric tables, K(K+1)/2 parameters.
    inference_method : {"auto", "exact", "lp"}
        ``"auto"``: exact max-product on forests, enumeration up to ``enumerate_up_to``
        labellings, otherwise exact MAP by branch and bound over the bounds of the LP
        relaxation (MPLP), at most ``bb_budget`` search nodes a call: the certificate is for
        the structural SVM itself, and a call that exhausts the budget returns its largest
        open bound (still an upper bound). ``"exact"``: refuse graphs that need the search.
        ``"lp"``: the LP relaxation over the local polytope everywhere except forests, solved
        to its optimum (MPLP, then PDHG where MPLP does not certify); the oracle's point is
        the LP's (fractional) optimum, so training solves and certifies the relaxed
        structural SVM (Finley and Joachims 2008), and prediction searches by branch and
        bound. ``lp_stats`` on the kernel counts the calls on loopy graphs and those not
        certified (exact MAP, or the LP's optimum, to ``lp_tol``). PyStruct's names
        (``"max-product"``, ``"qpbo"``, ``"ad3"``, …) are refused with what to use instead.
        The older keyword ``inference=`` is still accepted; the mode is the attribute
        ``inference_method`` (``inference`` is the protocol method).
    loss_weights : (K,) array, optional
    enumerate_up_to : int, default 4096
    lp_sweeps : int, default 200
    lp_tol : float, default 1e-9
        Relative tolerance of the certificates (MPLP's and the search's bound against the
        best labelling; the LP's bound against its best point).
    bb_budget : int, default 64
        Branch-and-bound nodes (LP bounds) per call, the root included.
    lp_iter : int, default 20000
        PDHG iterations per call (``"lp"``).
    support : (indptr, labels), optional
        Sparse node weights: feature f may score only the states
        ``labels[indptr[f]:indptr[f+1]]`` (:func:`observed_support`: those it met in
        training). None (default): the dense d × K matrix.
    inference : str, optional
        The older name of ``inference_method``.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import EdgeFeatureGraphCRF, grid_edges
    >>> edges, directions = grid_edges(2, 2, directions=True)   # one-hot right / down
    >>> model = EdgeFeatureGraphCRF(n_states=2, n_features=3, n_edge_features=2)
    >>> model.size                                   # 3 x 2 node weights + 2 tables of 2 x 2
    14
    >>> x = (np.ones((4, 3)), edges, directions)
    >>> model.joint_feature(x, np.array([0, 1, 1, 0])).shape
    (14,)
    """

    @refuse_pystruct_model_keywords
    def __init__(
        self,
        n_states,
        n_features,
        n_edge_features,
        *,
        directed=True,
        inference_method=None,
        loss_weights=None,
        enumerate_up_to=4096,
        lp_sweeps=200,
        lp_tol=1e-9,
        support=None,
        inference=None,
        bb_budget=64,
        lp_iter=20000,
    ):
        self.n_states = _integer_option("n_states", n_states, 2)
        self.n_features = _integer_option("n_features", n_features, 1)
        self.n_edge_features = _integer_option("n_edge_features", n_edge_features, 1)
        self.inference_method = resolve_inference_method(
            type(self).__name__, inference_method, inference, INFERENCE
        )
        if not isinstance(directed, (bool, np.bool_)):
            raise ValueError(f"directed must be True or False, got {directed!r}")
        self.directed = bool(directed)
        self.enumerate_up_to = _integer_option("enumerate_up_to", enumerate_up_to, 0)
        self.lp_sweeps = _integer_option("lp_sweeps", lp_sweeps, 1)
        self.bb_budget = _integer_option("bb_budget", bb_budget, 1)
        self.lp_iter = _integer_option("lp_iter", lp_iter, 0)
        if (
            isinstance(lp_tol, (bool, np.bool_))
            or not isinstance(lp_tol, numbers.Real)
            or not np.isfinite(lp_tol)
            or lp_tol < 0
        ):
            raise ValueError(f"lp_tol must be a finite number >= 0, got {lp_tol!r}")
        self.lp_tol = float(lp_tol)
        K = self.n_states
        lw = np.ones(K) if loss_weights is None else np.asarray(loss_weights, dtype=np.float64)
        if lw.shape != (K,) or np.any(lw < 0) or not np.all(np.isfinite(lw)):
            raise ValueError(f"loss_weights must be {K} finite non-negative numbers")
        self.loss_weights = np.ascontiguousarray(lw)
        if self.directed:
            self.pair_index = np.arange(K * K, dtype=np.int64).reshape(K, K)
        else:
            a, b = np.triu_indices(K)
            self.pair_index = np.zeros((K, K), dtype=np.int64)
            self.pair_index[a, b] = self.pair_index[b, a] = np.arange(len(a))
        self.n_pairs = int(self.pair_index.max()) + 1
        self.support = None if support is None else check_support(support, self.n_features, K)

    @property
    def n_unary(self) -> int:
        """The number of node weights: d·K dense, the support's size sparse."""
        if self.support is None:
            return self.n_features * self.n_states
        return len(self.support[1])

    @property
    def size(self) -> int:
        return self.n_unary + self.n_edge_features * self.n_pairs

    @property
    def fractional_oracle(self) -> bool:
        """Whether the oracle returns the LP's fractional optimum (``"lp"``): the solvers then
        train the relaxed structural SVM (BCFW with its classic step)."""
        return self.inference_method == "lp"

    def params(self) -> dict:
        return {
            "n_states": self.n_states,
            "n_features": self.n_features,
            "n_edge_features": self.n_edge_features,
            "directed": self.directed,
            "inference_method": self.inference_method,
            "loss_weights": self.loss_weights.tolist(),
            "enumerate_up_to": self.enumerate_up_to,
            "lp_sweeps": self.lp_sweeps,
            "lp_tol": self.lp_tol,
            "bb_budget": self.bb_budget,
            "lp_iter": self.lp_iter,
        }

    def unpack(self, w):
        """(W_U (d × K), W_P (F × K × K)) as arrays (W_P expanded for symmetric tables; W_U
        a CSR matrix of the support's pairs when the model has one)."""
        w = np.asarray(w)
        a = self.n_unary
        if self.support is None:
            W_U = w[:a].reshape(self.n_features, self.n_states)
        else:
            W_U = support_matrix(w[:a], self.support, self.n_features, self.n_states)
        W_P = w[a:].reshape(self.n_edge_features, self.n_pairs)[:, self.pair_index]
        return W_U, W_P

    # -- data ---------------------------------------------------------------------------------
    def _split(self, x, i, n_nodes=None):
        """``(nodes, edges, edge_features)`` of example ``i``: the edges as an (E, 2) int64
        array and the edge features as (E, F), each also accepted transposed where the
        shape says so unambiguously (:func:`edge_array`, :func:`edge_feature_array`)."""
        if not isinstance(x, (tuple, list)) or len(x) != 3:
            raise ValueError(f"X[{i}] must be (node_features, edges, edge_features)")
        nodes, edges, z = x
        edges = edge_array(edges, i, n_nodes)
        return nodes, edges, edge_feature_array(z, len(edges), self.n_edge_features, i)

    def example_cost(self, data) -> float:
        """The estimated cost of one graph of ``data`` in a compiled pass, about a
        nanosecond a unit: its nodes times K² + K."""
        n = max(1, int(getattr(data, "n_sequences", 1)))
        per = float(getattr(data, "n_tokens", n)) / n
        K = float(self.n_states)
        return 50.0 * per * (K * K + K)

    def _graphs(self, X, Y):
        """``X`` and ``Y`` as lists of graphs and node labellings (the grid models turn
        images into graphs here)."""
        X = list(X)
        if Y is not None:
            Y = list(Y)
            if len(Y) != len(X):
                raise ValueError(f"X has {len(X)} graphs, Y {len(Y)}")
        return X, Y

    def block_data(self, X, Y=None) -> BlockData:
        """Block data of graphs ``X`` and their labellings ``Y`` (zeros when None)."""
        X = list(X)
        Y = None if Y is None else list(Y)
        source = (self.block_data, X, Y)
        X, Y = self._graphs(X, Y)
        rows, edge_list, feats, labels, methods = [], [], [], [], []
        node_offsets, edge_offsets = [0], [0]
        K = self.n_states
        for i, x in enumerate(X):
            if not isinstance(x, (tuple, list)) or not x:
                self._split(x, i)  # raises the error naming the layout
            nodes = _node_matrix(x[0], i)
            n = nodes.shape[0]
            nodes, edges, z = self._split((nodes, *x[1:]), i, n)
            if n == 0:
                raise ValueError(f"X[{i}] has no nodes")
            if nodes.shape[1] != self.n_features:
                raise ValueError(
                    f"X[{i}] has {nodes.shape[1]} node features, the model {self.n_features}"
                )
            if not np.all(np.isfinite(nodes.data)):
                raise ValueError(f"X[{i}] contains NaN or infinite node features")
            if np.any(edges[:, 0] == edges[:, 1]):
                raise ValueError(f"X[{i}]: an edge joins a node to itself")
            if not np.all(np.isfinite(z)):
                raise ValueError(f"X[{i}] contains NaN or infinite edge features")
            if Y is None:
                y = np.zeros(n, dtype=np.int32)
            else:
                y = np.asarray(Y[i])
                if y.ndim > 1 and y.size == n:
                    y = y.ravel()
                if y.shape != (n,):
                    raise ValueError(f"Y[{i}] must hold {n} labels in 0 … {K - 1}")
                y = state_codes(y, f"Y[{i}]", K)
            forest = is_forest(n, edges)
            if forest:
                method = FOREST
            elif self.inference_method != "lp" and float(K) ** n <= self.enumerate_up_to:
                method = ENUMERATE
            elif self.inference_method == "exact":
                raise ValueError(
                    f"X[{i}] is a loopy graph with {K}^{n} labellings; exact "
                    "inference refuses it (use inference_method='lp' or 'auto')"
                )
            else:
                method = LP if self.inference_method == "lp" else BRANCH
            rows.append(nodes)
            edge_list.append(edges)
            feats.append(z)
            labels.append(y.astype(np.int32))
            methods.append(method)
            node_offsets.append(node_offsets[-1] + n)
            edge_offsets.append(edge_offsets[-1] + len(edges))
        if not X:
            raise ValueError("no graphs")
        nodes = sp.vstack(rows, format="csr")
        nodes.sort_indices()
        node_offsets = np.array(node_offsets, dtype=np.int64)
        edge_offsets = np.array(edge_offsets, dtype=np.int64)
        nnz = np.diff(nodes.indptr)
        per_graph_nnz = np.add.reduceat(nnz, node_offsets[:-1]) if nodes.shape[0] else nnz
        max_entries = int(
            np.max(2 * per_graph_nnz + 2 * np.diff(edge_offsets) * self.n_edge_features)
        )
        indices = nodes.indices.astype(np.int64)
        kernel = GraphKernel(
            nodes.indptr.astype(np.int64),
            indices,
            nodes.data,
            np.concatenate(labels),
            node_offsets,
            np.concatenate(edge_list),
            edge_offsets,
            np.ascontiguousarray(np.concatenate(feats)),
            self.loss_weights,
            self.pair_index,
            self.n_pairs,
            K,
            self.n_features,
            np.array(methods, dtype=np.int64),
            int(np.diff(node_offsets).max()),
            int(np.diff(edge_offsets).max()),
            self.lp_sweeps,
            self.lp_tol,
            np.zeros(2, dtype=np.int64),
            np.zeros(2, dtype=np.int64),
            self.bb_budget,
            self.lp_iter,
            np.zeros((edge_offsets[-1], K)),
            np.zeros((edge_offsets[-1], K)),
            max_entries,
            self.support is not None,
            *kernel_support(self.support, indices),
            self.n_unary,
            np.concatenate(labels).astype(np.int64),
        )
        return BlockData(
            kernel,
            (kernel.indptr, kernel.indices, kernel.values, kernel.edges, kernel.edge_features),
            source=source,
        )

    def predict(self, w, X) -> list:
        """The MAP labelling of every graph (LP-decoded where the graph needs the LP)."""
        data = self.block_data(X)
        flat = self.decode(w, data)
        return np.split(flat, data.label_offsets[1:-1])

    # -- the Python protocol (reference implementations; tests) -------------------------------
    def joint_feature(self, x, y) -> np.ndarray:
        nodes = _node_matrix(x[0] if isinstance(x, (tuple, list)) and x else x, 0)
        nodes, edges, z = self._split((nodes, *x[1:]), 0, nodes.shape[0])
        nodes = nodes.toarray()
        y = state_codes(np.asarray(y).ravel(), "y", self.n_states)
        if len(y) != nodes.shape[0]:
            raise ValueError(f"y has {len(y)} labels for {nodes.shape[0]} nodes")
        unary = np.zeros((self.n_features, self.n_states))
        np.add.at(unary.T, y, nodes)
        if self.support is not None:  # the support's pairs only
            indptr, labels = self.support
            unary = unary[np.repeat(np.arange(self.n_features), np.diff(indptr)), labels]
        pair = np.zeros((self.n_edge_features, self.n_pairs))
        for e, (u, v) in enumerate(edges):
            pair[:, self.pair_index[y[u], y[v]]] += z[e]
        return np.concatenate([unary.ravel(), pair.ravel()])

    def loss(self, y, y_hat) -> float:
        y, y_hat = np.asarray(y), np.asarray(y_hat)
        return float(np.sum(self.loss_weights[y] * (y != y_hat)))

    def inference(self, x, w):
        """The MAP labelling of graph ``x`` at ``w`` (the kernel's decoding)."""
        return self.predict(w, [x])[0].astype(np.int64)

    def loss_augmented_inference(self, x, y, w):
        """The maximizer of ``loss(y, ·) + ⟨w, φ(x, ·)⟩`` (the kernel's oracle; with the
        LP its best decoded labelling)."""
        return self.hinge(w, self.block_data([x], [y]))[1].astype(np.int64)


class GraphCRF(EdgeFeatureGraphCRF):
    """Pairwise CRF on per-example graphs with one K × K table shared by all edges (symmetric
    by default). An example ``x`` is ``(node_features, edges)``; otherwise as
    :class:`EdgeFeatureGraphCRF` with one constant edge feature.

    Parameters
    ----------
    n_states, n_features : int
        K and the node feature width.
    directed : bool, default False
        One K × K table for the (u, v) order of every edge; False: a symmetric table.
    **kwargs
        ``inference_method``, ``loss_weights``, ``enumerate_up_to``, ``lp_sweeps``, ``lp_tol``,
        ``bb_budget``, ``lp_iter``, ``support`` as :class:`EdgeFeatureGraphCRF`.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import GraphCRF, grid_edges
    >>> model = GraphCRF(n_states=3, n_features=2)       # one symmetric 3 x 3 table
    >>> model.size                                       # 2 x 3 node weights + 6 pair weights
    12
    >>> x = (np.ones((4, 2)), grid_edges(2, 2))
    >>> model.joint_feature(x, np.array([0, 1, 1, 2])).shape
    (12,)
    """

    def __init__(self, n_states, n_features, *, directed=False, **kwargs):
        super().__init__(n_states, n_features, 1, directed=directed, **kwargs)

    def params(self) -> dict:
        p = super().params()
        del p["n_edge_features"]
        return p

    def _split(self, x, i, n_nodes=None):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise ValueError(f"X[{i}] must be (node_features, edges)")
        nodes, edges = x
        edges = edge_array(edges, i, n_nodes)
        return nodes, edges, np.ones((len(edges), 1))


def observed_support(X, Y, n_states, min_count=1, full_rows_from=FULL_ROWS_FROM):
    """The (node feature, state) pairs met in training graphs, as a support for
    :class:`GraphCRF` and :class:`EdgeFeatureGraphCRF`.

    A node with feature f non-zero and state a meets (f, a); a feature that met at least
    ``full_rows_from`` × K states gets all K (:mod:`dualstruct.models.support`).

    Parameters
    ----------
    X : list of tuples
        The graphs, each ``(node_features, …)``.
    Y : list of int arrays
        Their node states.
    n_states : int
        K.
    min_count : int, default 1
        How often a pair must be met.
    full_rows_from : float, default 0.25

    Returns
    -------
    indptr : ndarray of int64
        (d + 1,) row offsets.
    labels : ndarray of int32
        The allowed states of each feature, by row.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models.graph import grid_edges, observed_support
    >>> X = [(np.eye(2), grid_edges(1, 2))]
    >>> observed_support(X, [np.array([1, 0])], n_states=2, full_rows_from=1.0)[1].tolist()
    [1, 0]
    """
    nodes = sp.vstack([sp.csr_matrix(x[0], dtype=np.float64) for x in X], format="csr")
    nodes.eliminate_zeros()
    states = np.concatenate(
        [integer_labels(np.asarray(y).ravel(), f"Y[{i}]") for i, y in enumerate(Y)]
    )
    if len(states) != nodes.shape[0]:
        raise ValueError(f"Y labels {len(states)} nodes, X has {nodes.shape[0]}")
    if len(states) and (states.min() < 0 or states.max() >= n_states):
        raise ValueError(f"Y must hold states in 0 … {n_states - 1}")
    node_of_entry = np.repeat(np.arange(nodes.shape[0]), np.diff(nodes.indptr))
    keys = nodes.indices.astype(np.int64) * n_states + states[node_of_entry]
    keys, counts = np.unique(keys, return_counts=True)
    features, labels = np.divmod(keys, n_states)
    return support_from_pairs(
        features, labels, counts, nodes.shape[1], n_states, min_count, full_rows_from
    )


def _integer_option(name, value, low) -> int:
    """An integer option of a graph model (also as read from a model file): an int >= low."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, numbers.Integral)
        or value < low
    ):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def _node_matrix(nodes, i):
    """Node features of example ``i`` as CSR float64 (n × d)."""
    if sp.issparse(nodes):
        return sp.csr_matrix(nodes, dtype=np.float64)
    arr = np.asarray(nodes)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"X[{i}]: node features must be numbers, got {arr.dtype} values")
    if arr.ndim != 2:
        raise ValueError(
            f"X[{i}]: node features must be a 2-D (nodes × features) array, got shape {arr.shape}"
        )
    return sp.csr_matrix(arr.astype(np.float64))


def edge_array(edges, i, n_nodes=None) -> np.ndarray:
    """The edges of example ``i`` as an (E, 2) int64 array of node pairs. Accepted: the
    documented (E, 2) layout, and PyTorch Geometric's (2, E) (``edge_index``) when E ≠ 2,
    which is then transposed (a (2, 2) array is read as two (u, v) rows); no edges as an
    empty array of any of these shapes. Float entries must be whole numbers; with
    ``n_nodes`` every entry must name a node ``0 … n_nodes − 1``."""
    if sp.issparse(edges):
        raise TypeError(f"X[{i}]: edges must be an (E, 2) integer array, not a sparse matrix")
    arr = np.asarray(edges)
    if arr.size == 0 and arr.ndim <= 2 and (arr.ndim < 2 or 2 in arr.shape or 0 in arr.shape):
        return np.zeros((0, 2), dtype=np.int64)
    if arr.ndim != 2 or 2 not in arr.shape:
        raise ValueError(
            f"X[{i}]: edges must be an (E, 2) array of node pairs, got shape {arr.shape}"
        )
    if arr.shape[1] != 2:
        arr = arr.T  # (2, E) with E != 2: PyTorch Geometric's edge_index
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise TypeError(f"X[{i}]: edges must hold integer node indices, got {arr.dtype} values")
    if arr.dtype.kind == "f":
        whole = np.isfinite(arr)
        whole[whole] = arr[whole] == np.floor(arr[whole])
        if not whole.all():
            raise ValueError(
                f"X[{i}]: edges must hold integer node indices, got {arr[~whole][0].item()!r}"
            )
    top = np.iinfo(np.int64).max if n_nodes is None else n_nodes - 1
    if arr.min() < 0 or arr.max() > top:
        raise ValueError(f"X[{i}]: edges must name nodes 0 … {top}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def edge_feature_array(z, n_edges, n_edge_features, i) -> np.ndarray:
    """Edge features of example ``i`` as an (E, F) float64 array. Accepted: (E, F), and
    (F, E) when E ≠ F (transposed); a 1-D array of E values when F = 1; empty when E = 0.
    Anything else is refused naming both shapes."""
    if sp.issparse(z):
        z = z.toarray()
    arr = np.asarray(z)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"X[{i}]: edge features must be numbers, got {arr.dtype} values")
    arr = arr.astype(np.float64)
    E, F = n_edges, n_edge_features
    if E == 0 and arr.size == 0:
        return np.zeros((0, F))
    if arr.ndim == 2 and arr.shape == (E, F):
        return np.ascontiguousarray(arr)
    if arr.ndim == 2 and arr.shape == (F, E):
        return np.ascontiguousarray(arr.T)
    if arr.ndim == 1 and F == 1 and arr.shape == (E,):
        return arr.reshape(E, 1)
    raise ValueError(
        f"X[{i}] must have {F} finite edge features per edge: an ({E}, {F}) array, got "
        f"shape {arr.shape}"
    )


def grid_edges(height, width, connectivity=4, directions=False):
    """Edges of a ``height × width`` pixel grid (pixels in row-major order).

    Parameters
    ----------
    height, width : int
    connectivity : {4, 8}, default 4
        Right and down neighbours, plus both diagonals below with 8.
    directions : bool, default False
        Also return a one-hot edge feature per direction (right, down, then down-right and
        down-left), for :class:`EdgeFeatureGraphCRF`.

    Returns
    -------
    edges : ndarray of int64
        (E, 2) node pairs.
    features : ndarray
        (E, 2 or 4) one-hot directions, with ``directions=True`` only.

    Examples
    --------
    >>> from dualstruct.models import grid_edges
    >>> grid_edges(2, 2).tolist()                        # right neighbours, then down
    [[0, 1], [2, 3], [0, 2], [1, 3]]
    """
    if connectivity not in (4, 8):
        raise ValueError(f"connectivity must be 4 or 8, got {connectivity!r}")
    idx = np.arange(height * width).reshape(height, width)
    parts = [(idx[:, :-1], idx[:, 1:]), (idx[:-1, :], idx[1:, :])]
    if connectivity == 8:
        parts += [(idx[:-1, :-1], idx[1:, 1:]), (idx[:-1, 1:], idx[1:, :-1])]
    edges = np.concatenate([np.stack([a.ravel(), b.ravel()], axis=1) for a, b in parts])
    edges = edges.astype(np.int64)
    if not directions:
        return edges
    feats = np.zeros((len(edges), len(parts)))
    start = 0
    for d, (a, _) in enumerate(parts):
        feats[start : start + a.size, d] = 1.0
        start += a.size
    return edges, feats
