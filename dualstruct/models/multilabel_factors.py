"""The factors of :class:`~dualstruct.models.MultiLabelModel` for GDMM: every label is a node
with two states (0, 1), every edge of the label graph an edge over the four pairs
(:mod:`dualstruct.models.factors`).

θ_l(1) = ⟨U[:, l], x⟩ (on the support's pairs only with sparse weights), θ_l(0) = 0,
θ_e(a, b) = V_e·[a = b = 1] (``interactions="11"``) or T_e[a, b] (``"table"``),
δ_l(a) = c_l·[a ≠ ȳ_l]. On a loopy label graph GDMM trains the relaxation over the local
polytope: build the model with ``inference="lp"``.

With ``interactions="11"`` a label's state 0 is its null state (an edge's feature is zero
unless both labels are 1), so GDMM keeps only the edges that carry information (lazy edges,
:mod:`dualstruct.models.factors`); ``edge_between`` finds an edge of the full graph (and of
a chain) by its position, of any other graph by a scan, and ``edge_score_bound`` is the
largest (1, 1) weight.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import factors
from .multilabel import MultiLabelModel
from .multilabel_kernels import MultiLabelKernel
from .support import entry_position


@njit(cache=True, inline="always")
def _column(k, p, l):
    """The entry of w that data entry ``p`` scores label ``l`` with (−1: none)."""
    if k.sparse:
        return entry_position(k.entry_start, k.entry_count, k.support_labels, k.n_labels, p, l)
    return k.indices[p] * k.n_labels + l


@njit(cache=True, inline="always")
def _pair_entry(k, e, a, b):
    """The entry of w that scores the pair (a, b) of edge e (−1: none)."""
    if k.pair_size == 1:
        return k.n_unary + e if a == 1 and b == 1 else -1
    return k.n_unary + 4 * e + 2 * a + b


@factors.implements(factors.factor_counts, MultiLabelKernel)
def _factor_counts(k, i):
    return k.n_labels, k.edges.shape[0]


@factors.implements(factors.node_info, MultiLabelKernel)
def _node_info(k, i, j):
    return 2, k.labels[k.label_offsets[i] + j]


@factors.implements(factors.edge_nodes, MultiLabelKernel)
def _edge_nodes(k, i, e):
    return k.edges[e, 0], k.edges[e, 1]


@factors.implements(factors.node_score, MultiLabelKernel)
def _node_score(k, i, w, j, a):
    if a == 0:
        return 0.0
    s = 0.0
    for p in range(k.indptr[i], k.indptr[i + 1]):
        c = _column(k, p, j)
        if c >= 0:
            s += k.values[p] * w[c]
    return s


@factors.implements(factors.edge_score, MultiLabelKernel)
def _edge_score(k, i, w, e, a, b):
    c = _pair_entry(k, e, a, b)
    return w[c] if c >= 0 else 0.0


@factors.implements(factors.node_loss, MultiLabelKernel)
def _node_loss(k, i, j, a):
    return 0.0 if a == k.labels[k.label_offsets[i] + j] else k.loss_weights[j]


@factors.implements(factors.add_node, MultiLabelKernel)
def _add_node(k, i, j, a, c, w):
    if a == 0:
        return
    for p in range(k.indptr[i], k.indptr[i + 1]):
        col = _column(k, p, j)
        if col >= 0:
            w[col] += c * k.values[p]


@factors.implements(factors.add_edge, MultiLabelKernel)
def _add_edge(k, i, e, a, b, c, w):
    col = _pair_entry(k, e, a, b)
    if col >= 0:
        w[col] += c


@factors.implements(factors.node_sq_distance, MultiLabelKernel)
def _node_sq_distance(k, i, j, a, b):
    if a == b:
        return 0.0
    if not k.sparse:
        return k.sq_norms[i]
    s = 0.0
    for p in range(k.indptr[i], k.indptr[i + 1]):
        if _column(k, p, j) >= 0:
            s += k.values[p] * k.values[p]
    return s


@factors.implements(factors.edge_sq_distance, MultiLabelKernel)
def _edge_sq_distance(k, i, e, a, b, c, d):
    if a == c and b == d:
        return 0.0
    if k.pair_size == 1:
        return 1.0 if (a == 1 and b == 1) or (c == 1 and d == 1) else 0.0
    return 2.0


@factors.implements(factors.node_oracle, MultiLabelKernel)
def _node_oracle(k, i, w, j, C, act, n_act, mu):
    gold = k.labels[k.label_offsets[i] + j]
    c = k.loss_weights[j]
    g0 = -C * (c if gold == 1 else 0.0) - mu[0]
    g1 = -C * (factors.node_score(k, i, w, j, 1) + (c if gold == 0 else 0.0)) - mu[1]
    return (1, g1) if g1 < g0 else (0, g0)


@factors.implements(factors.null_state, MultiLabelKernel)
def _null_state(k, i, j):
    return 0 if k.pair_size == 1 else -1


@factors.implements(factors.edge_between, MultiLabelKernel)
def _edge_between(k, i, u, v):
    lo, hi = min(u, v), max(u, v)
    L, E = k.n_labels, k.edges.shape[0]
    if E == L * (L - 1) // 2:  # the full graph's (l, k) row by row
        e = lo * L - lo * (lo + 1) // 2 + hi - lo - 1
    else:  # a chain's (l, l + 1)
        e = lo
    if 0 <= e < E and k.edges[e, 0] == lo and k.edges[e, 1] == hi:
        return e
    for e in range(E):
        a, b = k.edges[e, 0], k.edges[e, 1]
        if (a == u and b == v) or (a == v and b == u):
            return e
    return -1


@factors.implements(factors.edge_score_bound, MultiLabelKernel)
def _edge_score_bound(k, w):
    if k.pair_size != 1:
        return np.inf
    top = -np.inf
    for e in range(k.edges.shape[0]):
        top = max(top, w[k.n_unary + e])
    return top


factors.register_model(MultiLabelModel, MultiLabelKernel)
