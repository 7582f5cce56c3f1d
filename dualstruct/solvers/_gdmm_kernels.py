"""Numba kernels of GDMM (Yen et al. 2016, Algorithm 1) on linear chains.

**The problem.** Every example decomposes into unigram factors ``q_t ∈ Δ(K)`` (one per token)
and bigram factors ``q_e ∈ Δ(K²)`` (one per edge e = (t, t+1)), tied by the local-consistency
constraints ``M_L q_e = q_t`` (row sums) and ``M_R q_e = q_{t+1}`` (column sums). The
LP-relaxed dual, written as a minimization (C-form), is

    G(q) = ½‖w(q)‖² − C Σ_t <δ_t, q_t>,
    w(q) = C Σ_f (φ_f(ȳ_f) − Σ_{y_f} q_f(y_f) φ_f(y_f)),

and GDMM minimizes the augmented Lagrangian (paper eq. (9))

    L(q, λ) = G(q) + Σ_e <λ_e^L, M_L q_e − q_t> + <λ_e^R, M_R q_e − q_{t+1}>
              + ρ/2 Σ_e (‖M_L q_e − q_t‖² + ‖M_R q_e − q_{t+1}‖²)

by one pass of block steps over all factors, then takes the multiplier step
``λ ← λ + η (M q_e − q_j)``. With the messages ``μ_e^L = λ_e^L + ρ (M_L q_e − q_t)`` (and
likewise μ^R) the partial gradients are

    ∂L/∂q_t(k)    = −C (θ_t(k) + δ_t(k)) − μ_{e_left}^R(k) − μ_{e_right}^L(k)
    ∂L/∂q_e(a, b) = −C W_B[a, b] + μ_e^L(a) + μ_e^R(b)

(θ_t includes the start/end weights at the ends of the chain); the Frank-Wolfe vertex of a
factor, the argmin of its gradient, is the message-augmented factorwise maximization oracle
(FMO).

**Block steps.** Restricted to one unigram factor, L is a quadratic whose Hessian on the
simplex is ``c·I`` with ``c = C² (‖x_t‖² + [t = 1] + [t = T]) + ρ · (incident edges)``
(label blocks of φ are orthogonal), so on its active set the block is minimized exactly by
projecting ``q_t − ∇/c`` onto the simplex. A bigram factor takes a pairwise Frank-Wolfe step:
mass moves from its worst support pair (the away vertex) to the FMO pair; along
``D = e_(a*,b*) − e_(a',b')`` the curvature is ``2C² + ρ (‖M_L D‖² + ‖M_R D‖²)``, with
``‖M_L D‖² = 2[a* ≠ a']``, so the exact line search is a clipped ratio. Up to
``support_steps`` further pairwise steps follow inside the support (best and worst support
pair by the updated messages; μ^L(a) moves by ρ·γ when γ moves into a row), which costs no
oracle call and tightens the block's minimization.

**Sparsity.** Every token keeps an active label set ``A_t`` (slot 0 is the gold label)
holding q_t, and the two message halves that touch it: λ and the row
sums of the edge to its right (``lam_out``, ``sum_out``), λ and the column sums of the edge
to its left (``lam_in``, ``sum_in``), all aligned with the slots. A bigram factor keeps its
support as pairs of slots. When a pair enters ``q_e`` its labels enter ``A_t`` and
``A_{t+1}``, so messages are non-zero only on active labels and every step costs O(|A|).
The paper keeps every label that ever entered; here a label idle for ``patience`` passes
(no mass, in no pair) can leave with its multipliers (:func:`_shrink_example`), else the
sets grow with the passes and so does the cost of a step.

**Oracles.** Labels outside ``A_t`` carry no message, which makes the FMOs cheap:

* bigram (``bigram_sorted``): the argmin over K² pairs splits into four cases by whether each
  endpoint is active. All four use the sign of W_B: ``W_B[a, b] = C (n_ab − Σ_e q_e(a, b))``
  with n_ab the number of gold transitions a → b in the training set, so only the training
  transitions ("listed" pairs) can be positive; every other pair is 0 (never touched) or
  negative. This holds exactly: the pass clamps the rounding residue of an emptied unlisted
  pair to 0 (:func:`_listed_changed`). So the table needs order only on its listed pairs, a
  few per row, and everything else is settled by signs and zeros.
  Both active: the listed pairs among the active ones, then only the active pairs whose
  message sum ``μ^L(a) + μ^R(b)`` (a lower bound of an unlisted pair's gradient) does not
  exceed the best gradient found, about one pair per edge against |A_t|·|A_{t+1}| for a
  scan. One active (a, message μ): the listed inactive partners of a (a short scan), and,
  only if a zero can reach the best gradient (μ − best <= 0), the first inactive partner b
  with W_B[a, b] = 0 (zeros are nearly everywhere); the same by
  columns. Each row (column) also keeps its largest listed W_B, its "top" (updated in
  O(1) per change; the line is rescanned only when its top goes down), and a row whose
  bound ``−C max(top, 0) + μ`` exceeds the best gradient found is skipped whole (most of the
  active rows late in training). Neither: the top of a
  max-tree over the listed pairs (segment tree, O(log n) per update, a pruned depth-first
  search for "the top outside A_t × · and · × A_{t+1}") and, if a zero can win, the first
  pair of inactive labels with W_B = 0. Where every inactive
  entry of a row was touched (tiny K) the search scans it whole. This replaces the
  per-row, per-column and whole-table max-trees of the paper's description: the queries
  are the same ("best entry of a row, a column or the table outside given label sets"),
  and an entry that is 0 or negative is found by the zero scan or cannot win. Brute force
  (``bigram_brute``) scans all K² pairs.
* unigram, inactive labels have gradient ``−C (θ_t(k) + δ)``, so the FMO is the best score
  ``<W_U[:, k], x_t>`` among inactive labels. ``UNIGRAM_BRUTE`` scores all K labels
  (O(K nnz(x_t))); ``UNIGRAM_SAMPLED`` scores one of ν fixed random label groups (the
  approximate FMO of the paper, its rate scaled by 1/ν); ``UNIGRAM_SPARSE`` (exact, beyond
  the paper) uses that ``W_U[j, k] ≠ 0`` only if k was active at a token carrying feature j:
  per feature a list of such labels is kept, and labels in no list of x_t score exactly 0,
  so one of them stands for all. Its cost is the number of list entries touched. A label is
  listed on a token's features when it enters the token's active set (W_U[:, k] changes
  only through tokens where k is active), not at every change of its mass. A feature whose
  list holds more than K/16 labels has its row streamed instead. A feature seen at many
  tokens collects the active labels of all of them, so with dense weights nearly every row
  is streamed after a few passes, and the oracle then costs what brute force costs
  (BENCHMARKS.md, "GDMM and large label sets").

All three unigram oracles and both bigram oracles return the same argmin (ties broken by
the smaller label index), which the tests check against brute force.

**Certified dual.** −G(q) is the dual value only when q is consistent, and GDMM's q is
consistent only in the limit. A consistent point close to q gives a bound at every check:
keep every q_t and round each q_e into the transport polytope
``U(q_t, q_{t+1}) = {π ≥ 0 : M_L π = q_t, M_R π = q_{t+1}}`` (Altschuler, Weed and Rigollet
2017, Algorithm 2): scale down every row of q_e whose sum exceeds q_t, then every column
whose sum exceeds q_{t+1}, and give the missing mass the product
``π += e_L e_Rᵀ / ‖e_R‖₁`` of the row and column deficits. The result moves q_e by at most
``2 (‖M_L q_e − q_t‖₁ + ‖M_R q_e − q_{t+1}‖₁)`` in L1. On a chain, locally consistent
marginals are the marginals of a distribution over label sequences, so
``D = C Σ_t <δ_t, q_t> − ½‖w(q_u, π)‖²`` is the dual value of a feasible point and a lower
bound on the optimum (the rounding changes only W_B, by C Σ_e (q_e − π_e); the solver then
takes the best point between it and the gold labelling, :func:`.objective.scaled_dual`).
The bound is exact once q is consistent, so its gap closes as GDMM converges. Before that
it is loose,
because the rounding moves every edge and W_B adds up the moves of all edges: it can lag
well behind a primal already within 1% (BENCHMARKS.md, "GDMM and large label sets").

**Averaging.** The weighted average ``w̄_m = Σ_{j≤m} j w_j / A_m`` (``A_m = m(m+1)/2``) of
the iterates after each pass is kept lazily, as BCFW keeps it (:mod:`._block_kernels`):
``w̄_m = w_m − R_m / A_m`` with ``R_m = Σ_{j≤m} A_{j−1} Δ_j``, ``Δ_j`` the change of w during
pass j. Every change of W_U, W_B, start or end during pass m also goes into R, scaled by
``avg_weight = A_{m−1}``, so no pass touches all of w.

**Inlined helpers.** Numba counts references to arrays with atomic increments and
decrements. Around a call to a compiled helper that takes many arrays and calls helpers of
its own, they are not pruned, so every call pays two atomic operations per array argument.
They took a large share of a pass (``perf``: ``NRT_incref``/``NRT_decref``). The factor
steps are therefore written out in the loop over an example's factors,
:func:`_example_steps`, itself compiled into ``gdmm_pass`` (``inline="always"``); the
helpers it calls per factor are inlined too. That is not enough where a helper runs
several times per factor, or where an inlined helper receives the grouped arguments below:
an inlined call still binds its array arguments, counted, each time it runs. With the
unigram and bigram steps as inlined helpers taking the groups, a pass on OCR took 30–90%
longer. So the steps, and the bigram factor's pairwise steps (the line search, the
messages, W_B with its bookkeeping), are written out once, and only the rare activation of
the bigram oracle's labels is a helper (docs/algorithms.rst, "Design choices and what was
measured").

**Arguments.** The kernels take their arrays grouped in named tuples, built once per call by
the solver: the data (:class:`ChainData`), the weights (:class:`FactorWeights`), the
averaging accumulators (:class:`Averaging`), the active sets (:class:`ActiveSets`), the
bigram supports (:class:`PairSupport`), the bigram search's structures
(:class:`Transitions`), the label lists (:class:`LabelLists`) and the pass's settings
(:class:`PassSettings`).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from ..models.chain_transitions import (  # noqa: F401 (the chain GDMM's, re-exported)
    Transitions,
    _floor,
    _listed_changed,
    _pair_wins,
    bigram_brute,
    bigram_sorted,
    build_transition_tree,
    listed_position,
    tops_build,
    tree_best,
    tree_update,
)
from ..models.support import support_position
from ._gdmm_common import random_below as _random_below
from ._simplex import project_to_simplex

UNIGRAM_BRUTE = 0
UNIGRAM_SAMPLED = 1
UNIGRAM_SPARSE = 2

#: relative size of a rounding difference between gradients (a tie, see the support steps)
TIE = 1e-12

#: return codes of gdmm_pass (bit flags): which capacity must grow before continuing
NEED_LABEL_SLOTS = 1
NEED_PAIR_SLOTS = 2
NEED_LIST_ROOM = 4


# ------------------------------------------------------------------------------------------
# the kernels' arguments, grouped (built once per call by the solver)
# ------------------------------------------------------------------------------------------
class ChainData(NamedTuple):
    """The training sequences."""

    indptr: np.ndarray  # CSR rows of the token features
    indices: np.ndarray
    values: np.ndarray
    offsets: np.ndarray  # sequence i: tokens offsets[i] to offsets[i + 1] − 1
    labels: np.ndarray  # the gold label of every token
    loss_weights: np.ndarray  # (K,) the loss of a wrong label, by gold label
    sq_norms: np.ndarray  # ‖x_t‖² per token
    start_end: bool  # start and end weights at the ends of a chain
    max_T: int  # the longest sequence


class FactorWeights(NamedTuple):
    """w(q): unary, transition, start and end weights."""

    W_U: np.ndarray  # d × K (dense unary weights; (0, K) with sparse ones)
    W_B: np.ndarray  # K × K
    start: np.ndarray  # (K,), zeros without start and end weights
    end: np.ndarray
    sparse: bool  # the unary weights are w_s on the support, whose rows are the label lists
    w_s: np.ndarray


class Averaging(NamedTuple):
    """The lazy average's accumulators (module docstring, "Averaging")."""

    weight: float  # A_{m−1}, the weight of this pass's changes; 0: off
    R_U: np.ndarray
    R_B: np.ndarray
    R_start: np.ndarray
    R_end: np.ndarray
    R_s: np.ndarray


