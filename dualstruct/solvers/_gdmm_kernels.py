"""Numba kernels of GDMM (Yen et al. 2016; ALGORITHMS.md §5) on linear chains, dense version.

Every example decomposes into unigram factors ``q_t ∈ Δ(K)`` (one per token) and bigram
factors ``q_e ∈ Δ(K²)`` (one per edge e = (t, t+1)), tied by the local-consistency
constraints ``M_L q_e = q_t`` (row sums) and ``M_R q_e = q_{t+1}`` (column sums). The
LP-relaxed dual, written as a minimization (C-form, signs as fixed by ALGORITHMS.md §5), is

    G(q) = ½‖w(q)‖² − C Σ_t <δ_t, q_t>,
    w(q) = C Σ_f (φ_f(ȳ_f) − Σ_{y_f} q_f(y_f) φ_f(y_f)),

and GDMM minimizes the augmented Lagrangian

    L(q, λ) = G(q) + Σ_e <λ_e^L, M_L q_e − q_t> + <λ_e^R, M_R q_e − q_{t+1}>
              + ρ/2 Σ_e (‖M_L q_e − q_t‖² + ‖M_R q_e − q_{t+1}‖²)

by one pass of block Frank-Wolfe steps over all factors, then takes the multiplier step
``λ ← λ + η (M q_e − q_j)`` (Algorithm 1). With the messages
``μ_e^L = λ_e^L + ρ (M_L q_e − q_t)`` (and likewise μ^R) the partial gradients are

    ∂L/∂q_t(k)    = −C (θ_t(k) + δ_t(k)) − μ_{e_left}^R(k) − μ_{e_right}^L(k)
    ∂L/∂q_e(a, b) = −C W_B[a, b] + μ_e^L(a) + μ_e^R(b)

(θ_t includes the start/end weights at the ends of the chain), so the Frank-Wolfe vertex of a
factor is the argmin of its gradient — the message-augmented factorwise maximization oracle
(FMO). Restricted to one unigram factor, L is a quadratic whose Hessian on the simplex is
``c·I`` with ``c = C² (‖x_t‖² + [t = 1] + [t = T]) + ρ · (number of incident edges)``, so the
block is minimized exactly by projecting ``q_t − ∇/c`` onto the simplex. A bigram factor takes
a Frank-Wolfe step towards its FMO vertex: along ``D = e_{(a*, b*)} − q_e`` the slope is
``<∇, D>`` and the curvature ``C² ‖D‖² + ρ (‖M_L D‖² + ‖M_R D‖²)``, so the exact line search
is ``γ = clip(−<∇, D> / curvature, 0, 1)``. ``w`` is kept equal to ``w(q)``
incrementally. This version uses brute-force FMOs and dense factor marginals: it is the
reference a sublinear variant (sparse active sets, sorted structures for W_B) is to be checked
against.
"""

import numpy as np
from numba import njit


@njit(cache=True)
def project_to_simplex(v, out, scratch):
    """Euclidean projection of v onto the probability simplex (sort-based, O(K log K))."""
    K = v.shape[0]
    for k in range(K):
        scratch[k] = v[k]
    scratch[:K] = np.sort(scratch[:K])[::-1]
    cum = 0.0
    tau = 0.0
    for k in range(K):
        cum += scratch[k]
        t = (cum - 1.0) / (k + 1)
        if scratch[k] - t > 0.0:
            tau = t
    for k in range(K):
        x = v[k] - tau
        out[k] = x if x > 0.0 else 0.0


@njit(cache=True)
def left_message(q_b, lam_L, q_u, e, row, rho, out):
    """μ_e^L = λ_e^L + ρ (M_L q_e − q_t): row sums of the edge marginal against token t."""
    K = q_u.shape[1]
    for a in range(K):
        rs = 0.0
        for b in range(K):
            rs += q_b[e, a, b]
        out[a] = lam_L[e, a] + rho * (rs - q_u[row, a])


@njit(cache=True)
def right_message(q_b, lam_R, q_u, e, row, rho, out):
    """μ_e^R = λ_e^R + ρ (M_R q_e − q_{t+1}): column sums against token t+1 (= ``row``)."""
    K = q_u.shape[1]
    for b in range(K):
        cs = 0.0
        for a in range(K):
            cs += q_b[e, a, b]
        out[b] = lam_R[e, b] + rho * (cs - q_u[row, b])


