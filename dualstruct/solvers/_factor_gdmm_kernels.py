"""Numba kernels of GDMM over factors (Yen et al. 2016, Algorithm 1), written once over the
factor interface of :mod:`dualstruct.models.factors`.

**The problem.** Every example is a factor graph: node factors ``q_j ∈ Δ(S_j)`` and edge
factors ``q_e ∈ Δ(S_u × S_v)`` tied by local consistency ``M_u q_e = q_u``, ``M_v q_e = q_v``.
The dual, as a minimization, is ``G(q) = ½‖w(q)‖² − C Σ_j <δ_j, q_j>`` with
``w(q) = C Σ_f (φ_f(ȳ_f) − E_{q_f} φ_f)``; GDMM minimizes the augmented Lagrangian

    L(q, λ) = G(q) + Σ_{e, j ∈ e} <λ_ej, r_ej> + ρ/2 ‖r_ej‖²,    r_ej = M_j q_e − q_j

by block steps over the factors, then takes ``λ ← λ + η r``. With the messages
``μ_ej = λ_ej + ρ r_ej`` the gradients are

    ∂L/∂q_j(a)    = −C (θ_j(a) + δ_j(a)) − Σ_{e ∋ j} μ_ej(a)
    ∂L/∂q_e(a, b) = −C θ_e(a, b) + μ_eu(a) + μ_ev(b)

and the Frank-Wolfe vertex of a factor is the model's message-augmented oracle
(``node_oracle``, ``edge_oracle``).

**Block steps.** A factor takes up to ``steps`` pairwise Frank-Wolfe steps: mass γ moves
from its worst supported state (pair) to the oracle's, with the exact line search of the
quadratic along ``d = e_best − e_away``: curvature ``C² ‖φ_f(best) − φ_f(away)‖²`` plus ρ
times ``Σ ‖M d‖²`` (2 per incident edge for a node; 2 per endpoint whose state changes for
an edge).
With the proximal outer loop (:mod:`~dualstruct.solvers._gdmm_proximal`) ``w`` is the
subproblem's scoring point, which moves by ``Settings.scale`` = σ times each change of
``w(q)``, and σ scales the curvature's ``C²`` term.

**Active sets.** Node ``g`` keeps its states in slots ``act[g, :n_act[g]]`` (slot 0 the
gold state) with ``q``; an edge end (``2e`` for u, ``2e + 1`` for v) keeps λ and the
marginal ``M_j q_e`` aligned with its node's slots; an edge keeps its support as pairs of
slots. Messages are non-zero on active states only. A state idle (no mass, in no pair) for
``shrink_after`` visits leaves with its multipliers; a pair without mass leaves its support
at once (it carries none). Columns beyond ``n_act`` are zero.

**Certified dual.** Each q_e is rounded into the transport polytope ``U(q_u, q_v)``
(Altschuler, Weed and Rigollet 2017: scale down rows then columns that exceed the node
marginals, add the product of the deficits), which moves only the edge parts of w; the
rounded point is locally consistent, so ``C Σ <δ, q> − ½‖w'‖²`` is the dual value of a
feasible point of the local polytope: of the structural SVM on forests, of its relaxation
on loopy graphs.

**Averaging.** Lazy, as in the chain GDMM: every change Δ of w in pass m also goes into R
scaled by ``A_{m−1}``, and ``w̄_m = w − R / A_m``.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..models import factors
from ..models.interface import NO_REFCOUNT

#: False in the uncached copy of this module that kernels defined outside dualstruct are
#: compiled with (:func:`~dualstruct.solvers.factor_gdmm.kernels_for`)
CACHE = globals().get("CACHE", True)
#: gradients closer than this (relative) are a tie: no step
TIE = 1e-12
#: return codes of factor_pass (bit flags): which capacity must grow before continuing
NEED_SLOTS = 1
NEED_PAIRS = 2


class Layout(NamedTuple):
    """The factor graphs of all examples (global node and edge indices)."""

    node_offsets: np.ndarray  # int64 (n + 1,)
    edge_offsets: np.ndarray  # int64 (n + 1,)
    n_states: np.ndarray  # int64 (N,)
    edge_u: np.ndarray  # int64 (E,) the edge's nodes, within the example
    edge_v: np.ndarray
    adj_ptr: np.ndarray  # int64 (N + 1,): node g's incident edge ends
    adj_end: np.ndarray  # int64 (2E,): ends 2e (u side) and 2e + 1 (v side)
    max_states: int


class Weights(NamedTuple):
    w: np.ndarray
    R: np.ndarray  # the lazy average's accumulator
    avg_weight: float  # A_{m−1}; 0: no averaging


class ActiveSets(NamedTuple):
    act: np.ndarray  # int32 (N, cap) the states
    n_act: np.ndarray  # int32 (N,)
    q: np.ndarray  # (N, cap) node marginals
    idle: np.ndarray  # int32 (N, cap) visits without mass
    lam: np.ndarray  # (2E, cap) multipliers of the edge ends, by the node's slots
    msum: np.ndarray  # (2E, cap) M_j q_e, by the node's slots


class PairSupport(NamedTuple):
    pair_a: np.ndarray  # int32 (E, pcap) slot of u
    pair_b: np.ndarray  # int32 (E, pcap) slot of v
    q: np.ndarray  # (E, pcap)
    n_pair: np.ndarray  # int32 (E,)


class Settings(NamedTuple):
    C: float
    rho: float
    eta: float  # the multiplier step (0: none)
    steps: int  # pairwise steps per factor visit
    sweeps: int  # visits of every factor of an example before its multiplier step
    shrink_after: int  # 0: states never leave
    #: σ = 1/(1 + κ) of the proximal subproblem: w is its scoring point x, which moves by σ
    #: times each step, and σ scales the line search's quadratic (1: the plain dual)
    scale: float = 1.0


# -- the layout ------------------------------------------------------------------------------
@njit(cache=CACHE)
def graph_sizes(k, n, sizes):
    """``sizes[i] = (nodes, edges)`` of every example."""
    for i in range(n):
        a, b = factors.factor_counts(k, i)
        sizes[i, 0] = a
        sizes[i, 1] = b


@njit(cache=CACHE)
def graph_fill(k, node_offsets, edge_offsets, n_states, gold, edge_u, edge_v):
    """Every node's state count and gold state, every edge's nodes."""
    for i in range(len(node_offsets) - 1):
        n0 = node_offsets[i]
        for j in range(node_offsets[i + 1] - n0):
            s, g = factors.node_info(k, i, j)
            n_states[n0 + j] = s
            gold[n0 + j] = g
        e0 = edge_offsets[i]
        for e in range(edge_offsets[i + 1] - e0):
            u, v = factors.edge_nodes(k, i, e)
            edge_u[e0 + e] = u
            edge_v[e0 + e] = v


@njit(cache=CACHE)
def penalty_figures(k, layout):
    """(mean loss of a wrong state, mean ‖φ_j(a) − φ_j(b)‖² / 2) over the nodes, for κ."""
    loss, sq, m = 0.0, 0.0, 0
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for j in range(layout.node_offsets[i + 1] - n0):
            S = layout.n_states[n0 + j]
            if S < 2:
                continue
            g = factors.node_info(k, i, j)[1]
            b = (g + 1) % S
            loss += factors.node_loss(k, i, j, b)
            sq += 0.5 * factors.node_sq_distance(k, i, j, g, b)
            m += 1
    return loss / max(m, 1), sq / max(m, 1)


# -- the pass ----------------------------------------------------------------------------------
@njit(cache=CACHE)
def factor_pass(k, layout, weights, sets, pairs, settings, order, first, counters):
    """Block steps on every factor of the examples ``order[first:]``, each followed by the
    example's multiplier step (and shrinking). Returns ``(position, need)``: need ≠ 0 when
    the example at ``position`` needs more slots or pairs than there is room for (nothing
    of it was done)."""
    S = layout.max_states
    cap = sets.act.shape[1]
    mu_u, mu_v = np.zeros(S), np.zeros(S)
    smu_u, smu_v = np.zeros(cap), np.zeros(cap)
    factors.prepare_weights(k, weights.w)
    for pos in range(first, len(order)):
        i = order[pos]
        need = _room_needed(layout, sets, pairs, settings.steps * settings.sweeps, i)
        if need:
            return pos, need
        n0, e0 = layout.node_offsets[i], layout.edge_offsets[i]
        for _ in range(settings.sweeps):
            for j in range(layout.node_offsets[i + 1] - n0):
                _node_step(k, layout, weights, sets, settings, i, j, mu_u, smu_u, counters)
            for e in range(layout.edge_offsets[i + 1] - e0):
                _edge_step(
                    k,
                    layout,
                    weights,
                    sets,
                    pairs,
                    settings,
                    i,
                    e,
                    mu_u,
                    mu_v,
                    smu_u,
                    smu_v,
                    counters,
                )
        _multipliers(layout, sets, i, settings.eta)
        _drop_empty_pairs(layout, pairs, i)
        if settings.shrink_after > 0:
            _shrink(layout, sets, pairs, i, settings.shrink_after, counters)
    return len(order), 0


@njit(cache=CACHE, **NO_REFCOUNT)
def _room_needed(layout, sets, pairs, steps, i):
    """Whether example i's visit may add more states or pairs than there is room for."""
    need = 0
    cap, pcap = sets.act.shape[1], pairs.q.shape[1]
    for g in range(layout.node_offsets[i], layout.node_offsets[i + 1]):
        deg = layout.adj_ptr[g + 1] - layout.adj_ptr[g]
        grow = min(sets.n_act[g] + steps * (1 + deg), layout.n_states[g])
        if grow > cap:
            need |= NEED_SLOTS
    n0 = layout.node_offsets[i]
    for r in range(layout.edge_offsets[i], layout.edge_offsets[i + 1]):
        most = layout.n_states[n0 + layout.edge_u[r]] * layout.n_states[n0 + layout.edge_v[r]]
        if min(pairs.n_pair[r] + steps, most) > pcap:
            need |= NEED_PAIRS
    return need


