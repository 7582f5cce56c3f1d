"""Numba kernels of one training pass of BCFW and SSG on a linear chain.

Everything is C-form (ALGORITHMS.md §1): ``w = C Σ_i (φ(x_i, ȳ_i) − E_{q_i} φ(x_i, ·))`` and the
loss term ``ℓ = C Σ_i E_{q_i} δ(ȳ_i, ·)``. The λ-form of Lacoste-Julien et al. (2013) maps to it by
``w_λ = w`` and ``ℓ_λ = ℓ / (C n)``, so every formula below is theirs multiplied through by C n.

BCFW dual state in factor form
------------------------------
A block's dual point ``q_i`` (a distribution over labellings) enters ``w`` only through its
unigram marginals ``μ_t = E_{q_i} e_{y_t}`` (T × K) and its summed bigram marginals
``B_i = E_{q_i} Σ_t e_{y_t} e_{y_{t+1}}^T`` (K × K); start/end marginals are μ_1 and μ_T. So the
state is ``mu`` (n_tokens × K) and ``bigram`` (n_sequences × K × K), never a dense n × d matrix.
With ``D_t = e_{ŷ_t} − μ_t`` and ``B̂ − B_i`` for the Viterbi corner ``ŷ``,

    w_i − w_s = C ( Σ_t x_t ⊗ D_t,  B̂ − B_i,  D_1,  D_T )
    g_i  = <w_i − w_s, w> + ℓ_s − ℓ_i
         = C [ Σ_t <D_t, θ̃_t> + <B̂ − B_i, W_B> + <D_1, start> + <D_T, end> ]
    ‖w_i − w_s‖² = C² [ Σ_{t,t'} <x_t, x_t'> <D_t, D_t'> + ‖B̂ − B_i‖² + ‖D_1‖² + ‖D_T‖² ]

where ``θ̃_t`` are the loss-augmented unigram scores (the loss enters through ``ℓ_s − ℓ_i =
−C Σ_t lw[ȳ_t] D_t[ȳ_t]``, which is the loss-augmentation term of ``<D_t, θ̃_t>`` because
Σ_k D_t[k] = 0). The step is ``γ = clip(g_i / ‖w_i − w_s‖², 0, 1)`` (slides, exact line search),
and the token Gram matrices ``<x_t, x_t'>`` are precomputed once per data set.

Weighted averaging ``w̄_m = Σ_{j≤m} j w_j / A_m`` with ``A_m = m(m+1)/2`` is kept lazily: with
``Δ_m = w_m − w_{m−1}`` one has ``w̄_m = w_m − R_m / A_m`` where ``R_m = Σ_{j≤m} A_{j−1} Δ_j``,
so ``R`` receives exactly the sparse updates ``w`` does and a step never touches all of ``w``.
"""

import numpy as np
from numba import njit

from ..inference.chain import add_hamming_loss, labelling_score, unigram_scores, viterbi
from ..inference.slack_search import slack_oracle


@njit(cache=True)
def _max_length(offsets):
    longest = 0
    for i in range(offsets.shape[0] - 1):
        longest = max(longest, offsets[i + 1] - offsets[i])
    return longest


