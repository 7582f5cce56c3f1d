"""The factors of :class:`~dualstruct.models.MultiLabelModel` for GDMM: every label is a node
with two states (0, 1), every edge of the label graph an edge over the four pairs
(:mod:`dualstruct.models.factors`).

θ_l(1) = ⟨U[:, l], x⟩ (on the support's pairs only with sparse weights), θ_l(0) = 0,
θ_e(a, b) = V_e·[a = b = 1] (``interactions="11"``) or T_e[a, b] (``"table"``),
δ_l(a) = c_l·[a ≠ ȳ_l]. On a loopy label graph GDMM trains the relaxation over the local
polytope: build the model with ``inference="lp"``.

On the full label graph with ``interactions="11"`` a label's state 0 is its null state (an
edge's feature is zero unless both labels are 1), so GDMM keeps only the edges that carry
information (lazy edges, :mod:`dualstruct.models.factors`); on other graphs every edge stays
active (they have O(L) edges). ``edge_between`` finds an edge by its position
``(l, k)``, l < k, row by row, and ``best_inactive_edge`` searches the edges between labels
outside the active sets branch and bound over a max tree of the (1, 1) weights, the
paper's ordered map of the interaction scores (§3.2): a subtree of edges gains at most its
largest weight plus the best label terms among its first and among its second labels
(range maxima of a sparse table built per search). The tree follows w: ``prepare_weights``
builds it, ``add_edge`` raises a leaf whose weight grows, so that every node stays an upper
bound until the next build (only for the w it was built from, whose address it keeps).
``edge_gain_bound`` is label l's ``Σ_k max(0, V_lk)``, built and raised the same way.
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


@factors.implements(factors.node_scores, MultiLabelKernel)
def _node_scores(k, i, w, out):
    # one sweep over the example's features: each adds into every label it may score
    L = k.n_labels
    for l in range(L):
        out[l, 0] = 0.0
        out[l, 1] = 0.0
    if not k.sparse:  # rows of a (features × labels) view: the label loop vectorizes
        U = w[: k.n_unary].reshape((k.n_features, L))
        for p in range(k.indptr[i], k.indptr[i + 1]):
            v, f = k.values[p], k.indices[p]
            for l in range(L):
                out[l, 1] += v * U[f, l]
        return
    for p in range(k.indptr[i], k.indptr[i + 1]):
        v = k.values[p]
        q0, n = k.entry_start[p], k.entry_count[p]
        if n == L:
            for l in range(L):
                out[l, 1] += v * w[q0 + l]
        else:
            for q in range(q0, q0 + n):
                out[k.support_labels[q], 1] += v * w[q]


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
        if c > 0.0 and len(k.pair_tree) and w.ctypes.data == k.pair_scratch[0]:
            _raise_leaf(k.pair_tree, e, c)
            k.pair_bound[k.edges[e, 0]] += c  # Σ max(0, V) grows by at most c
            k.pair_bound[k.edges[e, 1]] += c


@njit(cache=True, inline="always")
def _raise_leaf(tree, e, c):
    """Leaf e of the max tree raised by c > 0, and its ancestors up to that value."""
    node = tree.shape[0] // 2 + e
    tree[node] += c
    top = tree[node]
    node //= 2
    while node >= 1 and tree[node] < top:
        tree[node] = top
        node //= 2


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
    return 0 if len(k.pair_tree) else -1


@factors.implements(factors.edge_between, MultiLabelKernel)
def _edge_between(k, i, u, v):
    # the full graph's edge by its position (GDMM asks only with lazy edges, which
    # null_state allows on the full graph only); −1 on other graphs
    lo, hi = min(u, v), max(u, v)
    L = k.n_labels
    e = lo * L - lo * (lo + 1) // 2 + hi - lo - 1  # the full graph's (l, k) row by row
    if 0 <= e < k.edges.shape[0] and k.edges[e, 0] == lo and k.edges[e, 1] == hi:
        return e
    return -1


@factors.implements(factors.prepare_weights, MultiLabelKernel)
def _prepare_weights(k, w):
    tree = k.pair_tree
    if not len(tree):
        return
    P, E = tree.shape[0] // 2, k.edges.shape[0]
    for e in range(P):
        tree[P + e] = w[k.n_unary + e] if e < E else -np.inf
    for node in range(P - 1, 0, -1):
        tree[node] = max(tree[2 * node], tree[2 * node + 1])
    bound = k.pair_bound
    for l in range(len(bound)):
        bound[l] = 0.0
    for e in range(E):
        if w[k.n_unary + e] > 0.0:
            bound[k.edges[e, 0]] += w[k.n_unary + e]
            bound[k.edges[e, 1]] += w[k.n_unary + e]
    k.pair_scratch[0] = w.ctypes.data


@factors.implements(factors.edge_gain_bound, MultiLabelKernel)
def _edge_gain_bound(k, i, w, j):
    # the sums follow the w the tree was built from only
    if len(k.pair_bound) and w.ctypes.data == k.pair_scratch[0]:
        return k.pair_bound[j]
    return np.inf


@njit(cache=True, inline="always")
def _range_max(table, lo, hi):
    """``max g[lo..hi]`` from the sparse table (−inf for an empty range)."""
    if lo > hi:
        return -np.inf
    j = 0
    while (2 << j) <= hi - lo + 1:
        j += 1
    return max(table[j, lo], table[j, hi - (1 << j) + 1])


@factors.implements(factors.best_inactive_edge, MultiLabelKernel)
def _best_inactive_edge(k, i, w, C, gain, outside, active, floor):
    tree, table, stack, edges = k.pair_tree, k.pair_table, k.pair_scratch, k.edges
    L, E = k.n_labels, edges.shape[0]
    best, arg = floor, -1
    if not len(tree):
        return arg, best
    g1, g2 = -np.inf, -np.inf  # the two best label terms outside
    for l in range(L):
        g = gain[l, 1] if outside[l] else -np.inf
        table[0, l] = g
        if g > g1:
            g1, g2 = g, g1
        elif g > g2:
            g2 = g
    if g2 == -np.inf:
        return arg, best
    width = 1
    for j in range(1, table.shape[0]):
        for l in range(L):
            other = table[j - 1, l + width] if l + width < L else -np.inf
            table[j, l] = max(table[j - 1, l], other)
        width *= 2
    P = tree.shape[0] // 2
    stack[1], top = 1, 1
    while top > 0:
        node = stack[top]
        top -= 1
        if C * tree[node] + g1 + g2 <= best:
            continue
        depth = 0
        while (2 << depth) <= node:
            depth += 1
        span = P >> depth
        lo = (node - (1 << depth)) * span
        if lo >= E:
            continue
        hi = min(lo + span, E) - 1
        f0, f1 = edges[lo, 0], edges[hi, 0]
        s0, s1 = (edges[lo, 1], edges[hi, 1]) if f0 == f1 else (f0 + 1, L - 1)
        if C * tree[node] + _range_max(table, f0, f1) + _range_max(table, s0, s1) <= best:
            continue
        if node >= P:
            u, v = edges[lo, 0], edges[lo, 1]
            if active[lo] < 0 and outside[u] and outside[v]:
                g = C * w[k.n_unary + lo] + gain[u, 1] + gain[v, 1]
                if g > best:
                    best, arg = g, lo
            continue
        a, b = 2 * node, 2 * node + 1
        if tree[a] > tree[b]:  # the larger child is popped first
            a, b = b, a
        stack[top + 1], stack[top + 2] = a, b
        top += 2
    return arg, best


factors.register_model(MultiLabelModel, MultiLabelKernel)