class ActiveSets(NamedTuple):
    """Per token, aligned with its active-label slots (slot 0 the gold label)."""

    act: np.ndarray  # the labels
    n_act: np.ndarray  # the used slots
    q_u: np.ndarray  # the unigram marginal
    lam_in: np.ndarray  # λ and the column sums of the edge to the left
    sum_in: np.ndarray
    lam_out: np.ndarray  # λ and the row sums of the edge to the right
    sum_out: np.ndarray
    idle: np.ndarray  # passes without mass


class PairSupport(NamedTuple):
    """Per edge, the support of its bigram marginal as pairs of slots."""

    pair_a: np.ndarray
    pair_b: np.ndarray
    q_b: np.ndarray
    n_pair: np.ndarray


class LabelLists(NamedTuple):
    """The sparse unigram oracle's label lists: list j is ``label[start[j] : start[j] +
    length[j]]`` in room ``cap[j]`` of the pool ``label``; ``member[j, k]`` whether k is in
    it; ``used[0]`` the pool's used size. With sparse weights, the support's rows."""

    start: np.ndarray
    cap: np.ndarray
    label: np.ndarray
    member: np.ndarray
    length: np.ndarray
    used: np.ndarray


class PassSettings(NamedTuple):
    C: float
    rho: float
    eta: float  # the multiplier step (0: none)
    unigram_mode: int  # UNIGRAM_*
    n_groups: int  # the sampled oracle's label groups
    perm: np.ndarray  # the labels in the order of those groups
    seed: int  # the key of the pass's random choices
    patience: int  # shrink a label idle for this many passes (0: never)
    support_steps: int  # pairwise steps inside a bigram support after the oracle's


