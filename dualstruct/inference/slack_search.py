"""Slack-rescaling oracles built from margin-type oracles (Choi, Meshi, Srebro 2016),
numba kernels for one chain at a time.

The slack oracle maximizes ``Φ(y) = h(y) g(y)`` with ``h(y) = 1 + c (s(y) − s(ȳ))`` (c the
score scale) and ``g(y) = δ(ȳ, y)`` (unit Hamming loss). Every labelling is a point
``(h, g)`` in the plane; the searches below only ever ask

* the **λ-oracle** ``argmax_y h(y) + λ g(y)`` — loss-augmented Viterbi with the loss scaled by
  λ/c, O(T K²) (:func:`lambda_oracle`);
* the **constrained λ-oracle** ``argmax h + λ g`` subject to ``β h ≤ g < α h`` and to not
  returning a label already found (:func:`constrained_oracle`). It is answered from the table
  of the best score for every loss value (:func:`~dualstruct.inference.chain.loss_table`):
  the points ``(h_L, L)``, one per loss L, are the upper envelope that contains the maximizer
  of Φ (for a fixed loss Φ grows with the score), so the search is exact over them.

Searches (each returns ``(Φ, loss, oracle calls)`` and writes its labelling to ``out``):

* :func:`binary_search` — Lemma 1: minimize the convex bound
  ``F̄(λ) = ¼ max_y (h/λ + λ g)²`` by bisection on log λ with the λ-oracle at λ²;
* :func:`bisecting_search` — Algorithm 1: shrink the ranges of h, g and λ (Lemmas 2–4);
* :func:`angular_search` — Algorithm 2: split angles of slopes ``g/h`` with the constrained
  oracle, queue ordered by an upper bound on Φ, seeded by a cached label; exact (Theorem 2,
  at most 2M + 1 calls over M candidate points).
* ``EXACT`` — the dynamic program of :func:`~dualstruct.inference.chain.slack_viterbi`.

The λ-oracle-only searches can miss the maximizer (Theorem 1); they never report more than
the true maximum.
"""

import math

import numpy as np
from numba import njit

from .chain import (
    add_hamming_loss,
    backtrack_loss_table,
    labelling_score,
    loss_table,
    slack_viterbi,
    unigram_scores,
    viterbi,
)

EXACT, ANGULAR, BISECTING, BINARY = 0, 1, 2, 3
SEARCHES = {"exact": EXACT, "angular": ANGULAR, "bisecting": BISECTING, "binary": BINARY}
MAX_CALLS = 60


@njit(cache=True)
def _h_and_g(scores, T, W_B, start, end, gold, scale, gold_score, y):
    loss = 0
    for t in range(T):
        if y[t] != gold[t]:
            loss += 1
    h = 1.0 + scale * labelling_score(scores, T, W_B, start, end, y) - gold_score
    return h, loss


@njit(cache=True)
def lambda_oracle(scores, T, W_B, start, end, gold, scale, lam, aug, lw, backptr, delta, out):
    """``argmax_y h(y) + λ g(y)`` = Viterbi on ``s + (λ/c) δ`` (c = scale > 0)."""
    K = scores.shape[1]
    for t in range(T):
        for k in range(K):
            aug[t, k] = scores[t, k]
    for k in range(K):
        lw[k] = lam / scale
    add_hamming_loss(aug, T, gold, lw)
    viterbi(aug, T, W_B, start, end, backptr, delta, out)


@njit(cache=True)
def _query(
    scores,
    T,
    W_B,
    start,
    end,
    gold,
    scale,
    gold_score,
    lam,
    aug,
    lw,
    backptr,
    delta,
    cand,
    out,
    best_phi,
    best_loss,
):
    """One λ-oracle call; keeps the best labelling so far in ``out``. Returns
    (h, g, best Φ, its loss)."""
    lambda_oracle(scores, T, W_B, start, end, gold, scale, lam, aug, lw, backptr, delta, cand)
    h, g = _h_and_g(scores, T, W_B, start, end, gold, scale, gold_score, cand)
    if h * g > best_phi:
        best_phi, best_loss = h * g, g
        for t in range(T):
            out[t] = cand[t]
    return h, g, best_phi, best_loss