@njit(cache=CACHE, inline="always")
def _slot(sets, g, a, counters):
    """The slot of state a at node g, activated (no mass, no multipliers) if needed."""
    n = sets.n_act[g]
    for s in range(n):
        if sets.act[g, s] == a:
            return s
    sets.act[g, n] = a
    sets.q[g, n] = 0.0
    sets.idle[g, n] = 0
    sets.n_act[g] = n + 1
    counters[2] += 1
    return n


@njit(cache=CACHE, **NO_REFCOUNT)
def _node_step(k, layout, weights, sets, settings, i, j, mu, slot_mu, counters):
    """Up to ``steps`` pairwise steps on node j of example i."""
    g = layout.node_offsets[i] + j
    C, rho, w = settings.C, settings.rho, weights.w
    p0, p1 = layout.adj_ptr[g], layout.adj_ptr[g + 1]
    for _ in range(settings.steps):
        n = sets.n_act[g]
        for s in range(n):
            m = 0.0
            for p in range(p0, p1):
                end = layout.adj_end[p]
                m += sets.lam[end, s] + rho * (sets.msum[end, s] - sets.q[g, s])
            slot_mu[s] = m
            mu[sets.act[g, s]] = m
        b, gb = factors.node_oracle(k, i, w, j, C, sets.act[g], n, mu)
        counters[0] += 1
        sa, ga = -1, -np.inf
        for s in range(n):
            mu[sets.act[g, s]] = 0.0
            if sets.q[g, s] > 0.0:
                a = sets.act[g, s]
                if a == b:  # the oracle's own value at the same w: no second score
                    gs = gb
                else:
                    gs = -C * (factors.node_score(k, i, w, j, a) + factors.node_loss(k, i, j, a))
                    gs -= slot_mu[s]
                if gs > ga:
                    sa, ga = s, gs
        if sa < 0 or ga - gb <= TIE * (abs(ga) + abs(gb)):
            return
        sb = _slot(sets, g, b, counters)
        if sb == sa:
            return
        a = sets.act[g, sa]
        curv = C * C * settings.scale * factors.node_sq_distance(k, i, j, a, b)
        curv += 2.0 * rho * (p1 - p0)
        gamma = sets.q[g, sa] if curv <= 0.0 else min(sets.q[g, sa], (ga - gb) / curv)
        if gamma >= sets.q[g, sa]:
            gamma = sets.q[g, sa]
            sets.q[g, sa] = 0.0
        else:
            sets.q[g, sa] -= gamma
        sets.q[g, sb] += gamma
        c = C * gamma
        factors.add_node(k, i, j, a, c * settings.scale, w)
        factors.add_node(k, i, j, b, -c * settings.scale, w)
        if weights.avg_weight != 0.0:
            factors.add_node(k, i, j, a, c * weights.avg_weight, weights.R)
            factors.add_node(k, i, j, b, -c * weights.avg_weight, weights.R)


