"""The block solvers' compiled passes, written once over the model-kernel interface of
:mod:`dualstruct.models.base` (``prepare``, ``score``, ``loss``, ``oracle``, ``decode``,
``add_difference``, ``difference_sq_norm``). numba compiles each function once per kernel
class, calling the model's compiled implementations, so a built-in model runs without Python
per block; a Python model's kernel calls back into Python from the same code. The loops a
model needs itself (the hinge, decoding, the cutting plane's constraint) are in
:mod:`dualstruct.models.loops`.

Notation (C-form): block i's dual point q_i is a distribution over labellings; its corner y
contributes ``w_s(y) = C g(y) (φ(x_i, ȳ_i) − φ(x_i, y))`` and ``ℓ_s(y) = C δ(ȳ_i, y)``, so that
``w = Σ_i E_{q_i} w_s`` and ``ℓ = Σ_i E_{q_i} ℓ_s`` and the dual is ``D = ℓ − ½‖w‖²``. The
corner scale is ``g(y) = 1`` for margin rescaling and ``g(y) = δ(ȳ_i, y)`` for slack rescaling
(the constraint ``⟨w, δ(y) ψ_i(y)⟩ ≥ δ(y) − ξ_i`` of Tsochantaridis et al. 2005, eq. 6). The
gradient of D at q along corner y is then ``C v(y)`` up to a constant of the block, with

    v(y) = δ(ȳ_i, y) + s(y)                    (margin)
    v(y) = δ(ȳ_i, y) (1 + s(y) − s(ȳ_i))        (slack)

so the oracle of a block is the maximizer of v and the Frank-Wolfe block gap is
``C (max_y v(y) − E_{q_i} v)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..models.interface import (
    add_difference,
    add_oracle_difference,
    difference_sq_norm,
    loss,
    oracle,
    oracle_loss,
    oracle_value,
    prepare,
    score,
    slack_oracle,
    status,
    workspace,
)
from ..models.loops import EXACT_SEARCH


@njit(cache=True)
def _max_block(label_offsets):
    longest = 0
    for i in range(label_offsets.shape[0] - 1):
        longest = max(longest, label_offsets[i + 1] - label_offsets[i])
    return longest


@njit(cache=True)
def _slack_value(k, i, w, ws, gold_score, y):
    """``v(y) = δ(ȳ_i, y)(1 + s(y) − s(ȳ_i))`` (after prepare)."""
    d = loss(k, i, y)
    if d == 0.0:
        return 0.0
    return d * (1.0 + score(k, i, w, ws, y) - gold_score)


@njit(cache=True, inline="always")
def _pairwise_step(
    k, i, ws, gold, y, v, pw_gap, alpha_v, C, sigma, slack, w, delta, R, averaging, A_prev
):
    """Block i's pairwise step from atom ``v`` (weight ``alpha_v``) to labelling ``y`` with
    the exact line search of :func:`pairwise_bcfw_pass`, applied to ``w`` (and ``delta``,
    ``R``); returns (γ, the change of the loss term)."""
    loss_y = loss(k, i, y)
    loss_v = loss(k, i, v)
    if slack:
        n_y = difference_sq_norm(k, i, ws, gold, y)
        n_v = difference_sq_norm(k, i, ws, gold, v)
        cross = n_y + n_v - difference_sq_norm(k, i, ws, y, v)
        norm2 = C * C * (loss_y * loss_y * n_y + loss_v * loss_v * n_v - loss_y * loss_v * cross)
    else:
        norm2 = C * C * difference_sq_norm(k, i, ws, y, v)
    norm2 *= sigma
    if norm2 <= 0.0:
        gamma = alpha_v
    else:
        gamma = pw_gap / norm2
        if gamma > alpha_v - 1e-12:
            gamma = alpha_v  # a drop step: the away atom leaves the active set
    f = gamma * C
    fs = f * sigma
    if slack:
        add_difference(k, i, gold, y, fs * loss_y, w)
        add_difference(k, i, gold, v, -fs * loss_v, w)
        if len(delta) > 0:
            add_difference(k, i, gold, y, f * loss_y, delta)
            add_difference(k, i, gold, v, -f * loss_v, delta)
        if averaging:
            add_difference(k, i, gold, y, f * loss_y * A_prev, R)
            add_difference(k, i, gold, v, -f * loss_v * A_prev, R)
    else:
        add_difference(k, i, v, y, fs, w)
        if len(delta) > 0:
            add_difference(k, i, v, y, f, delta)
        if averaging:
            add_difference(k, i, v, y, f * A_prev, R)
    return gamma, f * (loss_y - loss_v)


@njit(cache=True, inline="always")
def _move_mass(atom_labels, atom_weights, atom_count, i, base, T, fw, away, gamma):
    """Move weight γ from atom ``away`` to atom ``fw``; a drained away atom is dropped (the
    last atom takes its slot)."""
    alpha_v = atom_weights[i, away]
    atom_weights[i, fw] += gamma
    atom_weights[i, away] -= gamma
    if gamma == alpha_v:
        fw_weight = atom_weights[i, fw]
        last = atom_count[i] - 1
        if away != last:
            for t in range(T):
                atom_labels[base + away * T + t] = atom_labels[base + last * T + t]
            atom_weights[i, away] = atom_weights[i, last]
        atom_weights[i, last] = 0.0
        atom_count[i] = last
        if fw == last:
            atom_weights[i, away] = fw_weight


@njit(cache=True, inline="always")
def _best_and_worst_atom(
    k, i, w, ws, gold, atom_labels, atom_weights, n_atoms, base, T, slack, values
):
    """The atoms of largest v and, among those with weight, of smallest v at the prepared w
    (v of the module docstring, up to the block's constant), their values in ``values``."""
    gold_score = score(k, i, w, ws, gold) if slack else 0.0
    best, worst = 0, -1
    for a in range(n_atoms):
        y_a = atom_labels[base + a * T : base + (a + 1) * T]
        if slack:
            values[a] = _slack_value(k, i, w, ws, gold_score, y_a)
        else:
            values[a] = loss(k, i, y_a) + score(k, i, w, ws, y_a)
        if values[a] > values[best]:
            best = a
        if atom_weights[i, a] > 0.0 and (worst < 0 or values[a] < values[worst]):
            worst = a
    return best, worst


@njit(cache=True)
def pairwise_bcfw_pass(
    k,
    order,
    C,
    w,
    R,
    averaging,
    atom_labels,
    atom_weights,
    atom_count,
    capacity,
    scalars,
    block_gaps,
    slack,
    search,
    calls,
    sigma,
    delta,
    atom_steps=0,
):
    """One block-coordinate pairwise Frank-Wolfe pass (Osokin et al. 2016, Alg. 2), C-form.

    Block i's dual point is kept as atoms, labellings ``y^a`` with weights ``α_a`` summing to
    one, stored at ``atom_labels[label_offsets[i]·A + a·T_i : … + T_i]`` (A = ``capacity``,
    T_i the block's labelling length). The step moves mass γ from the away atom
    ``a = argmin_{α_a > 0} v(y^a)`` to the oracle's corner ``ŷ = argmax_y v(y)`` (v of the
    module docstring; the step uses v(ŷ) itself, the block gap the oracle's upper bound):

        w ← w + γ (w_s(ŷ) − w_s(y^a)),      ℓ ← ℓ + γ C (δ(ŷ) − δ(y^a))
        γ = min( C (v(ŷ) − v(y^a)) / ‖w_s(ŷ) − w_s(y^a)‖²,  α_a )    (exact line search)

    With margin rescaling ``w_s(ŷ) − w_s(y^a) = C (φ(y^a) − φ(ŷ))``; with slack rescaling the
    norm follows from the three labelling differences by polarization,
    ``‖g_ŷ u − g_a u'‖² = g_ŷ² ‖u‖² + g_a² ‖u'‖² − g_ŷ g_a (‖u‖² + ‖u'‖² − ‖u − u'‖²)`` with
    ``u = φ(ȳ) − φ(ŷ)``, ``u' = φ(ȳ) − φ(y^a)``, and the slack oracle is the model's
    ``search``, seeded by the block's best atom. ``block_gaps[i]`` receives the block's
    Frank-Wolfe gap. Weighted averaging (weights 1, 2, 3, … per visit) keeps
    ``R ← R + A_{m−1} Δw`` and ``R_ℓ ← R_ℓ + A_{m−1} Δℓ`` with ``A_m = m (m+1) / 2``, so that
    ``w̄ = w − R / A_m``. ``scalars = [ℓ, m, R_ℓ]``.

    As the local solver of CoCoA+ (:mod:`dualstruct.distributed`), ``w`` is the local
    iterate ``w₀ + σ' Δw`` of the subproblem G_k^{σ'} (Ma et al. 2015, eq. 10): the quadratic
    term of the line search is scaled by ``sigma`` = σ', ``w`` moves by σ' times the step and
    ``delta`` (when not empty) accumulates the unscaled change Δw. The proximal scheme of
    :class:`~dualstruct.solvers.BCFW` uses the same arguments (``w`` = x, ``delta`` = u,
    σ' = 1/(1+κ)). With ``delta`` the averaging accumulators follow the unscaled change, so
    they average ``delta``'s iterates. ``sigma = 1`` with an empty ``delta`` is plain BCFW
    (an empty array rather than None, so that one compiled pass serves both).

    After the oracle's step a block takes up to ``atom_steps`` more pairwise steps among its
    own atoms (from the worst to the best by v at the current ``w``, after preparing the
    block again), which call no oracle: where the oracle is dear (slack rescaling's dynamic
    program) or the problem ill-conditioned, they buy progress per pass at the price of a
    ``prepare`` and a scoring of the atoms each.

    Returns the number of blocks done: fewer than ``len(order)`` when a new atom does not fit
    into ``capacity`` (the caller grows the pool and continues) or when a Python model's
    callback failed (``status(k) != 0``). ``calls[0]`` counts oracle calls.
    """
    A = capacity
    offs = k.label_offsets
    ws = workspace(k)
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    atom_values = np.empty(A)
    loss_term = scalars[0]
    m = scalars[1]
    R_loss = scalars[2]
    done = order.shape[0]
    failed = False  # a Python model's callback failed after w moved
    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offs[i]
        T = offs[i + 1] - s0
        base = s0 * A
        gold = k.labels[s0 : s0 + T]
        y = yhat[:T]
        prepare(k, i, w, ws)
        n_atoms = atom_count[i]
        gold_score = 0.0
        if slack:
            gold_score = score(k, i, w, ws, gold)
            top = 0
            for a in range(n_atoms):
                atom_values[a] = _slack_value(
                    k, i, w, ws, gold_score, atom_labels[base + a * T : base + (a + 1) * T]
                )
                if atom_values[a] > atom_values[top]:
                    top = a
            y[:] = gold
            bound, nc = slack_oracle(
                k, i, w, ws, 1.0, search, atom_labels[base + top * T : base + (top + 1) * T], y
            )
            best = _slack_value(k, i, w, ws, gold_score, y)
            calls[0] += nc
        else:
            bound = oracle(k, i, w, ws, 1.0, y)
            best = oracle_value(k, i, w, ws, y)  # y's own value (below the bound if relaxed)
            calls[0] += 1
            for a in range(n_atoms):
                atom_values[a] = oracle_value(
                    k, i, w, ws, atom_labels[base + a * T : base + (a + 1) * T]
                )
        away = -1
        fw = -1
        mean_value = 0.0
        for a in range(n_atoms):
            y_a = atom_labels[base + a * T : base + (a + 1) * T]
            va = atom_values[a]
            mean_value += atom_weights[i, a] * va
            if atom_weights[i, a] > 0.0 and (away < 0 or va < atom_values[away]):
                away = a
            if fw < 0:
                same = True
                for t in range(T):
                    if y_a[t] != y[t]:
                        same = False
                        break
                if same:
                    fw = a
        if status(k) != 0:
            done = idx
            break
        if fw < 0 and n_atoms == A:
            done = idx  # redone after the pool grows
            break
        m += 1.0  # every visit is an averaging step, also when γ = 0
        A_prev = 0.5 * (m - 1.0) * m
        block_gaps[i] = C * (bound - mean_value)
        if fw < 0:
            fw = n_atoms
            for t in range(T):
                atom_labels[base + fw * T + t] = y[t]
            atom_weights[i, fw] = 0.0
            atom_values[fw] = best
            atom_count[i] = n_atoms + 1
        if fw == away or away < 0:
            continue
        pw_gap = C * (best - atom_values[away])
        if pw_gap <= 0.0:
            continue
        # the oracle's step (to the atom fw), then up to atom_steps steps among the atoms
        for r in range(atom_steps + 1):
            if r > 0:
                if failed or atom_count[i] < 2:
                    break
                prepare(k, i, w, ws)
                fw, away = _best_and_worst_atom(
                    k,
                    i,
                    w,
                    ws,
                    gold,
                    atom_labels,
                    atom_weights,
                    atom_count[i],
                    base,
                    T,
                    slack,
                    atom_values,
                )
                pw_gap = C * (atom_values[fw] - atom_values[away])
                if fw == away or pw_gap <= 0.0:
                    break
            gamma, dl = _pairwise_step(
                k,
                i,
                ws,
                gold,
                atom_labels[base + fw * T : base + (fw + 1) * T],
                atom_labels[base + away * T : base + (away + 1) * T],
                pw_gap,
                atom_weights[i, away],
                C,
                sigma,
                slack,
                w,
                delta,
                R,
                averaging,
                A_prev,
            )
            loss_term += dl
            if averaging:
                R_loss += A_prev * dl
            if status(k) != 0:  # w moved: keep the dual state in step before stopping
                done = idx + 1
                failed = True
            _move_mass(atom_labels, atom_weights, atom_count, i, base, T, fw, away, gamma)
        if failed:
            break
    scalars[0] = loss_term
    scalars[1] = m
    scalars[2] = R_loss
    return done


@njit(cache=True)
def classic_bcfw_pass(
    k,
    order,
    C,
    w,
    R,
    averaging,
    block_weights,
    block_losses,
    corner,
    scalars,
    block_gaps,
    slack,
    search,
    calls,
    sigma,
    delta,
):
    """One pass of block-coordinate Frank-Wolfe with the classic step (Lacoste-Julien et al.
    2013, Alg. 3 with exact line search), C-form.

    Block i keeps its share of the dual, ``w_i`` (row i of ``block_weights``) and ``ℓ_i``
    (``block_losses[i]``). With the oracle's corner ``(w_s, ℓ_s)`` built in ``corner`` — for
    margin rescaling from the oracle's point μ̂ (a relaxed oracle's fractional solution when
    the model has one), ``w_s = C (φ(ȳ_i) − φ(μ̂))``, ``ℓ_s = C δ(μ̂)``; for slack rescaling
    ``w_s = C δ(ŷ) (φ(ȳ_i) − φ(ŷ))``, ``ℓ_s = C δ(ŷ)`` — the step is

        g_i = (ℓ_s − ℓ_i) − ⟨w, w_s − w_i⟩,     γ = clip(g_i / ‖w_s − w_i‖², 0, 1)
        (w_i, ℓ_i) ← (w_i, ℓ_i) + γ (w_s − w_i, ℓ_s − ℓ_i),  and w, ℓ by the same change.

    ``g_i`` is the block's Frank-Wolfe gap (``block_gaps[i]``). O(dim w) per block; memory
    n × dim w; ``corner`` is scratch of dim w, zero on entry. Averaging and
    ``scalars = [ℓ, m, R_ℓ]``, and ``sigma``, ``delta`` for the local subproblem of CoCoA+
    and the proximal scheme (then ``γ = clip(g_i / (σ' ‖w_s − w_i‖²), 0, 1)``, ``w`` moves by
    σ' γ and the averaging follows ``delta``), as :func:`pairwise_bcfw_pass`. Returns the
    number of blocks done (fewer when a Python model's callback failed)."""
    offs = k.label_offsets
    ws = workspace(k)
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    done = order.shape[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offs[i]
        T = offs[i + 1] - s0
        gold = k.labels[s0 : s0 + T]
        y = yhat[:T]
        prepare(k, i, w, ws)
        if slack:
            y[:] = gold
            _, nc = slack_oracle(k, i, w, ws, 1.0, search, gold, y)
            calls[0] += nc
            g = loss(k, i, y)
            add_difference(k, i, gold, y, C * g, corner)
            loss_s = C * g
        else:
            oracle(k, i, w, ws, 1.0, y)
            calls[0] += 1
            add_oracle_difference(k, i, ws, y, C, corner)
            loss_s = C * oracle_loss(k, i, ws, y)
        if status(k) != 0:
            done = idx
            break
        w_i = block_weights[i]
        inner, norm2 = _direction_products(corner, w_i, w)
        dl = loss_s - block_losses[i]
        gap = dl - inner
        block_gaps[i] = gap
        m = scalars[1]
        scalars[1] = m + 1.0
        if gap <= 0.0:
            corner[:] = 0.0  # zero for the next block's corner
            continue
        # a block that does not move w (e.g. an all-zero x without bias) goes to the corner
        gamma = min(1.0, gap / (sigma * norm2)) if norm2 > 0.0 else 1.0
        if len(delta) > 0:
            A_prev = 0.5 * m * (m + 1.0) if averaging else 0.0
            _take_local_step(corner, gamma, sigma, w, w_i, delta, R, A_prev)
        else:
            _take_step(corner, gamma, w, w_i, R, 0.5 * m * (m + 1.0) if averaging else 0.0)
        block_losses[i] += gamma * dl
        scalars[0] += gamma * dl
        if averaging:
            scalars[2] += 0.5 * m * (m + 1.0) * gamma * dl
    return done


@njit(cache=True, fastmath=True)
def _direction_products(corner, w_i, w):
    """``corner ← corner − w_i`` (the step direction); returns ``(⟨w, corner⟩, ‖corner‖²)``
    (a vectorized reduction: its summation order is the compiler's)."""
    inner = 0.0
    norm2 = 0.0
    for j in range(w.shape[0]):
        diff = corner[j] - w_i[j]
        corner[j] = diff
        inner += w[j] * diff
        norm2 += diff * diff
    return inner, norm2


@njit(cache=True)
def _take_step(direction, gamma, w, w_i, R, A_prev):
    """``w, w_i += γ·direction`` and ``R += A_prev·γ·direction`` (when ``A_prev > 0``);
    zeroes ``direction`` for the next block's corner."""
    for j in range(w.shape[0]):
        if direction[j] != 0.0:
            step = gamma * direction[j]
            direction[j] = 0.0
            w[j] += step
            w_i[j] += step
            if A_prev > 0.0:
                R[j] += A_prev * step


@njit(cache=True)
def _take_local_step(direction, gamma, sigma, w, w_i, delta, R, A_prev):
    """The scaled step (CoCoA+'s local subproblem, the proximal scheme): ``w_i, Δw +=
    γ·direction``, ``w += σ' γ·direction``, and ``R += A_prev·γ·direction`` (the average of
    the dual's weights Δw accumulates) when ``A_prev > 0``; zeroes ``direction``."""
    for j in range(w.shape[0]):
        if direction[j] != 0.0:
            step = gamma * direction[j]
            direction[j] = 0.0
            w[j] += sigma * step
            w_i[j] += step
            delta[j] += step
            if A_prev > 0.0:
                R[j] += A_prev * step


@njit(cache=True)
def grow_atom_pool(
    label_offsets,
    atom_labels,
    atom_weights,
    atom_count,
    old_capacity,
    new_capacity,
    new_labels,
    new_weights,
):
    """Copy the atoms into a pool of ``new_capacity`` atoms per block."""
    for i in range(label_offsets.shape[0] - 1):
        s0 = label_offsets[i]
        T = label_offsets[i + 1] - s0
        for a in range(atom_count[i]):
            src = s0 * old_capacity + a * T
            dst = s0 * new_capacity + a * T
            new_labels[dst : dst + T] = atom_labels[src : src + T]
            new_weights[i, a] = atom_weights[i, a]


@njit(cache=True)
def mix_in_gold(label_offsets, gold, atom_labels, atom_weights, atom_count, capacity, t):
    """Every block's atoms to ``t β + (1 − t) e_gold`` (the gold labelling joins as an
    atom where it is not one). Returns False, changing nothing, when a block without a gold
    atom has no room for one (grow the pool and call again)."""
    n = label_offsets.shape[0] - 1
    at = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        s0 = label_offsets[i]
        T = label_offsets[i + 1] - s0
        for a in range(atom_count[i]):
            base = s0 * capacity + a * T
            same = True
            for j in range(T):
                if atom_labels[base + j] != gold[s0 + j]:
                    same = False
                    break
            if same:
                at[i] = a
                break
        if at[i] < 0 and atom_count[i] >= capacity:
            return False
    for i in range(n):
        s0 = label_offsets[i]
        T = label_offsets[i + 1] - s0
        for a in range(atom_count[i]):
            atom_weights[i, a] *= t
        if at[i] < 0:
            at[i] = atom_count[i]
            atom_labels[s0 * capacity + at[i] * T : s0 * capacity + (at[i] + 1) * T] = gold[
                s0 : s0 + T
            ]
            atom_weights[i, at[i]] = 0.0
            atom_count[i] += 1
        atom_weights[i, at[i]] += 1.0 - t
    return True


@njit(cache=True)
def ssg_pass(k, order, v, R, scalars, averaging, slack, search, calls):
    """One pass of Pegasos-style stochastic subgradient (Shalev-Shwartz et al. 2011), C-form.

    With step ``η_t = 1/(λ (t+1))`` (λ = 1/(C n)) the iterate is ``w_m = C n v_m / m`` where
    ``v_m = Σ_{j ≤ m} ψ_j`` sums the subgradient directions ``ψ = g (φ(x_i, ȳ_i) − φ(x_i, μ̂))``
    (g = 1 for margin rescaling, with μ̂ the oracle's point; ``g = δ(ŷ)`` and the labelling ŷ
    for slack rescaling), so only ``v`` is stored and each step touches the two labellings'
    features. The margin oracle at ``w_m`` is taken on ``v`` with the loss scaled by
    ``m / (C n)``; the slack oracle with the scores scaled by ``C n / m``. Weighted averaging
    keeps ``R_M = Σ_m (m − 1) ψ_m``, so ``w̄_M = C n (M v_M − R_M) / A_M``.
    ``scalars = [m, C n]``. Returns the number of blocks done (fewer when a Python model's
    callback failed).
    """
    offs = k.label_offsets
    ws = workspace(k)
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    m = scalars[0]
    Cn = scalars[1]
    done = order.shape[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        y = yhat[: offs[i + 1] - offs[i]]
        gold = k.labels[offs[i] : offs[i + 1]]
        prepare(k, i, v, ws)
        # argmax δ + (Cn/m) ⟨v, φ⟩  ==  argmax (m/Cn) δ + ⟨v, φ⟩   (v = 0 when m = 0)
        _hinge_labelling(
            k,
            i,
            v,
            ws,
            slack,
            search,
            Cn / m if m > 0 else 0.0,
            m / Cn if m > 0 else 1.0,
            gold,
            y,
            calls,
        )
        if status(k) != 0:
            done = idx
            break
        rm = m
        m += 1.0
        _add_hinge_direction(k, i, ws, slack, gold, y, 1.0, v)
        if averaging:
            _add_hinge_direction(k, i, ws, slack, gold, y, rm, R)
        if status(k) != 0:
            done = idx + 1
            break
    scalars[0] = m
    return done


@njit(cache=True)
def subgradient_sum(k, order, w, slack, search, psi, calls):
    """``psi += Σ_{i ∈ order} g_i (φ(x_i, ȳ_i) − φ(x_i, μ̂_i))``: the hinge terms' part of a
    subgradient of the primal at ``w`` over the blocks in ``order`` (μ̂_i the oracle's point,
    g_i = 1 for margin rescaling; the labelling ŷ and ``g_i = δ(ŷ)`` for slack rescaling), as
    :func:`ssg_pass` takes it. Returns the number of blocks done (fewer when a Python model's
    callback failed)."""
    offs = k.label_offsets
    ws = workspace(k)
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    done = order.shape[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        y = yhat[: offs[i + 1] - offs[i]]
        gold = k.labels[offs[i] : offs[i + 1]]
        prepare(k, i, w, ws)
        _hinge_labelling(k, i, w, ws, slack, search, 1.0, 1.0, gold, y, calls)
        if status(k) != 0:
            return idx
        _add_hinge_direction(k, i, ws, slack, gold, y, 1.0, psi)
        if status(k) != 0:
            return idx + 1
    return done


@njit(cache=True, inline="always")
def _hinge_labelling(k, i, w, ws, slack, search, score_scale, loss_scale, gold, y, calls):
    """Block i's hinge maximizer at ``w`` into ``y`` (after prepare): the slack oracle with
    the scores scaled by ``score_scale``, or the margin oracle with the loss scaled by
    ``loss_scale``; ``calls[0]`` counts the oracle calls."""
    if slack:
        y[:] = gold
        _, nc = slack_oracle(k, i, w, ws, score_scale, search, gold, y)
        calls[0] += nc
    else:
        oracle(k, i, w, ws, loss_scale, y)
        calls[0] += 1


@njit(cache=True, inline="always")
def _add_hinge_direction(k, i, ws, slack, gold, y, c, out):
    """``out += c g (φ(x_i, ȳ_i) − φ(x_i, y))`` with ``g = δ(y)`` for slack rescaling, else
    1 and the oracle's own point (a relaxed oracle's fractional one)."""
    if slack:
        add_difference(k, i, gold, y, c * loss(k, i, y), out)
    else:
        add_oracle_difference(k, i, ws, y, c, out)


@njit(cache=True)
def oracle_checks(k, w, slack, blocks, atom_labels, atom_count, capacity, out):
    """For each block ``i = blocks[j]`` at ``w``: ``out[j] = (H, A, scale, δ(ȳ_i, ȳ_i))``
    with H the oracle's hinge (its bound minus the gold labelling's value, margin, or the
    exact slack oracle's bound), A the largest hinge term ``v(y) − v(ȳ_i)`` of the block's
    atoms (0, the gold's, without atoms: ``atom_count`` empty) and the magnitude of the
    values compared. An exact (or relaxed) oracle has ``H >= A >= 0`` up to rounding, and
    the gold labelling's loss is 0."""
    ws = workspace(k)
    offs = k.label_offsets
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    for j in range(blocks.shape[0]):
        i = blocks[j]
        s0 = offs[i]
        T = offs[i + 1] - s0
        gold = k.labels[s0 : s0 + T]
        y = yhat[:T]
        prepare(k, i, w, ws)
        gold_score = score(k, i, w, ws, gold)
        if slack:
            y[:] = gold
            bound, _ = slack_oracle(k, i, w, ws, 1.0, EXACT_SEARCH, gold, y)
            hinge = bound
        else:
            bound = oracle(k, i, w, ws, 1.0, y)
            hinge = bound - gold_score
        scale = abs(bound) + abs(gold_score)
        top = 0.0
        if atom_count.shape[0] > 0:
            base = s0 * capacity
            for a in range(atom_count[i]):
                y_a = atom_labels[base + a * T : base + (a + 1) * T]
                if slack:
                    value = _slack_value(k, i, w, ws, gold_score, y_a)
                    scale = max(scale, abs(value))
                else:
                    s_a = score(k, i, w, ws, y_a)
                    value = loss(k, i, y_a) + s_a - gold_score
                    scale = max(scale, abs(s_a) + abs(value))
                top = max(top, value)
        out[j, 0] = hinge
        out[j, 1] = top
        out[j, 2] = scale
        out[j, 3] = loss(k, i, gold)
        if status(k) != 0:
            return


@njit(cache=True)
def atoms_dual_point(k, C, slack, atom_labels, atom_weights, atom_count, capacity, w):
    """The dual point the atoms determine: ``w += Σ_i Σ_a α_a C g(y^a) (φ(x_i, ȳ_i) −
    φ(x_i, y^a))`` (``g`` of the module docstring) and returns the loss term
    ``Σ_i Σ_a α_a C δ(ȳ_i, y^a)``; stops at a Python model's failed callback."""
    offs = k.label_offsets
    total = 0.0
    for i in range(offs.shape[0] - 1):
        s0 = offs[i]
        T = offs[i + 1] - s0
        base = s0 * capacity
        gold = k.labels[s0 : s0 + T]
        for a in range(atom_count[i]):
            weight = atom_weights[i, a]
            if weight == 0.0:
                continue
            y_a = atom_labels[base + a * T : base + (a + 1) * T]
            d = loss(k, i, y_a)
            add_difference(k, i, gold, y_a, C * weight * (d if slack else 1.0), w)
            total += C * weight * d
        if status(k) != 0:
            break
    return total
