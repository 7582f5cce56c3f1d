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

**Block steps.** An example's factors, nodes and edges together, are visited in a random
order, a new one at every visit and sweep (keyed by the pass's ``Settings.seed``, so the
order does not depend on where a kernel call starts). One pass of block steps and a
multiplier step is a multi-block ADMM step; with the blocks in a fixed cyclic order
(every node, then every edge) the consistency residual kept oscillating instead of
vanishing and, at a large C, the certified gap stalled. Cyclic multi-block ADMM need not
converge (Chen, He, Ye and Yuan 2016); with the blocks randomly permuted at every
iteration it does in expectation (Sun, Luo and Ye 2015), as the chain GDMM's random
factor order does.
A factor takes up to ``steps`` pairwise Frank-Wolfe steps: mass γ moves
from its worst supported state (pair) to the oracle's, with the exact line search of the
quadratic along ``d = e_best − e_away``: curvature ``C² ‖φ_f(best) − φ_f(away)‖²`` plus ρ
times ``Σ ‖M d‖²`` (2 per incident edge for a node; 2 per endpoint whose state changes for
an edge).
With the proximal outer loop (:mod:`~dualstruct.solvers._gdmm_proximal`) ``w`` is the
subproblem's scoring point, which moves by ``Settings.scale`` = σ times each change of
``w(q)``, and σ scales the curvature's ``C²`` term.
Where the model's node features of different states are orthogonal (``node_sq_norm``,
the chain's label blocks) a node is instead minimized exactly over its active states and
the oracle's (:func:`_node_block`): the block's Hessian is diagonal, so its minimizer is a
weighted projection onto the simplex, and the changed states' features are added once.

