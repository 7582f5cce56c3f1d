"""The factors of :class:`~dualstruct.models.ChainModel` for GDMM: every token is a node over
the K labels, every pair of neighbouring tokens an edge ``(t, t + 1)`` whose table is the
transition matrix (:mod:`dualstruct.models.factors`).

θ_t(a) = ⟨W_U[:, a], x_t⟩ (on the support's pairs only with sparse weights), plus start[a] at
the first token and end[a] at the last; θ_e(a, b) = W_B[a, b];
δ_t(a) = loss_weights[ȳ_t]·[a ≠ ȳ_t].

The oracles are sublinear in K where the weights allow it:

* ``node_oracle``, sparse weights: a walk over the support rows of the token's features.
  A label in none of them scores 0 (away from the chain's ends), so the smallest such label
  stands for them all; the cost is the rows' length, not K·nnz. Dense weights, the chain's
  ends (where start and end score every label) and tokens with a feature of more than K/16
  labels (a bias): one feature-major sweep over every label, as the chain GDMM streams
  such rows.
* ``edge_oracle``: up to ``chain_transitions.SCAN_LABELS`` labels a scan of the K² pairs
  (every row's minimum, then the first pair at the best); above, the four-case search
  over a max-tree of the training transitions
  (:func:`~dualstruct.models.chain_transitions.bigram_sorted`). It relies on
  ``W_B[a, b] <= 0`` for every pair that is no training transition, which holds for the
  weights GDMM keeps, ``w = C Σ (φ(ȳ) − E_q φ)`` from ``w = 0``. The kernel's
  :class:`~dualstruct.models.chain_transitions.FactorState` mirrors the transition weights
  of one w: ``prepare_weights`` rebuilds it (and checks the sign, else the oracle scans all
  K² pairs), ``add_edge`` on that w keeps it up to date in O(log n) and drops an unlisted
  pair's rounding residue above 0 (with the scan only the latter: there is no search to
  keep).
* The node oracle leaves the token's label scores in the kernel's scratch (every label on a
  sweep, the active and walked ones on a walk, the others 0), so ``node_score`` answers the
  engine's next questions about that token (the away state, the steps inside the active
  set) without a pass over its features, and ``add_node`` keeps them exact: the label
  blocks are orthogonal, so a step moves θ_t(a) by c ‖φ_t(a)‖² and no other label's score.
  They hold until w changes elsewhere (another token's ``add_node``, ``prepare_weights``)
  or an edge oracle runs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import factors
from .chain import ChainModel
from .chain_kernels import ChainKernel
from .chain_transitions import (
    _HEAD,
    CACHE,
    SCAN,
    _listed_changed,
    bigram_sorted,
    build_transition_tree,
    listed_position,
    listed_views,
    state_views,
    tops_build,
)
from .support import entry_position


@njit(cache=True, inline="always")
def _column(k, p, a):
    """The entry of w that token feature entry ``p`` scores label ``a`` with (−1: none)."""
    if k.sparse:
        return entry_position(k.entry_start, k.entry_count, k.support_labels, k.n_labels, p, a)
    return k.indices[p] * k.n_labels + a


@njit(cache=True, inline="always")
def _ends(k, i, j):
    """Whether node j of sequence i carries the start and the end weights."""
    T = k.label_offsets[i + 1] - k.label_offsets[i]
    return k.start_end and j == 0, k.start_end and j == T - 1


@njit(cache=True, inline="always")
def _state(k):
    return state_views(k.factor_ints, k.factor_floats, k.n_labels)


@njit(cache=True, inline="always")
def _next_stamp(st):
    st.stamp[0] += 1
    return st.stamp[0]


@factors.implements(factors.factor_counts, ChainKernel)
def _factor_counts(k, i):
    T = k.label_offsets[i + 1] - k.label_offsets[i]
    return T, max(T - 1, 0)


@factors.implements(factors.node_info, ChainKernel)
def _node_info(k, i, j):
    return k.n_labels, k.labels[k.label_offsets[i] + j]


@factors.implements(factors.edge_nodes, ChainKernel)
def _edge_nodes(k, i, e):
    return e, e + 1


@factors.implements(factors.node_score, ChainKernel)
def _node_score(k, i, w, j, a):
    if _cached(k, i, w, j):
        return _cached_score(k, a)
    return _score(k, i, w, j, a)


@factors.implements(factors.node_values, ChainKernel)
def _node_values(k, i, w, j, states, n, out):
    cached = _cached(k, i, w, j)
    gold = k.labels[k.label_offsets[i] + j]
    for s in range(n):
        a = states[s]
        out[s] = _cached_score(k, a) if cached else _score(k, i, w, j, a)
        out[s] += 0.0 if a == gold else k.loss_weights[gold]


@njit(cache=True, inline="always")
def _cached_score(k, a):
    """θ_j(a) from the scratch scores of the cached node (0: a label the walk left out)."""
    ints = k.factor_ints
    mark = ints[_HEAD + a]
    if ints[CACHE + 4] == 1 or mark == ints[CACHE + 3] or mark == -ints[CACHE + 3]:
        return k.factor_floats[_score_at(k) + a]
    return 0.0


@njit(cache=True, inline="always")
def _cached(k, i, w, j):
    """Whether the scratch scores are node j's of example i at w (``FactorState.cache``)."""
    ints = k.factor_ints
    return (
        ints[CACHE + 4] != 0
        and ints[CACHE] == i
        and ints[CACHE + 1] == j
        and ints[CACHE + 2] == w.ctypes.data
        and ints[CACHE + 3] == ints[2]
    )


