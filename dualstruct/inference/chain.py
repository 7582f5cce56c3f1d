"""Exact inference on linear chains (numba kernels).

Score of a labelling ``y`` of a sequence with token features ``x_1..x_T``:

    s(x, y) = start[y_1] + Σ_t <W_U[:, y_t], x_t> + Σ_t W_B[y_t, y_{t+1}] + end[y_T]

``W_U`` is stored feature-major, shape (n_features, K), so a sparse token row touches
contiguous K-vectors. Margin rescaling adds the Hamming loss ``lw[ȳ_t] · [y_t ≠ ȳ_t]`` to the
unigram scores before Viterbi (loss-augmented decoding).
"""

import numpy as np
from numba import njit, prange


@njit(cache=True)
def unigram_scores(indptr, indices, data, row_start, row_stop, W_U, out):
    """out[t, k] = <W_U[:, k], x_{row_start + t}> for the rows of one sequence."""
    K = W_U.shape[1]
    for t in range(row_stop - row_start):
        row = row_start + t
        for k in range(K):
            out[t, k] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            j = indices[p]
            v = data[p]
            for k in range(K):
                out[t, k] += v * W_U[j, k]


@njit(cache=True)
def add_hamming_loss(scores, T, gold, loss_weights):
    """scores[t, k] += loss_weights[gold[t]] for every k != gold[t] (loss augmentation)."""
    K = scores.shape[1]
    for t in range(T):
        g = gold[t]
        lw = loss_weights[g]
        for k in range(K):
            if k != g:
                scores[t, k] += lw


@njit(cache=True)
def viterbi(scores, T, W_B, start, end, backptr, delta, out):
    """Max-sum Viterbi over the first T rows of ``scores``; writes the argmax into out[:T].

    Returns the best total score. ``backptr`` (≥ T×K ints) and ``delta`` (≥ 2×K floats) are
    scratch. Ties go to the smallest label index, so the result is deterministic.
    """
    K = scores.shape[1]
    cur = 0
    for k in range(K):
        delta[0, k] = start[k] + scores[0, k]
    for t in range(1, T):
        nxt = 1 - cur
        # a outer, b inner: rows of W_B are read contiguously (ties keep the smallest a)
        d0 = delta[cur, 0]
        for b in range(K):
            delta[nxt, b] = d0 + W_B[0, b]
            backptr[t, b] = 0
        for a in range(1, K):
            da = delta[cur, a]
            for b in range(K):
                v = da + W_B[a, b]
                if v > delta[nxt, b]:
                    delta[nxt, b] = v
                    backptr[t, b] = a
        for b in range(K):
            delta[nxt, b] += scores[t, b]
        cur = nxt
    best = -np.inf
    arg = 0
    for k in range(K):
        v = delta[cur, k] + end[k]
        if v > best:
            best = v
            arg = k
    out[T - 1] = arg
    for t in range(T - 1, 0, -1):
        out[t - 1] = backptr[t, out[t]]
    return best


@njit(cache=True)
def labelling_score(scores, T, W_B, start, end, y):
    """s(x, y) for the labelling y[:T] given the unigram scores of the sequence."""
    s = start[y[0]] + end[y[T - 1]]
    for t in range(T):
        s += scores[t, y[t]]
    for t in range(T - 1):
        s += W_B[y[t], y[t + 1]]
    return s


@njit(cache=True)
def loss_table(scores, T, W_B, start, end, gold, scale, V, back, best_s, best_k):
    """Best ``scale·s(y)`` for every Hamming loss value L = 0..T (unit loss), O(T² K²).

    ``V[t, k, L]`` is the best scaled score of a prefix ending in label k at t with L
    mistakes; ``best_s[L]`` / ``best_k[L]`` the best complete score with loss L and its last
    label (``-inf`` / -1 when no labelling has that loss). ``back`` keeps the argmax
    predecessors for :func:`backtrack_loss_table`.
    """
    K = scores.shape[1]
    for t in range(T):
        for k in range(K):
            for L in range(T + 1):
                V[t, k, L] = -np.inf
    for k in range(K):
        V[0, k, 0 if k == gold[0] else 1] = scale * (start[k] + scores[0, k])
    for t in range(1, T):
        g = gold[t]
        for b in range(K):
            lb = 0 if b == g else 1
            for a in range(K):
                trans = scale * W_B[a, b]
                for L in range(t + 1):
                    v = V[t - 1, a, L]
                    if v == -np.inf:
                        continue
                    cand = v + trans
                    if cand > V[t, b, L + lb]:
                        V[t, b, L + lb] = cand
                        back[t, b, L + lb] = a
            for L in range(t + 2):
                if V[t, b, L] != -np.inf:
                    V[t, b, L] += scale * scores[t, b]
    for L in range(T + 1):
        best_s[L] = -np.inf
        best_k[L] = -1
        for k in range(K):
            v = V[T - 1, k, L]
            if v == -np.inf:
                continue
            v += scale * end[k]
            if v > best_s[L]:
                best_s[L] = v
                best_k[L] = k