@njit(cache=CACHE, inline="always")
def _end_messages(sets, end, g, rho, mu, slot_mu):
    """The messages of edge end ``end`` (node g), by slot and dense by state."""
    for s in range(sets.n_act[g]):
        m = sets.lam[end, s] + rho * (sets.msum[end, s] - sets.q[g, s])
        slot_mu[s] = m
        mu[sets.act[g, s]] = m


@njit(cache=CACHE, **NO_REFCOUNT)
def _edge_step(k, layout, weights, sets, pairs, settings, i, e, mu_u, mu_v, smu_u, smu_v, counters):
    """Up to ``steps`` pairwise steps on edge e of example i."""
    n0 = layout.node_offsets[i]
    r = layout.edge_offsets[i] + e
    gu, gv = n0 + layout.edge_u[r], n0 + layout.edge_v[r]
    C, rho, w = settings.C, settings.rho, weights.w
    for _ in range(settings.steps):
        _end_messages(sets, 2 * r, gu, rho, mu_u, smu_u)
        _end_messages(sets, 2 * r + 1, gv, rho, mu_v, smu_v)
        nu, nv = sets.n_act[gu], sets.n_act[gv]
        a, b, gb = factors.edge_oracle(
            k, i, w, e, C, sets.act[gu], nu, mu_u, sets.act[gv], nv, mu_v
        )
        counters[1] += 1
        for s in range(nu):
            mu_u[sets.act[gu, s]] = 0.0
        for s in range(nv):
            mu_v[sets.act[gv, s]] = 0.0
        pa, ga = -1, -np.inf
        for p in range(pairs.n_pair[r]):
            if pairs.q[r, p] > 0.0:
                x, y = pairs.pair_a[r, p], pairs.pair_b[r, p]
                s = factors.edge_score(k, i, w, e, sets.act[gu, x], sets.act[gv, y])
                gp = -C * s + smu_u[x] + smu_v[y]
                if gp > ga:
                    pa, ga = p, gp
        if pa < 0 or ga - gb <= TIE * (abs(ga) + abs(gb)):
            return
        su, sv = _slot(sets, gu, a, counters), _slot(sets, gv, b, counters)
        pb = _pair(pairs, r, su, sv)
        if pb == pa:
            return
        xa, ya = pairs.pair_a[r, pa], pairs.pair_b[r, pa]
        a2, b2 = sets.act[gu, xa], sets.act[gv, ya]
        moved = 2.0 * ((su != xa) + (sv != ya))
        curv = C * C * settings.scale * factors.edge_sq_distance(k, i, e, a, b, a2, b2)
        curv += rho * moved
        gamma = pairs.q[r, pa] if curv <= 0.0 else min(pairs.q[r, pa], (ga - gb) / curv)
        if gamma >= pairs.q[r, pa]:
            gamma = pairs.q[r, pa]
            pairs.q[r, pa] = 0.0
        else:
            pairs.q[r, pa] -= gamma
        pairs.q[r, pb] += gamma
        sets.msum[2 * r, xa] -= gamma
        sets.msum[2 * r, su] += gamma
        sets.msum[2 * r + 1, ya] -= gamma
        sets.msum[2 * r + 1, sv] += gamma
        c = C * gamma
        factors.add_edge(k, i, e, a2, b2, c * settings.scale, w)
        factors.add_edge(k, i, e, a, b, -c * settings.scale, w)
        if weights.avg_weight != 0.0:
            factors.add_edge(k, i, e, a2, b2, c * weights.avg_weight, weights.R)
            factors.add_edge(k, i, e, a, b, -c * weights.avg_weight, weights.R)