@njit(cache=True)
def warm_lambda(scores, T, W_B, start, end, gold, scale, seed):
    """λ₀ = h/g of a labelling near the maximizer (the block's best cached labelling): the
    λ at which the λ-oracle returns the maximizer y* of Φ is ``h(y*)/g(y*)`` (where
    ``h + λ g`` is tangent to ``Φ = h g``), so a good guess of y* starts the search close
    (Choi, Meshi, Srebro 2016 suggest ``λ₀ = Ĥ/Ĝ`` from the current weights). 1 when the
    seed has no loss or no margin violation."""
    gold_score = scale * labelling_score(scores, T, W_B, start, end, gold)
    h, g = _h_and_g(scores, T, W_B, start, end, gold, scale, gold_score, seed)
    if g > 0 and h > 0.0:
        return h / g
    return 1.0


@njit(cache=True)
def constrained_oracle(h_of, has, found, T, lam, alpha, beta):
    """``argmax_L h_L + λ L`` over the envelope points with ``β h_L ≤ L < α h_L``, h_L > 0,
    not yet found; -1 if there is none."""
    best = -np.inf
    arg = -1
    for L in range(1, T + 1):
        if not has[L] or found[L]:
            continue
        h = h_of[L]
        if h <= 0.0 or L < beta * h or (alpha < np.inf and L >= alpha * h):
            continue
        v = h + lam * L
        if v > best:
            best = v
            arg = L
    return arg


@njit(cache=True)
def bisecting_search(
    scores, T, W_B, start, end, gold, scale, lam0, max_calls, aug, lw, backptr, delta, cand, out
):
    """Algorithm 1 (bisecting search) with the λ-oracle; returns (Φ, loss, calls)."""
    gold_score = scale * labelling_score(scores, T, W_B, start, end, gold)
    best_phi, best_loss = 0.0, 0
    for t in range(T):
        out[t] = gold[t]
    h_lo, h_hi, g_lo, g_hi = 0.0, np.inf, 0.0, np.inf
    l_lo, l_hi = 0.0, np.inf
    lam = lam0
    calls = 0
    while calls < max_calls:
        h, g, best_phi, best_loss = _query(
            scores,
            T,
            W_B,
            start,
            end,
            gold,
            scale,
            gold_score,
            lam,
            aug,
            lw,
            backptr,
            delta,
            cand,
            out,
            best_phi,
            best_loss,
        )
        calls += 1
        u0, u1 = h, lam * g
        v0, v1 = float(g), h / lam
        h_lo, h_hi = max(h_lo, min(u0, u1)), min(h_hi, max(u0, u1))
        g_lo, g_hi = max(g_lo, min(v0, v1)), min(g_hi, max(v0, v1))
        if h_lo > h_hi or g_lo > g_hi:
            break
        if v0 <= v1:
            l_lo = max(l_lo, lam)  # increase λ
        else:
            l_hi = min(l_hi, lam)  # decrease λ
        lam = 2.0 * lam if l_hi == np.inf else 0.5 * (l_lo + l_hi)
        if l_hi < np.inf and l_hi - l_lo <= 1e-3 * l_hi:
            break  # λ is pinned down to 0.1%
    return best_phi, best_loss, calls