@njit(cache=True)
def bcfw_pass(indptr, indices, data, offsets, labels, loss_weights, gram, gram_offsets,
              order, C, start_end,
              W_U, W_B, start, end, mu, bigram, scalars,
              averaging, R_U, R_B, R_start, R_end, block_gaps):
    """One BCFW pass over the blocks in ``order`` (see the module docstring for the math).

    ``scalars`` holds ``[ℓ, m (steps taken so far), R_ℓ]`` and is updated in place, as are the
    weights, the dual state and the averaging accumulators. ``block_gaps[i]`` receives g_i
    measured before block i's step. Returns the number of oracle calls made.
    """
    K = W_U.shape[1]
    max_T = _max_length(offsets)
    scores = np.empty((max_T, K))
    backptr = np.empty((max_T, K), dtype=np.int32)
    delta = np.empty((2, K))
    yhat = np.empty(max_T, dtype=np.int32)
    D = np.empty((max_T, K))
    Bd = np.empty((K, K))
    loss_term = scalars[0]
    m = scalars[1]
    R_loss = scalars[2]

    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        gold = labels[s0:s0 + T]
        m += 1.0  # every visit is an averaging step, also when γ = 0
        A_prev = 0.5 * (m - 1.0) * m

        # loss-augmented Viterbi corner ŷ
        unigram_scores(indptr, indices, data, s0, s0 + T, W_U, scores)
        add_hamming_loss(scores, T, gold, loss_weights)
        viterbi(scores, T, W_B, start, end, backptr, delta, yhat)

        # D_t = e_ŷt − μ_t and B̂ − B_i, with the block gap's linear part
        lin = 0.0
        dloss = 0.0
        for t in range(T):
            for k in range(K):
                D[t, k] = -mu[s0 + t, k]
            D[t, yhat[t]] += 1.0
            for k in range(K):
                lin += D[t, k] * scores[t, k]
            dloss -= loss_weights[gold[t]] * D[t, gold[t]]
        for a in range(K):
            for b in range(K):
                Bd[a, b] = -bigram[i, a, b]
        for t in range(T - 1):
            Bd[yhat[t], yhat[t + 1]] += 1.0
        sq = 0.0
        for a in range(K):
            for b in range(K):
                lin += Bd[a, b] * W_B[a, b]
                sq += Bd[a, b] * Bd[a, b]
        if start_end:
            for k in range(K):
                lin += D[0, k] * start[k] + D[T - 1, k] * end[k]
                sq += D[0, k] * D[0, k] + D[T - 1, k] * D[T - 1, k]
        g0 = gram_offsets[i]
        for t in range(T):
            for u in range(t, T):
                gtu = gram[g0 + T * t + u]
                if gtu == 0.0:
                    continue
                dd = 0.0
                for k in range(K):
                    dd += D[t, k] * D[u, k]
                sq += gtu * dd if u == t else 2.0 * gtu * dd
        gap_i = C * lin
        block_gaps[i] = gap_i
        norm2 = C * C * sq
        if gap_i <= 0.0:
            continue
        gamma = 1.0
        if norm2 > 0.0 and gap_i < norm2:
            gamma = gap_i / norm2

        # w ← w − γ (w_i − w_s);  μ, B_i, ℓ follow;  R ← R + A_{m−1} Δ_m
        f = -gamma * C
        fr = f * A_prev
        for t in range(T):
            row = s0 + t
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                v = data[p]
                for k in range(K):
                    dk = D[t, k]
                    if dk != 0.0:
                        W_U[j, k] += f * v * dk
                        if averaging:
                            R_U[j, k] += fr * v * dk
            for k in range(K):
                mu[row, k] += gamma * D[t, k]
        for a in range(K):
            for b in range(K):
                dab = Bd[a, b]
                if dab != 0.0:
                    W_B[a, b] += f * dab
                    bigram[i, a, b] += gamma * dab
                    if averaging:
                        R_B[a, b] += fr * dab
        if start_end:
            for k in range(K):
                start[k] += f * D[0, k]
                end[k] += f * D[T - 1, k]
                if averaging:
                    R_start[k] += fr * D[0, k]
                    R_end[k] += fr * D[T - 1, k]
        dl = gamma * C * dloss
        loss_term += dl
        if averaging:
            R_loss += A_prev * dl

    scalars[0] = loss_term
    scalars[1] = m
    scalars[2] = R_loss
    return order.shape[0]