@njit(cache=True, inline="always")
def _label_score(data, weights, lists, row, k, at_start, at_end):
    """``<W_U[:, k], x_t>`` (+ start/end) of label k at token ``row``."""
    indptr, indices, values = data.indptr, data.indices, data.values
    s = 0.0
    if weights.sparse:
        K = weights.start.shape[0]
        w_s = weights.w_s
        for p in range(indptr[row], indptr[row + 1]):
            q = support_position(lists.start, lists.label, K, indices[p], k)
            if q >= 0:
                s += values[p] * w_s[q]
    else:
        W_U = weights.W_U
        for p in range(indptr[row], indptr[row + 1]):
            s += values[p] * W_U[indices[p], k]
    if at_start:
        s += weights.start[k]
    if at_end:
        s += weights.end[k]
    return s


@njit(cache=True)
def _wins_label(s, k, best_s, best):
    return best < 0 or s > best_s or (s == best_s and k < best)


@njit(cache=True, inline="always")
def unigram_fmo(
    data,
    weights,
    lists,
    mode,
    group,
    n_groups,
    perm,
    row,
    at_start,
    at_end,
    act_row,
    n_act,
    theta,
    mark,
    stamp,
    score,
    touched,
):
    """Scores ``theta[s] = <W_U[:, act_row[s]], x_t>`` (+ start/end) of the active labels and
    the best-scoring label outside the active set: ``(label, score)``, or ``(-1, 0)`` when
    every label is active (or the sampled group holds only active labels). Active labels
    must be marked (``mark[k] == stamp``); ``group`` is the sampled oracle's random draw, one
    of ``n_groups`` groups of the labels in the order ``perm``.

    The brute oracle scores every label in one feature-major sweep (contiguous, vectorized)
    and reads the answer off it. The sparse oracle walks the label lists of the token's
    features; features with long lists (more than K/16 labels, e.g. a bias) are added densely
    instead, since a list walk reads W_U at random while the sweep streams it.

    With sparse weights (``weights.sparse``) the unary weights are ``w_s`` on the support and
    the label lists are the support's rows: a list entry's position is its weight's position.
    """
    indptr, indices, values = data.indptr, data.indices, data.values
    W_U, start, end, sparse_w, w_s = (
        weights.W_U,
        weights.start,
        weights.end,
        weights.sparse,
        weights.w_s,
    )
    fl_start, fl_label, fl_len = lists.start, lists.label, lists.length
    K = start.shape[0]
    best, best_s = -1, 0.0
    sweep = mode == UNIGRAM_BRUTE
    if mode == UNIGRAM_SPARSE:
        # a feature whose list holds more than K/16 labels is added densely (streaming its
        # row of W_U); if any is, every label gets a score and the short lists are added on
        # top, feature by feature in CSR order so the sums equal the brute-force ones exactly
        walk = 0
        for p in range(indptr[row], indptr[row + 1]):
            n_j = fl_len[indices[p]]
            walk += n_j
            if 16 * n_j > K:
                sweep = True
        sweep = sweep or 16 * walk > K * (indptr[row + 1] - indptr[row])
    if sweep:
        for k in range(K):
            score[k] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            j, v = indices[p], values[p]
            if sparse_w:
                base = fl_start[j]
                for r in range(fl_len[j]):
                    score[fl_label[base + r]] += v * w_s[base + r]
            elif mode == UNIGRAM_SPARSE and 16 * fl_len[j] <= K:
                base = fl_start[j]
                for r in range(fl_len[j]):
                    k = fl_label[base + r]
                    score[k] += v * W_U[j, k]
            else:
                for k in range(K):
                    score[k] += v * W_U[j, k]
        if at_start:
            for k in range(K):
                score[k] += start[k]
        if at_end:
            for k in range(K):
                score[k] += end[k]
        for s in range(n_act):
            theta[s] = score[act_row[s]]
        for k in range(K):
            if mark[k] != stamp and _wins_label(score[k], k, best_s, best):
                best, best_s = k, score[k]
        return best, best_s
    for s in range(n_act):
        theta[s] = _label_score(data, weights, lists, row, act_row[s], at_start, at_end)
    if n_act >= K:
        return best, best_s
    if mode == UNIGRAM_SAMPLED:
        size = (K + n_groups - 1) // n_groups
        for r in range(group * size, min(K, (group + 1) * size)):
            k = perm[r]
            if mark[k] == stamp:
                continue
            s = _label_score(data, weights, lists, row, k, at_start, at_end)
            if _wins_label(s, k, best_s, best):
                best, best_s = k, s
        return best, best_s
    # sparse exact search: accumulate scores over the label lists of the token's features
    n_touched = 0
    d = fl_start.shape[0] - 2  # the lists of the d features, then start and end
    n_feat = indptr[row + 1] - indptr[row]
    for q in range(n_feat + 2):
        if q < n_feat:
            p = indptr[row] + q
            j, v = indices[p], values[p]
        elif q == n_feat and at_start:
            j, v = d, 1.0
        elif q == n_feat + 1 and at_end:
            j, v = d + 1, 1.0
        else:
            continue
        base = fl_start[j]
        for r in range(fl_len[j]):
            k = fl_label[base + r]
            if mark[k] == stamp:
                continue
            if mark[k] != -stamp:
                mark[k] = -stamp  # touched in this call
                score[k] = 0.0
                touched[n_touched] = k
                n_touched += 1
            if sparse_w and j < d:
                score[k] += v * w_s[base + r]
            elif j < d:
                score[k] += v * W_U[j, k]
            elif j == d:
                score[k] += start[k]
            else:
                score[k] += end[k]
    for r in range(n_touched):
        k = touched[r]
        if _wins_label(score[k], k, best_s, best):
            best, best_s = k, score[k]
    # every label in no list scores exactly 0: the smallest such label stands for them all
    # (the scan stops at the first unmarked label, so it costs at most |touched| + |A| + 1)
    if best < 0 or best_s < 0.0 or (best_s == 0.0 and best > 0):
        limit = K if best < 0 or best_s < 0.0 else best
        for k in range(limit):
            if mark[k] != stamp and mark[k] != -stamp:
                best, best_s = k, 0.0
                break
    for r in range(n_touched):
        mark[touched[r]] = 0
    return best, best_s