@njit(cache=True)
def binary_search(
    scores, T, W_B, start, end, gold, scale, lam0, max_calls, aug, lw, backptr, delta, cand, out
):
    """Lemma 1: bisection on log λ of ``F̄(λ) = ¼ max_y (h/λ + λ g)²`` (its maximizer is the
    λ-oracle at λ²); the slope's sign ``g − h/λ²`` tells the side. Returns (Φ, loss, calls)."""
    gold_score = scale * labelling_score(scores, T, W_B, start, end, gold)
    best_phi, best_loss = 0.0, 0
    for t in range(T):
        out[t] = gold[t]
    lo = math.log(lam0) - 4.0 * math.log(10.0)
    hi = math.log(lam0) + 4.0 * math.log(10.0)
    calls = 0
    while calls < max_calls and hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lam = math.exp(mid)
        h, g, best_phi, best_loss = _query(
            scores,
            T,
            W_B,
            start,
            end,
            gold,
            scale,
            gold_score,
            lam * lam,
            aug,
            lw,
            backptr,
            delta,
            cand,
            out,
            best_phi,
            best_loss,
        )
        calls += 1
        if g - h / (lam * lam) > 0.0:
            hi = mid
        else:
            lo = mid
    return best_phi, best_loss, calls


@njit(cache=True)
def angular_search(
    scores, T, W_B, start, end, gold, scale, lam0, max_calls, V, back, cache, use_cache, out
):
    """Algorithm 2 (angular search) with the constrained λ-oracle; exact.

    An angle is a range of slopes ``[β, α)`` of ``g/h``; the queue holds angles with an upper
    bound on Φ inside them (the best product on the line ``h + λ g = c`` that bounded their
    parent) and is served best bound first, stopping once no bound beats the best Φ found.
    ``cache`` (a labelling of length T, used when ``use_cache``) seeds the best Φ — the
    paper's label cache. Returns (Φ, loss, calls).
    """
    best_s = np.empty(T + 1)
    best_k = np.empty(T + 1, dtype=np.int64)
    loss_table(scores, T, W_B, start, end, gold, scale, V, back, best_s, best_k)
    gold_score = scale * labelling_score(scores, T, W_B, start, end, gold)
    h_of = np.empty(T + 1)
    has = np.zeros(T + 1, dtype=np.bool_)
    found = np.zeros(T + 1, dtype=np.bool_)
    for L in range(T + 1):
        if best_k[L] >= 0:
            has[L] = True
            h_of[L] = 1.0 + best_s[L] - gold_score
    best_phi, best_L = 0.0, 0
    if use_cache:
        h, g = _h_and_g(scores, T, W_B, start, end, gold, scale, gold_score, cache)
        if h * g > best_phi:
            best_phi = h * g
    cap = 4 * T + 8
    q_alpha = np.empty(cap)
    q_beta = np.empty(cap)
    q_ub = np.empty(cap)
    nq = 1
    q_alpha[0], q_beta[0], q_ub[0] = np.inf, 0.0, np.inf
    calls = 0
    while nq > 0 and calls < max_calls:
        top = 0
        for q in range(1, nq):
            if q_ub[q] > q_ub[top]:
                top = q
        alpha, beta, ub = q_alpha[top], q_beta[top], q_ub[top]
        nq -= 1
        q_alpha[top], q_beta[top], q_ub[top] = q_alpha[nq], q_beta[nq], q_ub[nq]
        if ub <= best_phi * (1.0 + 1e-12):
            break  # no angle can hold a better label
        if beta > 0.0 and alpha < np.inf:
            lam = 1.0 / math.sqrt(alpha * beta)
        elif beta > 0.0:
            lam = 0.5 / beta
        elif alpha < np.inf:
            lam = 2.0 / alpha
        else:
            lam = lam0
        L = constrained_oracle(h_of, has, found, T, lam, alpha, beta)
        calls += 1
        if L < 0:
            continue
        found[L] = True
        h = h_of[L]
        g = float(L)
        if h * g > best_phi:
            best_phi, best_L = h * g, L
        slope_z = g / h
        slope_r = 1.0 / lam
        slope_zp = (h / lam) / (lam * g)  # z' = (λ g, h/λ)
        if abs(slope_z - slope_r) <= 1e-12 * slope_r:
            continue  # the line touches the hyperbola at z: nothing better in this angle
        c = h + lam * g
        lo, hi = min(slope_z, slope_zp), max(slope_z, slope_zp)
        for side in range(2):
            a_lo = max(beta, lo if side == 0 else slope_r)
            a_hi = min(alpha, slope_r if side == 0 else hi)
            if a_lo >= a_hi:
                continue
            sig = min(max(slope_r, a_lo), a_hi)
            child_ub = sig * c * c / ((1.0 + lam * sig) ** 2)
            if child_ub > best_phi and nq < cap:
                q_alpha[nq], q_beta[nq], q_ub[nq] = a_hi, a_lo, child_ub
                nq += 1
    if best_L == 0:
        if use_cache:
            h, g = _h_and_g(scores, T, W_B, start, end, gold, scale, gold_score, cache)
            if h * g > 0.0 and h * g >= best_phi:
                for t in range(T):
                    out[t] = cache[t]
                return h * g, g, calls
        for t in range(T):
            out[t] = gold[t]
        return 0.0, 0, calls
    backtrack_loss_table(T, gold, back, best_k[best_L], best_L, out)
    return best_phi, best_L, calls


