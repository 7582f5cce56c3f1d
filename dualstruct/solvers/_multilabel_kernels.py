"""numba passes of the multi-label solvers (BCFW, SSG) over examples, C-form.

Model layout (see :mod:`dualstruct.models.multilabel`): unary weights ``U`` (d × L) and the
pair weights ``V`` (E × P): one weight on the (1, 1) outcome (P = 1) or a flat 2×2 table
(P = 4); the oracle works on the edge tables ``V_tab`` (E × 2 × 2), kept in step with ``V``.

A dual point of example i is a local-polytope point ``(μ_i, μ^pair_i)`` (L + E numbers; the
indicator of a labelling, or an LP solution). Then

    w_i = C (φ(x_i, ȳ_i) − φ(x_i, μ_i)),   φ(x, μ) = (x ⊗ μ, pair features of μ^pair),
    ℓ_i = C Σ_l c_l |μ_il − ȳ_il|          (Hamming loss, linear on the polytope),

``w = Σ_i w_i`` and the dual is ``D = Σ_i ℓ_i − ½‖w‖²`` (ALGORITHMS.md §1).
"""

import numpy as np
from numba import njit

from ..inference.multilabel import relaxed_oracle, slack_oracle


@njit(cache=True)
def unary_scores(indptr, indices, values, i, U, theta):
    """``θ_l = <U[:, l], x_i>`` for every label (O(nnz(x_i) L))."""
    theta[:] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        f, v = indices[p], values[p]
        for l in range(U.shape[1]):
            theta[l] += v * U[f, l]


@njit(cache=True)
def augmented_tables(theta, gold, loss_weights, loss_scale, a):
    """Unary tables ``a[l, s]`` of ``s_l(s) + loss_scale · c_l [s ≠ ȳ_l]``."""
    for l in range(theta.shape[0]):
        a[l, 0] = loss_scale * loss_weights[l] * gold[l]
        a[l, 1] = theta[l] + loss_scale * loss_weights[l] * (1 - gold[l])


@njit(cache=True)
def hamming(mu, gold, loss_weights):
    """``Σ_l c_l |μ_l − ȳ_l|``."""
    total = 0.0
    for l in range(mu.shape[0]):
        total += loss_weights[l] * abs(mu[l] - gold[l])
    return total


@njit(cache=True)
def pair_delta(d_l, d_k, d_lk, P, out):
    """The P pair features of one edge from its ``y_l``, ``y_k``, ``y_l y_k`` values (or their
    differences): ``P = 1`` the (1, 1) indicator, ``P = 4`` the 2×2 table's indicators in the
    order 00, 01, 10, 11 (:func:`~dualstruct.models.multilabel.pair_features`)."""
    if P == 1:
        out[0] = d_lk
    else:
        out[0] = d_lk - d_l - d_k
        out[1] = d_k - d_lk
        out[2] = d_l - d_lk
        out[3] = d_lk