@njit(cache=True)
def backtrack_loss_table(T, gold, back, k, L, out):
    """The labelling behind ``best_k[L] = k`` of :func:`loss_table`, written to out[:T]."""
    for t in range(T - 1, -1, -1):
        out[t] = k
        if t > 0:
            k_prev = back[t, k, L]
            L -= 0 if k == gold[t] else 1
            k = k_prev


@njit(cache=True)
def slack_viterbi(scores, T, W_B, start, end, gold, scale, V, back, out):
    """Exact slack-rescaled oracle on a chain with unit Hamming loss:

        argmax_y  Φ(y) = δ(ȳ, y) · (1 + scale·(s(y) − s(ȳ)))

    For each loss L the best score ``h_L`` of :func:`loss_table` gives
    ``Φ_L = L (1 + h_L − s(ȳ))`` (for fixed L, Φ grows with the score), and the answer is the
    best L, O(T² K²). ``scores`` are the plain (not loss-augmented) unigram scores; ``V``
    (≥ T×K×(T+1)) and ``back`` are scratch. Writes the maximizer into ``out[:T]`` (ȳ itself
    when no labelling has Φ > 0) and returns ``(Φ_max, loss)``.
    """
    best_s = np.empty(T + 1)
    best_k = np.empty(T + 1, dtype=np.int64)
    loss_table(scores, T, W_B, start, end, gold, scale, V, back, best_s, best_k)
    gold_score = scale * labelling_score(scores, T, W_B, start, end, gold)
    best_phi = 0.0
    best_L = 0
    for L in range(1, T + 1):
        if best_k[L] < 0:
            continue
        phi = L * (1.0 + best_s[L] - gold_score)
        if phi > best_phi:
            best_phi = phi
            best_L = L
    if best_L == 0:
        for t in range(T):
            out[t] = gold[t]
        return 0.0, 0
    backtrack_loss_table(T, gold, back, best_k[best_L], best_L, out)
    return best_phi, best_L


@njit(cache=True)
def _sparse_row_dot(indptr, indices, data, r1, r2):
    p, q = indptr[r1], indptr[r2]
    pe, qe = indptr[r1 + 1], indptr[r2 + 1]
    s = 0.0
    while p < pe and q < qe:
        a, b = indices[p], indices[q]
        if a == b:
            s += data[p] * data[q]
            p += 1
            q += 1
        elif a < b:
            p += 1
        else:
            q += 1
    return s


@njit(cache=True, parallel=True)
def sequence_grams(indptr, indices, data, offsets, gram_offsets, gram):
    """gram[gram_offsets[i] + T*t + u] = <x_t, x_u> for each sequence i (rows sorted)."""
    n = offsets.shape[0] - 1
    for i in prange(n):
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        g0 = gram_offsets[i]
        for t in range(T):
            for u in range(t, T):
                v = _sparse_row_dot(indptr, indices, data, s0 + t, s0 + u)
                gram[g0 + T * t + u] = v
                gram[g0 + T * u + t] = v


def sequence_gram_matrices(data):
    """Token Gram matrices ``<x_t, x_u>`` of every sequence of a :class:`PackedSequences`,
    packed: (offsets, flat values)."""
    lengths = data.lengths
    gram_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths * lengths, out=gram_offsets[1:])
    gram = np.empty(gram_offsets[-1])
    indptr, indices, values, offsets = data.kernel_arrays()
    sequence_grams(indptr, indices, values, offsets, gram_offsets, gram)
    return gram_offsets, gram
