"""The linear-chain model's kernel (one block per sequence): :class:`ChainKernel` and its
implementations of the kernel interface; :class:`~dualstruct.models.ChainModel` builds it.

``w = [W_U (d × K, feature-major) | W_B (K × K) | start (K) | end (K)]`` (start/end only with
``start_end``), ``φ(x, y) = (Σ_t x_t ⊗ e_{y_t}, Σ_t e_{y_t} e_{y_{t+1}}ᵀ, e_{y_1}, e_{y_T})``
and the weighted Hamming loss. The squared norm of a difference of two labellings a, b of
one sequence splits by factor:

    ‖φ(a) − φ(b)‖² = Σ_{t,u} ⟨x_t, x_u⟩ ⟨e_{a_t} − e_{b_t}, e_{a_u} − e_{b_u}⟩
                     + Σ_{(k,l)} (n_a(k,l) − n_b(k,l))² + [a_1 ≠ b_1]·2 + [a_T ≠ b_T]·2

with the token Gram matrix of the sequence (precomputed) and the transition counts n.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..inference.chain import unigram_scores, viterbi
from ..inference.slack_search import slack_oracle as chain_slack_oracle
from . import base
from .support import entry_position, entry_unigram_scores


class ChainKernel(NamedTuple):
    indptr: np.ndarray  # CSR token rows
    indices: np.ndarray
    values: np.ndarray
    labels: np.ndarray  # int32 gold label per token
    label_offsets: np.ndarray  # int64 sequence offsets (n + 1)
    loss_weights: np.ndarray  # (K,)
    gram: np.ndarray  # token Gram matrices, packed per sequence
    gram_offsets: np.ndarray  # int64 (n + 1)
    n_labels: int
    n_features: int
    start_end: bool
    max_length: int
    sparse: bool  # unary weights only on the support, else dense d × K
    support_labels: np.ndarray  # int32, the support's labels by feature row
    entry_start: np.ndarray  # sparse: int64 per data entry, its feature's support row
    entry_count: np.ndarray  # and int32 its length (models.support.entry_rows)
    n_unary: int  # unary weights: d·K dense, the support's size sparse
    max_sequence_nnz: int  # most feature entries of one sequence (sparse scratch size)
    factor_ints: np.ndarray  # the factor oracles' search and scratch (int64, float64;
    factor_floats: np.ndarray  # chain_transitions.factor_state)


class _Workspace(NamedTuple):
    scores: np.ndarray  # (T, K) unigram scores of the prepared sequence
    aug: np.ndarray  # (T, K) the last oracle's loss-augmented scores
    backptr: np.ndarray  # (T, K) int32
    delta: np.ndarray  # (2, K)
    zeros: np.ndarray  # (K,) start/end scores without start_end
    acc: np.ndarray  # sparse: (n_unary,) zeros, scratch of difference_sq_norm
    touched: np.ndarray  # sparse: int64 positions of acc in use
    row: np.ndarray  # (K,) sparse: one token's unigram scores being summed


@njit(cache=True, inline="always")
def _chain_views(k, w, zeros):
    """(W_B, start, end) as views of w: what Viterbi reads besides the unigram scores."""
    K = k.n_labels
    a = k.n_unary
    b = a + K * K
    if k.start_end:
        return w[a:b].reshape((K, K)), w[b : b + K], w[b + K : b + 2 * K]
    return w[a:b].reshape((K, K)), zeros, zeros


@base.implements(base.workspace, ChainKernel)
def _workspace(k):
    T, K = max(k.max_length, 1), k.n_labels
    n_acc = k.n_unary if k.sparse else 1
    n_touched = 2 * k.max_sequence_nnz if k.sparse else 1
    return _Workspace(
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty((T, K), dtype=np.int32),
        np.empty((2, K)),
        np.zeros(K),
        np.zeros(n_acc),
        np.zeros(n_touched, dtype=np.int64),
        np.empty(K),
    )


@base.implements(base.prepare, ChainKernel)
def _prepare(k, i, w, ws):
    if k.sparse:
        entry_unigram_scores(
            k.indptr,
            k.entry_start,
            k.entry_count,
            k.values,
            k.label_offsets[i],
            k.label_offsets[i + 1],
            k.support_labels,
            w,
            ws.scores,
            ws.row,
        )
        return
    W_U = w[: k.n_features * k.n_labels].reshape((k.n_features, k.n_labels))
    unigram_scores(
        k.indptr, k.indices, k.values, k.label_offsets[i], k.label_offsets[i + 1], W_U, ws.scores
    )


@base.implements(base.score, ChainKernel)
def _score(k, i, w, ws, y):
    return _flat_score(k, w, ws.scores, y)


@base.implements(base.loss, ChainKernel)
def _loss(k, i, y):
    start = k.label_offsets[i]
    return base.weighted_hamming(k.labels[start : start + y.shape[0]], k.loss_weights, y)


@base.implements(base.oracle, ChainKernel)
def _oracle(k, i, w, ws, loss_scale, y):
    W_B, start, end = _chain_views(k, w, ws.zeros)
    T = y.shape[0]
    s0 = k.label_offsets[i]
    aug, scores, labels, loss_weights = ws.aug, ws.scores, k.labels, k.loss_weights
    K = k.n_labels
    for t in range(T):
        g = labels[s0 + t]
        extra = loss_scale * loss_weights[g]
        for c in range(K):
            aug[t, c] = scores[t, c] + extra
        aug[t, g] = scores[t, g]
    return viterbi(aug, T, W_B, start, end, ws.backptr, ws.delta, y)


@base.implements(base.oracle_value, ChainKernel)
def _oracle_value(k, i, w, ws, y):
    return _flat_score(k, w, ws.aug, y)


@njit(cache=True, inline="always")
def _flat_score(k, w, scores, y):
    """The score of y from its unigram ``scores`` and the flat w (no views: this runs once
    per atom and step, where building the 2-D views cost more than the sum)."""
    K = k.n_labels
    b = k.n_unary
    T = y.shape[0]
    s = 0.0
    for t in range(T):
        s += scores[t, y[t]]
    for t in range(T - 1):
        s += w[b + y[t] * K + y[t + 1]]
    if k.start_end:
        s += w[b + K * K + y[0]] + w[b + K * K + K + y[T - 1]]
    return s


@base.implements(base.decode, ChainKernel)
def _decode(k, i, w, ws, y):
    W_B, start, end = _chain_views(k, w, ws.zeros)
    return viterbi(ws.scores, y.shape[0], W_B, start, end, ws.backptr, ws.delta, y)


@base.implements(base.add_difference, ChainKernel)
def _add_difference(k, i, ya, yb, c, w):
    K = k.n_labels
    T = ya.shape[0]
    s0 = k.label_offsets[i]
    indptr, indices, values = k.indptr, k.indices, k.values
    for t in range(T):
        a = ya[t]
        b = yb[t]
        if a == b:
            continue
        row = s0 + t
        for p in range(indptr[row], indptr[row + 1]):
            x = c * values[p]
            if k.sparse:  # a pair outside the support has no weight: its feature is dropped
                pa = entry_position(k.entry_start, k.entry_count, k.support_labels, K, p, a)
                pb = entry_position(k.entry_start, k.entry_count, k.support_labels, K, p, b)
                if pa >= 0:
                    w[pa] += x
                if pb >= 0:
                    w[pb] -= x
            else:
                j = indices[p] * K
                w[j + a] += x
                w[j + b] -= x
    b0 = k.n_unary  # W_B, then start and end
    for t in range(T - 1):
        w[b0 + ya[t] * K + ya[t + 1]] += c
        w[b0 + yb[t] * K + yb[t + 1]] -= c
    if k.start_end:
        e0 = b0 + K * K
        w[e0 + ya[0]] += c
        w[e0 + yb[0]] -= c
        w[e0 + K + ya[T - 1]] += c
        w[e0 + K + yb[T - 1]] -= c


@njit(cache=True, inline="always")
def _sparse_unary_sq_norm(k, i, ws, ya, yb):
    """‖Σ_t x_t ⊗ (e_{a_t} − e_{b_t})‖² over the support: the difference accumulated by
    support position in ``ws.acc`` (zeroed again before returning)."""
    s0 = k.label_offsets[i]
    acc, touched = ws.acc, ws.touched
    n = 0
    for t in range(ya.shape[0]):
        if ya[t] == yb[t]:
            continue
        row = s0 + t
        for p in range(k.indptr[row], k.indptr[row + 1]):
            v = k.values[p]
            pa = entry_position(
                k.entry_start, k.entry_count, k.support_labels, k.n_labels, p, ya[t]
            )
            pb = entry_position(
                k.entry_start, k.entry_count, k.support_labels, k.n_labels, p, yb[t]
            )
            if pa >= 0:
                acc[pa] += v
                touched[n] = pa
                n += 1
            if pb >= 0:
                acc[pb] -= v
                touched[n] = pb
                n += 1
    sq = 0.0
    for r in range(n):
        q = touched[r]
        sq += acc[q] * acc[q]
        acc[q] = 0.0  # a position touched twice adds 0 the second time
    return sq


@base.implements(base.difference_sq_norm, ChainKernel)
def _difference_sq_norm(k, i, ws, ya, yb):
    T = ya.shape[0]
    if k.sparse:
        sq = _sparse_unary_sq_norm(k, i, ws, ya, yb)
        return sq + _transition_sq_norm(k, ya, yb)
    g0 = k.gram_offsets[i]
    sq = 0.0
    for t in range(T):
        if ya[t] == yb[t]:
            continue
        for u in range(T):
            if ya[u] != yb[u]:
                e = _pair_product(ya[t], yb[t], ya[u], yb[u])
                if e != 0.0:
                    sq += k.gram[g0 + T * t + u] * e
    return sq + _transition_sq_norm(k, ya, yb)


@njit(cache=True, inline="always")
def _transition_sq_norm(k, ya, yb):
    """The transition and start/end part of ``‖φ(a) − φ(b)‖²``."""
    T = ya.shape[0]
    sq = 0.0
    # transitions: ‖Σ_t e_{A_t} − e_{B_t}‖², A_t = (a_t, a_{t+1}), over the positions that differ
    for t in range(T - 1):
        if ya[t] == yb[t] and ya[t + 1] == yb[t + 1]:
            continue
        for u in range(T - 1):
            if ya[u] == yb[u] and ya[u + 1] == yb[u + 1]:
                continue
            e = 0.0
            if ya[t] == ya[u] and ya[t + 1] == ya[u + 1]:
                e += 1.0
            if ya[t] == yb[u] and ya[t + 1] == yb[u + 1]:
                e -= 1.0
            if yb[t] == ya[u] and yb[t + 1] == ya[u + 1]:
                e -= 1.0
            if yb[t] == yb[u] and yb[t + 1] == yb[u + 1]:
                e += 1.0
            sq += e
    if k.start_end:
        if ya[0] != yb[0]:
            sq += 2.0
        if ya[T - 1] != yb[T - 1]:
            sq += 2.0
    return sq


@njit(cache=True, inline="always")
def _pair_product(a, b, c, d):
    """⟨e_a − e_b, e_c − e_d⟩."""
    e = 0.0
    if a == c:
        e += 1.0
    if a == d:
        e -= 1.0
    if b == c:
        e -= 1.0
    if b == d:
        e += 1.0
    return e


@base.implements(base.slack_oracle, ChainKernel)
def _slack_oracle(k, i, w, ws, scale, search, seed, y):
    W_B, start, end = _chain_views(k, w, ws.zeros)
    T = y.shape[0]
    K = k.n_labels
    s0 = k.label_offsets[i]
    # the dynamic program's tables grow as T² K: allocated per call (O(T² K²) work follows)
    V = np.empty((T, K, T + 1))
    back = np.zeros((T, K, T + 1), dtype=np.int32)
    lw = np.empty(K)
    cand = np.empty(T, dtype=np.int32)
    value, _, calls = chain_slack_oracle(
        search,
        ws.scores,
        T,
        W_B,
        start,
        end,
        k.labels[s0 : s0 + T],
        scale,
        V,
        back,
        ws.aug,
        lw,
        ws.backptr,
        ws.delta,
        cand,
        seed,
        True,
        y,
    )
    return value, calls


@base.implements(base.status, ChainKernel)
def _status(k):
    return 0
