"""The multi-label model's kernel (one block per example, its labelling the L binary labels):
:class:`MultiLabelKernel` and its implementations of the kernel interface;
:class:`~dualstruct.models.MultiLabelModel` builds it.

Weights ``w = [U (d × L, feature-major) | V (E × P)]``: ``P = 1`` scores the (1, 1) outcome
of each edge, ``P = 4`` is a 2×2 table per edge (:mod:`dualstruct.models.multilabel`). For
a labelling, or a local-polytope point ``μ = (μ_l, μ_e)``,

    ⟨w, φ(x, μ)⟩ = Σ_l μ_l ⟨U_l, x⟩ + Σ_e pair(V_e, μ),     δ(ȳ, μ) = Σ_l c_l |μ_l − ȳ_l|,

both linear in μ, and the squared norm of a difference splits into
``‖x‖² Σ_l Δμ_l² + Σ_e ‖Δ pair features_e‖²``; with a support (sparse feature–label
weights) label l sees only its allowed features, so ``‖x‖²`` becomes
``Σ_{f: (f, l) allowed} x_f²`` per label. The oracle is the model's inference (a tree's
max-product, enumeration, or the LP by one max-flow); with the LP it keeps the fractional
optimum μ̂, whose corner the classic BCFW step and SSG use, so that they solve the LP-relaxed
structural SVM (Finley & Joachims 2008) and its gap closes.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..inference.graph import labelling_score
from ..inference.multilabel import (
    ENUMERATE,
    LP,
    TREE,
    enumerate_map,
    lp_map,
    relaxed_oracle,
    round_lp,
    tree_map,
    unary_scores,
)
from ..inference.multilabel import slack_oracle as multilabel_slack_oracle
from . import base
from .support import entry_position, entry_unigram_scores


class MultiLabelKernel(NamedTuple):
    indptr: np.ndarray  # int64 CSR rows of X
    indices: np.ndarray  # int64
    values: np.ndarray
    labels: np.ndarray  # int32 gold labels, n × L flat
    label_offsets: np.ndarray  # int64, i · L
    loss_weights: np.ndarray  # (L,)
    sq_norms: np.ndarray  # ‖x_i‖²
    edges: np.ndarray  # int64 (E, 2)
    n_labels: int
    n_features: int
    pair_size: int  # P
    mode: int  # TREE, ENUMERATE or LP
    sparse: bool  # unary weights only on the support, else dense d × K
    support_labels: np.ndarray  # int32, the support's labels by feature row
    entry_start: np.ndarray  # sparse: int64 per data entry, its feature's support row
    entry_count: np.ndarray  # and int32 its length (models.support.entry_rows)
    n_unary: int  # unary weights: d·K dense, the support's size sparse
    #: GDMM's search of inactive edges on the full graph with interactions="11", else empty
    #: (:mod:`dualstruct.models.multilabel_factors`): a max tree over the (1, 1) weights,
    #: scratch of one training at a time (two GDMMs training on the same data in threads
    #: would share it: answers stay checked, but the search, and the bounds that skip
    #: labels, may miss the best edge)
    pair_tree: np.ndarray  # (2P,), P ≥ E a power of two
    pair_table: np.ndarray  # (levels, L) range maxima of the label terms
    pair_scratch: np.ndarray  # int64: [0] the address of the w the tree follows, the stack
    pair_bound: np.ndarray  # (L,) per label, the sum of its edges' positive (1, 1) weights

    #: the values of a labelling entry (0/1 per label; a class attribute, not a field)
    n_states = 2


def pair_search_arrays(pair_size, edges, n_labels):
    """:class:`MultiLabelKernel`'s ``pair_tree, pair_table, pair_scratch, pair_bound``: sized
    for the full graph over ``n_labels`` labels in its row-by-row order with one (1, 1) weight
    per edge, empty otherwise."""
    L, E = int(n_labels), len(edges)
    full = pair_size == 1 and E > 0 and E == L * (L - 1) // 2
    if full:
        first, second = np.triu_indices(L, 1)  # row by row
        full = np.array_equal(edges[:, 0], first) and np.array_equal(edges[:, 1], second)
    if not full:
        return np.zeros(0), np.zeros((0, max(L, 1))), np.zeros(0, dtype=np.int64), np.zeros(0)
    P = 1 << max(E - 1, 0).bit_length()
    levels = max(L - 1, 1).bit_length() + 1
    scratch = np.zeros(2 + 2 * P.bit_length(), dtype=np.int64)
    return np.zeros(2 * P), np.zeros((levels, L)), scratch, np.zeros(L)


class _Workspace(NamedTuple):
    theta: np.ndarray  # (L,) unary scores
    theta_row: np.ndarray  # the same memory as (1, L)
    row: np.ndarray  # (L,) sparse: scratch of the unary scores
    plain: np.ndarray  # (L, 2) unary tables
    aug: np.ndarray  # (L, 2) the last oracle's tables
    tables: np.ndarray  # (E, 2, 2) pair scores
    mu: np.ndarray  # (L,) the last oracle's point
    mu_pair: np.ndarray  # (E,)
    scratch: np.ndarray  # (L,) int64
    best: np.ndarray  # (L + 1,) slack oracle: best score per loss
    best_y: np.ndarray  # (L + 1, L) int64
    dv: np.ndarray  # (4,) pair feature differences
    gold: np.ndarray  # (L,) the block's gold labels as floats (oracle corners)
    gold_pair: np.ndarray  # (E,) their (1, 1) pair indicators


@base.implements(base.workspace, MultiLabelKernel)
def _workspace(k):
    L, E = k.n_labels, k.edges.shape[0]
    theta = np.empty(L)
    return _Workspace(
        theta,
        theta.reshape((1, L)),
        np.empty(L),
        np.zeros((L, 2)),
        np.zeros((L, 2)),
        np.zeros((E, 2, 2)),
        np.empty(L),
        np.empty(E),
        np.zeros(L, dtype=np.int64),
        np.empty(L + 1),
        np.zeros((L + 1, L), dtype=np.int64),
        np.empty(4),
        np.empty(L),
        np.empty(E),
    )


@base.implements(base.prepare, MultiLabelKernel)
def _prepare(k, i, w, ws):
    L = k.n_labels
    theta = ws.theta
    if k.sparse:
        entry_unigram_scores(
            k.indptr,
            k.entry_start,
            k.entry_count,
            k.values,
            i,
            i + 1,
            k.support_labels,
            w,
            ws.theta_row,
            ws.row,
        )
    else:
        unary_scores(
            k.indptr,
            k.indices,
            k.values,
            i,
            w[: k.n_features * L].reshape((k.n_features, L)),
            theta,
        )
    plain = ws.plain
    for l in range(L):
        plain[l, 1] = theta[l]
    b = k.n_unary
    P = k.pair_size
    tables = ws.tables
    for e in range(k.edges.shape[0]):
        if P == 1:
            tables[e, 1, 1] = w[b + e]
        else:
            for s in range(4):
                tables[e, s // 2, s % 2] = w[b + 4 * e + s]


@base.implements(base.score, MultiLabelKernel)
def _score(k, i, w, ws, y):
    return labelling_score(ws.plain, k.edges, ws.tables, y)


@base.implements(base.loss, MultiLabelKernel)
def _loss(k, i, y):
    start = k.label_offsets[i]
    total = 0.0
    for l in range(y.shape[0]):
        if y[l] != k.labels[start + l]:
            total += k.loss_weights[l]
    return total


@base.implements(base.oracle, MultiLabelKernel)
def _oracle(k, i, w, ws, loss_scale, y):
    s0 = k.label_offsets[i]
    for l in range(k.n_labels):
        c = loss_scale * k.loss_weights[l]
        gold = k.labels[s0 + l]
        ws.aug[l, 0] = c * gold
        ws.aug[l, 1] = ws.theta[l] + c * (1 - gold)
    value = relaxed_oracle(ws.aug, k.edges, ws.tables, k.mode, ws.mu, ws.mu_pair, ws.scratch)
    if k.mode == LP:
        round_lp(ws.aug, k.edges, ws.tables, ws.mu, ws.scratch)
    for l in range(k.n_labels):
        y[l] = ws.scratch[l]
    return value


@base.implements(base.oracle_value, MultiLabelKernel)
def _oracle_value(k, i, w, ws, y):
    return labelling_score(ws.aug, k.edges, ws.tables, y)


@base.implements(base.decode, MultiLabelKernel)
def _decode(k, i, w, ws, y):
    if k.mode == TREE:
        return tree_map(ws.plain, k.edges, ws.tables, y)
    if k.mode == ENUMERATE:
        return enumerate_map(ws.plain, k.edges, ws.tables, y)
    lp_map(ws.plain, k.edges, ws.tables, ws.mu, ws.mu_pair)
    value, _ = round_lp(ws.plain, k.edges, ws.tables, ws.mu, y)
    return value


@njit(cache=True, inline="always")
def _pair_delta(d_l, d_k, d_lk, P, out):
    """The P pair features of one edge from the differences of ``y_l``, ``y_k`` and
    ``y_l y_k``: P = 1 the (1, 1) indicator, P = 4 the 2×2 indicators 00, 01, 10, 11."""
    if P == 1:
        out[0] = d_lk
    else:
        out[0] = d_lk - d_l - d_k
        out[1] = d_k - d_lk
        out[2] = d_l - d_lk
        out[3] = d_lk


@njit(cache=True, inline="always")
def _add_to_label(k, i, l, d, w):
    """``w[U_l] += d x_i`` (on the pairs (f, l) of the support when the model has one)."""
    indices, values = k.indices, k.values
    L = k.n_labels
    for p in range(k.indptr[i], k.indptr[i + 1]):
        if k.sparse:
            q = entry_position(k.entry_start, k.entry_count, k.support_labels, L, p, l)
            if q >= 0:
                w[q] += d * values[p]
        else:
            w[indices[p] * L + l] += d * values[p]


@njit(cache=True, inline="always")
def _label_sq_norm(k, i, l):
    """``Σ x_if²`` over the features f label l sees: all of them (``‖x_i‖²``) dense, the
    support's pairs (f, l) sparse."""
    if not k.sparse:
        return k.sq_norms[i]
    sq = 0.0
    for p in range(k.indptr[i], k.indptr[i + 1]):
        if entry_position(k.entry_start, k.entry_count, k.support_labels, k.n_labels, p, l) >= 0:
            sq += k.values[p] * k.values[p]
    return sq