@njit(cache=True, inline="always")
def _score_at(k):
    """Where the scratch scores start in ``factor_floats`` (after the listed pairs' values,
    the tops and two message vectors: :func:`~.chain_transitions.state_views`)."""
    return k.factor_ints[3] + 4 * k.n_labels


@njit(cache=True, inline="always")
def _score(k, i, w, j, a):
    """θ_j(a) from the weights."""
    row = k.label_offsets[i] + j
    s = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        c = _column(k, p, a)
        if c >= 0:
            s += k.values[p] * w[c]
    at_start, at_end = _ends(k, i, j)
    b = k.n_unary + k.n_labels * k.n_labels
    if at_start:
        s += w[b + a]
    if at_end:
        s += w[b + k.n_labels + a]
    return s


@factors.implements(factors.edge_score, ChainKernel)
def _edge_score(k, i, w, e, a, b):
    return w[k.n_unary + a * k.n_labels + b]


@factors.implements(factors.node_loss, ChainKernel)
def _node_loss(k, i, j, a):
    gold = k.labels[k.label_offsets[i] + j]
    return 0.0 if a == gold else k.loss_weights[gold]


@factors.implements(factors.add_node, ChainKernel)
def _add_node(k, i, j, a, c, w):
    _add_one(k, i, j, a, c, w)


@njit(cache=True, inline="always")
def _add_one(k, i, j, a, c, w):
    row = k.label_offsets[i] + j
    sq = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        col = _column(k, p, a)
        if col >= 0:
            v = k.values[p]
            w[col] += c * v
            sq += v * v
    _add_ends(k, i, j, a, c, w)
    _score_moved(k, i, j, a, c, sq, w)


@factors.implements(factors.add_nodes, ChainKernel)
def _add_nodes(k, i, j, states, coefs, n, scale, w):
    if k.sparse:  # each state's own support pairs
        for s in range(n):
            _add_one(k, i, j, states[s], coefs[s] * scale, w)
        return
    # dense weights: one sweep of the token's features for every state (the same sums per
    # entry of w, in the same order, as add_node state by state)
    row = k.label_offsets[i] + j
    sq = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        v = k.values[p]
        q0 = k.indices[p] * k.n_labels
        for s in range(n):
            w[q0 + states[s]] += coefs[s] * scale * v
        sq += v * v
    for s in range(n):
        c = coefs[s] * scale
        _add_ends(k, i, j, states[s], c, w)
        _score_moved(k, i, j, states[s], c, sq, w)