# ------------------------------------------------------------------------------------------
# active sets and the label lists of the sparse unigram oracle
# ------------------------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _list_push(lists, j, k):
    """Append label k to the list of feature j (the caller checked it is not there). Each
    list is a contiguous segment of the pool ``lists.label`` (a walk streams it); a full
    segment moves to the pool's end with twice the room, so a push costs O(1) amortized
    and the pool holds at most about three times the listed labels. Should the pool lack
    the room, ``used[0]`` is set past its end and nothing is written: the caller grows
    the pool and rebuilds (gdmm_pass checks the room before each example)."""
    fl_start, fl_cap, fl_label, fl_len, fl_used = (
        lists.start,
        lists.cap,
        lists.label,
        lists.length,
        lists.used,
    )
    n = fl_len[j]
    if n == fl_cap[j]:
        base = fl_used[0]
        cap = max(4, 2 * n)
        if base + cap > fl_label.shape[0]:
            fl_used[0] = fl_label.shape[0] + 1
            return
        old = fl_start[j]
        for r in range(n):
            fl_label[base + r] = fl_label[old + r]
        fl_start[j] = base
        fl_cap[j] = cap
        fl_used[0] = base + cap
    fl_label[fl_start[j] + n] = k
    fl_len[j] = n + 1
    lists.member[j, k] = 1


@njit(cache=True, inline="always")
def _list_token_label(data, lists, d, row, k, at_start, at_end):
    """Record that label k may now carry weight on every feature of token ``row`` (start
    and end are features d and d + 1)."""
    indptr, indices = data.indptr, data.indices
    n_feat = indptr[row + 1] - indptr[row]
    for q in range(n_feat + 2):
        if q < n_feat:
            j = indices[indptr[row] + q]
        elif q == n_feat and at_start:
            j = d
        elif q == n_feat + 1 and at_end:
            j = d + 1
        else:
            continue
        if not lists.member[j, k]:
            _list_push(lists, j, k)


@njit(cache=True)
def build_label_lists(W_U, start, end, lists):
    """The label lists from scratch: feature j (start and end are features d and d + 1)
    lists every label k with ``W_U[j, k] != 0``."""
    d, K = W_U.shape
    lists.start[:] = 0
    lists.cap[:] = 0
    lists.length[:] = 0
    lists.member[:, :] = 0
    lists.used[0] = 0
    for j in range(d + 2):
        for k in range(K):
            v = W_U[j, k] if j < d else (start[k] if j == d else end[k])
            if v != 0.0:
                _list_push(lists, j, k)


@njit(cache=True)
def list_active_labels(data, sets, d, lists):
    """List every active label of every token on the token's features. With this, the
    lists stay complete when a label is listed at its activation only: W_U[j, k] changes
    only through tokens at which k is active."""
    offsets, act, n_act = data.offsets, sets.act, sets.n_act
    for i in range(offsets.shape[0] - 1):
        first, last = offsets[i], offsets[i + 1] - 1
        for row in range(first, last + 1):
            for s in range(n_act[row]):
                at_start = data.start_end and row == first
                at_end = data.start_end and row == last
                _list_token_label(data, lists, d, row, act[row, s], at_start, at_end)


@njit(cache=True, inline="always")
def _activate(sets, row, k):
    """Label k takes token ``row``'s next slot, with no mass and no messages."""
    s = sets.n_act[row]
    sets.idle[row, s] = 0
    sets.act[row, s] = k
    sets.q_u[row, s] = 0.0
    sets.lam_in[row, s] = 0.0
    sets.sum_in[row, s] = 0.0
    sets.lam_out[row, s] = 0.0
    sets.sum_out[row, s] = 0.0
    sets.n_act[row] = s + 1
    return s


# ------------------------------------------------------------------------------------------
# one pass
# ------------------------------------------------------------------------------------------
class _Scratch(NamedTuple):
    grad: np.ndarray  # (cap,) per active slot
    mu_a: np.ndarray  # messages of the left and right tokens' slots
    mu_b: np.ndarray
    proj: np.ndarray
    scratch: np.ndarray
    theta: np.ndarray
    step: np.ndarray
    changed: np.ndarray
    pair_w: np.ndarray  # (cap_pairs,) W_B of the current bigram factor's support pairs
    mark_a: np.ndarray  # (K,) labels marked with the factor's stamp
    mark_b: np.ndarray
    slot_a: np.ndarray
    slot_b: np.ndarray
    dense_a: np.ndarray
    dense_b: np.ndarray
    score: np.ndarray
    touched: np.ndarray
    stack: np.ndarray  # the max-tree search's
    factors: np.ndarray  # (2 max_T,) an example's factors in random order


@njit(cache=True, inline="always")
def _scratch(K, cap, cap_pairs, max_T):
    return _Scratch(
        np.empty(cap),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap),
        np.empty(cap, dtype=np.int64),
        np.empty(cap_pairs),
        np.zeros(K, dtype=np.int64),
        np.zeros(K, dtype=np.int64),
        np.zeros(K, dtype=np.int64),
        np.zeros(K, dtype=np.int64),
        np.zeros(K),
        np.zeros(K),
        np.zeros(K),
        np.empty(K, dtype=np.int64),
        np.empty(130, dtype=np.int64),
        np.empty(2 * max_T, dtype=np.int64),
    )


@njit(cache=True)
def gdmm_pass(data, weights, avg, sets, pairs, trans, lists, settings, order, first, counters):
    """GDMM on the examples ``order[first:]``: per example a block step on each of its
    factors (in random order), then the multiplier step on its edges. The multipliers of an
    example are read by its own factors only, so this is exactly Algorithm 1's pass followed
    by its multiplier step. Before an example it checks that its tokens, edges and label
    lists have room for what the example can add (3 labels per token, 1 pair per edge); if
    not, it returns ``(position, NEED_* flags)`` so the caller can grow the arrays and call
    again. Returns ``(len(order), 0)`` when done. ``counters`` accumulates [unigram oracle
    calls, bigram oracle calls, labels activated, pairs added]. Every change of the weights
    also goes into the averaging accumulators (``avg``, module docstring). With sparse
    weights (``weights.sparse``) the unary weights and their accumulator are ``w_s`` and
    ``R_s`` on the support, whose rows are the (fixed) label lists; ``W_U``, ``R_U`` are
    then unused.
    """
    K = weights.start.shape[0]
    d = lists.start.shape[0] - 2 if weights.sparse else weights.W_U.shape[0]
    sparse_lists = settings.unigram_mode == UNIGRAM_SPARSE and not weights.sparse
    ws = _scratch(K, sets.act.shape[1], pairs.q_b.shape[1], data.max_T)
    stamp = 0
    for idx in range(first, order.shape[0]):
        i = order[idx]
        need = _room_needed(data, sets, pairs, lists, K, d, sparse_lists, i)
        if need:
            return idx, need
        stamp = _example_steps(
            data, weights, avg, sets, pairs, trans, lists, settings, ws, i, stamp, counters
        )
        _example_multipliers(data.offsets, sets, pairs, i, settings.eta)
        if settings.patience > 0:
            _shrink_example(data.offsets, sets, pairs, i, settings.patience)
    return order.shape[0], 0