@njit(cache=True)
def slack_oracle(
    search,
    scores,
    T,
    W_B,
    start,
    end,
    gold,
    scale,
    V,
    back,
    aug,
    lw,
    backptr,
    delta,
    cand,
    cache,
    use_cache,
    out,
):
    """Dispatch to the chosen slack search; returns (Φ, loss, oracle calls). With
    ``use_cache`` the labelling ``cache`` seeds the angular search and sets λ₀ of every
    search (:func:`warm_lambda`; else λ₀ = 1)."""
    if search == EXACT or scale <= 0.0:
        phi, loss = slack_viterbi(scores, T, W_B, start, end, gold, scale, V, back, out)
        return phi, loss, 1
    lam0 = warm_lambda(scores, T, W_B, start, end, gold, scale, cache) if use_cache else 1.0
    if search == ANGULAR:  # Theorem 2: at most 2M + 1 calls over the M ≤ T envelope points
        return angular_search(
            scores,
            T,
            W_B,
            start,
            end,
            gold,
            scale,
            lam0,
            max(MAX_CALLS, 2 * T + 1),
            V,
            back,
            cache,
            use_cache,
            out,
        )
    if search == BISECTING:
        return bisecting_search(
            scores, T, W_B, start, end, gold, scale, lam0, MAX_CALLS, aug, lw, backptr, delta,
            cand, out,
        )  # fmt: skip
    return binary_search(  # its λ enters squared
        scores, T, W_B, start, end, gold, scale, math.sqrt(lam0), MAX_CALLS, aug, lw, backptr,
        delta, cand, out,
    )  # fmt: skip


@njit(cache=True)
def search_all(
    search,
    indptr,
    indices,
    data,
    offsets,
    labels,
    W_U,
    W_B,
    start,
    end,
    phi_out,
    calls_out,
    out,
    seeds,
    warm,
):
    """Run one search for every sequence at the given weights: Φ, calls, labels. With
    ``warm`` each sequence's labelling in ``seeds`` (laid out as ``labels``) warm-starts
    its search, as a block's best cached labelling does during training."""
    n = offsets.shape[0] - 1
    K = W_U.shape[1]
    max_T = 0
    for i in range(n):
        max_T = max(max_T, offsets[i + 1] - offsets[i])
    scores = np.empty((max_T, K))
    V = np.empty((max_T, K, max_T + 1))
    back = np.zeros((max_T, K, max_T + 1), dtype=np.int32)
    aug = np.empty((max_T, K))
    lw = np.empty(K)
    backptr = np.empty((max_T, K), dtype=np.int32)
    delta = np.empty((2, K))
    cand = np.empty(max_T, dtype=np.int32)
    for i in range(n):
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        unigram_scores(indptr, indices, data, s0, s0 + T, W_U, scores)
        phi, _, calls = slack_oracle(
            search,
            scores,
            T,
            W_B,
            start,
            end,
            labels[s0 : s0 + T],
            1.0,
            V,
            back,
            aug,
            lw,
            backptr,
            delta,
            cand,
            seeds[s0 : s0 + T],
            warm,
            out[s0 : s0 + T],
        )
        phi_out[i] = phi
        calls_out[i] = calls