@njit(cache=CACHE, inline="always")
def _pair(pairs, r, su, sv):
    """The support position of the slot pair (su, sv) of edge r, added (no mass) if new."""
    n = pairs.n_pair[r]
    for p in range(n):
        if pairs.pair_a[r, p] == su and pairs.pair_b[r, p] == sv:
            return p
    pairs.pair_a[r, n] = su
    pairs.pair_b[r, n] = sv
    pairs.q[r, n] = 0.0
    pairs.n_pair[r] = n + 1
    return n


@njit(cache=CACHE, **NO_REFCOUNT)
def _multipliers(layout, sets, i, eta):
    """``λ ← λ + η r`` on the edge ends of example i."""
    if eta == 0.0:
        return
    n0 = layout.node_offsets[i]
    for r in range(layout.edge_offsets[i], layout.edge_offsets[i + 1]):
        for side in range(2):
            g = n0 + (layout.edge_u[r] if side == 0 else layout.edge_v[r])
            end = 2 * r + side
            for s in range(sets.n_act[g]):
                sets.lam[end, s] += eta * (sets.msum[end, s] - sets.q[g, s])


@njit(cache=CACHE, **NO_REFCOUNT)
def _drop_empty_pairs(layout, pairs, i):
    """Pairs without mass leave their edge's support (the last pair takes their place)."""
    for r in range(layout.edge_offsets[i], layout.edge_offsets[i + 1]):
        p = 0
        while p < pairs.n_pair[r]:
            if pairs.q[r, p] > 0.0 or pairs.n_pair[r] == 1:
                p += 1
                continue
            last = pairs.n_pair[r] - 1
            pairs.pair_a[r, p] = pairs.pair_a[r, last]
            pairs.pair_b[r, p] = pairs.pair_b[r, last]
            pairs.q[r, p] = pairs.q[r, last]
            pairs.q[r, last] = 0.0
            pairs.n_pair[r] = last