@njit(cache=True, inline="always")
def _add_ends(k, i, j, a, c, w):
    at_start, at_end = _ends(k, i, j)
    b = k.n_unary + k.n_labels * k.n_labels
    if at_start:
        w[b + a] += c
    if at_end:
        w[b + k.n_labels + a] += c


@njit(cache=True, inline="always")
def _score_moved(k, i, j, a, c, sq, w):
    """Keep the cached scores exact after ``w += c φ_j(a)`` (``sq``: ‖x_j‖² over the
    support's pairs of a): label blocks are orthogonal, so only θ_j(a) moves, by
    c ‖φ_j(a)‖²; a step at another node of w forgets them (its features may share
    columns)."""
    ints = k.factor_ints
    if ints[CACHE + 4] == 0 or ints[CACHE + 2] != w.ctypes.data:  # not w's cached scores
        return
    if not _cached(k, i, w, j):
        ints[CACHE + 4] = 0
        return
    at_start, at_end = _ends(k, i, j)
    at = _score_at(k) + a
    stamp = ints[CACHE + 3]
    if ints[CACHE + 4] == 2 and ints[_HEAD + a] != stamp and ints[_HEAD + a] != -stamp:
        ints[_HEAD + a] = stamp
        k.factor_floats[at] = 0.0
    k.factor_floats[at] += c * (sq + at_start + at_end)


@factors.implements(factors.add_edge, ChainKernel)
def _add_edge(k, i, e, a, b, c, w):
    col = k.n_unary + a * k.n_labels + b
    w[col] += c
    if k.factor_ints[1] == 1 and w.ctypes.data == k.factor_ints[0]:  # the w mirrored
        if k.factor_ints[SCAN]:  # the edge oracle scans: no search to keep, only the sign
            if w[col] > 0.0:
                pos_ptr, pos_col = listed_views(k.factor_ints, k.n_labels)
                if listed_position(pos_ptr, pos_col, a, b) < 0:
                    w[col] = 0.0
            return
        sr = _state(k).search
        p = listed_position(sr.pos_ptr, sr.pos_col, a, b)
        if p >= 0:
            _listed_changed(
                w[col], p, a, b, sr.tree, sr.vals, sr.pos_ptr, sr.cpos_ptr, sr.cpos_idx, sr.top,
                sr.top_at,
            )  # fmt: skip
        elif w[col] > 0.0:  # an unlisted W_B is −C·(its mass): rounding residue
            w[col] = 0.0


@factors.implements(factors.node_sq_distance, ChainKernel)
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
    at_start, at_end = _ends(k, i, j)
    return s + 2.0 * at_start + 2.0 * at_end


@factors.implements(factors.node_sq_norm, ChainKernel)
def _node_sq_norm(k, i, j, a):
    # the label blocks of φ_t are orthogonal: ‖φ_t(a)‖² (the support's pairs with sparse
    # weights; dense: ‖x_t‖², the token Gram matrix's diagonal where the kernel has it)
    at_start, at_end = _ends(k, i, j)
    if not k.sparse and len(k.gram):
        T = k.label_offsets[i + 1] - k.label_offsets[i]
        return k.gram[k.gram_offsets[i] + j * T + j] + at_start + at_end
    row = k.label_offsets[i] + j
    s = 0.0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        if not k.sparse or _column(k, p, a) >= 0:
            s += k.values[p] * k.values[p]
    return s + at_start + at_end


@factors.implements(factors.node_sq_norms, ChainKernel)
def _node_sq_norms(k, i, j, states, n, out):
    if not k.sparse:  # dense: ‖x_t‖² (+ the ends) for every label
        norm = factors.node_sq_norm(k, i, j, 0)
        for s in range(n):
            out[s] = norm
        return
    for s in range(n):
        out[s] = factors.node_sq_norm(k, i, j, states[s])


@factors.implements(factors.edge_sq_distance, ChainKernel)
def _edge_sq_distance(k, i, e, a, b, c, d):
    return 0.0 if a == c and b == d else 2.0


