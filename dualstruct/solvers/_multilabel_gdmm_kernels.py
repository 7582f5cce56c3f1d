"""numba kernels of GDMM with block-greedy coordinate descent for multi-label models (Yen et
al. 2016, Algorithm 1 with step 1 done by Algorithm 3).

**Variables.** Per example i: a unigram marginal ``μ_il = q_il(1) ∈ [0, 1]`` for every label
(box-constrained coordinates) and, for every *active* pairwise factor e = (l, k), a
distribution ``q_ie`` over the four states (00, 10, 01, 11). The LP-relaxed dual, as a
minimization, is

    G(q) = ½‖w(q)‖² − C Σ_i Σ_l c_l |μ_il − ȳ_il|,
    w_U[:, l] = C Σ_i x_i (ȳ_il − μ_il),   w_V[e] = C Σ_i (ȳ_il ȳ_ik − q_ie(11)),

and the consistency constraints ``r_e,l = q_e(10) + q_e(11) − μ_l = 0`` and
``r_e,k = q_e(01) + q_e(11) − μ_k = 0`` join the pairwise factors to the unigrams.

**Storage.** The active pairs of example i are rows ``pair_base[i]`` to
``pair_base[i] + n_pairs[i]`` of a pool shared by all examples: ``pair_slots`` (the two
slots a < b of its active set), ``pair_edge`` (the edge's id), ``q`` (four states) and
``lam`` (two multipliers). Each example has its own room of ``pair_room[i]`` rows, which
moves to the end of the pool, doubled, when full (the solver compacts the pool when the
rooms left behind outweigh half the live ones), so memory follows each example's active
pairs (BENCHMARKS.md, "bibtex: 159 labels", gives the pool's size on a full graph).

**Inactive factors.** Labels outside the example's active set S_i have ``μ = 0`` (never
added, or dropped at 0). A pairwise factor that is not active is *defined* as the consistent state
with no mass on (1, 1), ``q = (1 − μ_l − μ_k, μ_l, μ_k, 0)``: it has zero residual,
contributes nothing to the augmented Lagrangian and needs no storage, and it is a
distribution as long as ``μ_l + μ_k <= 1``, which always holds when an endpoint lies outside
S_i. Inside S_i that bound is kept as a constraint of the unigram steps: a step that would
cross it stops at it, its slot is marked ``blocked``, and at the example's next visit every
inactive edge at its bound next to a blocked slot becomes active (at its consistent state,
λ = 0, so the point does not move). Gold labels start in S_i with μ = 1 and their pairs
active at ``q = e_11``, so the initial point is the gold labelling (w = 0). Pairs are thus
activated one by one, when a step needs them or when the greedy selection picks them, not
all pairs among the active labels.

**Idle labels.** A label outside the gold labelling that has had no mass (μ = 0, and none
on its pairs' (1, 1) state) for ``shrink_after`` visits, and whose gain with all its edges to
labels with mass (below) is not positive, leaves S_i with its pairs. Neither w nor G moves:
both depend on μ and the (1, 1) masses only, and a dropped pair's state with μ_l = 0,
``(1 − μ_k, 0, μ_k, 0)``, is its inactive state; only its multipliers are forgotten. On large
label sets the greedy selection adds many labels that never gain mass, and they would hold
memory and time; the gain test keeps a label that the selection would take back at once.

**Augmented Lagrangian** (Algorithm 1, step 1) over the active factors:

    L(q, λ) = G(q) + Σ_e Σ_{j ∈ e} [λ_e,j r_e,j + ρ/2 r_e,j²],   messages m_e,j = λ_e,j + ρ r_e,j,

with gradients ``∂L/∂μ_l = −C (θ_l + Δδ_l) − Σ_{e ∋ l} m_e,l`` (``θ_l = <w_U[:, l], x_i>``,
``Δδ_l = c_l (1 − 2ȳ_l)``) and ``∂L/∂q_e = (0, m_e,l, m_e,k, m_e,l + m_e,k − C w_V[e])``.

**Greedy factor selection** (Algorithm 3, step 1; eq. 18). The best inactive factor is the
one whose consistent activation has the largest first-order gain (all in units of C):

* a label l ∉ S_i, or l ∈ S_i with μ_l = 0: ``θ_l + Δδ_l + Σ_k w_V[e_lk]⁺`` over its
  inactive edges to labels k ∈ S_i with μ_k > 0 (raising μ_l and those pairs' (1, 1) mass
  together keeps them consistent; they become active with l);
* an edge (l, k) with both ends outside S_i: ``θ_l + Δδ_l + θ_k + Δδ_k + w_V[e]``;
* an inactive edge (l, k) inside S_i with ``μ_l, μ_k > 0``: ``w_V[e]`` (mass moves from
  (1, 0) and (0, 1) to (1, 1) and (0, 0), the marginals stay).

A label's inactive edges with positive weights add up: one edge alone may not pay for the
label's own term where several do (with the largest edge only, GDMM stalls short of the
optimum on small full graphs).

The outside edges would need a scan of all L² pairs; instead a max segment tree over
``w_V`` (its leaves brought up to date in O(log E) each once per visit, for the pairs the
visit changed) is searched branch-and-bound, so only edges that could win are visited —
the paper's ordered map of the (1, 1) scores (§3.2, "Binary-variable interaction factor").
A subtree gains at most
``max w_V(subtree) + min(g₁ + g₂, G₀ + G₁)``: g₁, g₂ are the two best label terms outside
S_i, and G₀, G₁ the best outside terms among the first and among the second labels of the
subtree's edges (their ranges are stored per node; range maxima of g come from a sparse
table built per visit in O(L log L)). With the full graph's edges listed row by row, a
subtree below the level of a row holds one first label, so rows whose label term is low
are cut whole. Where every outside g is alike (early in training, when most labels gain
by the loss term alone) the first bound decides; the second cuts rows once the label terms
spread. A factor is activated when its gain is positive: its labels enter S_i with μ = 0,
and the pairs whose (1, 1) mass its gain counts become active at the consistent state.

**Block steps** (Algorithm 3, step 3; eq. 19). On every active unigram the exact minimizer
of L along the coordinate, clipped to [0, 1] and to ``1 − μ_k`` for each inactive edge (l, k)
inside S_i (curvature ``C² ‖x_i‖² + ρ deg(l)``, deg the active pairs of l); on every
active pair the projected step ``q ← Π_Δ(q − ∇/Q)`` with ``Q = C² + 3ρ`` (the largest
eigenvalue of the factor's Hessian: C² on (1, 1) plus ρ MᵀM whose top eigenvalue is 3).
Then the multiplier step ``λ_e,j ← λ_e,j + η r_e,j`` for the example's active pairs.

**Certified dual.** −G(q) is a dual value only once every active factor is consistent. Only
``q_e(11)`` enters w, and given ``μ_l, μ_k`` a table with those marginals exists exactly when
``max(0, μ_l + μ_k − 1) <= q_e(11) <= min(μ_l, μ_k)``: it is then
``(1 − μ_l − μ_k + q_e(11), μ_l − q_e(11), μ_k − q_e(11), q_e(11)) >= 0``. Clipping every
active pair's ``q_e(11)`` into that interval (:func:`pair_rounding`; inactive pairs are
consistent by definition) gives a point of the local polytope, and
``D = C Σ_i Σ_l c_l |μ_il − ȳ_il| − ½‖w'‖²`` (only w_V changes, by C times the clipped mass)
is the dual value of a feasible point of the LP-relaxed problem (the inactive pairs' states are
distributions by the bound above): a lower bound on its
optimum, the exact one on forests (the solver then takes the best point between it and the
gold labelling, :func:`.objective.scaled_dual`). No consistent table lies closer to q_e(11),
and the bound is exact once the residual vanishes.

**Arguments.** The pass takes its arrays grouped in named tuples, built once per call by the
solver: the data (:class:`ExampleData`), the weights (:class:`LabelWeights`), the outside
pair search (:class:`EdgeSearch`), the active labels (:class:`LabelSets`), the pair pool
(:class:`PairPool`) and the settings (:class:`SweepSettings`). The greedy selection
(:func:`_greedy_selection`) and the block sweeps (:func:`_block_sweeps`) are compiled into
the pass (``inline="always"``): a call binds every array of its groups, counted, which
measurably slows a pass once it happens several times per example.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..inference.multilabel import unary_scores
from ..models.support import entry_position, entry_unigram_scores
from ._simplex import project_to_simplex

NEED_CAPACITY = 1


@njit(cache=True)
def build_max_tree(values, tree):
    """Max segment tree over ``values`` (leaves at ``P + e``, P a power of two)."""
    P = tree.shape[0] // 2
    tree[:] = -np.inf
    for e in range(values.shape[0]):
        tree[P + e] = values[e]
    for node in range(P - 1, 0, -1):
        tree[node] = max(tree[2 * node], tree[2 * node + 1])


@njit(cache=True)
def tree_set(tree, e, value):
    P = tree.shape[0] // 2
    node = P + e
    tree[node] = value
    node //= 2
    while node >= 1:
        tree[node] = max(tree[2 * node], tree[2 * node + 1])
        node //= 2


@njit(cache=True)
def tree_label_ranges(edges, P, ranges):
    """``ranges[node] = (lo₀, hi₀, lo₁, hi₁)``: the smallest and largest first and second
    label of the edges below a node of the segment tree (empty nodes: lo > hi). Edges listed
    in label order (the full graph's ``(l, k)``, l < k, row by row) give each subtree few
    first labels, so :func:`best_outside_pair` can bound it by the label terms of those."""
    L = edges.max() + 1 if edges.shape[0] else 1
    for node in range(2 * P):
        ranges[node, 0] = L
        ranges[node, 1] = -1
        ranges[node, 2] = L
        ranges[node, 3] = -1
    for e in range(edges.shape[0]):
        for j in range(2):
            ranges[P + e, 2 * j] = edges[e, j]
            ranges[P + e, 2 * j + 1] = edges[e, j]
    for node in range(P - 1, 0, -1):
        a, b = 2 * node, 2 * node + 1
        for j in range(2):
            ranges[node, 2 * j] = min(ranges[a, 2 * j], ranges[b, 2 * j])
            ranges[node, 2 * j + 1] = max(ranges[a, 2 * j + 1], ranges[b, 2 * j + 1])


@njit(cache=True)
def range_max_table(g, slot_of, table):
    """Sparse table of range maxima of the label terms ``g`` over the labels outside the
    active set (active labels count as −∞): ``table[j, l] = max g[l : l + 2^j]``."""
    L = g.shape[0]
    for l in range(L):
        table[0, l] = g[l] if slot_of[l] < 0 else -np.inf
    width = 1
    for j in range(1, table.shape[0]):
        for l in range(L):
            other = l + width
            table[j, l] = (
                table[j - 1, l] if other >= L else max(table[j - 1, l], table[j - 1, other])
            )
        width *= 2


@njit(cache=True)
def _range_max(table, lo, hi):
    """``max g[lo..hi]`` from :func:`range_max_table` (−∞ for an empty range)."""
    if lo > hi:
        return -np.inf
    j = 0
    while (2 << j) <= hi - lo + 1:
        j += 1
    return max(table[j, lo], table[j, hi - (1 << j) + 1])


@njit(cache=True)
def best_outside_pair(tree, ranges, table, edges, V, g, slot_of, g_top, floor, brute):
    """The edge (l, k) with both labels outside the active set (``slot_of < 0``) that
    maximizes ``g_l + g_k + V_e`` above ``floor``. Returns (edge, gain) or (−1, floor).

    Branch and bound over the max tree of ``V``: a subtree can gain at most its largest
    ``V_e`` plus the largest outside ``g`` among its first labels plus that among its
    second labels (``ranges``, ``table``), and never more than ``g_top`` (the two best
    outside terms) plus that ``V_e``. ``brute`` scans every edge (the test twin)."""
    best_e, best = -1, floor
    if brute:
        for e in range(edges.shape[0]):
            l, k = edges[e, 0], edges[e, 1]
            if slot_of[l] >= 0 or slot_of[k] >= 0:
                continue
            gain = g[l] + g[k] + V[e]
            if gain > best:
                best_e, best = e, gain
        return best_e, best
    P = tree.shape[0] // 2
    stack = np.empty(128, dtype=np.int64)
    stack[0] = 1
    top = 1
    while top > 0:
        top -= 1
        node = stack[top]
        if tree[node] + g_top <= best:
            continue
        labels = _range_max(table, ranges[node, 0], ranges[node, 1]) + _range_max(
            table, ranges[node, 2], ranges[node, 3]
        )
        if tree[node] + labels <= best:
            continue
        if node >= P:
            e = node - P
            l, k = edges[e, 0], edges[e, 1]
            if slot_of[l] >= 0 or slot_of[k] >= 0:
                continue
            gain = g[l] + g[k] + V[e]
            if gain > best:
                best_e, best = e, gain
            continue
        a, b = 2 * node, 2 * node + 1
        if tree[a] > tree[b]:  # the larger child is popped first
            a, b = b, a
        stack[top] = a
        stack[top + 1] = b
        top += 2
    return best_e, best


@njit(cache=True)
def _residuals(q, p, mu_a, mu_b):
    """Row p's consistency residuals ``(M_L q_p − μ_a, M_R q_p − μ_b)``. Callers pass the
    pool and a row, not the view ``q[p]``: a view costs numba two atomic reference counts,
    and these run once per active pair and sweep."""
    return q[p, 1] + q[p, 3] - mu_a, q[p, 2] + q[p, 3] - mu_b


@njit(cache=True)
def _activate_pair(edge_id, sets, pool, i, a, b):
    """Append the edge between example i's slots a < b at its inactive state
    ``(1 − μ_a − μ_b, μ_a, μ_b, 0)`` with λ = 0: consistent, so the point does not move
    (the first entry clipped at 0 against rounding, where ``μ_a + μ_b`` is 1 + ε).
    The caller has checked that the two labels share an edge and that the example has a
    free row. Returns the row."""
    mu, slot_label, n_pairs = sets.mu, sets.slot_label, pool.n_pairs
    pair_slots, pair_edge, q, lam = pool.pair_slots, pool.pair_edge, pool.q, pool.lam
    l, k = slot_label[i, a], slot_label[i, b]
    e, mu_a, mu_b = edge_id[l, k], mu[i, l], mu[i, k]
    p = pool.pair_base[i] + n_pairs[i]
    n_pairs[i] += 1
    pair_slots[p, 0] = a
    pair_slots[p, 1] = b
    pair_edge[p] = e
    q[p, 0] = max(0.0, 1.0 - mu_a - mu_b)
    q[p, 1] = mu_a
    q[p, 2] = mu_b
    q[p, 3] = 0.0
    lam[p, 0] = 0.0
    lam[p, 1] = 0.0
    return p


@njit(cache=True)
def _holds_back(i, a, b, blocked, row_of, mu, slot_label, edge_id):
    """Whether the slots a < b of example i are an inactive edge that held back a step of
    the last visit: the bound that stopped the step of a or b (``blocked`` holds that
    partner's slot + 1), or an edge at its bound ``μ_a + μ_b = 1`` (up to rounding) next
    to a blocked slot (several partners at μ = 1 bind at once)."""
    if row_of[a, b] >= 0 or (blocked[i, a] == 0 and blocked[i, b] == 0):
        return False
    l, k = slot_label[i, a], slot_label[i, b]
    if edge_id[l, k] < 0:
        return False
    return blocked[i, a] == b + 1 or blocked[i, b] == a + 1 or mu[i, l] + mu[i, k] >= 1.0 - 1e-12


@njit(cache=True)
def init_gold_pairs(Y, edge_id, pair_base, n_pairs, slot_label, pair_slots, pair_edge, q):
    """The starting point: example i's gold labels fill its first slots (μ = 1) and every
    edge between two of them is an active pair at ``q = e_11``."""
    for i in range(Y.shape[0]):
        ns = 0
        for l in range(Y.shape[1]):
            if Y[i, l]:
                slot_label[i, ns] = l
                ns += 1
        n_pairs[i] = 0
        for b in range(ns):
            for a in range(b):
                e = edge_id[slot_label[i, a], slot_label[i, b]]
                if e >= 0:
                    p = pair_base[i] + n_pairs[i]
                    n_pairs[i] += 1
                    pair_slots[p, 0] = a
                    pair_slots[p, 1] = b
                    pair_edge[p] = e
                    q[p, 3] = 1.0


@njit(cache=True)
def gold_pair_counts(Y, edge_id):
    """The number of edges among each example's gold labels (its active pairs at the start)."""
    out = np.zeros(Y.shape[0], dtype=np.int64)
    labels = np.empty(Y.shape[1], dtype=np.int64)
    for i in range(Y.shape[0]):
        ns = 0
        for l in range(Y.shape[1]):
            if Y[i, l]:
                labels[ns] = l
                ns += 1
        for b in range(ns):
            for a in range(b):
                if edge_id[labels[a], labels[b]] >= 0:
                    out[i] += 1
    return out


class ExampleData(NamedTuple):
    """The training examples."""

    indptr: np.ndarray  # CSR rows of X
    indices: np.ndarray
    values: np.ndarray
    Y: np.ndarray  # (n, L) gold labels
    loss_weights: np.ndarray  # (L,)
    sq_norms: np.ndarray  # ‖x_i‖²
    edges: np.ndarray  # (E, 2) the label graph
    edge_id: np.ndarray  # (L, L) an edge's id, −1 where none


class LabelWeights(NamedTuple):
    """w: the unary block ``U`` (d × L feature-major, or with a support its pairs,
    :func:`~dualstruct.models.support.kernel_support`, whose arrays follow; empty for dense
    weights) and the interaction weights ``V``."""

    U: np.ndarray
    support_labels: np.ndarray
    entry_start: np.ndarray
    entry_count: np.ndarray
    V: np.ndarray


class EdgeSearch(NamedTuple):
    """The search of the best outside pair (:func:`best_outside_pair`)."""

    tree: np.ndarray  # the max tree over V
    ranges: np.ndarray  # its nodes' label ranges (:func:`tree_label_ranges`)
    table: np.ndarray  # range maxima of the label terms (:func:`range_max_table`)
    brute: bool  # scan every edge instead


class LabelSets(NamedTuple):
    """Per example: μ, its active labels' slots, and per slot the partner slot + 1 of an
    inactive pair that held back its last step (0: none) and the visits it has been idle."""

    mu: np.ndarray
    slot_label: np.ndarray
    n_slots: np.ndarray
    blocked: np.ndarray
    idle: np.ndarray


class PairPool(NamedTuple):
    """The active pairs (module docstring, "Storage")."""

    pair_base: np.ndarray
    pair_room: np.ndarray
    n_pairs: np.ndarray
    pair_slots: np.ndarray
    pair_edge: np.ndarray
    q: np.ndarray
    lam: np.ndarray


class SweepSettings(NamedTuple):
    C: float
    rho: float
    eta: float
    shrink_after: int  # visits without mass before an idle label leaves (0: never)
    inner_sweeps: int  # at most this many sweeps of block steps per visit
    inner_tol: float  # stop once a sweep moves at most this share of the first one's move


class _Visit(NamedTuple):
    U2: np.ndarray  # the dense unary weights as d × L (empty with a support)
    theta: np.ndarray  # (L,) the example's unary scores
    theta_row: np.ndarray  # the same memory as (1, L)
    acc: np.ndarray
    g: np.ndarray  # (L,) the label terms
    bonus: np.ndarray  # (L,) positive interaction weights to active labels with mass
    slot_of: np.ndarray  # (L,) a label's slot, −1 outside the active set
    row_of: np.ndarray  # (cap, cap) slots (a < b) → pool row, −1 if inactive
    z: np.ndarray  # (4,) a pair's projected step
    qn: np.ndarray
    simplex_scratch: np.ndarray


@njit(cache=True)
def gdmm_pass(data, weights, search, sets, pool, settings, order, status, stats):
    """One GDMM pass (module docstring) over ``order``. Stops early with
    ``status = (NEED_CAPACITY, example, rows it needs)`` when an
    example's slots or rows cannot hold what its visit may add, before the visit changes
    anything but its idle labels (dropping them again finds none, so the caller gives the
    example more room and continues: the trajectory does not depend on the rooms).
    ``stats`` accumulates [labels added, block-step sweeps made, pairs activated, labels
    removed]. Returns the examples processed.

    With a support (``weights.entry_start`` not empty) label l's curvature and score change
    use only the features it may see."""
    L = data.Y.shape[1]
    cap_slots = sets.slot_label.shape[1]
    sparse = weights.entry_start.shape[0] > 0
    U = weights.U
    theta = np.empty(L)
    ws = _Visit(
        np.empty((0, L)) if sparse else U.reshape((U.shape[0] // L, L)),
        theta,
        theta.reshape((1, L)),
        np.empty(L),
        np.empty(L),
        np.empty(L),
        np.full(L, -1, dtype=np.int64),
        np.full((cap_slots, cap_slots), -1, dtype=np.int64),
        np.empty(4),
        np.empty(4),
        np.empty(4),
    )
    status[0] = 0
    indptr, values, V, edge_id = data.indptr, data.values, weights.V, data.edge_id
    mu, slot_label, blocked, idle = sets.mu, sets.slot_label, sets.blocked, sets.idle
    pair_slots, pair_edge, q, lam = pool.pair_slots, pool.pair_edge, pool.q, pool.lam
    g, bonus, row_of, tree, eta = ws.g, ws.bonus, ws.row_of, search.tree, settings.eta
    n_pairs = pool.n_pairs
    for idx in range(order.shape[0]):
        i = order[idx]
        gold = data.Y[i]
        # the unary scores θ, the label terms g[l] = θ_l + Δδ_l and bonus[l], the positive
        # interaction weights of l's edges to active labels with mass (rows of edge_id read
        # in order: it is symmetric)
        if weights.entry_start.shape[0] > 0:
            entry_unigram_scores(
                indptr,
                weights.entry_start,
                weights.entry_count,
                values,
                i,
                i + 1,
                weights.support_labels,
                weights.U,
                ws.theta_row,
                ws.acc,
            )
        else:
            unary_scores(indptr, data.indices, values, i, ws.U2, theta)
        for l in range(L):
            g[l] = theta[l] + data.loss_weights[l] * (1 - 2 * gold[l])
            bonus[l] = 0.0
        for t in range(sets.n_slots[i]):
            k = slot_label[i, t]
            if mu[i, k] <= 0.0:
                continue
            for l in range(L):
                e = edge_id[k, l]
                if e >= 0 and V[e] > 0.0:
                    bonus[l] += V[e]
        if settings.shrink_after > 0:  # idle labels that the selection would not take back
            stats[3] += _drop_idle_labels(i, settings.shrink_after, gold, ws, sets, pool)
        ns = sets.n_slots[i]
        base, room, n_pairs = pool.pair_base[i], pool.pair_room[i], pool.n_pairs
        for p in range(base, base + n_pairs[i]):
            row_of[pair_slots[p, 0], pair_slots[p, 1]] = p
        # the pairs that held a step back: inactive edges of a blocked slot at the bound
        held = 0
        for b in range(ns):
            for a in range(b):
                if _holds_back(i, a, b, blocked, row_of, mu, slot_label, edge_id):
                    held += 1
        if ns + 2 > slot_label.shape[1] or n_pairs[i] + held + ns + 1 > room:
            for p in range(base, base + n_pairs[i]):
                row_of[pair_slots[p, 0], pair_slots[p, 1]] = -1
            status[0] = NEED_CAPACITY
            status[1] = i
            status[2] = n_pairs[i] + held + ns + 1
            return idx
        if held:
            for b in range(ns):
                for a in range(b):
                    if _holds_back(i, a, b, blocked, row_of, mu, slot_label, edge_id):
                        row_of[a, b] = _activate_pair(edge_id, sets, pool, i, a, b)
                        stats[2] += 1
        for s in range(ns):
            blocked[i, s] = 0
        for s in range(ns):
            ws.slot_of[slot_label[i, s]] = s
        _greedy_selection(data, weights, search, sets, pool, ws, i, stats)
        _block_sweeps(data, weights, sets, pool, settings, ws, i, stats)
        # the max tree follows V (once per visit: only the next examples' selection reads
        # it), the multiplier step on the active pairs, and the idle counts
        base, count = pool.pair_base[i], pool.n_pairs[i]
        leaves = tree.shape[0] // 2
        for p in range(base, base + count):
            e = pair_edge[p]
            if tree[leaves + e] != V[e]:
                tree_set(tree, e, V[e])
        for p in range(base, base + count):
            a, b = pair_slots[p, 0], pair_slots[p, 1]
            ra, rb = _residuals(q, p, mu[i, slot_label[i, a]], mu[i, slot_label[i, b]])
            lam[p, 0] += eta * ra
            lam[p, 1] += eta * rb
            row_of[a, b] = -1
        # idle labels: no mass, and none on their pairs' (1, 1) state
        for s in range(sets.n_slots[i]):
            idle[i, s] = idle[i, s] + 1 if mu[i, slot_label[i, s]] <= 0.0 else 0
        for p in range(base, base + count):
            if q[p, 3] > 0.0:
                idle[i, pair_slots[p, 0]] = 0
                idle[i, pair_slots[p, 1]] = 0
    return order.shape[0]


@njit(cache=True, inline="always")
def _greedy_selection(data, weights, search, sets, pool, ws, i, stats):
    """Algorithm 3, step 1 (module docstring, "Greedy factor selection"): the inactive
    factor of largest gain, activated if the gain is positive; clears ``slot_of``."""
    mu, slot_label, n_slots = sets.mu, sets.slot_label, sets.n_slots
    pair_slots, pair_edge = pool.pair_slots, pool.pair_edge
    edges, edge_id, V = data.edges, data.edge_id, weights.V
    g, bonus, slot_of, row_of = ws.g, ws.bonus, ws.slot_of, ws.row_of
    L = data.Y.shape[1]
    ns = n_slots[i]
    base = pool.pair_base[i]
    # (bonus counts inactive edges only: take out the active ones)
    for p in range(base, base + pool.n_pairs[i]):  # active edges are not inactive
        e = pair_edge[p]
        if V[e] > 0.0:
            la, lb = slot_label[i, pair_slots[p, 0]], slot_label[i, pair_slots[p, 1]]
            if mu[i, lb] > 0.0:
                bonus[la] -= V[e]
            if mu[i, la] > 0.0:
                bonus[lb] -= V[e]
    g1, g2 = -np.inf, -np.inf
    best, best_a, best_b = 0.0, -1, -1
    for l in range(L):
        if slot_of[l] >= 0:
            if mu[i, l] <= 0.0 and bonus[l] > 0.0 and g[l] + bonus[l] > best:
                best, best_a, best_b = g[l] + bonus[l], l, -1  # an active label at 0
            continue
        if g[l] > g1:
            g1, g2 = g[l], g1
        elif g[l] > g2:
            g2 = g[l]
        if g[l] + bonus[l] > best:
            best, best_a, best_b = g[l] + bonus[l], l, -1
    # an inactive edge of two active labels with mass and a positive interaction weight
    best_pair_a, best_pair_b = -1, -1
    for b in range(ns):
        k = slot_label[i, b]
        if mu[i, k] <= 0.0:
            continue
        for a in range(b):
            l = slot_label[i, a]
            if row_of[a, b] >= 0 or mu[i, l] <= 0.0:
                continue
            e = edge_id[l, k]
            if e >= 0 and V[e] > best:
                best, best_pair_a, best_pair_b = V[e], a, b
    if best_pair_a >= 0:
        best_a = -1
    if g2 > -np.inf and edges.shape[0] > 0:
        if not search.brute:
            range_max_table(g, slot_of, search.table)
        e, gain = best_outside_pair(
            search.tree,
            search.ranges,
            search.table,
            edges,
            V,
            g,
            slot_of,
            g1 + g2,
            best,
            search.brute,
        )
        if e >= 0:
            best, best_a, best_b, best_pair_a = gain, edges[e, 0], edges[e, 1], -1
    for s in range(ns):
        slot_of[slot_label[i, s]] = -1
    if best_pair_a >= 0:
        a, b = best_pair_a, best_pair_b
        row_of[a, b] = _activate_pair(edge_id, sets, pool, i, a, b)
        stats[2] += 1
    elif best_b >= 0:  # two new labels take the next slots at μ = 0, with their edge
        slot_label[i, ns] = best_a
        slot_label[i, ns + 1] = best_b
        ns += 2
        n_slots[i] = ns
        stats[0] += 2
        row_of[ns - 2, ns - 1] = _activate_pair(edge_id, sets, pool, i, ns - 2, ns - 1)
        stats[2] += 1
    elif best_a >= 0:
        s = -1
        for t in range(ns):
            if slot_label[i, t] == best_a:
                s = t
        if s < 0:  # a new label takes the next slot at μ = 0
            s = ns
            slot_label[i, ns] = best_a
            ns += 1
            n_slots[i] = ns
            stats[0] += 1
        # and its edges whose (1, 1) mass the gain counted
        for t in range(ns):
            k = slot_label[i, t]
            if t == s or mu[i, k] <= 0.0:
                continue
            e = edge_id[best_a, k]
            a, b = (t, s) if t < s else (s, t)
            if e >= 0 and V[e] > 0.0 and row_of[a, b] < 0:
                row_of[a, b] = _activate_pair(edge_id, sets, pool, i, a, b)
                stats[2] += 1


@njit(cache=True, inline="always")
def _block_sweeps(data, weights, sets, pool, settings, ws, i, stats):
    """Algorithm 3, step 3 (module docstring, "Block steps"): sweeps over example i's
    active unigrams and pairs until one moves little against the first."""
    indptr, indices, values, edge_id = data.indptr, data.indices, data.values, data.edge_id
    U, V, support_labels = weights.U, weights.V, weights.support_labels
    entry_start, entry_count = weights.entry_start, weights.entry_count
    mu, slot_label, blocked = sets.mu, sets.slot_label, sets.blocked
    pair_slots, pair_edge, q, lam = pool.pair_slots, pool.pair_edge, pool.q, pool.lam
    theta, row_of, z, qn = ws.theta, ws.row_of, ws.z, ws.qn
    C, rho = settings.C, settings.rho
    L = data.Y.shape[1]
    gold = data.Y[i]
    sparse = entry_start.shape[0] > 0
    ns = sets.n_slots[i]
    base = pool.pair_base[i]
    first_move = 0.0
    for sweep in range(settings.inner_sweeps):
        stats[1] += 1
        moved = 0.0  # Σ |Δμ| + Σ |Δq| of this sweep (probability units: scale-free)
        for s in range(ns):
            l = slot_label[i, s]
            grad = -C * (theta[l] + data.loss_weights[l] * (1 - 2 * gold[l]))
            sq_l = data.sq_norms[i]
            if sparse:  # the features label l sees
                sq_l = 0.0
                for p in range(indptr[i], indptr[i + 1]):
                    if entry_position(entry_start, entry_count, support_labels, L, p, l) >= 0:
                        sq_l += values[p] * values[p]
            curv = C * C * sq_l
            upper, blocker = 1.0, -1  # μ_l + μ_k <= 1 on every inactive pair
            for t in range(ns):
                if t == s:
                    continue
                a, b = (t, s) if t < s else (s, t)
                p = row_of[a, b]
                if p < 0:
                    k = slot_label[i, t]
                    if 1.0 - mu[i, k] < upper and edge_id[l, k] >= 0:
                        upper, blocker = 1.0 - mu[i, k], t
                    continue
                ra, rb = _residuals(q, p, mu[i, slot_label[i, a]], mu[i, slot_label[i, b]])
                if s == a:
                    grad -= lam[p, 0] + rho * ra
                else:
                    grad -= lam[p, 1] + rho * rb
                curv += rho
            if curv <= 0.0:
                new = 1.0 if grad < 0.0 else (0.0 if grad > 0.0 else mu[i, l])
            else:
                new = min(1.0, max(0.0, mu[i, l] - grad / curv))
            if new > upper:  # held at the bound; the pair activates at the next visit
                new = upper
                blocked[i, s] = blocker + 1
            delta = new - mu[i, l]
            if delta != 0.0:
                moved += abs(delta)
                mu[i, l] = new
                step = -C * delta
                for p in range(indptr[i], indptr[i + 1]):
                    if sparse:
                        j = entry_position(entry_start, entry_count, support_labels, L, p, l)
                        if j >= 0:
                            U[j] += step * values[p]
                    else:
                        U[indices[p] * L + l] += step * values[p]
                theta[l] += step * sq_l
        Q = C * C + 3.0 * rho
        for p in range(base, base + pool.n_pairs[i]):
            e = pair_edge[p]
            a, b = pair_slots[p, 0], pair_slots[p, 1]
            ra, rb = _residuals(q, p, mu[i, slot_label[i, a]], mu[i, slot_label[i, b]])
            ma = lam[p, 0] + rho * ra
            mb = lam[p, 1] + rho * rb
            z[0] = q[p, 0]
            z[1] = q[p, 1] - ma / Q
            z[2] = q[p, 2] - mb / Q
            z[3] = q[p, 3] - (ma + mb - C * V[e]) / Q
            project_to_simplex(z, 4, qn, ws.simplex_scratch)
            d11 = qn[3] - q[p, 3]
            for j in range(4):
                moved += abs(qn[j] - q[p, j])
                q[p, j] = qn[j]
            V[e] -= C * d11
        if sweep == 0:
            first_move = moved
        elif moved <= settings.inner_tol * first_move:
            break


@njit(cache=True)
def _drop_idle_labels(i, shrink_after, gold, ws, sets, pool):
    """Example i's labels outside the gold labelling that were idle (μ = 0, no (1, 1) mass
    on their pairs) for ``shrink_after`` visits, and that the greedy selection would not
    take back (``g_l + bonus_l <= 0``: the gain of the label with all its edges to labels
    with mass), leave its active set, with their pairs.
    Neither w nor G moves: both depend on μ and the (1, 1) masses only, and a dropped
    pair's (1, 1) mass is 0, as in its inactive state ``(1 − μ_k, 0, μ_k, 0)``; its
    multipliers are forgotten. The last slot takes the freed one (its pairs renamed, a < b kept by
    swapping the two labels' states and multipliers). Returns the labels dropped."""
    g, bonus = ws.g, ws.bonus
    slot_label, n_slots, blocked, idle = sets.slot_label, sets.n_slots, sets.blocked, sets.idle
    pair_base, n_pairs, pair_slots = pool.pair_base, pool.n_pairs, pool.pair_slots
    pair_edge, q, lam = pool.pair_edge, pool.q, pool.lam
    dropped = 0
    s = 0
    while s < n_slots[i]:
        l = slot_label[i, s]
        if gold[l] or idle[i, s] < shrink_after or g[l] + bonus[l] > 0.0:
            s += 1
            continue
        last = n_slots[i] - 1
        base = pair_base[i]
        p = base
        while p < base + n_pairs[i]:  # the pairs of s go; the last row fills the gap
            if pair_slots[p, 0] == s or pair_slots[p, 1] == s:
                end = base + n_pairs[i] - 1
                pair_slots[p, 0], pair_slots[p, 1] = pair_slots[end, 0], pair_slots[end, 1]
                pair_edge[p] = pair_edge[end]
                for j in range(4):
                    q[p, j] = q[end, j]
                lam[p, 0], lam[p, 1] = lam[end, 0], lam[end, 1]
                n_pairs[i] -= 1
            else:
                p += 1
        if last != s:  # the last slot moves to s
            slot_label[i, s] = slot_label[i, last]
            blocked[i, s] = blocked[i, last]
            idle[i, s] = idle[i, last]
            for p in range(base, base + n_pairs[i]):
                for side in range(2):
                    if pair_slots[p, side] == last:
                        pair_slots[p, side] = s
                if pair_slots[p, 0] > pair_slots[p, 1]:
                    pair_slots[p, 0], pair_slots[p, 1] = pair_slots[p, 1], pair_slots[p, 0]
                    q[p, 1], q[p, 2] = q[p, 2], q[p, 1]
                    lam[p, 0], lam[p, 1] = lam[p, 1], lam[p, 0]
        for t in range(last):  # the bounds that named s or last
            if blocked[i, t] == s + 1:
                blocked[i, t] = 0
            elif blocked[i, t] == last + 1:
                blocked[i, t] = s + 1
        blocked[i, last] = 0
        idle[i, last] = 0
        n_slots[i] = last
        dropped += 1
    return dropped


@njit(cache=True)
def mix_label_and_pair_marginals_with_gold(Y, sets, pool, t):
    """Every factor's marginal to ``t q + (1 − t) e_gold``: μ toward ȳ, an active pair's
    four states toward its gold state (labels outside the active set have μ = ȳ = 0, gold
    labels are active). Inactive pairs stay consistent: ``μ_l + μ_k <= 1`` still holds,
    since two gold labels share an active pair."""
    mu, slot_label = sets.mu, sets.slot_label
    pair_base, n_pairs, pair_slots, q = pool.pair_base, pool.n_pairs, pool.pair_slots, pool.q
    for i in range(mu.shape[0]):
        for l in range(mu.shape[1]):
            mu[i, l] = t * mu[i, l] + (1.0 - t) * Y[i, l]
        for p in range(pair_base[i], pair_base[i] + n_pairs[i]):
            gold_a = Y[i, slot_label[i, pair_slots[p, 0]]]
            gold_b = Y[i, slot_label[i, pair_slots[p, 1]]]
            for j in range(4):
                q[p, j] *= t
            q[p, gold_a + 2 * gold_b] += 1.0 - t


@njit(cache=True)
def pair_rounding(mu, slot_label, pair_base, n_pairs, pair_slots, pair_edge, q, C, dV):
    """Clip every active pair's ``q_e(11)`` into ``[max(0, μ_l + μ_k − 1), min(μ_l, μ_k)]``
    (module docstring, "Certified dual") and add the change of w_V, ``C (q_e(11) − clipped)``,
    to ``dV`` (one entry per edge, zero on entry)."""
    for i in range(slot_label.shape[0]):
        for p in range(pair_base[i], pair_base[i] + n_pairs[i]):
            mu_a = mu[i, slot_label[i, pair_slots[p, 0]]]
            mu_b = mu[i, slot_label[i, pair_slots[p, 1]]]
            q11 = q[p, 3]
            clipped = min(max(q11, mu_a + mu_b - 1.0, 0.0), mu_a, mu_b)
            if clipped != q11:
                dV[pair_edge[p]] += C * (q11 - clipped)


@njit(cache=True)
def state_summary(sets, pool, rho, loss_weights, Y):
    """``[Σ |r|, Σ λ·r + ρ/2 Σ r², active labels, active pairs, Σ_i δ(ȳ_i, μ_i)]`` over all
    examples (residual, the Lagrangian's penalty terms, set sizes, the loss term / C)."""
    mu, slot_label, n_slots = sets.mu, sets.slot_label, sets.n_slots
    pair_base, n_pairs, pair_slots, q, lam = (
        pool.pair_base,
        pool.n_pairs,
        pool.pair_slots,
        pool.q,
        pool.lam,
    )
    out = np.zeros(5)
    for i in range(slot_label.shape[0]):
        out[2] += n_slots[i]
        out[3] += n_pairs[i]
        for p in range(pair_base[i], pair_base[i] + n_pairs[i]):
            mu_a = mu[i, slot_label[i, pair_slots[p, 0]]]
            mu_b = mu[i, slot_label[i, pair_slots[p, 1]]]
            ra, rb = _residuals(q, p, mu_a, mu_b)
            out[0] += abs(ra) + abs(rb)
            out[1] += lam[p, 0] * ra + lam[p, 1] * rb + 0.5 * rho * (ra * ra + rb * rb)
        for l in range(mu.shape[1]):
            out[4] += loss_weights[l] * abs(mu[i, l] - Y[i, l])
    return out


@njit(cache=True)
def inactive_pair_excess(mu, slot_label, n_slots, edge_id, pair_base, n_pairs, pair_slots):
    """``max(μ_l + μ_k − 1)`` over the inactive edges between active labels (at most 0 when
    every inactive pair's state ``(1 − μ_l − μ_k, μ_l, μ_k, 0)`` is a distribution; −1 when
    there is none): the invariant the tests check."""
    worst = -1.0
    for i in range(slot_label.shape[0]):
        ns = n_slots[i]
        active = np.zeros((ns, ns), dtype=np.bool_)
        for p in range(pair_base[i], pair_base[i] + n_pairs[i]):
            active[pair_slots[p, 0], pair_slots[p, 1]] = True
        for b in range(ns):
            for a in range(b):
                l, k = slot_label[i, a], slot_label[i, b]
                if not active[a, b] and edge_id[l, k] >= 0:
                    worst = max(worst, mu[i, l] + mu[i, k] - 1.0)
    return worst