@njit(cache=True)
def _room_needed(data, sets, pairs, lists, K, d, sparse_lists, i):
    """The NEED_* flags of example i: what must grow before its factors may add 3 labels
    per token (each pushed on the token's label lists) and 1 pair per edge."""
    indptr, indices, offsets = data.indptr, data.indices, data.offsets
    n_act, n_pair, fl_len = sets.n_act, pairs.n_pair, lists.length
    cap = sets.act.shape[1]
    s0 = offsets[i]
    T = offsets[i + 1] - s0
    need = 0
    list_need = 0
    for row in range(s0, s0 + T):
        if min(n_act[row] + 3, K) > cap:
            need |= NEED_LABEL_SLOTS
        if row < s0 + T - 1 and n_pair[row - i] + 1 > pairs.q_b.shape[1]:
            need |= NEED_PAIR_SLOTS
        if sparse_lists:  # 3 activations at most, each pushing k on x_t's lists
            list_need += 16 * (indptr[row + 1] - indptr[row] + 2)
            for p in range(indptr[row], indptr[row + 1]):
                list_need += 4 * fl_len[indices[p]]
            list_need += 4 * (fl_len[d] + fl_len[d + 1])
    if sparse_lists and lists.used[0] + list_need > lists.label.shape[0]:
        need |= NEED_LIST_ROOM
    return need