@njit(cache=True)
def gdmm_pass(indptr, indices, data, offsets, labels, loss_weights, sq_norms, order, C, rho,
              start_end, W_U, W_B, start, end, q_u, q_b, lam_L, lam_R, pairwise):
    """One pass of factorwise Frank-Wolfe steps over the examples in ``order``.

    ``q_u`` (tokens × K), ``q_b`` (edges × K × K) with edge ``e = token − sequence`` for every
    token that is not last in its sequence; ``lam_L``/``lam_R`` (edges × K) the multipliers.
    Returns the number of factor oracle calls.
    """
    K = W_U.shape[1]
    grad = np.empty(K)
    mu_a = np.empty(K)
    mu_b = np.empty(K)
    d = np.empty(K)
    G = np.empty((K, K))
    D = np.empty((K, K))
    calls = 0
    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        # unigram factors
        for t in range(T):
            row = s0 + t
            g = labels[row]
            for k in range(K):
                grad[k] = 0.0
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                v = data[p]
                for k in range(K):
                    grad[k] += v * W_U[j, k]
            extra = 0.0
            if start_end and t == 0:
                for k in range(K):
                    grad[k] += start[k]
                extra += 1.0
            if start_end and t == T - 1:
                for k in range(K):
                    grad[k] += end[k]
                extra += 1.0
            for k in range(K):
                theta = grad[k] + (loss_weights[g] if k != g else 0.0)
                grad[k] = -C * theta
            n_edges = 0
            if t > 0:  # edge (t-1, t): this token is its right end
                n_edges += 1
                right_message(q_b, lam_R, q_u, row - 1 - i, row, rho, mu_b)
                for k in range(K):
                    grad[k] -= mu_b[k]
            if t < T - 1:  # edge (t, t+1): this token is its left end
                n_edges += 1
                left_message(q_b, lam_L, q_u, row - i, row, rho, mu_a)
                for k in range(K):
                    grad[k] -= mu_a[k]
            calls += 1
            # the unigram block's Hessian is c·I on the simplex, so its exact minimizer is
            # the projection of q − ∇/c onto the simplex (an exact block step)
            c = C * C * (sq_norms[row] + extra) + rho * n_edges
            if c <= 0.0:
                continue
            for k in range(K):
                mu_a[k] = q_u[row, k] - grad[k] / c
            project_to_simplex(mu_a, mu_b, d)
            dd = 0.0
            for k in range(K):
                d[k] = mu_b[k] - q_u[row, k]
                dd += d[k] * d[k]
            if dd == 0.0:
                continue
            gamma = 1.0
            f = -gamma * C
            for k in range(K):
                q_u[row, k] += gamma * d[k]
            for p in range(indptr[row], indptr[row + 1]):
                j = indices[p]
                v = data[p]
                for k in range(K):
                    if d[k] != 0.0:
                        W_U[j, k] += f * v * d[k]
            if start_end and t == 0:
                for k in range(K):
                    start[k] += f * d[k]
            if start_end and t == T - 1:
                for k in range(K):
                    end[k] += f * d[k]
        # bigram factors
        for t in range(T - 1):
            row = s0 + t
            e = row - i
            left_message(q_b, lam_L, q_u, e, row, rho, mu_a)
            right_message(q_b, lam_R, q_u, e, row + 1, rho, mu_b)
            ba, bb = 0, 0
            va, vb = -1, -1  # the away vertex: the worst pair in the support of q_e
            for a in range(K):
                for b in range(K):
                    G[a, b] = -C * W_B[a, b] + mu_a[a] + mu_b[b]
                    if G[a, b] < G[ba, bb]:
                        ba, bb = a, b
                    if q_b[e, a, b] > 0.0 and (va < 0 or G[a, b] > G[va, vb]):
                        va, vb = a, b
            calls += 1
            if pairwise:
                # move mass from the away pair to the FMO pair (pairwise Frank-Wolfe step)
                slope = G[ba, bb] - G[va, vb]
                if slope >= 0.0 or (ba == va and bb == vb):
                    continue
                mm = (2.0 if ba != va else 0.0) + (2.0 if bb != vb else 0.0)
                curv = 2.0 * C * C + rho * mm
                gamma = min(q_b[e, va, vb], -slope / curv)
                q_b[e, ba, bb] += gamma
                q_b[e, va, vb] -= gamma
                if q_b[e, va, vb] < 1e-15:
                    q_b[e, va, vb] = 0.0
                W_B[ba, bb] -= gamma * C
                W_B[va, vb] += gamma * C
                continue
            slope = 0.0
            dd = 0.0
            for a in range(K):
                for b in range(K):
                    D[a, b] = -q_b[e, a, b]
            D[ba, bb] += 1.0
            for a in range(K):
                for b in range(K):
                    slope += G[a, b] * D[a, b]
                    dd += D[a, b] * D[a, b]
            if slope >= 0.0 or dd == 0.0:
                continue
            mm = 0.0
            for a in range(K):
                rs = 0.0
                for b in range(K):
                    rs += D[a, b]
                mm += rs * rs
            for b in range(K):
                cs = 0.0
                for a in range(K):
                    cs += D[a, b]
                mm += cs * cs
            curv = C * C * dd + rho * mm
            gamma = min(1.0, -slope / curv)
            for a in range(K):
                for b in range(K):
                    if D[a, b] != 0.0:
                        q_b[e, a, b] += gamma * D[a, b]
                        W_B[a, b] -= gamma * C * D[a, b]
    return calls


@njit(cache=True)
def multiplier_step(offsets, q_u, q_b, lam_L, lam_R, eta):
    """λ ← λ + η (M q_e − q_j) for every edge; returns the residual Σ ‖M q_e − q_j‖."""
    n = offsets.shape[0] - 1
    K = q_u.shape[1]
    residual = 0.0
    for i in range(n):
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        for t in range(T - 1):
            row = s0 + t
            e = row - i
            r_l = 0.0
            r_r = 0.0
            for a in range(K):
                rs = 0.0
                cs = 0.0
                for b in range(K):
                    rs += q_b[e, a, b]
                    cs += q_b[e, b, a]
                dl = rs - q_u[row, a]
                dr = cs - q_u[row + 1, a]
                lam_L[e, a] += eta * dl
                lam_R[e, a] += eta * dr
                r_l += dl * dl
                r_r += dr * dr
            residual += np.sqrt(r_l) + np.sqrt(r_r)
    return residual