@njit(cache=True, inline="always")
def _wins(g, a, best_g, best):
    return best < 0 or g < best_g or (g == best_g and a < best)


@factors.implements(factors.node_oracle, ChainKernel)
def _node_oracle(k, i, w, j, C, act, n_act, mu):
    st = _state(k)
    K = k.n_labels
    row = k.label_offsets[i] + j
    gold = k.labels[row]
    lw = k.loss_weights[gold]
    at_start, at_end = _ends(k, i, j)
    score = st.score
    cache = st.cache
    cache[4] = 0
    best, best_g = -1, np.inf
    sweep = not k.sparse or at_start or at_end
    walk = 0
    if not sweep:  # a row of more than K/16 labels (a bias) is streamed, as dense weights
        for p in range(k.indptr[row], k.indptr[row + 1]):
            walk += k.entry_count[p]
            sweep = sweep or 16 * k.entry_count[p] > K
    if sweep or 16 * walk > K * (k.indptr[row + 1] - k.indptr[row]):  # score every label
        for a in range(K):
            score[a] = 0.0
        if k.sparse:
            for p in range(k.indptr[row], k.indptr[row + 1]):
                v = k.values[p]
                q0 = k.entry_start[p]
                for r in range(k.entry_count[p]):
                    score[k.support_labels[q0 + r]] += v * w[q0 + r]
        else:  # rows of the (features × labels) view: the label loop vectorizes
            U = w[: k.n_unary].reshape((k.n_features, K))
            for p in range(k.indptr[row], k.indptr[row + 1]):
                v = k.values[p]
                f = k.indices[p]
                for a in range(K):
                    score[a] += v * U[f, a]
        b0 = k.n_unary + K * K
        if at_start:
            for a in range(K):
                score[a] += w[b0 + a]
        if at_end:
            for a in range(K):
                score[a] += w[b0 + K + a]
        for a in range(K):
            g = -C * (score[a] + (0.0 if a == gold else lw)) - mu[a]
            if _wins(g, a, best_g, best):
                best, best_g = a, g
        _cache_scores(cache, i, j, w, st.stamp[0], 1)
        return best, best_g
    # sparse weights inside the chain: the active states and the gold one exactly, the
    # labels of the features' support rows by a walk, the rest score 0
    mark, touched = st.mark_a, st.touched
    stamp = _next_stamp(st)
    for s in range(n_act + 1):
        a = act[s] if s < n_act else gold
        if mark[a] == stamp:
            continue
        mark[a] = stamp
        score[a] = _score(k, i, w, j, a)
        g = -C * (score[a] + (0.0 if a == gold else lw)) - mu[a]
        if _wins(g, a, best_g, best):
            best, best_g = a, g
    n_touched = 0
    for p in range(k.indptr[row], k.indptr[row + 1]):
        v = k.values[p]
        q0 = k.entry_start[p]
        for r in range(k.entry_count[p]):
            a = k.support_labels[q0 + r]
            if mark[a] == stamp:
                continue
            if mark[a] != -stamp:
                mark[a] = -stamp
                score[a] = 0.0
                touched[n_touched] = a
                n_touched += 1
            score[a] += v * w[q0 + r]
    for r in range(n_touched):
        a = touched[r]
        g = -C * (score[a] + lw) - mu[a]
        if _wins(g, a, best_g, best):
            best, best_g = a, g
    for a in range(K):  # the first label neither explicit nor walked (<= |act| + |walk| + 1)
        if mark[a] != stamp and mark[a] != -stamp:
            g = -C * lw - mu[a]
            if _wins(g, a, best_g, best):
                best, best_g = a, g
            break
    _cache_scores(cache, i, j, w, stamp, 2)
    return best, best_g


@njit(cache=True, inline="always")
def _cache_scores(cache, i, j, w, stamp, how):
    """Record that the state's ``score`` holds node j's label scores at w (module
    docstring): read by ``node_score`` and kept by ``add_node`` until w changes elsewhere,
    another node's weights change, an edge oracle call or ``prepare_weights``."""
    cache[0] = i
    cache[1] = j
    cache[2] = w.ctypes.data
    cache[3] = stamp
    cache[4] = how