@njit(cache=True, inline="always")
def _example_steps(data, weights, avg, sets, pairs, trans, lists, settings, ws, i, stamp, counters):
    """A block step on every factor of example i, in random order; returns the last stamp."""
    C, rho = settings.C, settings.rho
    act, n_act, q_u = sets.act, sets.n_act, sets.q_u
    lam_in, sum_in, lam_out, sum_out = sets.lam_in, sets.sum_in, sets.lam_out, sets.sum_out
    pair_a, pair_b, q_b, n_pair = pairs.pair_a, pairs.pair_b, pairs.q_b, pairs.n_pair
    grad, mu_a, mu_b, proj, theta = ws.grad, ws.mu_a, ws.mu_b, ws.proj, ws.theta
    step, changed, pair_w = ws.step, ws.changed, ws.pair_w
    mark_a, mark_b, slot_a, slot_b = ws.mark_a, ws.mark_b, ws.slot_a, ws.slot_b
    W_B = weights.W_B
    sparse_w = weights.sparse
    K = weights.start.shape[0]
    d = lists.start.shape[0] - 2 if sparse_w else weights.W_U.shape[0]
    sparse_lists = settings.unigram_mode == UNIGRAM_SPARSE and not sparse_w
    W_U, R_U, w_s, R_s = weights.W_U, avg.R_U, weights.w_s, avg.R_s
    avg_weight, R_B = avg.weight, avg.R_B
    indptr, indices, values = data.indptr, data.indices, data.values
    pos_ptr, pos_col = trans.pos_ptr, trans.pos_col
    s0 = data.offsets[i]
    T = data.offsets[i + 1] - s0
    factors = ws.factors
    n_f = 2 * T - 1
    for f in range(n_f):
        factors[f] = f
    for f in range(n_f - 1, 0, -1):
        r = _random_below(settings.seed, i, f, f + 1)
        factors[f], factors[r] = factors[r], factors[f]
    for f_idx in range(n_f):
        f = factors[f_idx]
        stamp += 1
        if f < T:
            t = f
            row = s0 + t
            at_start = data.start_end and t == 0
            at_end = data.start_end and t == T - 1
            nA = n_act[row]
            lw = data.loss_weights[data.labels[row]]
            for s in range(nA):
                mark_a[act[row, s]] = stamp
            counters[0] += 1
            k_new, th_new = unigram_fmo(
                data,
                weights,
                lists,
                settings.unigram_mode,
                _random_below(settings.seed, i, n_f + t, settings.n_groups),
                settings.n_groups,
                settings.perm,
                row,
                at_start,
                at_end,
                act[row],
                nA,
                theta,
                mark_a,
                stamp,
                ws.score,
                ws.touched,
            )
            for s in range(nA):
                grad[s] = -C * (theta[s] + (lw if s > 0 else 0.0))
            n_edges = 0
            if t > 0:
                n_edges += 1
                for s in range(nA):
                    grad[s] -= lam_in[row, s] + rho * (sum_in[row, s] - q_u[row, s])
            if t < T - 1:
                n_edges += 1
                for s in range(nA):
                    grad[s] -= lam_out[row, s] + rho * (sum_out[row, s] - q_u[row, s])
            g_min = grad[0]
            for s in range(1, nA):
                g_min = min(g_min, grad[s])
            if k_new >= 0 and -C * (th_new + lw) < g_min:
                s = _activate(sets, row, k_new)
                if settings.unigram_mode == UNIGRAM_SPARSE and not sparse_w:
                    # W_U[j, k_new] may become non-zero for j in x_t
                    _list_token_label(data, lists, d, row, k_new, at_start, at_end)
                grad[s] = -C * (th_new + lw)
                nA += 1
                counters[2] += 1
            c = C * C * (data.sq_norms[row] + at_start + at_end) + rho * n_edges
            if c > 0.0:
                for s in range(nA):
                    mu_a[s] = q_u[row, s] - grad[s] / c
                project_to_simplex(mu_a, nA, proj, ws.scratch)
            else:  # L is linear in this block: jump to the best vertex
                best = 0
                for s in range(nA):
                    proj[s] = 0.0
                    if grad[s] < grad[best]:
                        best = s
                proj[best] = 1.0
            n_changed = 0
            for s in range(nA):
                delta = proj[s] - q_u[row, s]
                if delta != 0.0:
                    q_u[row, s] = proj[s]
                    changed[n_changed] = act[row, s]
                    step[n_changed] = -C * delta
                    n_changed += 1
            for p in range(indptr[row], indptr[row + 1]):  # row-major: W_U[j] is contiguous
                j, v = indices[p], values[p]
                if weights.sparse:  # a pair outside the support has no weight
                    for r in range(n_changed):
                        q = support_position(lists.start, lists.label, K, j, changed[r])
                        if q >= 0:
                            w_s[q] += step[r] * v
                            if avg_weight > 0.0:
                                R_s[q] += avg_weight * step[r] * v
                    continue
                for r in range(n_changed):
                    W_U[j, changed[r]] += step[r] * v
                if avg_weight > 0.0:
                    for r in range(n_changed):
                        R_U[j, changed[r]] += avg_weight * step[r] * v
            for r in range(n_changed):
                if at_start:
                    weights.start[changed[r]] += step[r]
                    avg.R_start[changed[r]] += avg_weight * step[r]
                if at_end:
                    weights.end[changed[r]] += step[r]
                    avg.R_end[changed[r]] += avg_weight * step[r]
            continue
        t = f - T
        row = s0 + t
        e = row - i
        nA = n_act[row]
        nB = n_act[row + 1]
        for s in range(nA):
            k = act[row, s]
            mark_a[k] = stamp
            slot_a[k] = s
            mu_a[s] = lam_out[row, s] + rho * (sum_out[row, s] - q_u[row, s])
        for s in range(nB):
            k = act[row + 1, s]
            mark_b[k] = stamp
            slot_b[k] = s
            mu_b[s] = lam_in[row + 1, s] + rho * (sum_in[row + 1, s] - q_u[row + 1, s])
        counters[1] += 1
        if trans.sorted_search:
            a_new, b_new, g_new = bigram_sorted(
                trans,
                W_B,
                C,
                act[row],
                nA,
                mu_a,
                act[row + 1],
                nB,
                mu_b,
                mark_a,
                mark_b,
                slot_b,
                stamp,
                ws.stack,
            )
        else:
            a_new, b_new, g_new = bigram_brute(
                W_B, C, act[row], nA, mu_a, act[row + 1], nB, mu_b, ws.dense_a, ws.dense_b
            )
        # the away pair: the worst pair in the support of q_e
        p_old = -1
        g_old = 0.0
        for p in range(n_pair[e]):
            sa, sb = pair_a[e, p], pair_b[e, p]
            pair_w[p] = W_B[act[row, sa], act[row + 1, sb]]
            g = -C * pair_w[p] + mu_a[sa] + mu_b[sb]
            if p_old < 0 or g > g_old:
                p_old, g_old = p, g
        if g_new >= g_old:
            continue
        if mark_a[a_new] == stamp and mark_b[b_new] == stamp:
            sa_new, sb_new = slot_a[a_new], slot_b[b_new]
        else:
            sa_new, sb_new = _activate_pair_labels(
                data, sets, lists, ws, d, sparse_lists, i, t, a_new, b_new, stamp, counters
            )
        p_new = -1
        for p in range(n_pair[e]):
            if pair_a[e, p] == sa_new and pair_b[e, p] == sb_new:
                p_new = p
                break
        if p_new < 0:
            p_new = n_pair[e]
            pair_a[e, p_new] = sa_new
            pair_b[e, p_new] = sb_new
            q_b[e, p_new] = 0.0
            n_pair[e] += 1
            counters[3] += 1
        # Pairwise steps, written out here rather than called (module docstring, "Inlined
        # helpers"): first from the away pair to the oracle's pair, then up to
        # support_steps steps from the support's worst pair to its best (first index on
        # ties), which need no oracle call.
        for n_step in range(settings.support_steps + 1):
            if n_step > 0:
                # gradients within rounding of each other tie (the first pair wins): an
                # exact line search leaves its two pairs at equal gradients, and which
                # of them rounding favours must not steer the next step
                p_new = -1
                p_old = -1
                for p in range(n_pair[e]):
                    ma, mb = mu_a[pair_a[e, p]], mu_b[pair_b[e, p]]
                    g = -C * pair_w[p] + ma + mb
                    tie = TIE * (abs(C * pair_w[p]) + abs(ma) + abs(mb))
                    if p_old < 0 or g > g_old + tie:
                        p_old, g_old = p, g
                    if p_new < 0 or g < g_new - tie:
                        p_new, g_new = p, g
                if p_new == p_old or g_new >= g_old:
                    break
            # exact line search along D = e_new − e_old:
            # γ = min(q_old, (g_old − g_new) / (2C² + ρ (‖M_L D‖² + ‖M_R D‖²)))
            sa_new, sb_new = pair_a[e, p_new], pair_b[e, p_new]
            sa_old, sb_old = pair_a[e, p_old], pair_b[e, p_old]
            curv = 2.0 * C * C + rho * (2.0 * (sa_new != sa_old) + 2.0 * (sb_new != sb_old))
            gamma = min(q_b[e, p_old], (g_old - g_new) / curv)
            q_b[e, p_new] += gamma
            q_b[e, p_old] -= gamma
            sum_out[row, sa_new] += gamma
            sum_out[row, sa_old] -= gamma
            sum_in[row + 1, sb_new] += gamma
            sum_in[row + 1, sb_old] -= gamma
            mu_a[sa_new] += rho * gamma  # μ moves with its marginal sum
            mu_a[sa_old] -= rho * gamma
            mu_b[sb_new] += rho * gamma
            mu_b[sb_old] -= rho * gamma
            for end_of_step in range(2):  # W_B at the new pair, then at the old one
                if end_of_step == 0:
                    a, b, p, dw = act[row, sa_new], act[row + 1, sb_new], p_new, -gamma * C
                else:
                    a, b, p, dw = act[row, sa_old], act[row + 1, sb_old], p_old, gamma * C
                W_B[a, b] += dw
                if avg_weight > 0.0:
                    R_B[a, b] += avg_weight * dw
                at = listed_position(pos_ptr, pos_col, a, b)
                if at < 0:  # unlisted: drop a rounding residue above 0 (see _listed_changed)
                    if W_B[a, b] > 0.0:
                        W_B[a, b] = 0.0
                elif trans.sorted_search:
                    _listed_changed(
                        W_B[a, b],
                        at,
                        a,
                        b,
                        trans.tree,
                        trans.vals,
                        pos_ptr,
                        trans.cpos_ptr,
                        trans.cpos_idx,
                        trans.top,
                        trans.top_at,
                    )
                pair_w[p] = W_B[a, b]
            if q_b[e, p_old] <= 1e-15:  # drop the emptied pair
                last = n_pair[e] - 1
                pair_a[e, p_old] = pair_a[e, last]
                pair_b[e, p_old] = pair_b[e, last]
                q_b[e, p_old] = q_b[e, last]
                pair_w[p_old] = pair_w[last]
                n_pair[e] = last
    return stamp


