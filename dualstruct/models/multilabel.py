"""Multi-label model with pairwise label interactions.

L binary labels per example. Parameters, flat:

    [ U (n_features × L, feature-major) | V (n_edges,) ]            interactions="11"
    [ U (n_features × L, feature-major) | T (n_edges × 2 × 2) ]     interactions="table"

with the score ``s(x, y) = Σ_l y_l <U[:, l], x> + Σ_{e=(l,k)} V_e y_l y_k`` (interactions
score the (1, 1) outcome of each edge), joint feature ``φ(x, y) = (x ⊗ y, (y_l y_k)_e)`` and
the (optionally per-label weighted) Hamming loss ``Σ_l c_l [y_l ≠ ȳ_l]``. With a support
(:mod:`dualstruct.models.support`) U keeps a weight only for the allowed (feature, label)
pairs, the first block of w holds them in the support's order, and ``x ⊗ y`` is restricted
to the same pairs (:func:`observed_support`: the pairs that met in training). With full 2×2
tables the pair term is ``Σ_e T_e[y_l, y_k]`` and its features are the four indicators
``(1 − y_l)(1 − y_k), (1 − y_l) y_k, y_l (1 − y_k), y_l y_k`` — linear in ``(y_l, y_k,
y_l y_k)``, so every solver keeps the same marginal state and only maps it to four
features (:func:`pair_features`). The tables score the same labellings as "11" plus
per-label biases (``T[1,1] − T[1,0] − T[0,1] + T[0,0]`` is the interaction), but their
regularization differs.

Edges: ``"independent"`` (none), ``"chain"`` (l — l+1), ``"tree"`` (the maximum spanning
tree of the labels' empirical mutual information, Chow–Liu; set by :meth:`fit_edges`),
``"full"`` (all L(L−1)/2 pairs) or an explicit (E, 2) array.

Inference (``inference_method=``): ``"exact"`` is max-product on forests and enumeration of all 2^L
labellings on loopy graphs (L ≤ 16); ``"lp"`` is the LP relaxation over the local polytope
(exact on forests, an upper bound elsewhere, :func:`~dualstruct.inference.multilabel.lp_map`);
``"auto"`` is exact on forests and for L ≤ 10, the LP otherwise. With the LP, training uses the
LP-relaxed hinge ``max_{μ ∈ local polytope} δ(ȳ, μ) + s(μ) − s(ȳ)`` (Finley & Joachims 2008),
and prediction rounds the LP solution (:func:`~dualstruct.inference.multilabel.round_lp`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._pystruct import refuse_pystruct_model_keywords, resolve_inference_method
from ..data import BlockData
from ..inference import multilabel as kernels
from ..inference.multilabel import ENUMERATE, LP, TREE
from ..memory import check_memory
from .base import KernelModel
from .loops import run_ranges
from .multilabel_kernels import MultiLabelKernel, pair_search_arrays
from .support import (
    FULL_ROWS_FROM,
    SUPPORT_ADVICE,
    check_support,
    kernel_support,
    support_from_pairs,
    support_matrix,
    support_memory_parts,
)

EDGE_KINDS = ("independent", "chain", "tree", "full")
INFERENCE = ("auto", "exact", "lp")
MAX_ENUMERATED_LABELS = 16
#: "auto" enumerates loopy graphs only up to this many labels (2^10 labellings), above it the
#: LP (faster than enumeration there and mostly integral: BENCHMARKS.md, "Multi-label
#: classification with label interactions")
AUTO_ENUMERATED_LABELS = 10


class MultiLabelDataset:
    """Training data of a multi-label model: ``X`` (n × d, CSR float64) and ``Y`` (n × L,
    0/1). ``n_sequences``/``n_tokens`` (both n) let the pass-based solvers treat every
    example as one block."""

    kind = "multilabel"

    def __init__(self, X, Y):
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sum_duplicates()
        X.sort_indices()
        Y = np.asarray(Y)
        if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
            raise ValueError(f"Y must have shape ({X.shape[0]}, n_labels), got {Y.shape}")
        if not np.all((Y == 0) | (Y == 1)):
            raise ValueError("Y must hold only 0 and 1")
        if not np.all(np.isfinite(X.data)):
            raise ValueError("X holds a NaN or infinite value")
        self.X, self.Y = X, np.ascontiguousarray(Y, dtype=np.int64)

    @property
    def n_sequences(self) -> int:
        return self.X.shape[0]

    n_tokens = n_sequences

    def fingerprint_arrays(self):
        return (self.X.indptr, self.X.indices, self.X.data, self.Y)

    def kernel_arrays(self):
        return self.X.indptr.astype(np.int64), self.X.indices.astype(np.int64), self.X.data

    def take(self, indices):
        return MultiLabelDataset(self.X[indices], self.Y[indices])


INTERACTIONS = ("11", "table")


class MultiLabelWeights(NamedTuple):
    unary: np.ndarray  # (n_features, L); with a support its values, flat
    pairwise: np.ndarray  # (n_edges,) score of the (1, 1) outcome, or (n_edges, 2, 2) tables


def pair_features(d_l, d_k, d_lk, table):
    """The pair part of ``φ`` (or of a difference or sum of ``φ``'s) from the per-edge
    values of ``y_l``, ``y_k`` and ``y_l y_k``: ``y_l y_k`` itself, or with ``table`` the
    (E, 2, 2) indicators of the four outcomes. In differences of equal total mass (every
    use here) the constant of the (0, 0) indicator cancels, so it is left out."""
    if not table:
        return np.asarray(d_lk, dtype=np.float64)
    d_l, d_k, d_lk = (np.asarray(v, dtype=np.float64) for v in (d_l, d_k, d_lk))
    out = np.empty(d_lk.shape + (2, 2))
    out[..., 0, 0] = d_lk - d_l - d_k
    out[..., 0, 1] = d_k - d_lk
    out[..., 1, 0] = d_l - d_lk
    out[..., 1, 1] = d_lk
    return out


#: peak bytes per label pair while :func:`chow_liu_edges` runs (measured: 169)
TREE_BYTES_PER_PAIR = 176


def chow_liu_edges(Y, smoothing=1.0):
    """The Chow–Liu tree of binary label columns: the maximum spanning tree over their pairwise
    mutual information (Prim's algorithm, O(L²); ties go to the smaller label index).

    Parameters
    ----------
    Y : array of shape (n, L)
        0/1 labels.
    smoothing : float, default 1.0
        Additive smoothing of the 2 × 2 counts.

    Returns
    -------
    ndarray of int64
        (L − 1, 2) edges.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import chow_liu_edges
    >>> Y = np.array([[1, 1, 0], [0, 0, 1], [1, 1, 1], [0, 0, 0]])
    >>> chow_liu_edges(Y).tolist()                       # labels 0 and 1 always agree
    [[0, 1], [0, 2]]
    """
    Y = np.asarray(Y, dtype=np.float64)
    n, L = Y.shape
    if L < 2:
        return np.zeros((0, 2), dtype=np.int64)
    check_memory(
        f"the Chow-Liu tree of {L:,} labels",
        {"pairwise label statistics (L x L)": TREE_BYTES_PER_PAIR * L * L},
        "Lower it with edges='chain' or 'independent', or an explicit list of edges.",
    )
    ones = Y.T @ Y  # counts of (1, 1)
    col = Y.sum(axis=0)
    counts = np.empty((L, L, 2, 2))
    counts[:, :, 1, 1] = ones
    counts[:, :, 1, 0] = col[:, None] - ones
    counts[:, :, 0, 1] = col[None, :] - ones
    counts[:, :, 0, 0] = n - col[:, None] - col[None, :] + ones
    p = (counts + smoothing) / (n + 4 * smoothing)
    pl = p.sum(axis=3)  # (L, L, 2): marginal of l
    pk = p.sum(axis=2)  # (L, L, 2): marginal of k
    mi = (p * np.log(p / (pl[:, :, :, None] * pk[:, :, None, :]))).sum(axis=(2, 3))
    in_tree = np.zeros(L, dtype=bool)
    in_tree[0] = True
    best = mi[0].copy()
    parent = np.zeros(L, dtype=np.int64)
    edges = []
    for _ in range(L - 1):
        cand = np.where(in_tree, -np.inf, best)
        v = int(np.argmax(cand))
        edges.append((int(parent[v]), v))
        in_tree[v] = True
        better = ~in_tree & (mi[v] > best)
        best[better] = mi[v][better]
        parent[better] = v
    return np.array(edges, dtype=np.int64)


def edge_count(kind, n_labels) -> int:
    """How many edges the label graph ``kind`` (one of :data:`EDGE_KINDS`) has over
    ``n_labels`` labels (a tree: L − 1)."""
    L = int(n_labels)
    counts = {"independent": 0, "chain": L - 1, "tree": L - 1, "full": L * (L - 1) // 2}
    return max(0, counts[kind])


#: bytes per edge while a label graph is built: the (E, 2) int64 array and one temporary
GRAPH_BYTES_PER_EDGE = 24


def label_graph(kind, n_labels) -> np.ndarray:
    """The (E, 2) int64 edges ``(l, k)``, l < k, of the graph ``"independent"``, ``"chain"``
    or ``"full"`` over ``n_labels`` labels (``"tree"``: none until :meth:`fit_edges`), built
    with NumPy after a memory check of its size."""
    L = int(n_labels)
    if kind == "tree":
        return np.zeros((0, 2), dtype=np.int64)
    E = edge_count(kind, L)
    check_memory(
        f"the {kind} label graph over {L:,} labels ({E:,} edges)",
        {"label graph": GRAPH_BYTES_PER_EDGE * E},
        "Lower it with a sparser label graph (edges='tree', 'chain' or 'independent', or "
        "an explicit list of edges).",
    )
    edges = np.empty((E, 2), dtype=np.int64)
    if kind == "chain":
        edges[:, 0] = np.arange(E)
        edges[:, 1] = edges[:, 0] + 1
    elif kind == "full":  # row l holds (l, l+1), …, (l, L−1)
        length = np.arange(L - 1, 0, -1)
        edges[:, 0] = np.repeat(np.arange(L - 1), length)
        start = np.cumsum(length) - length
        # k = l + 1 + (position − start of row l)
        edges[:, 1] = np.arange(1, E + 1)
        edges[:, 1] += edges[:, 0]
        edges[:, 1] -= np.repeat(start, length)
    return edges


def training_memory_parts(n_labels, n_features, edges, interactions="11", n_unary=None) -> dict:
    """What a multi-label model over the graph ``edges`` (a kind or an (E, 2) array) holds
    in training at the least, before it is built: its graph, and its weights and their
    copies (every solver keeps four; ``n_unary``: the unary weights, None for d·L)."""
    E = len(edges) if not isinstance(edges, str) else edge_count(edges, n_labels)
    unary = int(n_features) * int(n_labels) if n_unary is None else int(n_unary)
    size = unary + (4 if interactions == "table" else 1) * E
    return {"label graph": 16 * E, "weights and their copies": 8 * 4 * size}


class MultiLabelModel(KernelModel):
    """L binary labels over n_features features with pairwise interactions on ``edges``.

    A kernel model (:class:`~dualstruct.models.multilabel_kernels.MultiLabelKernel`): every
    solver trains it, on a :class:`MultiLabelDataset` or on its :meth:`block_data`.

    Parameters
    ----------
    n_labels, n_features : int
        L and d.
    edges : {"independent", "chain", "tree", "full"} or (E, 2) int array, default "full"
        The interacting label pairs (``"tree"``: set by :meth:`fit_edges`).
    loss_weights : array of L positive numbers, optional
        Per-label weights of the Hamming loss (default 1).
    inference_method : {"auto", "exact", "lp"}, default "auto"
        Exact (max-product on forests, enumeration up to 16 labels) or the LP relaxation;
        "auto" is exact on forests and up to 10 labels. PyStruct's names (``"qpbo"``,
        ``"ad3"``, ``"max-product"``, …) are refused with what to use instead.
    interactions : {"11", "table"}, default "11"
        An edge scores its (1, 1) outcome, or a full 2 × 2 table.
    support : (indptr, labels), optional
        Sparse feature–label weights (:func:`observed_support`); None: dense d × L.
    inference : str, optional
        The older name of ``inference_method`` (the mode is the attribute
        ``inference_method``; ``inference`` is the protocol method).

    Examples
    --------
    >>> from dualstruct.models import MultiLabelModel
    >>> model = MultiLabelModel(n_labels=4, n_features=10, edges="chain")
    >>> model.edges.tolist()
    [[0, 1], [1, 2], [2, 3]]
    >>> model.size                                       # 10 x 4 unary + 3 pair weights
    43
    """

    kind = "multilabel"

    @refuse_pystruct_model_keywords
    def __init__(
        self,
        n_labels: int,
        n_features: int,
        *,
        edges="full",
        loss_weights=None,
        inference_method=None,
        interactions="11",
        support=None,
        inference=None,
    ):
        self.inference_method = resolve_inference_method(
            type(self).__name__, inference_method, inference, INFERENCE
        )
        if interactions not in INTERACTIONS:
            raise ValueError(f"interactions must be one of {INTERACTIONS}, got {interactions!r}")
        self.interactions = interactions
        if n_labels < 1:
            raise ValueError(f"n_labels must be >= 1, got {n_labels}")
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        self.n_labels, self.n_features = int(n_labels), int(n_features)
        L = self.n_labels
        if loss_weights is None:
            self.loss_weights = np.ones(L)
        else:
            self.loss_weights = np.asarray(loss_weights, dtype=np.float64)
            if (
                self.loss_weights.shape != (L,)
                or not np.all(self.loss_weights > 0)
                or not np.all(np.isfinite(self.loss_weights))
            ):
                raise ValueError(f"loss_weights must be {L} finite positive numbers")
        self.edge_kind = edges if isinstance(edges, str) else "explicit"
        if isinstance(edges, str):
            if edges not in EDGE_KINDS:
                raise ValueError(
                    f"edges must be one of {EDGE_KINDS} or an (E, 2) array, got {edges!r}"
                )
            self.edges = label_graph(edges, L)
        else:
            self.edges = self._check_edges(edges)
        self.support = (
            None if support is None else check_support(support, self.n_features, self.n_labels)
        )

    def _check_edges(self, edges):
        edges = np.asarray(edges)
        L = self.n_labels
        if edges.ndim != 2 or edges.shape[1] != 2 or not np.issubdtype(edges.dtype, np.integer):
            raise ValueError("edges must be an (E, 2) integer array")
        if edges.size and (edges.min() < 0 or edges.max() >= L):
            raise ValueError(f"edge labels must lie in 0..{L - 1}")
        if np.any(edges[:, 0] == edges[:, 1]):
            raise ValueError("an edge joins a label to itself")
        edges = edges.astype(np.int64)
        keys = np.minimum(edges[:, 0], edges[:, 1]) * L + np.maximum(edges[:, 0], edges[:, 1])
        if len(np.unique(keys)) != len(edges):
            raise ValueError("an edge is repeated")
        return edges

    def fit_edges(self, Y):
        """For ``edges="tree"``: the Chow–Liu tree of the training label matrix ``Y``."""
        Y = self._check_labels(Y)
        if self.edge_kind == "tree":
            self.edges = chow_liu_edges(Y)
        return self

    @property
    def pair_size(self) -> int:
        """Weights per edge: 1 (the (1, 1) outcome) or 4 (a 2×2 table)."""
        return 4 if self.interactions == "table" else 1

    @property
    def n_unary(self) -> int:
        """The number of unary weights: d·L dense, the support's size sparse."""
        if self.support is None:
            return self.n_features * self.n_labels
        return len(self.support[1])

    @property
    def size(self) -> int:
        return self.n_unary + self.pair_size * len(self.edges)

    def unpack(self, w) -> MultiLabelWeights:
        d, L = self.n_features, self.n_labels
        if w.shape != (self.size,):
            raise ValueError(f"w must have shape ({self.size},), got {w.shape}")
        a = self.n_unary
        pair = w[a:]
        if self.interactions == "table":
            pair = pair.reshape(len(self.edges), 2, 2)
        return MultiLabelWeights(w[:a].reshape(d, L) if self.support is None else w[:a], pair)

    def unary_matrix(self, w):
        """The unary weights U as a (d, L) matrix: a dense array, or with a support a CSR
        matrix holding just the support's pairs."""
        U = self.unpack(w).unary
        if self.support is None:
            return U
        return support_matrix(U, self.support, self.n_features, self.n_labels)

    def label_scores_of(self, w, X):
        """``θ_il = ⟨U_l, x_i⟩`` for the rows of ``X``, a dense (n, L) array (with a support a
        sparse product with its CSR matrix, never a dense U)."""
        if self.support is None:
            return np.asarray(X @ self.unpack(w).unary)
        return (sp.csr_matrix(X) @ self.unary_matrix(w)).toarray()

    def _check_labels(self, Y):
        Y = np.asarray(Y)
        if Y.ndim != 2 or Y.shape[1] != self.n_labels:
            raise ValueError(f"Y must have shape (n, {self.n_labels}), got {Y.shape}")
        if not np.all((Y == 0) | (Y == 1)):
            raise ValueError("Y must hold only 0 and 1")
        return Y.astype(np.int64)

    def _check_X(self, X):
        if isinstance(X, MultiLabelDataset):
            X = X.X
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features, the model {self.n_features}")
        return X

    def _pair_tables(self, w):
        """The (E, 2, 2) score table of every edge (the (1, 1) entry alone for "11")."""
        pairwise = self.unpack(w).pairwise
        if self.interactions == "table":
            return np.ascontiguousarray(pairwise)
        V = np.zeros((len(self.edges), 2, 2))
        V[:, 1, 1] = pairwise
        return V

    def _scoring_graph(self, w):
        """The edges whose score table is not all zero, and their tables: a labelling's score,
        the MAP and the LP relaxation see no other edge (a zero table adds 0 to every
        labelling, and the LP's pair marginal of such an edge is free within its bounds).
        Prediction and the primal then cost what the edges that carry weight cost, not the
        full graph's: a full-graph model over 983 labels has 482,653 edges, of which
        training gives weight to those met by a labelling or an active pair."""
        V = self._pair_tables(w)
        keep = self._scoring_edges(V)
        if keep is None:
            return self.edges, V
        return self.edges[keep], np.ascontiguousarray(V[keep])

    def _scoring_edges(self, V):
        """The edges whose table ``V[e]`` is not all zero (None: every edge)."""
        keep = np.flatnonzero(V.reshape(len(V), 4).any(axis=1))
        return None if len(keep) == len(V) else keep

    @property
    def inference_code(self) -> int:
        """TREE, ENUMERATE or LP: the oracle the kernels run for this model."""
        if self.inference_method == "lp":
            return LP
        if self._is_forest():
            return TREE
        exact = self.inference_method == "exact"
        limit = MAX_ENUMERATED_LABELS if exact else AUTO_ENUMERATED_LABELS
        if self.n_labels <= limit:
            return ENUMERATE
        if self.inference_method == "exact":
            raise ValueError(
                f"exact inference on a loopy graph needs n_labels <= "
                f"{MAX_ENUMERATED_LABELS} (enumeration); use inference='lp'"
            )
        return LP

    @property
    def is_relaxed(self) -> bool:
        """Whether training uses the LP relaxation (the oracle can return fractional μ)."""
        return self.inference_code == LP and not self._is_forest()

    def _map_all(self, A, edges, V, relaxed=False):
        """The (loss-augmented) maxima of unary tables A (n, L, 2) on the graph ``edges``
        with tables ``V``: the scores (LP values when ``relaxed`` and the model uses the LP)
        and labellings (rounded from the LP)."""
        out = np.zeros(A.shape[:2], dtype=np.int64)
        integral = np.ones(A.shape[0], dtype=np.bool_)
        best = kernels.map_all(A, edges, V, self.inference_code, relaxed, out, integral)
        self.last_integral_ = integral
        return best, out

    def example_cost(self, data) -> float:
        """The estimated cost of one example in a compiled pass, about a nanosecond a
        unit: it grows with the labels and the edges (the LP's sweeps over them)."""
        return 50.0 * (self.n_labels + 10.0 * len(self.edges))

    #: the slack oracle enumerates the best score per loss value (exact)
    slack_searches = ("exact",)

    @property
    def fractional_oracle(self) -> bool:
        """Whether the oracle is the LP relaxation on a loopy graph (fractional points)."""
        return self.is_relaxed

    def block_data(self, data) -> BlockData:
        """Block data of a :class:`MultiLabelDataset`."""
        return self._block_data(data, self.edges)

    def _block_data(self, data, edges) -> BlockData:
        """The kernel of ``data`` over the label graph ``edges`` (the model's, or the edges
        that score at some weights: :meth:`_scoring_blocks`)."""
        if data.Y.shape[1] != self.n_labels:
            raise ValueError(f"the data has {data.Y.shape[1]} labels, the model {self.n_labels}")
        if data.X.shape[1] != self.n_features:
            raise ValueError(
                f"the data has {data.X.shape[1]} features, the model {self.n_features}"
            )
        indptr, indices, values = data.kernel_arrays()
        n, L = data.Y.shape
        sq_norms = np.asarray(data.X.multiply(data.X).sum(axis=1), dtype=np.float64).ravel()
        kernel_edges = np.ascontiguousarray(edges, dtype=np.int64).reshape(-1, 2)
        kernel = MultiLabelKernel(
            indptr,
            indices,
            values,
            data.Y.astype(np.int32).ravel(),
            np.arange(n + 1, dtype=np.int64) * L,
            np.asarray(self.loss_weights, np.float64),
            sq_norms,
            kernel_edges,
            L,
            self.n_features,
            self.pair_size,
            self.inference_code,
            self.support is not None,
            *kernel_support(self.support, indices),
            self.n_unary,
            *pair_search_arrays(self.pair_size, kernel_edges, L),
        )
        return BlockData(kernel, data.fingerprint_arrays())

    def _scoring_blocks(self, w, X, Y):
        """Block data over the edges that score at ``w`` (:meth:`_scoring_graph`) and the
        weights in its layout: a labelling's score, the MAP and the LP's value are those of
        the full graph, at the cost of the edges that carry weight."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        keep = self._scoring_edges(self._pair_tables(w))
        data = MultiLabelDataset(self._check_X(X), self._check_labels(Y))
        if keep is None:
            return self._block_data(data, self.edges), w
        P = self.pair_size
        pair = w[self.n_unary :].reshape(len(self.edges), P)[keep]
        return self._block_data(data, self.edges[keep]), np.concatenate(
            [w[: self.n_unary], pair.ravel()]
        )

    def ssvm_model(self):
        """The kernel model :class:`~dualstruct.SSVM` trains: the same kernel, with block
        data made from a feature matrix and an (n, L) 0/1 label matrix."""
        return MultiLabelRowsModel(self)

    def constructor_params(self) -> dict:
        """The keyword arguments that rebuild this model (a model file's record; the
        edges as a list)."""
        return {
            "n_labels": self.n_labels,
            "n_features": self.n_features,
            "edges": self.edges.tolist(),
            "loss_weights": self.loss_weights.tolist(),
            "inference_method": self.inference_method,
            "interactions": self.interactions,
        }

    def check_slack(self):
        """Slack rescaling needs the unit Hamming loss and enumerable labellings (L ≤ 16):
        its oracle reads the best score at every loss value (:func:`loss_table`)."""
        if not np.all(self.loss_weights == 1.0):
            raise ValueError(
                "slack rescaling supports the unit Hamming loss only (loss_weights must all be 1)"
            )
        if self.n_labels > MAX_ENUMERATED_LABELS:
            raise ValueError(
                f"slack rescaling of multi-label models enumerates the "
                f"labellings: n_labels must be <= {MAX_ENUMERATED_LABELS}"
            )

    def slack_hinge(self, w, X, Y=None):
        """Per-example slack-rescaled hinge ``max_y δ(ȳ, y)(1 + s(y) − s(ȳ))`` (exact, by
        enumeration of the best score per loss value) and its maximizers (``X`` as in
        :meth:`hinge`)."""
        self.check_slack()
        return self._hinge_of(w, X, Y, True)

    def _is_forest(self):
        """Whether the edges have no cycle (union–find; stops at the first cycle)."""
        parent = list(range(self.n_labels))

        def root(u):
            while parent[u] != u:
                parent[u] = parent[parent[u]]
                u = parent[u]
            return u

        for i, k in self.edges.tolist():
            ri, rk = root(i), root(k)
            if ri == rk:
                return False
            parent[ri] = rk
        return True

    def predict(self, w, X, n_jobs=None) -> np.ndarray:
        """The highest-scoring labelling of every row of X, (n, L) uint8 (with the LP: its
        rounding; ``last_integral_`` then says which rows had an integral LP optimum).
        ``n_jobs`` threads share the rows (None: 1, or the enclosing
        :func:`~dualstruct.models.loops.thread_setting`'s; −1: every core)."""
        X = self._check_X(X)
        edges, V = self._scoring_graph(w)
        A = kernels.unary_tables(self.label_scores_of(w, X))
        out = np.zeros(A.shape[:2], dtype=np.int64)
        integral = np.ones(A.shape[0], dtype=np.bool_)
        code = self.inference_code
        run_ranges(
            A.shape[0],
            n_jobs,
            lambda a, b: kernels.map_all(A[a:b], edges, V, code, False, out[a:b], integral[a:b]),
        )
        self.last_integral_ = integral
        return out.astype(np.uint8)

    def label_scores(self, w, X) -> np.ndarray:
        """Every label's own score ``⟨w_l, x⟩`` for the rows of X, (n, L): what a label adds
        to a labelling's score when on, before the interactions of the edges."""
        return self.label_scores_of(w, self._check_X(X))

    def hinge(self, w, X, Y=None):
        """Per-example margin-rescaled hinge ``max_y δ(ȳ, y) + s(y) − s(ȳ)`` (the LP-relaxed
        maximum when the model uses the LP) and the loss-augmented argmax labellings
        (rounded). ``X`` may be a :class:`MultiLabelDataset` (then ``Y`` is its labels) or
        block data (then the labellings are flat)."""
        return self._hinge_of(w, X, Y, False)

    def _hinge_of(self, w, X, Y, slack):
        if isinstance(X, BlockData):
            return self._hinge(w, X, slack)
        if isinstance(X, MultiLabelDataset):
            X, Y = X.X, X.Y
        blocks, w = self._scoring_blocks(w, X, Y)
        hinge, out = self._hinge(w, blocks, slack)
        return hinge, out.reshape(-1, self.n_labels).astype(np.int64)

    def loss(self, y_true, y_pred) -> float:
        """The weighted Hamming loss ``Σ_l loss_weights[l] [y_l ≠ ŷ_l]``."""
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        return float(self.loss_weights @ (y_true != y_pred))

    def inference(self, x, w):
        """The highest-scoring labelling (L,) of the feature vector ``x`` (the kernels';
        with the LP its rounding)."""
        w = np.asarray(w, dtype=np.float64)
        return self.predict(w, _rows(x))[0].astype(np.int64)

    def loss_augmented_inference(self, x, y, w):
        """The labelling maximizing ``loss(y, ·) + ⟨w, φ(x, ·)⟩`` (the kernels'; with the
        LP the rounding of the relaxation's maximizer)."""
        w = np.asarray(w, dtype=np.float64)
        return self.hinge(w, _rows(x), _label_rows(y))[1][0].astype(np.int64)

    def joint_feature(self, x, y) -> np.ndarray:
        """``φ(x, y) = (x ⊗ y, (y_l y_k)_e)`` (or the 2×2 indicators of every edge) as a
        flat vector in the layout of w (``x ⊗ y`` on the support's pairs if it has one)."""
        x = np.asarray(sp.csr_matrix(x).toarray()).ravel()
        y = np.asarray(y, dtype=np.float64)
        yl, yk = y[self.edges[:, 0]], y[self.edges[:, 1]]
        pair = pair_features(yl, yk, yl * yk, self.interactions == "table")
        if self.interactions == "table":
            pair[:, 0, 0] += 1.0  # the constant left out of differences
        unary = np.outer(x, y)
        if self.support is not None:
            indptr, labels = self.support
            unary = unary[np.repeat(np.arange(self.n_features), np.diff(indptr)), labels]
        return np.concatenate([unary.ravel(), pair.ravel()])


def _rows(X):
    """Feature vectors as a CSR matrix of rows (one vector: one row)."""
    if sp.issparse(X):
        return sp.csr_matrix(X, dtype=np.float64)
    X = np.asarray(X, dtype=np.float64)
    return sp.csr_matrix(X.reshape(1, -1) if X.ndim == 1 else X)


def _label_rows(Y):
    """0/1 labellings as an (n, L) array (one labelling: one row)."""
    Y = np.asarray(Y)
    return Y.reshape(1, -1) if Y.ndim == 1 else Y


def observed_support(
    data: MultiLabelDataset, min_count: int = 1, full_rows_from: float = FULL_ROWS_FROM
):
    """The (feature, label) pairs met in multi-label training data, as a support
    ``(indptr, labels)``.

    An example meets (f, l) when feature f is non-zero in it and label l is on. A feature that
    met at least ``full_rows_from`` × L labels (the intercept, a common word) gets its whole
    row. Unlike a tag of a chain, a label that is off still reads its weights: a feature that
    never meets label l cannot argue against it either, so on dense or low-dimensional inputs
    the dense model is the better one (``weights="auto"`` keeps it there).

    Parameters
    ----------
    data : MultiLabelDataset
    min_count : int, default 1
        How often a pair must be met.
    full_rows_from : float, default 0.25

    Returns
    -------
    indptr : ndarray of int64
        (d + 1,) row offsets.
    labels : ndarray of int32
        The allowed labels of each feature, by row.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models.multilabel import MultiLabelDataset, observed_support
    >>> data = MultiLabelDataset(np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([[1, 0], [0, 1]]))
    >>> indptr, labels = observed_support(data, full_rows_from=1.0)
    >>> indptr.tolist(), labels.tolist()
    ([0, 1, 2], [0, 1])
    """
    d, L = data.X.shape[1], data.Y.shape[1]
    met = int(np.diff(data.X.indptr) @ data.Y.sum(axis=1))  # pairs met, with repeats
    check_memory(
        f"the observed support of {d:,} features and {L:,} labels",
        support_memory_parts(d, L, met, data.X.nnz),
        SUPPORT_ADVICE,
    )
    X = sp.csr_matrix(data.X, copy=True)
    X.data[:] = 1.0
    counts = sp.coo_matrix(X.T @ sp.csr_matrix(data.Y, dtype=np.float64))
    return support_from_pairs(
        counts.row, counts.col, counts.data, X.shape[1], data.Y.shape[1], min_count, full_rows_from
    )


class MultiLabelRowsModel(KernelModel):
    """A :class:`MultiLabelModel` taking the protocol's format: a feature matrix (or a list of
    feature vectors) and an (n, L) 0/1 label matrix, as :class:`~dualstruct.SSVM` passes
    them (the same kernel).

    Parameters
    ----------
    multilabel : MultiLabelModel
    """

    slack_searches = ("exact",)

    def __init__(self, multilabel):
        self.multilabel = multilabel

    @property
    def size(self) -> int:
        return self.multilabel.size

    @property
    def fractional_oracle(self) -> bool:
        """Whether the oracle is the LP relaxation on a loopy graph (fractional points)."""
        return self.multilabel.is_relaxed

    def check_slack(self):
        self.multilabel.check_slack()

    @property
    def builtin(self):
        """The model this kernel trains (what a model file records)."""
        return self.multilabel

    def block_data(self, X, Y=None) -> BlockData:
        """Block data of the rows of ``X`` and their labellings ``Y`` (zeros when None)."""
        if isinstance(X, MultiLabelDataset):
            return self.multilabel.block_data(X)
        X = _rows(X)
        if Y is None:
            Y = np.zeros((X.shape[0], self.multilabel.n_labels), dtype=np.int64)
        return self.multilabel.block_data(MultiLabelDataset(X, _label_rows(Y)))

    def predict(self, w, X) -> np.ndarray:
        """The highest-scoring labelling of every row of ``X``, (n, L) int64."""
        return self.multilabel.predict(w, _rows(X)).astype(np.int64)