@njit(cache=True, inline="always")
def _add_point_difference(k, i, ma, mb, pa, pb, c, w, dv):
    """``w += c (φ(x_i, a) − φ(x_i, b))`` for points with unary parts ``ma``, ``mb`` and
    pair parts ``pa``, ``pb`` (the (1, 1) entries)."""
    L = k.n_labels
    for l in range(L):
        d = c * (ma[l] - mb[l])
        if d != 0.0:
            _add_to_label(k, i, l, d, w)
    b = k.n_unary
    P = k.pair_size
    for e in range(k.edges.shape[0]):
        u, v = k.edges[e, 0], k.edges[e, 1]
        _pair_delta(ma[u] - mb[u], ma[v] - mb[v], pa[e] - pb[e], P, dv)
        for s in range(P):
            if dv[s] != 0.0:
                w[b + P * e + s] += c * dv[s]


@base.implements(base.add_difference, MultiLabelKernel)
def _add_difference(k, i, ya, yb, c, w):
    for l in range(k.n_labels):
        if ya[l] != yb[l]:
            _add_to_label(k, i, l, c * (ya[l] - yb[l]), w)
    b = k.n_unary
    edges = k.edges
    for e in range(edges.shape[0]):
        u, v = edges[e, 0], edges[e, 1]
        if k.pair_size == 1:
            dd = ya[u] * ya[v] - yb[u] * yb[v]
            if dd != 0:
                w[b + e] += c * dd
        else:
            sa = 2 * ya[u] + ya[v]
            sb = 2 * yb[u] + yb[v]
            if sa != sb:
                w[b + 4 * e + sa] += c
                w[b + 4 * e + sb] -= c