@njit(cache=True)
def _activate_pair_labels(
    data, sets, lists, ws, d, sparse_lists, i, t, a_new, b_new, stamp, counters
):
    """The slots of the bigram oracle's labels (a_new, b_new) at edge (t, t + 1) of example
    i, activating (and listing) whichever is not active yet."""
    mark_a, mark_b, slot_a, slot_b = ws.mark_a, ws.mark_b, ws.slot_a, ws.slot_b
    mu_a, mu_b = ws.mu_a, ws.mu_b
    s0 = data.offsets[i]
    T = data.offsets[i + 1] - s0
    row = s0 + t
    if mark_a[a_new] == stamp:
        sa_new = slot_a[a_new]
    else:
        sa_new = _activate(sets, row, a_new)
        mu_a[sa_new] = 0.0  # a new label carries no message yet
        if sparse_lists:
            _list_token_label(data, lists, d, row, a_new, data.start_end and t == 0, False)
        counters[2] += 1
    if mark_b[b_new] == stamp:
        sb_new = slot_b[b_new]
    else:
        sb_new = _activate(sets, row + 1, b_new)
        mu_b[sb_new] = 0.0
        if sparse_lists:
            at_end = data.start_end and t + 1 == T - 1
            _list_token_label(data, lists, d, row + 1, b_new, False, at_end)
        counters[2] += 1
    return sa_new, sb_new


@njit(cache=True)
def _example_multipliers(offsets, sets, pairs, i, eta):
    """Recompute the marginal sums of example i's edges exactly, then
    λ ← λ + η (M q_e − q_j) (Algorithm 1, step 2; ``eta = 0`` only measures). Returns
    ``(Σ‖M q_e − q_j‖, Σ <λ, M q_e − q_j>, Σ ‖M q_e − q_j‖²)`` before the step."""
    n_act, q_u = sets.n_act, sets.q_u
    lam_in, sum_in, lam_out, sum_out = sets.lam_in, sets.sum_in, sets.lam_out, sets.sum_out
    pair_a, pair_b, q_b, n_pair = pairs.pair_a, pairs.pair_b, pairs.q_b, pairs.n_pair
    residual = 0.0
    lagrange = 0.0
    penalty = 0.0
    for row in range(offsets[i], offsets[i + 1] - 1):
        e = row - i
        nA, nB = n_act[row], n_act[row + 1]
        for s in range(nA):
            sum_out[row, s] = 0.0
        for s in range(nB):
            sum_in[row + 1, s] = 0.0
        for p in range(n_pair[e]):
            sum_out[row, pair_a[e, p]] += q_b[e, p]
            sum_in[row + 1, pair_b[e, p]] += q_b[e, p]
        r_l = 0.0
        for s in range(nA):
            diff = sum_out[row, s] - q_u[row, s]
            lagrange += lam_out[row, s] * diff
            r_l += diff * diff
            lam_out[row, s] += eta * diff
        r_r = 0.0
        for s in range(nB):
            diff = sum_in[row + 1, s] - q_u[row + 1, s]
            lagrange += lam_in[row + 1, s] * diff
            r_r += diff * diff
            lam_in[row + 1, s] += eta * diff
        residual += np.sqrt(r_l) + np.sqrt(r_r)
        penalty += r_l + r_r
    return residual, lagrange, penalty


@njit(cache=True)
def _shrink_example(offsets, sets, pairs, i, patience):
    """Drop from the active sets of example i the labels that have been idle (no mass in
    q_t and in no pair of either incident edge; the sums are exact here) for ``patience``
    consecutive multiplier steps. Their multipliers are dropped with them: the Lagrangian's
    value is unchanged (their constraint residual is 0), and should such a label become
    attractive again without its message the FMO re-activates it. The gold slot 0 stays."""
    act, n_act, q_u, idle = sets.act, sets.n_act, sets.q_u, sets.idle
    lam_in, sum_in, lam_out, sum_out = sets.lam_in, sets.sum_in, sets.lam_out, sets.sum_out
    pair_a, pair_b, n_pair = pairs.pair_a, pairs.pair_b, pairs.n_pair
    first, stop = offsets[i], offsets[i + 1]
    for row in range(first, stop):
        for s in range(n_act[row] - 1, 0, -1):
            if q_u[row, s] == 0.0 and sum_in[row, s] == 0.0 and sum_out[row, s] == 0.0:
                idle[row, s] += 1
            else:
                idle[row, s] = 0
            if idle[row, s] < patience:
                continue
            last = n_act[row] - 1
            if s != last:  # move the last slot into s and re-point the pairs that use it
                act[row, s] = act[row, last]
                q_u[row, s] = q_u[row, last]
                lam_in[row, s] = lam_in[row, last]
                sum_in[row, s] = sum_in[row, last]
                lam_out[row, s] = lam_out[row, last]
                sum_out[row, s] = sum_out[row, last]
                idle[row, s] = idle[row, last]
                if row < stop - 1:
                    e = row - i
                    for p in range(n_pair[e]):
                        if pair_a[e, p] == last:
                            pair_a[e, p] = s
                if row > first:
                    e = row - 1 - i
                    for p in range(n_pair[e]):
                        if pair_b[e, p] == last:
                            pair_b[e, p] = s
            n_act[row] = last


@njit(cache=True)
def mix_token_and_edge_marginals_with_gold(offsets, sets, pairs, t):
    """Every factor's marginal to ``t q + (1 − t) e_gold`` (slot 0 is a token's gold label,
    the slot pair (0, 0) an edge's gold pair, added where it left the support), with the
    row and column sums kept in step. Returns False, changing nothing, when an edge without
    its gold pair has no room for it (widen the pair slots and call again)."""
    q_u, sum_in, sum_out = sets.q_u, sets.sum_in, sets.sum_out
    pair_a, pair_b, q_b, n_pair = pairs.pair_a, pairs.pair_b, pairs.q_b, pairs.n_pair
    n_edges = q_b.shape[0]
    at = np.full(n_edges, -1, dtype=np.int64)
    for e in range(n_edges):
        for p in range(n_pair[e]):
            if pair_a[e, p] == 0 and pair_b[e, p] == 0:
                at[e] = p
                break
        if at[e] < 0 and n_pair[e] >= q_b.shape[1]:
            return False
    for i in range(offsets.shape[0] - 1):
        for row in range(offsets[i], offsets[i + 1]):
            for s in range(q_u.shape[1]):
                q_u[row, s] *= t
                sum_in[row, s] *= t
                sum_out[row, s] *= t
            q_u[row, 0] += 1.0 - t
            if row > offsets[i]:
                sum_in[row, 0] += 1.0 - t
            if row < offsets[i + 1] - 1:
                sum_out[row, 0] += 1.0 - t
                e = row - i
                for p in range(n_pair[e]):
                    q_b[e, p] *= t
                if at[e] < 0:
                    at[e] = n_pair[e]
                    pair_a[e, at[e]] = 0
                    pair_b[e, at[e]] = 0
                    q_b[e, at[e]] = 0.0
                    n_pair[e] += 1
                q_b[e, at[e]] += 1.0 - t
    return True