@njit(cache=True)
def ssg_pass(indptr, indices, data, offsets, labels, loss_weights, order, start_end,
             V_U, V_B, V_start, V_end, scalars, averaging, R_U, R_B, R_start, R_end,
             slack, search):
    """One pass of Pegasos-style stochastic subgradient (ALGORITHMS.md §2), C-form.

    With step ``η_t = 1/(λ (t+1))`` the iterate is ``w_m = v_m / (λ m) = C n v_m / m`` where
    ``v_m = Σ_{j≤m} ψ_{i_j}(ŷ_j)`` is the running sum of subgradient directions
    ``ψ_i(ŷ) = φ(x_i, ȳ_i) − φ(x_i, ŷ)``; so only ``v`` is stored and the step is sparse. The
    loss-augmented argmax at ``w_m`` is taken on ``v`` with the loss scaled by ``m / (C n)``.
    Averaging ``w̄_M = Σ_j j w_j / A_M = C n (M v_M − R_M) / A_M`` with ``R_M = Σ_m (m−1) ψ_m``.
    ``scalars = [m, C n]``. Returns the number of oracle calls (for slack rescaling the calls
    its search made).

    With ``slack=True`` the oracle is the slack search ``search`` (scores scaled by C n / m)
    and the direction is weighted by the loss of ŷ: ``v += δ(ŷ) ψ_i(ŷ)`` (the subgradient of
    ``δ(ŷ)(1 + s(ŷ) − s(ȳ))``, ALGORITHMS.md §6).
    """
    K = V_U.shape[1]
    max_T = _max_length(offsets)
    scores = np.empty((max_T, K))
    backptr = np.empty((max_T, K), dtype=np.int32)
    delta = np.empty((2, K))
    yhat = np.empty(max_T, dtype=np.int32)
    lw_scaled = np.empty(K)
    V = np.empty((max_T, K, max_T + 1)) if slack else np.empty((1, 1, 1))
    back = np.zeros((max_T, K, max_T + 1), dtype=np.int32) if slack else np.zeros(
        (1, 1, 1), dtype=np.int32)
    aug = np.empty((max_T, K))
    cand = np.empty(max_T, dtype=np.int32)
    calls = 0
    m = scalars[0]
    Cn = scalars[1]
    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        gold = labels[s0:s0 + T]
        unigram_scores(indptr, indices, data, s0, s0 + T, V_U, scores)
        c = 1.0  # weight of ψ_i(ŷ) in the step
        if slack:
            phi, loss, nc = slack_oracle(search, scores, T, V_B, V_start, V_end, gold,
                                         Cn / m if m > 0 else 0.0, V, back, aug, lw_scaled,
                                         backptr, delta, cand, cand, False, yhat)
            calls += nc
            c = float(loss)
        else:
            # argmax δ + (Cn/m) <v, φ>  ==  argmax (m/Cn) δ + <v, φ>   (v = 0 when m = 0)
            loss_scale = m / Cn if m > 0 else 1.0
            for k in range(K):
                lw_scaled[k] = loss_weights[k] * loss_scale
            add_hamming_loss(scores, T, gold, lw_scaled)
            viterbi(scores, T, V_B, V_start, V_end, backptr, delta, yhat)
            calls += 1
        rm = m * c  # weight (m+1 − 1) of this step's direction in R
        m += 1.0
        if c == 0.0:
            continue
        for t in range(T):
            a = gold[t]
            b = yhat[t]
            if a == b:
                continue
            row = s0 + t
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                v = data[p]
                V_U[j, a] += c * v
                V_U[j, b] -= c * v
                if averaging:
                    R_U[j, a] += rm * v
                    R_U[j, b] -= rm * v
        for t in range(T - 1):
            V_B[gold[t], gold[t + 1]] += c
            V_B[yhat[t], yhat[t + 1]] -= c
            if averaging:
                R_B[gold[t], gold[t + 1]] += rm
                R_B[yhat[t], yhat[t + 1]] -= rm
        if start_end:
            V_start[gold[0]] += c
            V_start[yhat[0]] -= c
            V_end[gold[T - 1]] += c
            V_end[yhat[T - 1]] -= c
            if averaging:
                R_start[gold[0]] += rm
                R_start[yhat[0]] -= rm
                R_end[gold[T - 1]] += rm
                R_end[yhat[T - 1]] -= rm
    scalars[0] = m
    return calls