@njit(cache=True)
def copy_table(V, e, V_tab):
    """Write edge e's weights (``V[e]``: the (1, 1) score or a flat 2×2 table) into the
    (E, 2, 2) score tables the inference kernels read."""
    if V.shape[1] == 1:
        V_tab[e, 1, 1] = V[e, 0]
    else:
        for s in range(4):
            V_tab[e, s // 2, s % 2] = V[e, s]


@njit(cache=True)
def bcfw_pass(indptr, indices, values, Y, loss_weights, sq_norms, edges, mode, order, C,
              U, V, V_tab, mu, mu_pair, mass, scalars, averaging, R_U, R_V, block_gaps, slack):
    """One BCFW pass (Lacoste-Julien et al. 2013, Alg. 3 in C-form) over ``order``.

    Margin rescaling: for example i with oracle point ``s = (μ_s, μ^pair_s)`` and
    ``Δ = (μ_i − μ_s, μ^pair_i − μ^pair_s)``: ``w_s − w_i = C (x_i ⊗ Δμ, Δμ^pair)``, the
    block gap is ``g_i = (ℓ_s − ℓ_i) − <w, w_s − w_i> = (ℓ_s − ℓ_i) − C (θ·Δμ + V·Δμ^pair)``
    and the exact line search is ``γ = clip(g_i / ‖w_s − w_i‖², 0, 1)`` (1 when the norm is
    0) with ``‖w_s − w_i‖² = C² (‖x_i‖² ‖Δμ‖² + ‖Δμ^pair‖²)``.

    Slack rescaling (``slack``; ALGORITHMS.md §6): the corners are ``δ(ŷ) ψ_i(ŷ)`` with loss
    term ``δ(ŷ)``, so a block keeps the δ-weighted sums ``ν_i = Σ_y q(y) δ(y) y`` (in ``mu``,
    ``mu_pair``) and ``G_i = Σ_y q(y) δ(y)`` (``mass``): ``w_i = C (G_i φ(ȳ_i) − φ(ν_i))``,
    ``ℓ_i = C G_i``; the corner of the slack maximizer ŷ is ``(δ ŷ, δ ŷŷ, δ)``. The same
    formulas with ``Δμ`` replaced by ``ν_i − ν_s − (G_i − G_s) ȳ_i``.

    ``V`` (E × P) holds the pair weights, P = 1 or 4 (:func:`pair_delta`).

    ``scalars = [ℓ, steps, R_ℓ]``; with ``averaging`` the weighted average ``w̄ = w − R / A``
    (``A = m(m+1)/2``) is kept through ``R += A_m Δw``. Returns the number of oracle calls."""
    L, E, P = U.shape[1], edges.shape[0], V.shape[1]
    dv = np.empty(P)
    theta = np.empty(L)
    a = np.empty((L, 2))
    mu_s = np.empty(L)
    pair_s = np.empty(E)
    d_mu = np.empty(L)
    d_pair = np.empty(E)
    y = np.zeros(L, dtype=np.int64)
    best = np.empty(L + 1)
    best_y = np.zeros((L + 1, L), dtype=np.int64)
    for idx in range(order.shape[0]):
        i = order[idx]
        gold = Y[i]
        unary_scores(indptr, indices, values, i, U, theta)
        if slack:
            augmented_tables(theta, gold, loss_weights, 0.0, a)
            _, loss = slack_oracle(a, edges, V_tab, gold, 1.0, best, best_y, y)
            mass_s = float(loss)
            for l in range(L):
                mu_s[l] = mass_s * y[l]
            for e in range(E):
                pair_s[e] = mass_s * y[edges[e, 0]] * y[edges[e, 1]]
            d_mass = mass_s - mass[i]
            d_loss = C * d_mass
        else:
            augmented_tables(theta, gold, loss_weights, 1.0, a)
            relaxed_oracle(a, edges, V_tab, mode, mu_s, pair_s, y)
            d_mass = 0.0
            d_loss = C * (hamming(mu_s, gold, loss_weights)
                          - hamming(mu[i], gold, loss_weights))
        inner = 0.0
        sq_mu = 0.0
        for l in range(L):
            d_mu[l] = mu[i, l] - mu_s[l] + d_mass * gold[l]
            inner += theta[l] * d_mu[l]
            sq_mu += d_mu[l] * d_mu[l]
        sq_pair = 0.0
        for e in range(E):
            d_pair[e] = (mu_pair[i, e] - pair_s[e]
                         + d_mass * gold[edges[e, 0]] * gold[edges[e, 1]])
            pair_delta(d_mu[edges[e, 0]], d_mu[edges[e, 1]], d_pair[e], P, dv)
            for s in range(P):
                inner += V[e, s] * dv[s]
                sq_pair += dv[s] * dv[s]
        gap = d_loss - C * inner
        block_gaps[i] = gap
        norm2 = C * C * (sq_norms[i] * sq_mu + sq_pair)
        m = scalars[1]
        scalars[1] = m + 1.0
        if gap <= 0.0:
            continue
        # a block that does not move w (e.g. an all-zero x without bias) goes to the corner
        gamma = min(1.0, gap / norm2) if norm2 > 0.0 else 1.0
        A = 0.5 * m * (m + 1.0) if averaging else 0.0
        step = gamma * C
        for p in range(indptr[i], indptr[i + 1]):
            f, v = indices[p], values[p]
            for l in range(L):
                if d_mu[l] != 0.0:
                    delta = step * v * d_mu[l]
                    U[f, l] += delta
                    R_U[f, l] += A * delta
        for e in range(E):
            pair_delta(d_mu[edges[e, 0]], d_mu[edges[e, 1]], d_pair[e], P, dv)
            for s in range(P):
                if dv[s] != 0.0:
                    delta = step * dv[s]
                    V[e, s] += delta
                    R_V[e, s] += A * delta
            copy_table(V, e, V_tab)
        for l in range(L):
            mu[i, l] += gamma * (mu_s[l] - mu[i, l])
        for e in range(E):
            mu_pair[i, e] += gamma * (pair_s[e] - mu_pair[i, e])
        mass[i] += gamma * d_mass
        scalars[0] += gamma * d_loss
        scalars[2] += A * gamma * d_loss
    return order.shape[0]


@njit(cache=True)
def ssg_pass(indptr, indices, values, Y, loss_weights, edges, mode, order, U, V, V_tab,
             scalars, averaging, R_U, R_V, slack):
    """One pass of Pegasos SSG (ALGORITHMS.md §2) in the parametrization of the chain SSG:
    ``w_m = (C n / m) v_m`` with ``v_m`` the sum of the subgradient directions
    ``ψ_i = φ(x_i, ȳ_i) − φ(x_i, μ̂)``; the oracle at ``w_m`` runs on ``v`` with the loss
    scaled by ``m / (C n)``. ``scalars = [m, C n]``; averaging keeps ``R += (m − 1) ψ``.
    With ``slack`` the oracle is the slack maximizer at ``w_m`` (scores scaled by C n / m)
    and the direction is ``δ(ŷ) ψ_i(ŷ)`` (ALGORITHMS.md §6). ``V`` is E × P as in
    :func:`bcfw_pass`."""
    L, E, P = U.shape[1], edges.shape[0], V.shape[1]
    dv = np.empty(P)
    theta = np.empty(L)
    a = np.empty((L, 2))
    mu_s = np.empty(L)
    pair_s = np.empty(E)
    y = np.zeros(L, dtype=np.int64)
    best = np.empty(L + 1)
    best_y = np.zeros((L + 1, L), dtype=np.int64)
    for idx in range(order.shape[0]):
        i = order[idx]
        gold = Y[i]
        m = scalars[0]
        unary_scores(indptr, indices, values, i, U, theta)
        c = 1.0
        if slack:
            augmented_tables(theta, gold, loss_weights, 0.0, a)
            _, loss = slack_oracle(a, edges, V_tab, gold, scalars[1] / m if m > 0 else 0.0,
                                   best, best_y, y)
            c = float(loss)
            for l in range(L):
                mu_s[l] = y[l]
            for e in range(E):
                pair_s[e] = y[edges[e, 0]] * y[edges[e, 1]]
        else:
            augmented_tables(theta, gold, loss_weights, m / scalars[1] if m > 0 else 1.0, a)
            relaxed_oracle(a, edges, V_tab, mode, mu_s, pair_s, y)
        weight = m if averaging else 0.0
        for p in range(indptr[i], indptr[i + 1]):
            f, v = indices[p], values[p]
            for l in range(L):
                d = c * v * (gold[l] - mu_s[l])
                if d != 0.0:
                    U[f, l] += d
                    R_U[f, l] += weight * d
        for e in range(E):
            l, k = edges[e, 0], edges[e, 1]
            pair_delta(c * (gold[l] - mu_s[l]), c * (gold[k] - mu_s[k]),
                       c * (gold[l] * gold[k] - pair_s[e]), P, dv)
            for s in range(P):
                if dv[s] != 0.0:
                    V[e, s] += dv[s]
                    R_V[e, s] += weight * dv[s]
            copy_table(V, e, V_tab)
        scalars[0] = m + 1.0
    return order.shape[0]