**Active sets.** Node ``g`` keeps its states in slots ``act[g, :n_act[g]]`` (slot 0 the
gold state) with ``q`` (and, for exact node blocks, each state's ``‖φ_j(a)‖²``); an edge
end (``2e`` for u, ``2e + 1`` for v) keeps λ and the marginal ``M_j q_e`` aligned with its
node's slots; an edge keeps its support as pairs of slots. Messages are non-zero on active
states only. A state idle (no mass, in no pair) for ``shrink_after`` visits leaves with its
multipliers; a pair without mass leaves its support at once (it carries none). Columns
beyond ``n_act`` are zero.

**Certified dual.** Each q_e is rounded into the transport polytope ``U(q_u, q_v)``
(Altschuler, Weed and Rigollet 2017: scale down rows then columns that exceed the node
marginals, add the product of the deficits), which moves only the edge parts of w; the
rounded point is locally consistent, so ``C Σ <δ, q> − ½‖w'‖²`` is the dual value of a
feasible point of the local polytope: of the structural SVM on forests, of its relaxation
on loopy graphs.

**Lazy edges.** With a model that registers ``null_state`` (:mod:`dualstruct.models.factors`)
only the edges that carry information are stored. Node g's mass ``m_g = 1 − q_g(null)``;
an inactive edge stands at the table T: ``q_e(a, null) = q_u(a)``, ``q_e(null, b) = q_v(b)``
(a, b not null), ``q_e(null, null) = 1 − m_u − m_v``: consistent, a distribution while
``m_u + m_v <= 1``, and all its mass lies on pairs whose features are zero, so it adds
nothing to w, to G or to the augmented Lagrangian. Example i's active edges are rows
``start[i] … start[i] + count[i] − 1`` of a pool (``room[i]`` rows reserved; a full room
moves, doubled, to the end of the pool: within the pass while the pool has the rows free
past its last room, else the solver doubles the pool), and become active at T with λ = 0,
so the point does not move:

* a node step that would raise ``m_u`` over ``1 − m_v`` for an inactive edge stops at that
  bound and marks the node; at the example's next visit its inactive edges at the bound
  become active;
* at every visit the inactive edge (or a node's set of inactive edges) of largest positive
  first-order gain becomes active (:func:`_best_inactive`: the pairs with a node with mass
  by a scan, those of two nodes without mass by the model's ``best_inactive_edge``)
  with ``h_u(a) = ∂_u(null) − ∂_u(a)`` (∂ the node's gradient of L):
  ``Cθ_e(a, b) + h_u(a) + h_v(b)`` from T's (null, null) mass (when ``m_u + m_v < 1``),
  ``Cθ_e(a, b)`` from its (a, null) and (null, b) masses, and
  ``h_u(a) + Σ_v max(0, Cθ_e(a, b))`` over u's inactive edges to nodes v with mass on b
  (u's mass moves onto all of them at once: one edge alone may not pay for u's own term
  where several do); each such edge is scored once for both, and a node without mass
  whose bound (from the model's ``edge_gain_bound``) is below the best gain of the nodes
  with mass is not scored at all;
* an active edge that carries nothing (not a gold edge, no mass on a pair of non-null
  states, no multipliers, a node with no mass off null) goes back to T at the end of the
  visit (:func:`_deactivate`).

A node at its null state takes no step in a visit when its gain ``h`` is nowhere positive
at the visit's start (its step would find no better state) or when it has no active edge:
as the active labels of the multi-label GDMM (Yen et al. 2016, Algorithm 3) such nodes
join one at a time, by the greedy choice (an edge of theirs, or the node alone when its
own gain ``h`` is the largest).

**Averaging.** Lazy: every change Δ of w in pass m also goes into R
scaled by ``A_{m−1}``, and ``w̄_m = w − R / A_m``. With ``Weights.avg_weight`` 0 the kernels
leave R alone: the solver adds the pass's net change of u instead, when w is small
(:meth:`~.factor_gdmm.FactorGDMM._pass_level_average`).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..inference.graph import find
from ..models import factors
from ..models.interface import NO_REFCOUNT
from ._gdmm_common import random_below

#: False in the uncached copy of this module that kernels defined outside dualstruct are
#: compiled with (:func:`~dualstruct.solvers.factor_gdmm.kernels_for`)
CACHE = globals().get("CACHE", True)
#: gradients closer than this (relative) are a tie: no step
TIE = 1e-12
#: return codes of factor_pass (bit flags): which capacity must grow before continuing
NEED_SLOTS = 1
NEED_PAIRS = 2
NEED_ROWS = 4
#: lazy edges: masses this close to their bound count as at it
AT_BOUND = 1e-9
#: lazy edges: first-order gains (in units of C) below this activate nothing
GAIN_FLOOR = 1e-9
#: lazy edges: a node's bound on its gain counts as below the best (relative to its terms)
#: only this far below it, against rounding
BOUND_SLACK = 1e-9
#: lazy edges: the examples between two ``prepare_weights`` within a kernel call (the
#: model's bounds over w, as the multi-label model's, only rise as w moves)
REFRESH = 64


class Layout(NamedTuple):
    """The nodes of all examples (global node indices) and the graphs' sizes."""

    node_offsets: np.ndarray  # int64 (n + 1,)
    n_states: np.ndarray  # int64 (N,)
    null: np.ndarray  # int64 (N,) the null states with lazy edges, else empty
    max_states: int
    max_nodes: int  # the most nodes of an example
    max_edges: int  # the most edges of an example
    lazy: bool


class Rows(NamedTuple):
    """The active edges: example i's are rows ``start[i] … start[i] + count[i] − 1`` of the
    pool (``room[i]`` rows reserved); without lazy edges every edge, in order."""

    start: np.ndarray  # int64 (n,)
    count: np.ndarray  # int64 (n,)
    room: np.ndarray  # int64 (n,)
    u: np.ndarray  # int64 (R,) the row's nodes, within the example
    v: np.ndarray
    edge: np.ndarray  # int64 (R,) its edge (edge_nodes' index)


class Weights(NamedTuple):
    w: np.ndarray
    R: np.ndarray  # the lazy average's accumulator
    avg_weight: float  # A_{m−1}; 0: R untouched (no averaging, or R once per pass)


class ActiveSets(NamedTuple):
    act: np.ndarray  # int32 (N, cap) the states
    n_act: np.ndarray  # int32 (N,)
    q: np.ndarray  # (N, cap) node marginals
    idle: np.ndarray  # int32 (N, cap) visits without mass
    lam: np.ndarray  # (2R, cap) multipliers of the rows' ends, by the node's slots
    msum: np.ndarray  # (2R, cap) M_j q_e, by the node's slots
    blocked: np.ndarray  # int32 (N,) lazy edges: a step stopped at an inactive edge's bound
    #: (N, cap) ‖φ_j(a)‖² of the slot's state a once an exact node block needed it, −1
    #: before; (0, cap) where the model has no node norms
    sq_norm: np.ndarray


class PairSupport(NamedTuple):
    pair_a: np.ndarray  # int32 (R, pcap) slot of u
    pair_b: np.ndarray  # int32 (R, pcap) slot of v
    q: np.ndarray  # (R, pcap)
    n_pair: np.ndarray  # int32 (R,)


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
    #: the key of the pass's random factor orders
    seed: int = 0


class Visit(NamedTuple):
    """Scratch of one example's visit (local node indices)."""

    adj_ptr: np.ndarray  # (max_nodes + 1,) node j's active row ends
    adj_end: np.ndarray  # ends 2r (u side) and 2r + 1 (v side), in row order
    fill: np.ndarray  # (max_nodes,)
    mu_u: np.ndarray  # (S,) dense messages
    mu_v: np.ndarray
    smu_u: np.ndarray  # (cap,) messages by slot
    smu_v: np.ndarray
    row_of: np.ndarray  # lazy: (max_edges,) an active edge's row, −1
    heavy: np.ndarray  # lazy: the nodes with mass off null, n_heavy[0] of them
    is_heavy: np.ndarray
    n_heavy: np.ndarray
    gain: np.ndarray  # lazy: (max_nodes, S) h_j(a) = ∂_j(null) − ∂_j(a)
    pick: np.ndarray  # lazy: the edges to activate
    skip: np.ndarray  # lazy: nodes at null that gain nothing (no step this visit)
    outside: np.ndarray  # lazy: nodes without mass (best_inactive_edge's pairs)
    mass_states: np.ndarray  # lazy: (max_nodes, S) the t-th heavy node's states with mass
    n_mass_states: np.ndarray  # lazy: (max_nodes,) their number
    to_heavy: np.ndarray  # lazy: (max_nodes,) one node's inactive edge to the t-th, −1
    from_first: np.ndarray  # lazy: (max_nodes,) whether that node is the edge's first
    heavy_mass: np.ndarray  # lazy: (max_nodes,) the t-th heavy node's mass
    bundle: np.ndarray  # lazy: (S,) one node's bundle gains by state, without h
    bundle_count: np.ndarray  # lazy: (S,) the number of their positive terms
    heavy_gain: np.ndarray  # lazy: (max_nodes,) the t-th heavy node's best choice: its gain,
    heavy_choice: np.ndarray  # (max_nodes, 2) and its state and edge (_node_candidates)
    moved: np.ndarray  # (cap,) the states a node block moved (before: its scratch)
    moved_by: np.ndarray  # (cap,) and by how much: −C Δq
    slots: np.ndarray  # (cap,) an exact node block's slots whose d_s it needs
    packed: np.ndarray  # (4, cap) its candidates: key, q − g/d, 1/d; and the norms


# -- the layout ------------------------------------------------------------------------------
@njit(cache=CACHE)
def graph_sizes(k, n, sizes):
    """``sizes[i] = (nodes, edges)`` of every example."""
    for i in range(n):
        a, b = factors.factor_counts(k, i)
        sizes[i, 0] = a
        sizes[i, 1] = b


@njit(cache=CACHE)
def node_fill(k, node_offsets, n_states, gold, null):
    """Every node's state count, gold state and null state (``null`` empty: not read)."""
    for i in range(len(node_offsets) - 1):
        n0 = node_offsets[i]
        for j in range(node_offsets[i + 1] - n0):
            s, g = factors.node_info(k, i, j)
            n_states[n0 + j] = s
            gold[n0 + j] = g
            if len(null):
                null[n0 + j] = factors.null_state(k, i, j)


@njit(cache=CACHE)
def edge_fill(k, edge_offsets, edge_u, edge_v):
    """Every edge's nodes."""
    for i in range(len(edge_offsets) - 1):
        e0 = edge_offsets[i]
        for e in range(edge_offsets[i + 1] - e0):
            u, v = factors.edge_nodes(k, i, e)
            edge_u[e0 + e] = u
            edge_v[e0 + e] = v


@njit(cache=CACHE)
def edge_scan(k, node_offsets, edge_counts, loopy, parent):
    """Lazy edges: every example's edges checked without storing them (nodes in range and
    different, ``edge_between`` finding a sample of them) and ``loopy[i]`` set by union-find.
    Returns the first bad (example, edge, u, v), or (−1, −1, −1, −1)."""
    for i in range(len(node_offsets) - 1):
        nodes = node_offsets[i + 1] - node_offsets[i]
        for j in range(nodes):
            parent[j] = j
        stride = max(1, edge_counts[i] // 64)
        for e in range(edge_counts[i]):
            u, v = factors.edge_nodes(k, i, e)
            if u < 0 or v < 0 or u >= nodes or v >= nodes or u == v:
                return i, e, u, v
            if e % stride == 0 and factors.edge_between(k, i, v, u) != e:
                return i, e, u, v
            u, v = find(parent, u), find(parent, v)
            if u == v:
                loopy[i] = True
            else:
                parent[u] = v
    return -1, -1, -1, -1


@njit(cache=CACHE, inline="always")
def _edge_joining(k, i, a, b):
    """The edge of example i between nodes a and b by the model's ``edge_between``; −1 when
    there is none or the answer is not an edge of i joining them (no index out of range)."""
    e = factors.edge_between(k, i, a, b)
    if e < 0 or e >= factors.factor_counts(k, i)[1]:
        return -1
    u, v = factors.edge_nodes(k, i, e)
    return e if (u == a and v == b) or (u == b and v == a) else -1


@njit(cache=CACHE)
def gold_rows(k, node_offsets, gold, null, counts, rows):
    """Lazy edges: the edges whose gold pair has no null state, active from the start.
    Counts them per example into ``counts`` when ``rows`` is None, else writes them at
    ``rows.start``."""
    for i in range(len(node_offsets) - 1):
        n0 = node_offsets[i]
        c = 0
        for b in range(node_offsets[i + 1] - n0):
            if gold[n0 + b] == null[n0 + b]:
                continue
            for a in range(b):
                if gold[n0 + a] == null[n0 + a]:
                    continue
                e = _edge_joining(k, i, a, b)
                if e < 0:
                    continue
                if rows is not None:
                    r = rows.start[i] + c
                    u, v = factors.edge_nodes(k, i, e)
                    rows.u[r], rows.v[r], rows.edge[r] = u, v, e
                c += 1
        counts[i] = c


@njit(cache=CACHE)
def check_inactive_edges(k, layout, rows, sets):
    """Lazy edges, a restored state: the first example (−1: none) with an inactive edge that
    cannot stand at the fixed table: its gold pair has no null state, or its nodes' masses
    off the null state add up to more than 1."""
    active = np.full(max(layout.max_edges, 1), -1, dtype=np.int64)
    for i in range(len(layout.node_offsets) - 1):
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            active[rows.edge[r]] = i
        n0 = layout.node_offsets[i]
        for b in range(layout.node_offsets[i + 1] - n0):
            gold_b = sets.act[n0 + b, 0] != layout.null[n0 + b]
            mb = _mass(layout, sets, n0 + b)
            if not gold_b and mb <= 0.0:
                continue
            for a in range(b):
                gold_a = sets.act[n0 + a, 0] != layout.null[n0 + a]
                heavy = mb + _mass(layout, sets, n0 + a) > 1.0 + AT_BOUND
                if not (gold_a and gold_b) and not heavy:
                    continue
                e = _edge_joining(k, i, a, b)
                if e >= 0 and active[e] != i:
                    return i
    return -1


@njit(cache=CACHE)
def check_rows(k, layout, rows, edge_counts):
    """Lazy edges: the first row (of a restored state) whose edge or nodes are wrong or
    repeated within its example, −1 if none."""
    seen = np.full(max(layout.max_edges, 1), -1, dtype=np.int64)
    for i in range(len(rows.start)):
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            e = rows.edge[r]
            if e < 0 or e >= edge_counts[i] or seen[e] == i:
                return r
            seen[e] = i
            u, v = factors.edge_nodes(k, i, e)
            if u != rows.u[r] or v != rows.v[r]:
                return r
    return -1


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


@njit(cache=CACHE)
def edge_curvature(k, layout):
    """Mean over the nodes of ``Σ_e ‖φ_e(g_u, g_v) − φ_e(a, g_v)‖² / 2`` over the node's
    edges e (``a = g_u + 1``: the node's next state, as :func:`penalty_figures`' ψ̄²), for κ."""
    sq, m = 0.0, 0
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for j in range(layout.node_offsets[i + 1] - n0):
            m += layout.n_states[n0 + j] >= 2
        for e in range(factors.factor_counts(k, i)[1]):
            u, v = factors.edge_nodes(k, i, e)
            S_u, g_u = factors.node_info(k, i, u)
            S_v, g_v = factors.node_info(k, i, v)
            if S_u >= 2:
                sq += 0.5 * factors.edge_sq_distance(k, i, e, g_u, g_v, (g_u + 1) % S_u, g_v)
            if S_v >= 2:
                sq += 0.5 * factors.edge_sq_distance(k, i, e, g_u, g_v, g_u, (g_v + 1) % S_v)
    return sq / max(m, 1)


# -- the pass ----------------------------------------------------------------------------------
@njit(cache=CACHE)
def factor_pass(k, layout, rows, weights, sets, pairs, settings, order, first, counters):
    """Block steps on every factor of the examples ``order[first:]``, each followed by the
    example's multiplier step (and shrinking). Returns ``(position, need, rows)``: need ≠ 0
    when the example at ``position`` needs more slots, or pairs, than there is room for, or
    more rows (at least ``rows``) than its room holds and than the pool has free past its
    last room (:func:`_move_room`); nothing of it was done."""
    S, cap = layout.max_states, sets.act.shape[1]
    most = max(rows.room.max(), 1) if len(rows.room) else 1
    if layout.lazy:  # rooms may grow within the call: an example's edges at most
        most = max(most, layout.max_edges)
    lazy_nodes = layout.max_nodes if layout.lazy else 0
    visit = Visit(
        np.zeros(layout.max_nodes + 1, dtype=np.int64),
        np.zeros(2 * most, dtype=np.int64),
        np.zeros(layout.max_nodes, dtype=np.int64),
        np.zeros(S),
        np.zeros(S),
        np.zeros(cap),
        np.zeros(cap),
        np.full(layout.max_edges if layout.lazy else 0, -1, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        np.zeros((lazy_nodes, S if layout.lazy else 0)),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros((lazy_nodes, S if layout.lazy else 0), dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes, dtype=np.int64),
        np.zeros(lazy_nodes),
        np.zeros(S if layout.lazy else 0),
        np.zeros(S if layout.lazy else 0, dtype=np.int64),
        np.zeros(lazy_nodes),
        np.zeros((lazy_nodes, 2), dtype=np.int64),
        np.zeros(cap, dtype=np.int64),
        np.zeros(cap),
        np.zeros(cap, dtype=np.int64),
        np.zeros((4, cap)),
    )
    factors.prepare_weights(k, weights.w)
    # node features of different states orthogonal (the first node's norm says so): exact
    # node blocks, each falling back to pairwise steps where a norm is −1
    exact = False
    for i0 in range(len(layout.node_offsets) - 1):
        if layout.node_offsets[i0 + 1] > layout.node_offsets[i0]:
            exact = factors.node_sq_norm(k, i0, 0, 0) >= 0.0
            break
    factor_order = np.zeros(layout.max_nodes + most, dtype=np.int64)
    for pos in range(first, len(order)):
        i = order[pos]
        if layout.lazy and pos > first and (pos - first) % REFRESH == 0:
            factors.prepare_weights(k, weights.w)  # the model's bounds tight again
        _adjacency(layout, rows, visit, i)
        # only a factor visit's first step (the oracle's) may add a state or a pair
        need = _room_needed(layout, rows, visit, sets, pairs, settings.sweeps, i)
        if need:
            _forget_rows(layout, rows, visit, i)
            return pos, need, 0
        if layout.lazy:
            want = _rows_wanted(layout, rows, sets, visit, i)
            if want > rows.room[i]:
                _forget_rows(layout, rows, visit, i)
                if not _move_room(rows, sets, pairs, i, want):
                    return pos, NEED_ROWS, want
                _adjacency(layout, rows, visit, i)
            if _activate_edges(k, layout, rows, weights, sets, pairs, settings, visit, i, counters):
                _adjacency(layout, rows, visit, i)
        n0 = layout.node_offsets[i]
        nodes = layout.node_offsets[i + 1] - n0
        for sweep in range(settings.sweeps):
            n_f = _shuffled_factors(factor_order, nodes, rows.count[i], settings.seed + sweep, i)
            for f in range(n_f):
                j = factor_order[f]
                if j >= nodes:  # an edge
                    r = rows.start[i] + j - nodes
                    _edge_step(
                        k, layout, rows, weights, sets, pairs, settings, visit, i, r, counters
                    )
                elif layout.lazy:
                    if not visit.skip[j]:
                        _node_step(k, layout, weights, sets, settings, visit, i, j, counters)
                elif not (
                    exact and _node_block(k, layout, weights, sets, settings, visit, i, j, counters)
                ):
                    _node_step(k, layout, weights, sets, settings, visit, i, j, counters)
        _multipliers(layout, rows, sets, i, settings.eta)
        _drop_empty_pairs(rows, pairs, i)
        if settings.shrink_after > 0:
            _shrink(layout, rows, visit, sets, pairs, i, settings.shrink_after, counters)
        if layout.lazy:
            _deactivate(layout, rows, sets, pairs, visit, i)
        _forget_rows(layout, rows, visit, i)
    return len(order), 0, 0


@njit(cache=CACHE, **NO_REFCOUNT)
def _move_room(rows, sets, pairs, i, want):
    """Example i's room moves to the end of the pool, ``max(2 room, want)`` rows, where the
    pool has them free past its last room (the solver grows the pool otherwise): its rows
    are copied, the rows it leaves stay behind unused. Returns whether it moved."""
    end = 0
    for x in range(len(rows.start)):
        end = max(end, rows.start[x] + rows.room[x])
    old = rows.room[i]
    new = max(2 * old, want)
    if end + new > len(rows.u):
        return False
    for t in range(old):
        a, b = rows.start[i] + t, end + t
        rows.u[b], rows.v[b], rows.edge[b] = rows.u[a], rows.v[a], rows.edge[a]
        pairs.n_pair[b] = pairs.n_pair[a]
        for p in range(pairs.q.shape[1]):
            pairs.pair_a[b, p], pairs.pair_b[b, p] = pairs.pair_a[a, p], pairs.pair_b[a, p]
            pairs.q[b, p] = pairs.q[a, p]
        for side in range(2):
            for s in range(sets.lam.shape[1]):
                sets.lam[2 * b + side, s] = sets.lam[2 * a + side, s]
                sets.msum[2 * b + side, s] = sets.msum[2 * a + side, s]
    rows.start[i], rows.room[i] = end, new
    return True


@njit(cache=CACHE, inline="always")
def _shuffled_factors(out, nodes, edges, seed, i):
    """A random permutation of example i's factors into ``out`` (node j as j, the edge of
    its t-th active row as ``nodes + t``; Fisher-Yates keyed by (seed, i)); returns their
    number."""
    n = nodes + edges
    for f in range(n):
        out[f] = f
    for f in range(n - 1, 0, -1):
        x = random_below(seed, i, f, f + 1)
        out[f], out[x] = out[x], out[f]
    return n


@njit(cache=CACHE, **NO_REFCOUNT)
def _adjacency(layout, rows, visit, i):
    """Example i's active row ends by node, in row order (lazy: and ``row_of``)."""
    nodes = layout.node_offsets[i + 1] - layout.node_offsets[i]
    ptr, fill = visit.adj_ptr, visit.fill
    for j in range(nodes + 1):
        ptr[j] = 0
    r0, r1 = rows.start[i], rows.start[i] + rows.count[i]
    for r in range(r0, r1):
        ptr[rows.u[r] + 1] += 1
        ptr[rows.v[r] + 1] += 1
    for j in range(nodes):
        ptr[j + 1] += ptr[j]
        fill[j] = ptr[j]
    for r in range(r0, r1):
        visit.adj_end[fill[rows.u[r]]] = 2 * r
        fill[rows.u[r]] += 1
        visit.adj_end[fill[rows.v[r]]] = 2 * r + 1
        fill[rows.v[r]] += 1
        if layout.lazy:
            visit.row_of[rows.edge[r]] = r


@njit(cache=CACHE, **NO_REFCOUNT)
def _forget_rows(layout, rows, visit, i):
    if layout.lazy:
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            visit.row_of[rows.edge[r]] = -1


@njit(cache=CACHE, **NO_REFCOUNT)
def _room_needed(layout, rows, visit, sets, pairs, steps, i):
    """Whether example i's visit may add more states or pairs than there is room for."""
    need = 0
    cap, pcap = sets.act.shape[1], pairs.q.shape[1]
    n0 = layout.node_offsets[i]
    nodes = layout.node_offsets[i + 1] - n0
    for j in range(nodes if cap < layout.max_states else 0):  # (else every state fits)
        g = n0 + j
        deg = visit.adj_ptr[j + 1] - visit.adj_ptr[j]
        if layout.lazy:  # an edge to every node may become active, and the null state
            grow = sets.n_act[g] + 1 + steps * (1 + deg + nodes)
        else:
            grow = sets.n_act[g] + steps * (1 + deg)
        if min(grow, layout.n_states[g]) > cap:
            need |= NEED_SLOTS
    if pcap >= layout.max_states**2:  # every pair fits
        return need
    for r in range(rows.start[i], rows.start[i] + rows.count[i]):
        most = layout.n_states[n0 + rows.u[r]] * layout.n_states[n0 + rows.v[r]]
        if min(pairs.n_pair[r] + steps, most) > pcap:
            need |= NEED_PAIRS
    if layout.lazy and min(2 * cap - 1 + steps, layout.max_states**2) > pcap:
        need |= NEED_PAIRS  # an edge activated at T holds up to n_u + n_v − 1 pairs
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
    if len(sets.sq_norm):
        sets.sq_norm[g, n] = -1.0
    sets.n_act[g] = n + 1
    counters[2] += 1
    return n


@njit(cache=CACHE, inline="always")
def _mass(layout, sets, g):
    """``m_g = 1 − q_g(null)``."""
    null = layout.null[g]
    for s in range(sets.n_act[g]):
        if sets.act[g, s] == null:
            return 1.0 - sets.q[g, s]
    return 1.0


@njit(cache=CACHE, inline="always")
def _mark_heavy(visit, j):
    if not visit.is_heavy[j]:
        visit.is_heavy[j] = 1
        visit.heavy[visit.n_heavy[0]] = j
        visit.n_heavy[0] += 1


@njit(cache=CACHE, **NO_REFCOUNT)
def _node_block(k, layout, weights, sets, settings, visit, i, j, counters):
    """Node j of example i minimized exactly over its active states and the oracle's, where
    the model's node features of different states are orthogonal (``node_sq_norm``): the
    block's Hessian is then diagonal, ``d_s = C² σ ‖φ_j(a_s)‖² + ρ·(incident edges)``, and
    its minimizer ``q_s = max(0, q_s − (g_s + τ) / d_s)``, τ setting the sum to 1. Returns
    False where a norm is −1 (not orthogonal) or a curvature is not positive (nothing
    moved)."""
    g = layout.node_offsets[i] + j
    C, rho, w = settings.C, settings.rho, weights.w
    mu, grad, curv, key = visit.mu_u, visit.smu_u, visit.smu_v, visit.mu_v
    p0, p1 = visit.adj_ptr[j], visit.adj_ptr[j + 1]
    n = sets.n_act[g]
    _node_messages(sets, visit, g, p0, p1, rho, grad)
    for s in range(n):
        mu[sets.act[g, s]] = grad[s]
    b, gb = factors.node_oracle(k, i, w, j, C, sets.act[g], n, mu)
    counters[0] += 1
    factors.node_values(k, i, w, j, sets.act[g], n, grad)  # the messages are in mu
    low = np.inf
    for s in range(n):
        a = sets.act[g, s]
        # the oracle's own value at the same w where it is an active state
        grad[s] = gb if a == b else -C * grad[s] - mu[a]
        mu[a] = 0.0
        low = min(low, grad[s])
    if gb < low and low - gb > TIE * (abs(low) + abs(gb)):  # the oracle's state enters
        s = _slot(sets, g, b, counters)
        grad[s] = gb
        n += 1
    # the breakpoints key_s = d_s q_s − g_s; a state is in the minimizer's support iff
    # key_s > τ, and τ ≥ key_s − d_s for every s (no q ends above 1), so the states with
    # mass bound τ from below and only the states above that bound need their d_s
    ridge, floor = rho * (p1 - p0), -np.inf
    listed = 0
    for s in range(n):
        curv[s] = -1.0
        key[s] = -grad[s]
        if sets.q[g, s] > 0.0:
            visit.slots[listed] = s
            listed += 1
    if not _curvatures(k, settings, sets, visit, i, j, g, ridge, listed):
        return _clear(key, n)
    for r in range(listed):
        s = visit.slots[r]
        key[s] += curv[s] * sets.q[g, s]
        floor = max(floor, key[s] - curv[s])
    listed = 0
    for s in range(n):  # (>=: the state setting the floor stays through rounding)
        if key[s] >= floor and curv[s] < 0.0:
            visit.slots[listed] = s
            listed += 1
    if not _curvatures(k, settings, sets, visit, i, j, g, ridge, listed):
        return _clear(key, n)
    # the candidates, packed: key, q − g/d and 1/d
    m, support, packed = 0, visit.moved, visit.packed
    for s in range(n):
        if key[s] >= floor:
            support[m] = s
            packed[0, m] = key[s]
            packed[1, m] = sets.q[g, s] - grad[s] / curv[s]
            packed[2, m] = 1.0 / curv[s]
            m += 1
    # τ by Michelot's fixed point, weighted: the candidates' τ = (Σ (q − g/d) − 1) / Σ 1/d,
    # drop those at or below it, until none drops (a candidate set holding the support has
    # τ_C ≤ τ*, equal once none drops)
    while True:
        total, inverse = 0.0, 0.0
        for r in range(m):
            total += packed[1, r]
            inverse += packed[2, r]
        tau = (total - 1.0) / inverse
        kept = 0
        for r in range(m):
            if packed[0, r] > tau:
                support[kept] = support[r]
                packed[0, kept] = packed[0, r]
                packed[1, kept] = packed[1, r]
                packed[2, kept] = packed[2, r]
                kept += 1
        if kept == m or kept == 0:  # (0 only by rounding: keep the last set)
            break
        m = kept
    for r in range(m):
        key[support[r]] = -np.inf  # in the minimizer's support
    moved = 0
    for s in range(n):
        new = max(0.0, sets.q[g, s] - (grad[s] + tau) / curv[s]) if key[s] == -np.inf else 0.0
        key[s] = 0.0  # dense messages elsewhere: zero again
        delta = new - sets.q[g, s]
        if delta == 0.0 or (new > 0.0 and abs(delta) <= 1e-15):
            continue
        sets.q[g, s] = new
        visit.moved[moved] = sets.act[g, s]
        visit.moved_by[moved] = -C * delta
        moved += 1
    factors.add_nodes(k, i, j, visit.moved, visit.moved_by, moved, settings.scale, w)
    if weights.avg_weight != 0.0:
        factors.add_nodes(
            k, i, j, visit.moved, visit.moved_by, moved, weights.avg_weight, weights.R
        )
    return True


@njit(cache=CACHE, inline="always")
def _curvatures(k, settings, sets, visit, i, j, g, ridge, n):
    """``d_s = C² σ ‖φ_j(a_s)‖² + ridge`` into the node block's slots ``visit.slots[:n]``;
    False where a norm is −1 (not orthogonal) or a d_s is not positive. The norms of the
    slots' states are asked of the model once and kept (``ActiveSets.sq_norm``).
    Overwrites ``visit.moved[:n]`` and ``visit.packed[3, :n]``."""
    if n == 0:
        return True
    keep = len(sets.sq_norm) > 0
    states, norms = visit.moved, visit.packed[3]
    m = 0
    for r in range(n):
        if not keep or sets.sq_norm[g, visit.slots[r]] < 0.0:
            states[m] = sets.act[g, visit.slots[r]]
            m += 1
    if m:
        factors.node_sq_norms(k, i, j, states, m, norms)
    t = 0
    for r in range(n):
        s = visit.slots[r]
        if keep and sets.sq_norm[g, s] >= 0.0:
            norm = sets.sq_norm[g, s]
        else:
            norm = norms[t]
            t += 1
            if keep:
                sets.sq_norm[g, s] = norm
        visit.smu_v[s] = settings.C * settings.C * settings.scale * norm + ridge
        if not (norm >= 0.0 and visit.smu_v[s] > 0.0):
            return False
    return True


@njit(cache=CACHE, inline="always")
def _node_messages(sets, visit, g, p0, p1, rho, out):
    """``out[s] = Σ_e λ_e(s) + ρ (M_e q_e(s) − q_g(s))`` over the active row ends ``p0 … p1``
    of node g: what the pair factors add to the gradient of its slot s."""
    for s in range(sets.n_act[g]):
        m = 0.0
        for p in range(p0, p1):
            end = visit.adj_end[p]
            m += sets.lam[end, s] + rho * (sets.msum[end, s] - sets.q[g, s])
        out[s] = m


@njit(cache=CACHE, inline="always")
def _clear(x, n):
    for s in range(n):
        x[s] = 0.0
    return False


@njit(cache=CACHE, **NO_REFCOUNT)
def _node_step(k, layout, weights, sets, settings, visit, i, j, counters):
    """Up to ``steps`` pairwise steps on node j of example i: the first toward the oracle's
    state, the others between the best and the worst state of the active set (no oracle)."""
    g = layout.node_offsets[i] + j
    C, rho, w = settings.C, settings.rho, weights.w
    mu, slot_mu = visit.mu_u, visit.smu_u
    p0, p1 = visit.adj_ptr[j], visit.adj_ptr[j + 1]
    for step in range(settings.steps):
        n = sets.n_act[g]
        _node_messages(sets, visit, g, p0, p1, rho, slot_mu)
        sa, ga = -1, -np.inf
        if step == 0:
            for s in range(n):
                mu[sets.act[g, s]] = slot_mu[s]
            b, gb = factors.node_oracle(k, i, w, j, C, sets.act[g], n, mu)
            counters[0] += 1
            for s in range(n):
                mu[sets.act[g, s]] = 0.0
                if sets.q[g, s] > 0.0:
                    a = sets.act[g, s]
                    if a == b:  # the oracle's own value at the same w: no second score
                        gs = gb
                    else:
                        gs = -C * (
                            factors.node_score(k, i, w, j, a) + factors.node_loss(k, i, j, a)
                        )
                        gs -= slot_mu[s]
                    if gs > ga:
                        sa, ga = s, gs
        else:
            sb, gb = -1, np.inf
            for s in range(n):
                a = sets.act[g, s]
                gs = -C * (factors.node_score(k, i, w, j, a) + factors.node_loss(k, i, j, a))
                gs -= slot_mu[s]
                if gs < gb:
                    sb, gb = s, gs
                if sets.q[g, s] > 0.0 and gs > ga:
                    sa, ga = s, gs
            b = sets.act[g, sb]
        if sa < 0 or ga - gb <= TIE * (abs(ga) + abs(gb)):
            return
        sb = _slot(sets, g, b, counters)
        if sb == sa:
            return
        a = sets.act[g, sa]
        curv = C * C * settings.scale * factors.node_sq_distance(k, i, j, a, b)
        curv += 2.0 * rho * (p1 - p0)
        gamma = sets.q[g, sa] if curv <= 0.0 else min(sets.q[g, sa], (ga - gb) / curv)
        if layout.lazy and a == layout.null[g]:  # the mass off null grows: the bound
            bound = _mass_room(k, layout, sets, visit, i, j)
            if gamma >= bound:
                sets.blocked[g] = 1
                gamma = bound
                if gamma <= 0.0:
                    return
            _mark_heavy(visit, j)
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


@njit(cache=CACHE, **NO_REFCOUNT)
def _mass_room(k, layout, sets, visit, i, j):
    """``q_j(null) − max m_v`` over j's inactive edges to nodes v with mass: how far j's
    mass may grow with those edges at T; ∞ without such edges. (``q_j(null)``, not
    ``1 − m_j``: a step that empties the null state is not cut short by rounding, which
    would leave it a sliver of mass that every later step takes as its away state.)"""
    n0 = layout.node_offsets[i]
    most = -1.0
    for t in range(visit.n_heavy[0]):
        if _heavy_edge(k, visit, i, j, t) >= 0:
            most = max(most, _mass(layout, sets, n0 + visit.heavy[t]))
    if most < 0.0:
        return np.inf
    return _q_of(sets, n0 + j, layout.null[n0 + j]) - most


@njit(cache=CACHE, inline="always")
def _heavy_edge(k, visit, i, j, t):
    """The inactive edge between node j and the t-th node with mass (−1: none, or j)."""
    v = visit.heavy[t]
    if v == j:
        return -1
    e = _edge_joining(k, i, j, v)
    return e if 0 <= e < len(visit.row_of) and visit.row_of[e] < 0 else -1


@njit(cache=CACHE, **NO_REFCOUNT)
def _rows_wanted(layout, rows, sets, visit, i):
    """The rows example i's visit may fill: its active edges, those its blocked nodes
    wait for and the greedy choice (at most one per node with mass, which it lists)."""
    n0 = layout.node_offsets[i]
    nodes = layout.node_offsets[i + 1] - n0
    visit.n_heavy[0] = 0
    for j in range(nodes):
        visit.is_heavy[j] = 0
    for j in range(nodes):
        if _mass(layout, sets, n0 + j) > 0.0:
            _mark_heavy(visit, j)
    want = rows.count[i] + max(visit.n_heavy[0], 1)
    for j in range(nodes):
        if sets.blocked[n0 + j]:
            want += visit.n_heavy[0]
    return want


@njit(cache=CACHE, **NO_REFCOUNT)
def _activate_edges(k, layout, rows, weights, sets, pairs, settings, visit, i, counters):
    """The inactive edges at their bound next to a node whose step they stopped, then the
    greedy choice (:func:`_best_inactive`), become active. Returns how many did."""
    n0 = layout.node_offsets[i]
    before = rows.count[i]
    for j in range(layout.node_offsets[i + 1] - n0):
        if not sets.blocked[n0 + j]:
            continue
        sets.blocked[n0 + j] = 0
        mj = _mass(layout, sets, n0 + j)
        for t in range(visit.n_heavy[0]):
            e = _heavy_edge(k, visit, i, j, t)
            if e >= 0 and mj + _mass(layout, sets, n0 + visit.heavy[t]) >= 1.0 - AT_BOUND:
                _activate(k, layout, rows, sets, pairs, visit, i, e, counters)
    _node_gains(k, layout, weights, sets, settings, visit, i)
    for t in range(_best_inactive(k, layout, weights, sets, settings, visit, i)):
        _activate(k, layout, rows, sets, pairs, visit, i, visit.pick[t], counters)
    return rows.count[i] - before


@njit(cache=CACHE, **NO_REFCOUNT)
def _activate(k, layout, rows, sets, pairs, visit, i, e, counters):
    """Edge e of example i joins its active rows at T with λ = 0 (nothing moves)."""
    n0 = layout.node_offsets[i]
    u, v = factors.edge_nodes(k, i, e)
    gu, gv = n0 + u, n0 + v
    r = rows.start[i] + rows.count[i]
    rows.count[i] += 1
    rows.u[r], rows.v[r], rows.edge[r] = u, v, e
    visit.row_of[e] = r
    zu = _slot(sets, gu, layout.null[gu], counters)
    zv = _slot(sets, gv, layout.null[gv], counters)
    for s in range(sets.act.shape[1]):
        sets.lam[2 * r, s] = 0.0
        sets.lam[2 * r + 1, s] = 0.0
        sets.msum[2 * r, s] = sets.q[gu, s]
        sets.msum[2 * r + 1, s] = sets.q[gv, s]
    for p in range(pairs.q.shape[1]):
        pairs.q[r, p] = 0.0
    n = 0
    for x in range(sets.n_act[gu]):
        if x != zu and sets.q[gu, x] > 0.0:
            pairs.pair_a[r, n], pairs.pair_b[r, n], pairs.q[r, n] = x, zv, sets.q[gu, x]
            n += 1
    for y in range(sets.n_act[gv]):
        if y != zv and sets.q[gv, y] > 0.0:
            pairs.pair_a[r, n], pairs.pair_b[r, n], pairs.q[r, n] = zu, y, sets.q[gv, y]
            n += 1
    rest = sets.q[gu, zu] + sets.q[gv, zv] - 1.0
    if rest > 0.0 or n == 0:
        pairs.pair_a[r, n], pairs.pair_b[r, n], pairs.q[r, n] = zu, zv, max(rest, 0.0)
        n += 1
    pairs.n_pair[r] = n
    counters[4] += 1
    visit.skip[u] = 0
    visit.skip[v] = 0


@njit(cache=CACHE, inline="always")
def _at_null(layout, sets, g):
    """Whether node g has no mass on its states other than null."""
    for s in range(sets.n_act[g]):
        if sets.q[g, s] > 0.0 and sets.act[g, s] != layout.null[g]:
            return False
    return True


@njit(cache=CACHE, **NO_REFCOUNT)
def _deactivate(layout, rows, sets, pairs, visit, i):
    """Example i's active edges that carry nothing go back to T (their multipliers are
    forgotten): not gold edges, no mass on a pair of non-null states, and a node with no
    mass off null (so ``m_u + m_v <= 1``: T is a distribution, and the edge's marginal,
    consistent or not, adds nothing to w). The example's last row takes the place of one
    that leaves (the adjacency is stale afterwards)."""
    n0, null = layout.node_offsets[i], layout.null
    r = rows.start[i]
    while r < rows.start[i] + rows.count[i]:
        gu, gv = n0 + rows.u[r], n0 + rows.v[r]
        keep = sets.act[gu, 0] != null[gu] and sets.act[gv, 0] != null[gv]
        keep = keep or not (_at_null(layout, sets, gu) or _at_null(layout, sets, gv))
        for p in range(pairs.n_pair[r]):
            a, b = sets.act[gu, pairs.pair_a[r, p]], sets.act[gv, pairs.pair_b[r, p]]
            keep = keep or (pairs.q[r, p] > 0.0 and a != null[gu] and b != null[gv])
        for s in range(sets.lam.shape[1]):
            keep = keep or sets.lam[2 * r, s] != 0.0 or sets.lam[2 * r + 1, s] != 0.0
        if keep:
            r += 1
            continue
        last = rows.start[i] + rows.count[i] - 1
        visit.row_of[rows.edge[r]] = -1
        rows.u[r], rows.v[r], rows.edge[r] = rows.u[last], rows.v[last], rows.edge[last]
        for end in range(2):
            for s in range(sets.lam.shape[1]):
                sets.lam[2 * r + end, s] = sets.lam[2 * last + end, s]
                sets.msum[2 * r + end, s] = sets.msum[2 * last + end, s]
                sets.lam[2 * last + end, s] = 0.0
                sets.msum[2 * last + end, s] = 0.0
        for p in range(pairs.q.shape[1]):
            pairs.pair_a[r, p], pairs.pair_b[r, p] = pairs.pair_a[last, p], pairs.pair_b[last, p]
            pairs.q[r, p] = pairs.q[last, p]
            pairs.q[last, p] = 0.0
        pairs.n_pair[r] = pairs.n_pair[last]
        pairs.n_pair[last] = 0
        rows.count[i] -= 1


@njit(cache=CACHE, **NO_REFCOUNT)
def _node_gains(k, layout, weights, sets, settings, visit, i):
    """``gain[j, a] = ∂_j(null) − ∂_j(a)`` for every node of example i, with
    ``∂_j(a) = −C (θ_j(a) + δ_j(a)) − Σ μ_ej(a)`` over its active edges."""
    n0 = layout.node_offsets[i]
    C, rho = settings.C, settings.rho
    factors.node_scores(k, i, weights.w, visit.gain)
    for j in range(layout.node_offsets[i + 1] - n0):
        g = n0 + j
        for a in range(layout.n_states[g]):
            visit.gain[j, a] = -C * (visit.gain[j, a] + factors.node_loss(k, i, j, a))
        for s in range(sets.n_act[g]):
            for p in range(visit.adj_ptr[j], visit.adj_ptr[j + 1]):
                end = visit.adj_end[p]
                m = sets.lam[end, s] + rho * (sets.msum[end, s] - sets.q[g, s])
                visit.gain[j, sets.act[g, s]] -= m
        base = visit.gain[j, layout.null[g]]
        top = -np.inf
        for a in range(layout.n_states[g]):
            visit.gain[j, a] = base - visit.gain[j, a]
            if a != layout.null[g]:
                top = max(top, visit.gain[j, a])
        # at null with nothing to gain (its step would find no better state), or with no
        # active edge: outside the example's active nodes until the greedy choice takes it
        lone = visit.adj_ptr[j + 1] == visit.adj_ptr[j]
        visit.skip[j] = _mass(layout, sets, g) <= 0.0 and (top <= 0.0 or lone)


@njit(cache=CACHE, inline="always")
def _q_of(sets, g, a):
    for s in range(sets.n_act[g]):
        if sets.act[g, s] == a:
            return sets.q[g, s]
    return 0.0


@njit(cache=CACHE, **NO_REFCOUNT)
def _list_mass_states(layout, sets, visit, i):
    """Every node with mass's states with mass off null, into ``visit.mass_states``, and
    its mass."""
    n0, null = layout.node_offsets[i], layout.null
    for t in range(visit.n_heavy[0]):
        g, n = n0 + visit.heavy[t], 0
        visit.heavy_mass[t] = _mass(layout, sets, g)
        for s in range(sets.n_act[g]):
            if sets.act[g, s] != null[g] and sets.q[g, s] > 0.0:
                visit.mass_states[t, n] = sets.act[g, s]
                n += 1
        visit.n_mass_states[t] = n


@njit(cache=CACHE, **NO_REFCOUNT)
def _edges_to_heavy(k, visit, i, j):
    """Node j's inactive edges to the nodes with mass, into ``visit.to_heavy`` (−1: none)
    with their orientation; returns how many there are."""
    n = 0
    for t in range(visit.n_heavy[0]):
        e = _heavy_edge(k, visit, i, j, t)
        visit.to_heavy[t] = e
        if e >= 0:
            visit.from_first[t] = factors.edge_nodes(k, i, e)[0] == j
            n += 1
    return n


@njit(cache=CACHE, inline="always")
def _bundle(k, settings, w, visit, i, a):
    """The node of :func:`_edges_to_heavy` at state a: its inactive edges to nodes with mass
    whose term ``C max θ_e`` (the max over the other node's states with mass) is positive,
    into ``visit.pick``; returns their number."""
    m = 0
    for t in range(visit.n_heavy[0]):
        e = visit.to_heavy[t]
        if e < 0:
            continue
        top = -np.inf
        for s in range(visit.n_mass_states[t]):
            b = visit.mass_states[t, s]
            if visit.from_first[t]:
                top = max(top, factors.edge_score(k, i, w, e, a, b))
            else:
                top = max(top, factors.edge_score(k, i, w, e, b, a))
        if settings.C * top > 0.0:
            visit.pick[m] = e
            m += 1
    return m


@njit(cache=CACHE, **NO_REFCOUNT)
def _best_inactive(k, layout, weights, sets, settings, visit, i):
    """The inactive edges of example i whose activation gains most to first order (module
    docstring, "Lazy edges"), into ``visit.pick``; returns their number (0: no gain): a
    node with its edges to nodes with mass, or one edge (the first best in node order).

    The nodes with mass go first, for a floor (their choices kept for the node loop): a
    node without mass gains at most
    ``max_a h_j(a) + C B_j + max(0, max h_u)`` (B_j the model's ``edge_gain_bound``, u over
    the nodes with mass below their bound), and is skipped where that is below the floor
    (it cannot be the best)."""
    n0 = layout.node_offsets[i]
    C, w, null = settings.C, weights.w, layout.null
    best, node, state, edge = GAIN_FLOOR * C, -1, -1, -1
    _list_mass_states(layout, sets, visit, i)
    floor, lift = best, 0.0
    for t in range(visit.n_heavy[0]):
        u = visit.heavy[t]
        gain, a, e = _node_candidates(k, layout, sets, settings, w, visit, i, u)
        visit.heavy_gain[t], visit.heavy_choice[t, 0], visit.heavy_choice[t, 1] = gain, a, e
        floor = max(floor, gain)
        if visit.heavy_mass[t] < 1.0 - AT_BOUND:
            for b in range(layout.n_states[n0 + u]):
                if b != null[n0 + u]:
                    lift = max(lift, visit.gain[u, b])
    for j in range(layout.node_offsets[i + 1] - n0):
        if visit.is_heavy[j]:  # scored for the floor already
            t = _heavy_index(visit, j)
            gain, a, e = visit.heavy_gain[t], visit.heavy_choice[t, 0], visit.heavy_choice[t, 1]
        else:
            bound = factors.edge_gain_bound(k, i, w, j)
            if bound < np.inf:
                top = -np.inf
                for a in range(layout.n_states[n0 + j]):
                    if a != null[n0 + j]:
                        top = max(top, visit.gain[j, a])
                high = top + C * bound + lift
                if high + BOUND_SLACK * (abs(top) + C * bound + lift) < max(best, floor):
                    continue
            gain, a, e = _node_candidates(k, layout, sets, settings, w, visit, i, j)
        if gain > best:
            best, node, state, edge = gain, j if e < 0 else -1, a, e
    # an edge between two nodes without mass: the model's search (its answer checked)
    for j in range(layout.node_offsets[i + 1] - n0):
        visit.outside[j] = 1 - visit.is_heavy[j]
    e = factors.best_inactive_edge(k, i, w, C, visit.gain, visit.outside, visit.row_of, best)[0]
    if 0 <= e < min(factors.factor_counts(k, i)[1], len(visit.row_of)) and visit.row_of[e] < 0:
        gain = _pair_gain(k, layout, sets, w, C, visit, i, e, best)
        if gain > best:
            best, node, edge = gain, -1, e
    if node >= 0:
        visit.skip[node] = 0  # alone (no edge gains): it steps
        _edges_to_heavy(k, visit, i, node)
        return _bundle(k, settings, w, visit, i, state)
    if edge >= 0:
        visit.pick[0] = edge
        return 1
    return 0


@njit(cache=CACHE, inline="always")
def _heavy_index(visit, j):
    """The t with ``visit.heavy[t] == j`` (j a node with mass)."""
    for t in range(visit.n_heavy[0]):
        if visit.heavy[t] == j:
            return t
    return -1


@njit(cache=CACHE, inline="always")
def _node_candidates(k, layout, sets, settings, w, visit, i, j):
    """Node j's best greedy choice, the first best of: j at a non-null state a with its
    inactive edges to the nodes with mass, then one of those edges alone (free next to a
    node with mass below its bound; an edge of two nodes with mass from its larger end).
    Returns (gain, a, −1) or (gain, −1, the edge); gain −∞: none. Each edge is looked up
    and scored once, for both (:func:`_edge_terms`)."""
    n0, C = layout.node_offsets[i], settings.C
    S, heavy = layout.n_states[n0 + j], visit.is_heavy[j]
    total, count = visit.bundle, visit.bundle_count
    for a in range(S):
        total[a] = 0.0
        count[a] = 0
    n, one, one_edge = 0, -np.inf, -1
    for t in range(visit.n_heavy[0]):
        e = _heavy_edge(k, visit, i, j, t)
        if e < 0:
            continue
        n += 1
        free = not heavy and visit.heavy_mass[t] < 1.0 - AT_BOUND
        gain = _edge_terms(k, layout, w, C, visit, i, e, t, j, free)
        if heavy and j > visit.heavy[t]:
            gain = _pair_gain(k, layout, sets, w, C, visit, i, e, -np.inf)
        if gain > one:
            one, one_edge = gain, e
    best, state = -np.inf, -1
    if _mass(layout, sets, n0 + j) < 1.0 and (n > 0 or visit.skip[j]):  # j onto them
        for a in range(S):
            if a != layout.null[n0 + j] and (count[a] > 0 or visit.skip[j]):
                if total[a] + visit.gain[j, a] > best:
                    best, state = total[a] + visit.gain[j, a], a
    if one > best:
        return one, -1, one_edge
    return best, state, -1


@njit(cache=CACHE, inline="always")
def _edge_terms(k, layout, w, C, visit, i, e, t, j, free):
    """Node j's inactive edge e to the t-th node with mass u, scored once: adds its bundle
    term ``max(0, C max θ_e(a, b))`` (b over u's states with mass) to ``visit.bundle[a]``
    for every non-null state a of j (counting the positive ones), and returns, when
    ``free``, the edge's own gain ``max C θ_e(a, b) + h_u(b) + h_j(a)`` over non-null
    states (:func:`_pair_gain` next to a node with mass below its bound; −∞ otherwise)."""
    n0, null = layout.node_offsets[i], layout.null
    gj, gu, u = n0 + j, n0 + visit.heavy[t], visit.heavy[t]
    first = factors.edge_nodes(k, i, e)[0] == j
    # every non-null state of u has mass (a binary node with mass): one score for both
    every = visit.n_mass_states[t] == layout.n_states[gu] - 1
    one = -np.inf
    for a in range(layout.n_states[gj]):
        if a == null[gj]:
            continue
        top = -np.inf
        if free or every:
            for b in range(layout.n_states[gu]):
                if b == null[gu]:
                    continue
                score = (
                    factors.edge_score(k, i, w, e, a, b)
                    if first
                    else factors.edge_score(k, i, w, e, b, a)
                )
                if free:
                    one = max(one, C * score + visit.gain[u, b] + visit.gain[j, a])
                if every or _has_mass(visit, t, b):
                    top = max(top, score)
        else:
            for s in range(visit.n_mass_states[t]):
                b = visit.mass_states[t, s]
                score = (
                    factors.edge_score(k, i, w, e, a, b)
                    if first
                    else factors.edge_score(k, i, w, e, b, a)
                )
                top = max(top, score)
        if C * top > 0.0:
            visit.bundle[a] += C * top
            visit.bundle_count[a] += 1
    return one


@njit(cache=CACHE, inline="always")
def _has_mass(visit, t, b):
    """Whether state b is one of the t-th node with mass's states with mass."""
    for s in range(visit.n_mass_states[t]):
        if visit.mass_states[t, s] == b:
            return True
    return False


@njit(cache=CACHE, inline="always")
def _pair_gain(k, layout, sets, w, C, visit, i, e, best):
    """The best first-order gain of inactive edge e over its non-null pairs (module
    docstring, "Lazy edges"), if above ``best``; else ``best``."""
    n0 = layout.node_offsets[i]
    u, v = factors.edge_nodes(k, i, e)
    gu, gv, null = n0 + u, n0 + v, layout.null
    free = _mass(layout, sets, gu) + _mass(layout, sets, gv) < 1.0 - AT_BOUND
    if not free and not (visit.is_heavy[u] and visit.is_heavy[v]):
        return best
    for a in range(layout.n_states[gu]):
        if a == null[gu]:
            continue
        qa = _q_of(sets, gu, a)
        for b in range(layout.n_states[gv]):
            if b == null[gv]:
                continue
            t = C * factors.edge_score(k, i, w, e, a, b)
            gain = t + visit.gain[u, a] + visit.gain[v, b] if free else -np.inf
            if qa > 0.0 and _q_of(sets, gv, b) > 0.0:
                gain = max(gain, t)
            best = max(best, gain)
    return best


@njit(cache=CACHE, inline="always")
def _end_messages(sets, end, g, rho, mu, slot_mu):
    """The messages of edge end ``end`` (node g), by slot and dense by state."""
    for s in range(sets.n_act[g]):
        m = sets.lam[end, s] + rho * (sets.msum[end, s] - sets.q[g, s])
        slot_mu[s] = m
        mu[sets.act[g, s]] = m


@njit(cache=CACHE, **NO_REFCOUNT)
def _edge_step(k, layout, rows, weights, sets, pairs, settings, visit, i, r, counters):
    """Up to ``steps`` pairwise steps on the edge of row r (example i): the first toward the
    oracle's pair, the others between the best and the worst pair of its support."""
    n0 = layout.node_offsets[i]
    e = rows.edge[r]
    gu, gv = n0 + rows.u[r], n0 + rows.v[r]
    C, rho, w = settings.C, settings.rho, weights.w
    mu_u, mu_v, smu_u, smu_v = visit.mu_u, visit.mu_v, visit.smu_u, visit.smu_v
    # the messages by slot, kept up to date over the steps (μ moves by ρ γ with M q_e)
    _end_messages(sets, 2 * r, gu, rho, mu_u, smu_u)
    _end_messages(sets, 2 * r + 1, gv, rho, mu_v, smu_v)
    for step in range(settings.steps):
        nu, nv = sets.n_act[gu], sets.n_act[gv]
        if step == 0:
            a, b, gb = factors.edge_oracle(
                k, i, w, e, C, sets.act[gu], nu, mu_u, sets.act[gv], nv, mu_v
            )
            counters[1] += 1
            for s in range(nu):
                mu_u[sets.act[gu, s]] = 0.0
            for s in range(nv):
                mu_v[sets.act[gv, s]] = 0.0
        else:
            a, b, gb = -1, -1, np.inf
        pa, ga = -1, -np.inf
        for p in range(pairs.n_pair[r]):
            x, y = pairs.pair_a[r, p], pairs.pair_b[r, p]
            s = factors.edge_score(k, i, w, e, sets.act[gu, x], sets.act[gv, y])
            gp = -C * s + smu_u[x] + smu_v[y]
            if step > 0 and gp < gb:  # inside the support: its best pair
                a, b, gb = sets.act[gu, x], sets.act[gv, y], gp
            if pairs.q[r, p] > 0.0 and gp > ga:
                pa, ga = p, gp
        if pa < 0 or ga - gb <= TIE * (abs(ga) + abs(gb)):
            return
        su, sv = _slot(sets, gu, a, counters), _slot(sets, gv, b, counters)
        smu_u[su] = sets.lam[2 * r, su] + rho * (sets.msum[2 * r, su] - sets.q[gu, su])
        smu_v[sv] = sets.lam[2 * r + 1, sv] + rho * (sets.msum[2 * r + 1, sv] - sets.q[gv, sv])
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
        smu_u[xa] -= rho * gamma
        smu_u[su] += rho * gamma
        smu_v[ya] -= rho * gamma
        smu_v[sv] += rho * gamma
        c = C * gamma
        factors.add_edge(k, i, e, a2, b2, c * settings.scale, w)
        factors.add_edge(k, i, e, a, b, -c * settings.scale, w)
        if weights.avg_weight != 0.0:
            factors.add_edge(k, i, e, a2, b2, c * weights.avg_weight, weights.R)
            factors.add_edge(k, i, e, a, b, -c * weights.avg_weight, weights.R)


@njit(cache=CACHE, inline="always")
def _pair(pairs, r, su, sv):
    """The support position of the slot pair (su, sv) of row r, added (no mass) if new."""
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
def _multipliers(layout, rows, sets, i, eta):
    """``λ ← λ + η r`` on the active edge ends of example i."""
    if eta == 0.0:
        return
    n0 = layout.node_offsets[i]
    for r in range(rows.start[i], rows.start[i] + rows.count[i]):
        for side in range(2):
            g = n0 + (rows.u[r] if side == 0 else rows.v[r])
            end = 2 * r + side
            for s in range(sets.n_act[g]):
                sets.lam[end, s] += eta * (sets.msum[end, s] - sets.q[g, s])


@njit(cache=CACHE, **NO_REFCOUNT)
def _drop_empty_pairs(rows, pairs, i):
    """Pairs without mass leave their edge's support (the last pair takes their place)."""
    for r in range(rows.start[i], rows.start[i] + rows.count[i]):
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
def _shrink(layout, rows, visit, sets, pairs, i, patience, counters):
    """States (not the gold one) without mass and in no pair for ``patience`` visits leave
    their node, with their multipliers; the node's last slot takes their place."""
    n0 = layout.node_offsets[i]
    for g in range(n0, layout.node_offsets[i + 1]):
        j = g - n0
        s = 1
        while s < sets.n_act[g]:
            used = sets.q[g, s] > 0.0
            for p in range(visit.adj_ptr[j], visit.adj_ptr[j + 1]):
                end = visit.adj_end[p]
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
            _remove_slot(visit, sets, pairs, g, j, s)
            counters[3] += 1


@njit(cache=CACHE, **NO_REFCOUNT)
def _remove_slot(visit, sets, pairs, g, j, s):
    """Move node g's (local j) last slot into slot s (unused) and clear the last one."""
    last = sets.n_act[g] - 1
    sets.act[g, s] = sets.act[g, last]
    sets.q[g, s] = sets.q[g, last]
    sets.idle[g, s] = sets.idle[g, last]
    sets.q[g, last] = 0.0
    sets.idle[g, last] = 0
    if len(sets.sq_norm):
        sets.sq_norm[g, s] = sets.sq_norm[g, last]
        sets.sq_norm[g, last] = -1.0
    for p in range(visit.adj_ptr[j], visit.adj_ptr[j + 1]):
        end = visit.adj_end[p]
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
def consistency(layout, rows, sets):
    """(Σ_ej ‖r_ej‖₁, Σ <λ, r>, Σ ‖r‖²) over every active edge end (inactive edges are
    consistent and have no multipliers)."""
    l1, lag, sq = 0.0, 0.0, 0.0
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            for side in range(2):
                g = n0 + (rows.u[r] if side == 0 else rows.v[r])
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
def transport_rounding(k, layout, rows, sets, pairs, C, w):
    """``w += C Σ_e (q_e − π_e)·φ_e``: every active edge marginal replaced by its rounding
    π_e into the transport polytope of its two node marginals (inactive edges stand at T,
    consistent already)."""
    cap = sets.act.shape[1]
    table = np.zeros((cap, cap))
    row, col = np.zeros(cap), np.zeros(cap)
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            gu, gv = n0 + rows.u[r], n0 + rows.v[r]
            nu, nv = sets.n_act[gu], sets.n_act[gv]
            _round_edge(sets, pairs, r, gu, gv, table, row, col)
            e = rows.edge[r]
            for p in range(pairs.n_pair[r]):  # C (q_e − π_e) as C q_e − C π_e
                a, b = sets.act[gu, pairs.pair_a[r, p]], sets.act[gv, pairs.pair_b[r, p]]
                factors.add_edge(k, i, e, a, b, C * pairs.q[r, p], w)
            for x in range(nu):
                for y in range(nv):
                    if table[x, y] != 0.0:
                        a, b = sets.act[gu, x], sets.act[gv, y]
                        factors.add_edge(k, i, e, a, b, -C * table[x, y], w)
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
def rebuild_weights(k, layout, rows, sets, pairs, C, w):
    """``w += C Σ_f (φ_f(ȳ_f) − E_{q_f} φ_f)``: the weights the marginals determine
    (inactive edges add nothing: their gold pair and T's pairs have a null state)."""
    for i in range(len(layout.node_offsets) - 1):
        n0 = layout.node_offsets[i]
        for g in range(n0, layout.node_offsets[i + 1]):
            j = g - n0
            factors.add_node(k, i, j, sets.act[g, 0], C, w)  # slot 0: the gold state
            for s in range(sets.n_act[g]):
                factors.add_node(k, i, j, sets.act[g, s], -C * sets.q[g, s], w)
        for r in range(rows.start[i], rows.start[i] + rows.count[i]):
            gu, gv, e = n0 + rows.u[r], n0 + rows.v[r], rows.edge[r]
            factors.add_edge(k, i, e, sets.act[gu, 0], sets.act[gv, 0], C, w)
            for p in range(pairs.n_pair[r]):
                a, b = sets.act[gu, pairs.pair_a[r, p]], sets.act[gv, pairs.pair_b[r, p]]
                factors.add_edge(k, i, e, a, b, -C * pairs.q[r, p], w)