@njit(cache=True)
def _atom_value(scores, T, W_B, start, end, y, gold, gold_score, slack):
    """The block-gap value of labelling y: s̃(y) (margin; scores loss-augmented) or
    Φ(y) = δ(y)(1 + s(y) − s(ȳ)) (slack, unit loss; scores plain). Also returns δ(y) for
    slack (1 for margin, where corners are not loss-weighted)."""
    s = labelling_score(scores, T, W_B, start, end, y)
    if not slack:
        return s, 1.0
    loss = 0.0
    for t in range(T):
        if y[t] != gold[t]:
            loss += 1.0
    return loss * (1.0 + s - gold_score), loss


@njit(cache=True)
def _add_coef(labels, coefs, n, label, c):
    """Add c to the entry of ``label`` in a tiny sparse vector (labels[:n], coefs[:n])."""
    for q in range(n):
        if labels[q] == label:
            coefs[q] += c
            return n
    labels[n] = label
    coefs[n] = c
    return n + 1


@njit(cache=True)
def _add_ends(start, end, gold, yhat, v, T, c_gold, c_hat, c_v):
    """start/end weights of the three corners gold, ŷ and v, scaled by their coefficients."""
    start[gold[0]] += c_gold
    start[yhat[0]] -= c_hat
    start[v[0]] += c_v
    end[gold[T - 1]] += c_gold
    end[yhat[T - 1]] -= c_hat
    end[v[T - 1]] += c_v