@base.implements(base.difference_sq_norm, MultiLabelKernel)
def _difference_sq_norm(k, i, ws, ya, yb):
    sq = 0.0
    for l in range(k.n_labels):
        if ya[l] != yb[l]:
            sq += _label_sq_norm(k, i, l)
    for e in range(k.edges.shape[0]):
        u, v = k.edges[e, 0], k.edges[e, 1]
        if k.pair_size == 1:
            d = ya[u] * ya[v] - yb[u] * yb[v]
            sq += d * d
        elif ya[u] != yb[u] or ya[v] != yb[v]:
            sq += 2.0
    return sq


@base.implements(base.add_oracle_difference, MultiLabelKernel)
def _add_oracle_difference(k, i, ws, y, c, w):
    s0 = k.label_offsets[i]
    gold, gold_pair = ws.gold, ws.gold_pair
    for l in range(k.n_labels):
        gold[l] = k.labels[s0 + l]
    for e in range(k.edges.shape[0]):
        gold_pair[e] = gold[k.edges[e, 0]] * gold[k.edges[e, 1]]
    _add_point_difference(k, i, gold, ws.mu, gold_pair, ws.mu_pair, c, w, ws.dv)


@base.implements(base.oracle_loss, MultiLabelKernel)
def _oracle_loss(k, i, ws, y):
    s0 = k.label_offsets[i]
    total = 0.0
    for l in range(k.n_labels):
        total += k.loss_weights[l] * abs(ws.mu[l] - k.labels[s0 + l])
    return total


@base.implements(base.slack_oracle, MultiLabelKernel)
def _slack_oracle(k, i, w, ws, scale, search, seed, y):
    s0 = k.label_offsets[i]
    value, _ = multilabel_slack_oracle(
        ws.plain,
        k.edges,
        ws.tables,
        k.labels[s0 : s0 + k.n_labels],
        scale,
        ws.best,
        ws.best_y,
        ws.scratch,
    )
    for l in range(k.n_labels):
        y[l] = ws.scratch[l]
    return value, 1


@base.implements(base.status, MultiLabelKernel)
def _status(k):
    return 0