@njit(cache=CACHE, **NO_REFCOUNT)
def _shrink(layout, sets, pairs, i, patience, counters):
    """States (not the gold one) without mass and in no pair for ``patience`` visits leave
    their node, with their multipliers; the node's last slot takes their place."""
    for g in range(layout.node_offsets[i], layout.node_offsets[i + 1]):
        s = 1
        while s < sets.n_act[g]:
            used = sets.q[g, s] > 0.0
            for p in range(layout.adj_ptr[g], layout.adj_ptr[g + 1]):
                end = layout.adj_end[p]
                r, side = end // 2, end % 2
                for t in range(pairs.n_pair[r]):
                    x = pairs.pair_a[r, t] if side == 0 else pairs.pair_b[r, t]
                    used = used or x == s
            if used:
                sets.idle[g, s] = 0
                s += 1
                continue
            sets.idle[g, s] += 1
            if sets.idle[g, s] < patience:
                s += 1
                continue
            _remove_slot(layout, sets, pairs, g, s)
            counters[3] += 1


@njit(cache=CACHE, **NO_REFCOUNT)
def _remove_slot(layout, sets, pairs, g, s):
    """Move node g's last slot into slot s (unused) and clear the last one."""
    last = sets.n_act[g] - 1
    sets.act[g, s] = sets.act[g, last]
    sets.q[g, s] = sets.q[g, last]
    sets.idle[g, s] = sets.idle[g, last]
    sets.q[g, last] = 0.0
    sets.idle[g, last] = 0
    for p in range(layout.adj_ptr[g], layout.adj_ptr[g + 1]):
        end = layout.adj_end[p]
        sets.lam[end, s] = sets.lam[end, last]
        sets.msum[end, s] = sets.msum[end, last]
        sets.lam[end, last] = 0.0
        sets.msum[end, last] = 0.0
        r, side = end // 2, end % 2
        for t in range(pairs.n_pair[r]):
            if side == 0 and pairs.pair_a[r, t] == last:
                pairs.pair_a[r, t] = s
            if side == 1 and pairs.pair_b[r, t] == last:
                pairs.pair_b[r, t] = s
    sets.n_act[g] = last


# -- figures and the certified dual ----------------------------------------------------------
@njit(cache=CACHE)
def consistency(layout, sets):
    """(Σ_ej ‖r_ej‖₁, Σ <λ, r>, Σ ‖r‖²) over every edge end."""
    l1, lag, sq = 0.0, 0.0, 0.0
    n = len(layout.node_offsets) - 1
    for i in range(n):
        n0 = layout.node_offsets[i]
        for r in range(layout.edge_offsets[i], layout.edge_offsets[i + 1]):
            for side in range(2):
                g = n0 + (layout.edge_u[r] if side == 0 else layout.edge_v[r])
                end = 2 * r + side
                for s in range(sets.n_act[g]):
                    d = sets.msum[end, s] - sets.q[g, s]
                    l1 += abs(d)
                    lag += sets.lam[end, s] * d
                    sq += d * d
    return l1, lag, sq


@njit(cache=CACHE)
def loss_term(k, layout, sets, C):
    """``C Σ_j <δ_j, q_j>``."""
    total = 0.0
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for g in range(n0, layout.node_offsets[i + 1]):
            for s in range(sets.n_act[g]):
                if sets.q[g, s] > 0.0:
                    total += sets.q[g, s] * factors.node_loss(k, i, g - n0, sets.act[g, s])
    return C * total