@njit(cache=True)
def bcpfw_pass(indptr, indices, data, offsets, labels, loss_weights, gram, gram_offsets,
               order, C, start_end,
               W_U, W_B, start, end, atom_labels, atom_weights, atom_count, capacity, scalars,
               averaging, R_U, R_B, R_start, R_end, block_gaps, slack, search, calls):
    """One block-coordinate *pairwise* Frank-Wolfe pass (Osokin et al. 2016, BCPFW), C-form.

    Block i's dual point is kept as its atoms: labellings ``y^a`` with weights ``α_a``
    (``q_i = Σ_a α_a e_{y^a}``), stored in ``atom_labels[offsets[i]·A + a·T + t]``. Corner
    ``y`` of block i is ``w_s(y) = C g(y) ψ_i(y)``, ``ℓ_s(y) = C δ(y)`` with ``g ≡ 1`` for margin
    rescaling and ``g = δ`` for slack rescaling (ALGORITHMS.md §6), and its block-gap value is
    ``ℓ_s − <w, w_s> = C v(y)`` with ``v = s̃`` (loss-augmented score) or ``v = Φ``. A step moves
    mass γ ∈ [0, α_v] from the away atom ``v = argmin_a v(y^a)`` to the oracle's corner
    ``ŷ = argmax_y v(y)`` (Viterbi, or the exact slack dynamic program):

        w ← w + γ C Σ_t x_t ⊗ c_t (+ bigram, start, end),  ℓ ← ℓ + γ C (δ(ŷ) − δ(v))
        c_t = (g_ŷ − g_v) e_{ȳ_t} − g_ŷ e_{ŷ_t} + g_v e_{v_t}
        γ = min( C (v(ŷ) − v(v)) / ‖C (g_ŷ ψ(ŷ) − g_v ψ(v))‖²,  α_v )      (exact line search)

    For margin rescaling ``c_t = e_{v_t} − e_{ŷ_t}`` vanishes where ŷ and v agree, so only
    those tokens are touched. ``block_gaps[i]`` receives the Frank-Wolfe block gap
    ``C (v(ŷ) − Σ_a α_a v(y^a))``. The pass stops early, returning the number of blocks done,
    when a new atom does not fit into ``capacity`` atoms; the caller grows the pool and
    continues. ``scalars = [ℓ, m, R_ℓ]`` as in :func:`bcfw_pass`. For slack rescaling the
    corner comes from the slack search ``search`` (exact DP, angular, bisecting or binary),
    seeded with the block's best atom as the label cache; ``calls[0]`` counts oracle calls.
    """
    K = W_U.shape[1]
    A = capacity
    max_T = _max_length(offsets)
    scores = np.empty((max_T, K))
    backptr = np.empty((max_T, K), dtype=np.int32)
    delta = np.empty((2, K))
    yhat = np.empty(max_T, dtype=np.int32)
    pair_count = np.zeros((K, K))
    atom_scores = np.empty(A)
    atom_losses = np.empty(A)
    coef_labels = np.empty((max_T, 3), dtype=np.int64)
    coefs = np.empty((max_T, 3))
    n_coef = np.empty(max_T, dtype=np.int64)
    end_labels = np.empty(3, dtype=np.int64)
    end_coefs = np.empty(3)
    V = np.empty((max_T, K, max_T + 1)) if slack else np.empty((1, 1, 1))
    back = np.zeros((max_T, K, max_T + 1), dtype=np.int32) if slack else np.zeros(
        (1, 1, 1), dtype=np.int32)
    aug = np.empty((max_T, K))
    lw = np.empty(K)
    cand = np.empty(max_T, dtype=np.int32)
    loss_term = scalars[0]
    m = scalars[1]
    R_loss = scalars[2]

    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        gold = labels[s0:s0 + T]
        base = s0 * A
        m += 1.0  # every visit is an averaging step, also when γ = 0
        A_prev = 0.5 * (m - 1.0) * m
        unigram_scores(indptr, indices, data, s0, s0 + T, W_U, scores)
        gold_score = 0.0
        if slack:
            gold_score = labelling_score(scores, T, W_B, start, end, gold)
            top = 0  # the block's best atom seeds the search (label cache)
            top_val = -np.inf
            for a in range(atom_count[i]):
                y_a = atom_labels[base + a * T: base + (a + 1) * T]
                va, _ = _atom_value(scores, T, W_B, start, end, y_a, gold, gold_score, True)
                if va > top_val:
                    top, top_val = a, va
            best, best_loss, nc = slack_oracle(
                search, scores, T, W_B, start, end, gold, 1.0, V, back, aug, lw, backptr,
                delta, cand, atom_labels[base + top * T: base + (top + 1) * T], True, yhat)
            calls[0] += nc
            g_hat = float(best_loss)
        else:
            add_hamming_loss(scores, T, gold, loss_weights)
            best = viterbi(scores, T, W_B, start, end, backptr, delta, yhat)
            calls[0] += 1
            g_hat = 1.0

        # atoms: values, the away atom, the position of ŷ, the Frank-Wolfe block gap
        n_atoms = atom_count[i]
        away = -1
        fw = -1
        mean_score = 0.0
        for a in range(n_atoms):
            y_a = atom_labels[base + a * T: base + (a + 1) * T]
            sa, la = _atom_value(scores, T, W_B, start, end, y_a, gold, gold_score,
                                 slack)
            atom_scores[a] = sa
            atom_losses[a] = la
            mean_score += atom_weights[i, a] * sa
            if atom_weights[i, a] > 0.0 and (away < 0 or sa < atom_scores[away]):
                away = a
            if fw < 0:
                same = True
                for t in range(T):
                    if y_a[t] != yhat[t]:
                        same = False
                        break
                if same:
                    fw = a
        block_gaps[i] = C * (best - mean_score)
        if fw < 0:
            if n_atoms == A:
                scalars[0] = loss_term
                scalars[1] = m - 1.0  # this visit is redone after the pool grows
                scalars[2] = R_loss
                return idx
            fw = n_atoms
            for t in range(T):
                atom_labels[base + fw * T + t] = yhat[t]
            atom_weights[i, fw] = 0.0
            atom_scores[fw] = best
            atom_losses[fw] = g_hat
            atom_count[i] = n_atoms + 1
        if fw == away or away < 0:
            continue
        pw_gap = C * (best - atom_scores[away])
        if pw_gap <= 0.0:
            continue
        v = atom_labels[base + away * T: base + (away + 1) * T]
        g_v = atom_losses[away] if slack else 1.0
        g_gold = g_hat - g_v

        # per-token coefficient vectors c_t and ‖Σ_t x_t ⊗ c_t‖² via the token Gram matrix
        for t in range(T):
            nc = 0
            if g_gold != 0.0:
                nc = _add_coef(coef_labels[t], coefs[t], nc, gold[t], g_gold)
            nc = _add_coef(coef_labels[t], coefs[t], nc, yhat[t], -g_hat)
            nc = _add_coef(coef_labels[t], coefs[t], nc, v[t], g_v)
            n_coef[t] = nc
        sq = 0.0
        g0 = gram_offsets[i]
        for t in range(T):
            for u in range(T):
                gtu = gram[g0 + T * t + u]
                if gtu == 0.0:
                    continue
                e = 0.0
                for p in range(n_coef[t]):
                    for q in range(n_coef[u]):
                        if coef_labels[t, p] == coef_labels[u, q]:
                            e += coefs[t, p] * coefs[u, q]
                if e != 0.0:
                    sq += gtu * e
        for t in range(T - 1):
            pair_count[gold[t], gold[t + 1]] += g_gold
            pair_count[yhat[t], yhat[t + 1]] -= g_hat
            pair_count[v[t], v[t + 1]] += g_v
        for t in range(T - 1):
            c = pair_count[gold[t], gold[t + 1]]
            sq += c * c
            pair_count[gold[t], gold[t + 1]] = 0.0
            c = pair_count[yhat[t], yhat[t + 1]]
            sq += c * c
            pair_count[yhat[t], yhat[t + 1]] = 0.0
            c = pair_count[v[t], v[t + 1]]
            sq += c * c
            pair_count[v[t], v[t + 1]] = 0.0
        if start_end:
            for pos in (0, T - 1):
                ne = 0
                ne = _add_coef(end_labels, end_coefs, ne, gold[pos], g_gold)
                ne = _add_coef(end_labels, end_coefs, ne, yhat[pos], -g_hat)
                ne = _add_coef(end_labels, end_coefs, ne, v[pos], g_v)
                for q in range(ne):
                    sq += end_coefs[q] * end_coefs[q]
        norm2 = C * C * sq
        alpha_v = atom_weights[i, away]
        if norm2 <= 0.0:
            gamma = alpha_v
        else:
            gamma = pw_gap / norm2
            if gamma > alpha_v - 1e-12:
                gamma = alpha_v  # a drop step: the away atom leaves the active set

        # w ← w + γ C Σ_t x_t ⊗ c_t …; averaging accumulator R ← R + A_{m−1} Δ
        f = gamma * C
        fr = f * A_prev
        dloss = 0.0
        for t in range(T):
            g = gold[t]
            if yhat[t] != g:
                dloss += loss_weights[g]
            if v[t] != g:
                dloss -= loss_weights[g]
            row = s0 + t
            for q in range(n_coef[t]):
                c = coefs[t, q]
                if c == 0.0:
                    continue
                lab = coef_labels[t, q]
                for p in range(indptr[row], indptr[row + 1]):
                    j = indices[p]
                    x = data[p]
                    W_U[j, lab] += f * c * x
                    if averaging:
                        R_U[j, lab] += fr * c * x
        for t in range(T - 1):
            W_B[gold[t], gold[t + 1]] += f * g_gold
            W_B[yhat[t], yhat[t + 1]] -= f * g_hat
            W_B[v[t], v[t + 1]] += f * g_v
            if averaging:
                R_B[gold[t], gold[t + 1]] += fr * g_gold
                R_B[yhat[t], yhat[t + 1]] -= fr * g_hat
                R_B[v[t], v[t + 1]] += fr * g_v
        if start_end:
            _add_ends(start, end, gold, yhat, v, T, f * g_gold, f * g_hat, f * g_v)
            if averaging:
                _add_ends(R_start, R_end, gold, yhat, v, T, fr * g_gold, fr * g_hat,
                          fr * g_v)
        dl = gamma * C * dloss
        loss_term += dl
        if averaging:
            R_loss += A_prev * dl

        # move the mass; a drained away atom is dropped (the last atom takes its slot)
        atom_weights[i, fw] += gamma
        atom_weights[i, away] -= gamma
        if gamma == alpha_v:
            fw_w = atom_weights[i, fw]
            last = atom_count[i] - 1
            if away != last:
                for t in range(T):
                    atom_labels[base + away * T + t] = atom_labels[base + last * T + t]
                atom_weights[i, away] = atom_weights[i, last]
            atom_weights[i, last] = 0.0
            atom_count[i] = last
            if fw == last:
                atom_weights[i, away] = fw_w

    scalars[0] = loss_term
    scalars[1] = m
    scalars[2] = R_loss
    return order.shape[0]