@njit(cache=True)
def _prepare_weights(k, w):
    """Mirror the transition weights of ``w`` in the kernel's search: the listed pairs'
    values, the max-tree, every row's and column's top (none where the edge oracle scans);
    flag whether every unlisted pair is <= 0 (an unlisted pair's positive rounding residue,
    at most 1e-12 of the largest |W_B|, is dropped)."""
    st = _state(k)
    st.cache[4] = 0  # w may have changed: no cached scores
    sr = st.search
    K, b0 = k.n_labels, k.n_unary
    big = 0.0
    for q in range(K * K):
        big = max(big, abs(w[b0 + q]))
    ok = 1
    for a in range(K):
        p = sr.pos_ptr[a]
        for b in range(K):
            if p < sr.pos_ptr[a + 1] and sr.pos_col[p] == b:
                p += 1
                continue
            col = b0 + a * K + b
            if w[col] > 0.0:
                if w[col] <= 1e-12 * big:
                    w[col] = 0.0
                else:
                    ok = 0
    if not k.factor_ints[SCAN]:  # the edge oracle's search (a scan needs none)
        for p in range(len(sr.vals)):
            sr.vals[p] = w[b0 + sr.pos_row[p] * K + sr.pos_col[p]]
        build_transition_tree(sr.tree, sr.vals)
        tops_build(sr.vals, sr.pos_ptr, sr.cpos_ptr, sr.cpos_idx, sr.top, sr.top_at)
    st.tracked[0] = w.ctypes.data
    st.tracked[1] = ok


@njit(cache=True, inline="always")
def _scan_pairs(W_B, C, mu_u, mu_v):
    """The first pair (a, b) in row-major order minimizing ``g = −C W_B[a, b] + mu_u[a] +
    mu_v[b]``, and g: every row's minimum (a branch-free reduction), then the first pair
    of the best row at it (the same sums, so the same pair as a scan keeping the best)."""
    K = W_B.shape[0]
    best_a, best_g = 0, np.inf
    for a in range(K):
        m_a = mu_u[a]
        low = np.inf
        for b in range(K):
            low = min(low, -C * W_B[a, b] + m_a + mu_v[b])
        if low < best_g:
            best_a, best_g = a, low
    m_a = mu_u[best_a]
    for b in range(K):
        if -C * W_B[best_a, b] + m_a + mu_v[b] == best_g:
            return best_a, b, best_g
    return best_a, 0, best_g  # (NaN weights or messages)


@factors.implements(factors.edge_oracle, ChainKernel)
def _edge_oracle(k, i, w, e, C, act_u, n_u, mu_u, act_v, n_v, mu_v):
    if w.ctypes.data != k.factor_ints[0]:
        _prepare_weights(k, w)
    st = _state(k)
    K = k.n_labels
    W_B = w[k.n_unary : k.n_unary + K * K].reshape((K, K))
    if st.tracked[1] == 0 or k.factor_ints[SCAN]:  # few labels, or an unlisted pair > 0
        return _scan_pairs(W_B, C, mu_u, mu_v)
    stamp = _next_stamp(st)
    for s in range(n_u):
        a = act_u[s]
        st.mark_a[a] = stamp
        st.mu_a[s] = mu_u[a]
    for s in range(n_v):
        b = act_v[s]
        st.mark_b[b] = stamp
        st.slot_b[b] = s
        st.mu_b[s] = mu_v[b]
    return bigram_sorted(
        st.search, W_B, C, act_u, n_u, st.mu_a, act_v, n_v, st.mu_b, st.mark_a, st.mark_b,
        st.slot_b, stamp, st.stack,
    )  # fmt: skip


@factors.implements(factors.prepare_weights, ChainKernel)
def _prepare(k, w):
    _prepare_weights(k, w)


factors.register_model(ChainModel, ChainKernel)