@njit(cache=CACHE)
def transport_rounding(k, layout, sets, pairs, C, w):
    """``w += C Σ_e (q_e − π_e)·φ_e``: every edge marginal replaced by its rounding π_e into
    the transport polytope of its two node marginals."""
    cap = sets.act.shape[1]
    table = np.zeros((cap, cap))
    row, col = np.zeros(cap), np.zeros(cap)
    for i in range(len(layout.node_offsets) - 1):
        n0, e0 = layout.node_offsets[i], layout.edge_offsets[i]
        for r in range(e0, layout.edge_offsets[i + 1]):
            gu, gv = n0 + layout.edge_u[r], n0 + layout.edge_v[r]
            nu, nv = sets.n_act[gu], sets.n_act[gv]
            _round_edge(sets, pairs, r, gu, gv, table, row, col)
            for p in range(pairs.n_pair[r]):  # C (q_e − π_e) as C q_e − C π_e
                a, b = sets.act[gu, pairs.pair_a[r, p]], sets.act[gv, pairs.pair_b[r, p]]
                factors.add_edge(k, i, r - e0, a, b, C * pairs.q[r, p], w)
            for x in range(nu):
                for y in range(nv):
                    if table[x, y] != 0.0:
                        a, b = sets.act[gu, x], sets.act[gv, y]
                        factors.add_edge(k, i, r - e0, a, b, -C * table[x, y], w)
                    table[x, y] = 0.0


@njit(cache=CACHE)
def _round_edge(sets, pairs, r, gu, gv, table, row, col):
    """π_e into ``table[:n_u, :n_v]`` (Altschuler et al. 2017, Algorithm 2)."""
    nu, nv = sets.n_act[gu], sets.n_act[gv]
    for p in range(pairs.n_pair[r]):
        table[pairs.pair_a[r, p], pairs.pair_b[r, p]] += max(pairs.q[r, p], 0.0)
    for x in range(nu):
        s = 0.0
        for y in range(nv):
            s += table[x, y]
        target = max(sets.q[gu, x], 0.0)
        if s > target:
            f = target / s
            for y in range(nv):
                table[x, y] *= f
    for y in range(nv):
        s = 0.0
        for x in range(nu):
            s += table[x, y]
        target = max(sets.q[gv, y], 0.0)
        if s > target:
            f = target / s
            for x in range(nu):
                table[x, y] *= f
    total = 0.0
    for x in range(nu):
        s = 0.0
        for y in range(nv):
            s += table[x, y]
        row[x] = max(sets.q[gu, x], 0.0) - s
    for y in range(nv):
        s = 0.0
        for x in range(nu):
            s += table[x, y]
        col[y] = max(sets.q[gv, y], 0.0) - s
        total += col[y]
    if total > 0.0:
        for x in range(nu):
            for y in range(nv):
                table[x, y] += row[x] * col[y] / total


@njit(cache=CACHE)
def oracle_calls_pass(k, layout, w, C):
    """One node oracle call per node at w without messages (timing only)."""
    S = layout.max_states
    mu = np.zeros(S)
    act = np.zeros(1, dtype=np.int32)
    total = 0.0
    for i in range(len(layout.node_offsets) - 1):
        for j in range(layout.node_offsets[i + 1] - layout.node_offsets[i]):
            total += factors.node_oracle(k, i, w, j, C, act, 0, mu)[1]
    return total


@njit(cache=CACHE)
def rebuild_weights(k, layout, sets, pairs, C, w):
    """``w += C Σ_f (φ_f(ȳ_f) − E_{q_f} φ_f)``: the weights the marginals determine."""
    for i in range(len(layout.node_offsets) - 1):
        n0, e0 = layout.node_offsets[i], layout.edge_offsets[i]
        for g in range(n0, layout.node_offsets[i + 1]):
            j = g - n0
            factors.add_node(k, i, j, sets.act[g, 0], C, w)  # slot 0: the gold state
            for s in range(sets.n_act[g]):
                factors.add_node(k, i, j, sets.act[g, s], -C * sets.q[g, s], w)
        for r in range(e0, layout.edge_offsets[i + 1]):
            gu, gv = n0 + layout.edge_u[r], n0 + layout.edge_v[r]
            factors.add_edge(k, i, r - e0, sets.act[gu, 0], sets.act[gv, 0], C, w)
            for p in range(pairs.n_pair[r]):
                a, b = sets.act[gu, pairs.pair_a[r, p]], sets.act[gv, pairs.pair_b[r, p]]
                factors.add_edge(k, i, r - e0, a, b, -C * pairs.q[r, p], w)