@njit(cache=True)
def aggregate_joint_feature_difference(indptr, indices, data, offsets, gold, pred, weights,
                                       start_end, out_U, out_B, out_start, out_end):
    """out += Σ_i weights[i] (φ(x_i, ȳ_i) − φ(x_i, ŷ_i)) in the chain layout (the 1-slack
    cutting plane's aggregated constraint direction). Only tokens where ŷ and ȳ differ touch
    the unigram block."""
    n = offsets.shape[0] - 1
    for i in range(n):
        c = weights[i]
        if c == 0.0:
            continue
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        for t in range(T):
            a = gold[s0 + t]
            b = pred[s0 + t]
            if a != b:
                row = s0 + t
                for p in range(indptr[row], indptr[row + 1]):
                    out_U[indices[p], a] += c * data[p]
                    out_U[indices[p], b] -= c * data[p]
        for t in range(T - 1):
            out_B[gold[s0 + t], gold[s0 + t + 1]] += c
            out_B[pred[s0 + t], pred[s0 + t + 1]] -= c
        if start_end:
            out_start[gold[s0]] += c
            out_start[pred[s0]] -= c
            out_end[gold[s0 + T - 1]] += c
            out_end[pred[s0 + T - 1]] -= c


@njit(cache=True)
def simplex_qp(G, b, alpha, total, tol, max_steps):
    """Minimize ½ αᵀGα − bᵀα over {α ≥ 0, Σ α = total} by pairwise coordinate steps with exact
    line search (SMO on the simplex), warm-started from ``alpha`` (updated in place).

    The 1-slack dual ``max Σ α_c δ_c − ½‖Σ α_c ψ_c‖², α ≥ 0, Σ α ≤ C`` is this problem with an
    extra coordinate for the zero constraint (ψ = 0, δ = 0) that takes up the slack of Σ α ≤ C.
    Stops when the largest pairwise gap ``max_{α_j>0} ∇_j − min_i ∇_i`` is below ``tol``.
    Returns the number of steps.
    """
    m = alpha.shape[0]
    grad = G @ alpha - b
    steps = 0
    while steps < max_steps:
        i_best = 0
        for i in range(1, m):
            if grad[i] < grad[i_best]:
                i_best = i
        j_away = -1
        for j in range(m):
            if alpha[j] > 0.0 and (j_away < 0 or grad[j] > grad[j_away]):
                j_away = j
        if j_away < 0 or grad[j_away] - grad[i_best] <= tol or j_away == i_best:
            break
        i, j = i_best, j_away
        curv = G[i, i] + G[j, j] - 2.0 * G[i, j]
        step = alpha[j]
        if curv > 0.0:
            step = min(step, (grad[j] - grad[i]) / curv)
        alpha[i] += step
        alpha[j] -= step
        if alpha[j] < 1e-15 * total:
            alpha[j] = 0.0
        for k in range(m):
            grad[k] += step * (G[k, i] - G[k, j])
        steps += 1
    return steps
