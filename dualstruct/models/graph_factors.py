"""The factors of :class:`~dualstruct.models.GraphCRF` and
:class:`~dualstruct.models.EdgeFeatureGraphCRF` for GDMM: every node of a graph is a factor
over its K states, every edge one over K² pairs (:mod:`dualstruct.models.factors`).

θ_u(a) = ⟨W_U[:, a], x_u⟩ (on the support's pairs only with sparse node weights),
θ_e(a, b) = Σ_f z_{e,f} W_P[f, pair_index[a, b]], δ_u(a) = loss_weights[ȳ_u]·[a ≠ ȳ_u].
On loopy graphs GDMM trains the relaxation over the local polytope: build the model with
``inference_method="lp"`` so that the primal it is certified against is the relaxed one.
"""

from __future__ import annotations

from numba import njit

from . import factors
from .graph import EdgeFeatureGraphCRF
from .graph.kernels import GraphKernel
from .support import entry_position


@njit(cache=True, inline="always")
def _column(k, p, a):
    """The entry of w that node feature entry ``p`` scores state ``a`` with (−1: none)."""
    if k.sparse:
        return entry_position(k.entry_start, k.entry_count, k.support_labels, k.n_states, p, a)
    return k.indices[p] * k.n_states + a


@factors.implements(factors.factor_counts, GraphKernel)
def _factor_counts(k, i):
    n = k.label_offsets[i + 1] - k.label_offsets[i]
    return n, k.edge_offsets[i + 1] - k.edge_offsets[i]


@factors.implements(factors.node_info, GraphKernel)
def _node_info(k, i, j):
    return k.n_states, k.labels[k.label_offsets[i] + j]


@factors.implements(factors.edge_nodes, GraphKernel)
def _edge_nodes(k, i, e):
    r = k.edge_offsets[i] + e
    return k.edges[r, 0], k.edges[r, 1]


@factors.implements(factors.node_score, GraphKernel)
def _node_score(k, i, w, j, a):
    row = k.label_offsets[i] + j
    s = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        c = _column(k, p, a)
        if c >= 0:
            s += k.values[p] * w[c]
    return s


@factors.implements(factors.edge_score, GraphKernel)
def _edge_score(k, i, w, e, a, b):
    r = k.edge_offsets[i] + e
    at = k.n_unary + k.pair_index[a, b]
    s = 0.0
    for f in range(k.edge_features.shape[1]):
        s += k.edge_features[r, f] * w[at + f * k.n_pairs]
    return s


@factors.implements(factors.node_loss, GraphKernel)
def _node_loss(k, i, j, a):
    gold = k.labels[k.label_offsets[i] + j]
    return 0.0 if a == gold else k.loss_weights[gold]


@factors.implements(factors.add_node, GraphKernel)
def _add_node(k, i, j, a, c, w):
    row = k.label_offsets[i] + j
    for p in range(k.indptr[row], k.indptr[row + 1]):
        col = _column(k, p, a)
        if col >= 0:
            w[col] += c * k.values[p]


@factors.implements(factors.add_edge, GraphKernel)
def _add_edge(k, i, e, a, b, c, w):
    r = k.edge_offsets[i] + e
    at = k.n_unary + k.pair_index[a, b]
    for f in range(k.edge_features.shape[1]):
        w[at + f * k.n_pairs] += c * k.edge_features[r, f]


@factors.implements(factors.node_sq_distance, GraphKernel)
def _node_sq_distance(k, i, j, a, b):
    if a == b:
        return 0.0
    row = k.label_offsets[i] + j
    s = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        x2 = k.values[p] * k.values[p]
        if _column(k, p, a) >= 0:
            s += x2
        if _column(k, p, b) >= 0:
            s += x2
    return s


@factors.implements(factors.edge_sq_distance, GraphKernel)
def _edge_sq_distance(k, i, e, a, b, c, d):
    if k.pair_index[a, b] == k.pair_index[c, d]:
        return 0.0
    r = k.edge_offsets[i] + e
    s = 0.0
    for f in range(k.edge_features.shape[1]):
        s += k.edge_features[r, f] * k.edge_features[r, f]
    return 2.0 * s


factors.register_model(EdgeFeatureGraphCRF, GraphKernel)
