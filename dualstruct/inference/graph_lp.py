"""The local-polytope LP of a pairwise graph solved to optimality, and exact MAP by branch and
bound (numba kernels). Notation of :mod:`dualstruct.inference.graph`: node potentials θ
(n × K), edge potentials ``pot`` (E × K × K), messages δ_{e→u} (``to_first``) and δ_{e→v}
(``to_second``).

**The LP.** Over the local polytope — node marginals ``p_u ∈ Δ_K``, edge marginals
``q_e ∈ Δ_{K²}`` with ``Σ_b q_e(a, b) = p_u(a)`` and ``Σ_a q_e(a, b) = p_v(b)`` — maximize
``Σ_u ⟨θ_u, p_u⟩ + Σ_e ⟨pot_e, q_e⟩``. With multipliers δ of the consistency constraints
the Lagrangian's maximum over the simplices is MPLP's dual ``L(δ)``, a bound on the LP's
optimum for every δ. :func:`lp_optimum` solves the saddle point problem by the primal–dual
hybrid gradient method (Chambolle and Pock 2011) with restarts to the average and the primal
weight of PDLP (Applegate et al. 2021), which converges to the LP's optimum on any graph:

    x ← Π(x + τ (c − Kᵀ δ)),    δ ← δ + σ K (2 x_new − x)

(``Kx = (A q_e − p_u, B q_e − p_v)`` per edge, Π the projection on the simplices,
``τ σ ‖K‖² < 1``). Every few iterations it measures a certified gap: the bound ``L(δ)`` and
the value of a feasible point, the iterate's node marginals with edge marginals made
consistent with them (:func:`repair_edge`), or the labelling decoded from the beliefs. It
stops when the gap is at most ``tol · max(1, |L|)`` and returns the best of both.

**Branch and bound.** :func:`branch_and_bound` takes MPLP's bound at every node of a
depth-first search tree: a node whose bound does not exceed the best labelling found is
pruned; otherwise the node whose beliefs separate its two best labels least is fixed to
the best (first child) or barred from it (second child), by a penalty on the unary
potentials larger than any difference of scores. The bound returned is the largest of the
pruned and the unexplored nodes' bounds and the best value: when the tree is exhausted
within the budget, the best labelling is a certified maximizer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .graph import dual_value, labelling_score, mplp


@njit(cache=True)
def project_simplex(v, out):
    """The Euclidean projection of ``v`` on the probability simplex, into ``out``."""
    m = v.shape[0]
    s = np.sort(v)
    total = 0.0
    tau = 0.0
    for j in range(m - 1, -1, -1):
        total += s[j]
        t = (total - 1.0) / (m - j)
        if j == 0 or s[j - 1] <= t:
            tau = t
            break
    for j in range(m):
        out[j] = max(v[j] - tau, 0.0)


@njit(cache=True)
def repair_edge(q, pu, pv, out):
    """Edge marginals ``out`` ≥ 0 whose row sums are ``pu`` and column sums ``pv`` (both on
    the simplex), close to ``q``: rows then columns of ``q`` are shrunk below their targets and
    the remaining mass is spread as the product of the row and column deficits."""
    K = pu.shape[0]
    for a in range(K):
        r = 0.0
        for b in range(K):
            out[a, b] = max(q[a, b], 0.0)
            r += out[a, b]
        if r > pu[a]:
            f = pu[a] / r
            for b in range(K):
                out[a, b] *= f
    for b in range(K):
        c = 0.0
        for a in range(K):
            c += out[a, b]
        if c > pv[b]:
            f = pv[b] / c
            for a in range(K):
                out[a, b] *= f
    du = np.empty(K)
    dv = np.empty(K)
    rest = 0.0
    for a in range(K):
        r = 0.0
        for b in range(K):
            r += out[a, b]
        du[a] = max(pu[a] - r, 0.0)
        rest += du[a]
    rest_v = 0.0
    for b in range(K):
        c = 0.0
        for a in range(K):
            c += out[a, b]
        dv[b] = max(pv[b] - c, 0.0)
        rest_v += dv[b]
    if rest > 0.0 and rest_v > 0.0:
        for a in range(K):
            for b in range(K):
                out[a, b] += du[a] * dv[b] / rest_v


@njit(cache=True)
def point_value(theta, edges, pot, node_mu, edge_mu):
    """``Σ_u ⟨θ_u, p_u⟩ + Σ_e ⟨pot_e, q_e⟩``."""
    n, K = theta.shape
    s = 0.0
    for u in range(n):
        for k in range(K):
            s += theta[u, k] * node_mu[u, k]
    for e in range(edges.shape[0]):
        for a in range(K):
            for b in range(K):
                s += pot[e, a, b] * edge_mu[e, a, b]
    return s


@njit(cache=True)
def labelling_point(edges, x, node_mu, edge_mu):
    """The local-polytope point of the labelling ``x`` (indicators)."""
    node_mu[:] = 0.0
    edge_mu[:] = 0.0
    for u in range(node_mu.shape[0]):
        node_mu[u, x[u]] = 1.0
    for e in range(edges.shape[0]):
        edge_mu[e, x[edges[e, 0]], x[edges[e, 1]]] = 1.0


@njit(cache=True)
def _beliefs(theta, edges, to_first, to_second, belief):
    n, K = theta.shape
    for u in range(n):
        for k in range(K):
            belief[u, k] = theta[u, k]
    for e in range(edges.shape[0]):
        u, v = edges[e, 0], edges[e, 1]
        for k in range(K):
            belief[u, k] += to_first[e, k]
            belief[v, k] += to_second[e, k]


@njit(cache=True)
def _feasible_value(theta, edges, pot, p, q, node_mu, edge_mu):
    """The value of the feasible point made from (p, q) (written into node_mu, edge_mu)."""
    n = theta.shape[0]
    for u in range(n):
        node_mu[u] = p[u]
    for e in range(edges.shape[0]):
        repair_edge(q[e], p[edges[e, 0]], p[edges[e, 1]], edge_mu[e])
    return point_value(theta, edges, pot, node_mu, edge_mu)


@njit(cache=True)
def lp_optimum(theta, edges, pot, to_first, to_second, node_mu, edge_mu, x, max_iter, tol):
    """The local-polytope LP by restarted PDHG (module docstring), from the messages
    ``to_first``, ``to_second`` (a warm start; on return the last iterate's messages).
    Writes the best feasible point found into ``node_mu`` (n × K), ``edge_mu`` (E × K × K)
    and the beliefs' labelling into ``x``; returns ``(value of the point, bound, iterations)``
    with ``value ≤ LP optimum ≤ bound`` and ``bound − value ≤ tol · max(1, |bound|)`` unless
    ``max_iter`` iterations ran out."""
    n, K = theta.shape
    E = edges.shape[0]
    degree = np.zeros(n, dtype=np.int64)
    for e in range(E):
        degree[edges[e, 0]] += 1
        degree[edges[e, 1]] += 1
    max_deg = 0
    scale = 0.0
    for u in range(n):
        max_deg = max(max_deg, degree[u])
        for k in range(K):
            scale = max(scale, abs(theta[u, k]))
    for e in range(E):
        for a in range(K):
            for b in range(K):
                scale = max(scale, abs(pot[e, a, b]))
    norm = np.sqrt(2.0 * K) + np.sqrt(max(max_deg, 1))
    omega = max(scale, 1e-6)  # primal weight: the duals' scale over the primal's (1)
    belief = np.empty((n, K))
    xs = np.empty(n, dtype=np.int64)
    # the starting primal: the beliefs' labelling
    _beliefs(theta, edges, to_first, to_second, belief)
    bound = dual_value(theta, edges, pot, to_first, to_second, belief, xs)
    p = np.zeros((n, K))
    q = np.zeros((E, K, K))
    for u in range(n):
        p[u, xs[u]] = 1.0
    for e in range(E):
        q[e, xs[edges[e, 0]], xs[edges[e, 1]]] = 1.0
    avg_y1 = np.empty((E, K))  # the average's messages
    avg_y2 = np.empty((E, K))
    labelling_point(edges, xs, node_mu, edge_mu)
    value = labelling_score(theta, edges, pot, xs)
    for u in range(n):
        x[u] = xs[u]
    y1 = to_first
    y2 = to_second
    # averages since the last restart, and the point of the last restart
    p_avg = np.zeros((n, K))
    q_avg = np.zeros((E, K, K))
    y1_avg = np.zeros((E, K))
    y2_avg = np.zeros((E, K))
    p_last = p.copy()
    q_last = q.copy()
    y1_last = y1.copy()
    y2_last = y2.copy()
    n_avg = 0
    restart_gap = np.inf
    p_new = np.empty((n, K))
    q_new = np.empty((E, K, K))
    grad_p = np.empty(K)
    grad_q = np.empty(K * K)
    out_q = np.empty(K * K)
    out_p = np.empty(K)
    trial_node = np.empty((n, K))
    trial_edge = np.empty((E, K, K))
    check_every = 16
    it = 0
    while it < max_iter and bound - value > tol * max(1.0, abs(bound)):
        tau = 0.99 / (norm * omega)
        sigma = 0.99 * omega / norm
        for _ in range(check_every):
            it += 1
            # primal step: x + τ (c − Kᵀ δ), projected
            for u in range(n):
                for k in range(K):
                    belief[u, k] = theta[u, k]
            for e in range(E):
                u, v = edges[e, 0], edges[e, 1]
                for k in range(K):
                    belief[u, k] += y1[e, k]
                    belief[v, k] += y2[e, k]
            for u in range(n):
                for k in range(K):
                    grad_p[k] = p[u, k] + tau * belief[u, k]
                project_simplex(grad_p, out_p)
                for k in range(K):
                    p_new[u, k] = out_p[k]
            for e in range(E):
                for a in range(K):
                    for b in range(K):
                        grad_q[a * K + b] = q[e, a, b] + tau * (pot[e, a, b] - y1[e, a] - y2[e, b])
                project_simplex(grad_q, out_q)
                for a in range(K):
                    for b in range(K):
                        q_new[e, a, b] = out_q[a * K + b]
            # dual step: δ + σ K (2 x_new − x)
            for e in range(E):
                u, v = edges[e, 0], edges[e, 1]
                for a in range(K):
                    r = 0.0
                    c = 0.0
                    for b in range(K):
                        r += 2.0 * q_new[e, a, b] - q[e, a, b]
                        c += 2.0 * q_new[e, b, a] - q[e, b, a]
                    y1[e, a] += sigma * (r - (2.0 * p_new[u, a] - p[u, a]))
                    y2[e, a] += sigma * (c - (2.0 * p_new[v, a] - p[v, a]))
            for u in range(n):
                for k in range(K):
                    p[u, k] = p_new[u, k]
                    p_avg[u, k] += p_new[u, k]
            for e in range(E):
                for a in range(K):
                    y1_avg[e, a] += y1[e, a]
                    y2_avg[e, a] += y2[e, a]
                    for b in range(K):
                        q[e, a, b] = q_new[e, a, b]
                        q_avg[e, a, b] += q_new[e, a, b]
            n_avg += 1
        # certified gaps of the iterate and of the average
        gaps = np.empty(2)
        for which in range(2):
            if which == 0:
                L = _bound_at(theta, edges, pot, y1, y2, belief, xs)
                f = _feasible_value(theta, edges, pot, p, q, trial_node, trial_edge)
            else:
                for e in range(E):
                    for k in range(K):
                        avg_y1[e, k] = y1_avg[e, k] / n_avg
                        avg_y2[e, k] = y2_avg[e, k] / n_avg
                L = _bound_at(theta, edges, pot, avg_y1, avg_y2, belief, xs)
                for u in range(n):
                    for k in range(K):
                        p_new[u, k] = p_avg[u, k] / n_avg
                for e in range(E):
                    for a in range(K):
                        for b in range(K):
                            q_new[e, a, b] = q_avg[e, a, b] / n_avg
                f = _feasible_value(theta, edges, pot, p_new, q_new, trial_node, trial_edge)
            s = labelling_score(theta, edges, pot, xs)
            if s > value and s >= f:
                value = s
                labelling_point(edges, xs, node_mu, edge_mu)
                for u in range(n):
                    x[u] = xs[u]
            elif f > value:
                value = f
                node_mu[:n] = trial_node
                edge_mu[:E] = trial_edge
            bound = min(bound, L)
            gaps[which] = L - f
        # restart to the better of iterate and average when its gap has halved
        use_avg = gaps[1] < gaps[0]
        g = min(gaps[0], gaps[1])
        if g <= 0.5 * restart_gap or n_avg * check_every >= 4096:
            if use_avg:
                p[:] = p_new
                q[:] = q_new
                y1[:] = avg_y1
                y2[:] = avg_y2
            dx = np.sqrt(np.sum((p - p_last) ** 2) + np.sum((q - q_last) ** 2))
            dy = np.sqrt(np.sum((y1 - y1_last) ** 2) + np.sum((y2 - y2_last) ** 2))
            if dx > 1e-10 and dy > 1e-10:
                omega = np.exp(0.5 * np.log(dy / dx) + 0.5 * np.log(omega))
            p_last[:] = p
            q_last[:] = q
            y1_last[:] = y1
            y2_last[:] = y2
            p_avg[:] = 0.0
            q_avg[:] = 0.0
            y1_avg[:] = 0.0
            y2_avg[:] = 0.0
            n_avg = 0
            restart_gap = g
    return value, bound, it


@njit(cache=True)
def _bound_at(theta, edges, pot, y1, y2, belief, xs):
    _beliefs(theta, edges, y1, y2, belief)
    return dual_value(theta, edges, pot, y1, y2, belief, xs)


@njit(cache=True)
def branch_and_bound(
    theta, edges, pot, to_first, to_second, x, max_sweeps, tol, budget, start=-np.inf
):
    """Exact MAP by branch and bound over MPLP bounds (module docstring), from the messages
    ``to_first``, ``to_second`` (a warm start; on return the root's messages). ``start``:
    the score of a labelling already in ``x`` (a first incumbent: every node whose bound does
    not exceed it is pruned, the root included), ``-inf`` for none. Writes the best
    labelling into ``x``; returns ``(its score, bound, nodes solved)``: the bound equals the
    score up to ``tol · max(1, |bound|)`` when the search ended within ``budget`` nodes (the
    root counts), else it is the largest bound left open."""
    n, K = theta.shape
    E = edges.shape[0]
    belief = np.empty((n, K))
    x0 = x.copy()
    # within the certificate's tolerance of the incumbent (half of it: |bound| ≈ |start|)
    target = start + 0.5 * tol * max(1.0, abs(start)) if start > -np.inf else -np.inf
    value, bound, _ = mplp(
        theta, edges, pot, to_first, to_second, belief, x, max_sweeps, tol, target
    )
    if start > value:
        value = start
        x[:] = x0
    slack = tol * max(1.0, abs(bound))
    if bound - value <= slack or budget <= 1 or n == 0:
        return value, max(bound, value), 1
    # a penalty above any difference of two labellings' scores
    big = 1.0
    for u in range(n):
        m = 0.0
        for k in range(K):
            m = max(m, abs(theta[u, k]))
        big += 2.0 * m
    for e in range(E):
        m = 0.0
        for a in range(K):
            for b in range(K):
                m = max(m, abs(pot[e, a, b]))
        big += 2.0 * m
    depth = budget + 2  # every expansion pushes two nodes and pops one
    child_sweeps = min(max_sweeps, 30)  # a child starts from its parent's messages
    s_theta = np.empty((depth, n, K))
    s_first = np.empty((depth, E, K))
    s_second = np.empty((depth, E, K))
    s_bound = np.empty(depth)
    xs = np.empty(n, dtype=np.int64)
    top = 0
    nodes = 1
    left = -np.inf  # the largest bound pruned or left unexplored
    # the root's children
    cur_theta = theta.copy()
    cur_first = to_first.copy()
    cur_second = to_second.copy()
    cur_bound = bound
    while True:
        # branch on the node whose two best beliefs are closest (a fixed node cannot tie)
        pick = -1
        margin = np.inf
        for u in range(n):
            b1 = -np.inf
            b2 = -np.inf
            for k in range(K):
                val = belief[u, k]
                if val > b1:
                    b2 = b1
                    b1 = val
                elif val > b2:
                    b2 = val
            if b1 - b2 < margin and b1 - b2 < 0.5 * big:
                margin = b1 - b2
                pick = u
        if pick < 0:  # every node fixed: the bound is this labelling's own
            left = max(left, cur_bound)
        else:
            label = 0
            for k in range(1, K):
                if belief[pick, k] > belief[pick, label]:
                    label = k
            for child in range(2):  # pushed second: fixed to the label (explored first)
                s_theta[top] = cur_theta
                s_first[top] = cur_first
                s_second[top] = cur_second
                s_bound[top] = cur_bound
                if child == 0:
                    s_theta[top, pick, label] -= big
                else:
                    for k in range(K):
                        if k != label:
                            s_theta[top, pick, k] -= big
                top += 1
        # the next open node
        solved = False
        while top > 0 and not solved:
            top -= 1
            if s_bound[top] <= value + slack:
                left = max(left, s_bound[top])
                continue
            if nodes >= budget:
                left = max(left, s_bound[top])
                continue
            cur_theta[:] = s_theta[top]
            cur_first[:] = s_first[top]
            cur_second[:] = s_second[top]
            _, b, _ = mplp(
                cur_theta,
                edges,
                pot,
                cur_first,
                cur_second,
                belief,
                xs,
                child_sweeps,
                tol,
                value + slack,
            )
            nodes += 1
            cur_bound = min(b, s_bound[top])
            s = labelling_score(theta, edges, pot, xs)
            if s > value:
                value = s
                for u in range(n):
                    x[u] = xs[u]
            if cur_bound <= value + slack:
                left = max(left, cur_bound)
                continue
            solved = True
        if not solved:
            break
    return value, max(value, left), nodes