@njit(cache=True)
def consistency_residuals(offsets, sets, pairs):
    """Over all examples: the residual Σ‖M q_e − q_j‖, Σ <λ, M q_e − q_j> and
    Σ ‖M q_e − q_j‖² (the last two give the augmented Lagrangian)."""
    residual = 0.0
    lagrange = 0.0
    penalty = 0.0
    for i in range(offsets.shape[0] - 1):
        r, lg, pn = _example_multipliers(offsets, sets, pairs, i, 0.0)
        residual += r
        lagrange += lg
        penalty += pn
    return residual, lagrange, penalty


@njit(cache=True)
def transport_rounding(offsets, C, act, n_act, q_u, pair_a, pair_b, q_b, n_pair, dW_B):
    """Round every bigram factor q_e into the transport polytope of its two unigram factors
    (module docstring, "Certified dual") and add the change of W_B, ``C (q_e − π_e)``, to
    ``dW_B`` (K × K, zero on entry)."""
    cap = act.shape[1]
    row_sum = np.zeros(cap)
    col_sum = np.zeros(cap)
    row_gap = np.zeros(cap)
    col_gap = np.zeros(cap)
    pi = np.zeros(q_b.shape[1])
    for i in range(offsets.shape[0] - 1):
        for row in range(offsets[i], offsets[i + 1] - 1):
            e = row - i
            nA, nB, nP = n_act[row], n_act[row + 1], n_pair[e]
            # rows down to q_t
            for s in range(nA):
                row_sum[s] = 0.0
            for p in range(nP):
                pi[p] = q_b[e, p]
                row_sum[pair_a[e, p]] += pi[p]
            for s in range(nB):
                col_sum[s] = 0.0
            for p in range(nP):
                sa = pair_a[e, p]
                if row_sum[sa] > q_u[row, sa]:
                    pi[p] *= q_u[row, sa] / row_sum[sa]
                col_sum[pair_b[e, p]] += pi[p]
            # columns down to q_{t+1}, then the deficits of both
            for s in range(nA):
                row_sum[s] = 0.0
            for p in range(nP):
                sb = pair_b[e, p]
                if col_sum[sb] > q_u[row + 1, sb]:
                    pi[p] *= q_u[row + 1, sb] / col_sum[sb]
                row_sum[pair_a[e, p]] += pi[p]
            for s in range(nB):
                col_sum[s] = 0.0
            for p in range(nP):
                col_sum[pair_b[e, p]] += pi[p]
            for s in range(nA):
                row_gap[s] = max(q_u[row, s] - row_sum[s], 0.0)
            missing = 0.0
            for s in range(nB):
                col_gap[s] = max(q_u[row + 1, s] - col_sum[s], 0.0)
                missing += col_gap[s]
            for p in range(nP):
                change = q_b[e, p] - pi[p]
                if change != 0.0:
                    dW_B[act[row, pair_a[e, p]], act[row + 1, pair_b[e, p]]] += C * change
            if missing <= 0.0:
                continue
            for sa in range(nA):  # the deficits' product: π += row_gap col_gapᵀ / missing
                if row_gap[sa] <= 0.0:
                    continue
                a = act[row, sa]
                scale = C * row_gap[sa] / missing
                for sb in range(nB):
                    if col_gap[sb] > 0.0:
                        dW_B[a, act[row + 1, sb]] -= scale * col_gap[sb]


@njit(cache=True)
def oracle_pass(data, weights, sets, trans, lists, settings):
    """Every factor's FMO on the current state, without steps: times the oracles alone
    (the history's oracle share of a pass). Returns a checksum so nothing is optimized
    away."""
    C, rho = settings.C, settings.rho
    act, n_act, q_u = sets.act, sets.n_act, sets.q_u
    lam_in, sum_in, lam_out, sum_out = sets.lam_in, sets.sum_in, sets.lam_out, sets.sum_out
    offsets, W_B = data.offsets, weights.W_B
    K = weights.start.shape[0]
    cap = act.shape[1]
    mu_a = np.empty(cap)
    mu_b = np.empty(cap)
    theta = np.empty(cap)
    mark_a = np.zeros(K, dtype=np.int64)
    mark_b = np.zeros(K, dtype=np.int64)
    slot_b = np.zeros(K, dtype=np.int64)
    dense_a = np.zeros(K)
    dense_b = np.zeros(K)
    score = np.zeros(K)
    touched = np.empty(K, dtype=np.int64)
    stack = np.empty(130, dtype=np.int64)
    stamp = 0
    total = 0.0
    for i in range(offsets.shape[0] - 1):
        s0 = offsets[i]
        T = offsets[i + 1] - s0
        for t in range(T):
            row = s0 + t
            stamp += 1
            for s in range(n_act[row]):
                mark_a[act[row, s]] = stamp
            k, th = unigram_fmo(
                data,
                weights,
                lists,
                settings.unigram_mode,
                _random_below(settings.seed, i, t, settings.n_groups),
                settings.n_groups,
                settings.perm,
                row,
                data.start_end and t == 0,
                data.start_end and t == T - 1,
                act[row],
                n_act[row],
                theta,
                mark_a,
                stamp,
                score,
                touched,
            )
            total += th
            if t == T - 1:
                continue
            stamp += 1
            nA, nB = n_act[row], n_act[row + 1]
            for s in range(nA):
                mark_a[act[row, s]] = stamp
                mu_a[s] = lam_out[row, s] + rho * (sum_out[row, s] - q_u[row, s])
            for s in range(nB):
                mark_b[act[row + 1, s]] = stamp
                slot_b[act[row + 1, s]] = s
                mu_b[s] = lam_in[row + 1, s] + rho * (sum_in[row + 1, s] - q_u[row + 1, s])
            if trans.sorted_search:
                a, b, g = bigram_sorted(
                    trans,
                    W_B,
                    C,
                    act[row],
                    nA,
                    mu_a,
                    act[row + 1],
                    nB,
                    mu_b,
                    mark_a,
                    mark_b,
                    slot_b,
                    stamp,
                    stack,
                )
            else:
                a, b, g = bigram_brute(
                    W_B, C, act[row], nA, mu_a, act[row + 1], nB, mu_b, dense_a, dense_b
                )
            total += g
    return total
