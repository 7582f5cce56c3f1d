"""The block solvers' compiled passes, written once over the model-kernel interface of
:mod:`dualstruct.models.base` (``prepare``, ``score``, ``loss``, ``oracle``, ``decode``,
``add_difference``, ``difference_sq_norm``). numba compiles each function once per kernel
class, calling the model's compiled implementations, so a built-in model runs without Python
per block; a Python model's kernel calls back into Python from the same code.

Notation (C-form): block i's dual point q_i is a distribution over labellings; its corner y
contributes ``w_s(y) = C (φ(x_i, ȳ_i) − φ(x_i, y))`` and ``ℓ_s(y) = C δ(ȳ_i, y)``, so that
``w = Σ_i E_{q_i} w_s`` and ``ℓ = Σ_i E_{q_i} ℓ_s`` and the dual is ``D = ℓ − ½‖w‖²``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..models.base import (
    add_difference,
    decode,
    difference_sq_norm,
    loss,
    oracle,
    oracle_value,
    prepare,
    score,
    status,
    workspace,
)


@njit(cache=True)
def _max_block(label_offsets):
    longest = 0
    for i in range(label_offsets.shape[0] - 1):
        longest = max(longest, label_offsets[i + 1] - label_offsets[i])
    return longest


@njit(cache=True)
def hinge_all(k, w, hinge, out):
    """``hinge[i] = H_i(w) = max_y [δ(ȳ_i, y) + ⟨w, φ(x_i, y)⟩] − ⟨w, φ(x_i, ȳ_i)⟩`` (from the
    oracle's bound: an upper bound where the oracle is relaxed) and the maximizers into
    ``out`` (flat, in the layout of ``k.labels``)."""
    ws = workspace(k)
    offs = k.label_offsets
    for i in range(offs.shape[0] - 1):
        y = out[offs[i]:offs[i + 1]]
        prepare(k, i, w, ws)
        best = oracle(k, i, w, ws, 1.0, y)
        gold = score(k, i, w, ws, k.labels[offs[i]:offs[i + 1]])
        if status(k) != 0:
            return
        hinge[i] = best - gold


@njit(cache=True)
def decode_all(k, w, out):
    """The highest-scoring labelling of every block into ``out`` (flat)."""
    ws = workspace(k)
    offs = k.label_offsets
    for i in range(offs.shape[0] - 1):
        prepare(k, i, w, ws)
        decode(k, i, w, ws, out[offs[i]:offs[i + 1]])
        if status(k) != 0:
            return


@njit(cache=True)
def aggregate_difference(k, yhat, psi):
    """``psi += Σ_i φ(x_i, ȳ_i) − φ(x_i, ŷ_i)``; returns ``Σ_i δ(ȳ_i, ŷ_i)`` (the 1-slack
    cutting plane's constraint of the labellings ``yhat``)."""
    offs = k.label_offsets
    total = 0.0
    for i in range(offs.shape[0] - 1):
        gold = k.labels[offs[i]:offs[i + 1]]
        y = yhat[offs[i]:offs[i + 1]]
        add_difference(k, i, gold, y, 1.0, psi)
        total += loss(k, i, y)
        if status(k) != 0:
            break
    return total


@njit(cache=True)
def pairwise_bcfw_pass(k, order, C, w, R, averaging, atom_labels, atom_weights, atom_count,
                       capacity, scalars, block_gaps, calls):
    """One block-coordinate pairwise Frank-Wolfe pass (Osokin et al. 2016), C-form.

    Block i's dual point is kept as atoms, labellings ``y^a`` with weights ``α_a`` summing to
    one, stored at ``atom_labels[label_offsets[i]·A + a·T_i : … + T_i]`` (A = ``capacity``,
    T_i the block's labelling length). With ``v(y) = δ(ȳ_i, y) + ⟨w, φ(x_i, y)⟩`` the step
    moves mass γ from the away atom ``v = argmin_{a: α_a > 0} v(y^a)`` to the oracle's
    corner ``ŷ = argmax_y v(y)`` (the step uses v(ŷ) itself, the block gap the oracle's upper
    bound on the maximum):

        w ← w + γ C (φ(x_i, v) − φ(x_i, ŷ)),      ℓ ← ℓ + γ C (δ(ŷ) − δ(v))
        γ = min( (v(ŷ) − v(v)) / (C ‖φ(x_i, ŷ) − φ(x_i, v)‖²),  α_v )    (exact line search)

    which maximizes the dual along that direction. ``block_gaps[i]`` receives the block's
    Frank-Wolfe gap ``C (v(ŷ) − Σ_a α_a v(y^a))``. Weighted averaging (weights 1, 2, 3, … per
    visit) keeps ``R ← R + A_{m−1} Δw`` and ``R_ℓ ← R_ℓ + A_{m−1} Δℓ`` with
    ``A_m = m (m+1) / 2``, so that ``w̄ = w − R / A_m``. ``scalars = [ℓ, m, R_ℓ]``.

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
    for idx in range(order.shape[0]):
        i = order[idx]
        s0 = offs[i]
        T = offs[i + 1] - s0
        base = s0 * A
        y = yhat[:T]
        prepare(k, i, w, ws)
        bound = oracle(k, i, w, ws, 1.0, y)
        best = oracle_value(k, i, w, ws, y)  # y's own value (below the bound if relaxed)
        calls[0] += 1
        n_atoms = atom_count[i]
        away = -1
        fw = -1
        mean_value = 0.0
        for a in range(n_atoms):
            y_a = atom_labels[base + a * T: base + (a + 1) * T]
            va = oracle_value(k, i, w, ws, y_a)
            atom_values[a] = va
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
        v = atom_labels[base + away * T: base + (away + 1) * T]
        norm2 = C * C * difference_sq_norm(k, i, ws, y, v)
        alpha_v = atom_weights[i, away]
        if norm2 <= 0.0:
            gamma = alpha_v
        else:
            gamma = pw_gap / norm2
            if gamma > alpha_v - 1e-12:
                gamma = alpha_v  # a drop step: the away atom leaves the active set
        f = gamma * C
        add_difference(k, i, v, y, f, w)
        dl = f * (loss(k, i, y) - loss(k, i, v))
        loss_term += dl
        if averaging:
            add_difference(k, i, v, y, f * A_prev, R)
            R_loss += A_prev * dl
        if status(k) != 0:  # w moved: keep the dual state in step before stopping
            done = idx + 1
        # move the mass; a drained away atom is dropped (the last atom takes its slot)
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
        if done == idx + 1:
            break
    scalars[0] = loss_term
    scalars[1] = m
    scalars[2] = R_loss
    return done


@njit(cache=True)
def grow_atom_pool(label_offsets, atom_labels, atom_weights, atom_count, old_capacity,
                   new_capacity, new_labels, new_weights):
    """Copy the atoms into a pool of ``new_capacity`` atoms per block."""
    for i in range(label_offsets.shape[0] - 1):
        s0 = label_offsets[i]
        T = label_offsets[i + 1] - s0
        for a in range(atom_count[i]):
            src = s0 * old_capacity + a * T
            dst = s0 * new_capacity + a * T
            new_labels[dst:dst + T] = atom_labels[src:src + T]
            new_weights[i, a] = atom_weights[i, a]


@njit(cache=True)
def ssg_pass(k, order, v, R, scalars, averaging, calls):
    """One pass of Pegasos-style stochastic subgradient, C-form.

    With step ``η_t = 1/(λ (t+1))`` (λ = 1/(C n)) the iterate is ``w_m = C n v_m / m`` where
    ``v_m = Σ_{j ≤ m} φ(x_{i_j}, ȳ_{i_j}) − φ(x_{i_j}, ŷ_j)`` sums the subgradient directions,
    so only ``v`` is stored and each step touches the two labellings' features. The oracle at
    ``w_m`` is taken on ``v`` with the loss scaled by ``m / (C n)``. Weighted averaging keeps
    ``R_M = Σ_m (m − 1) ψ_m``, so ``w̄_M = C n (M v_M − R_M) / A_M``. ``scalars = [m, C n]``.
    Returns the number of blocks done (fewer when a Python model's callback failed).
    """
    offs = k.label_offsets
    ws = workspace(k)
    yhat = np.empty(_max_block(offs), dtype=np.int32)
    m = scalars[0]
    Cn = scalars[1]
    done = order.shape[0]
    for idx in range(order.shape[0]):
        i = order[idx]
        y = yhat[:offs[i + 1] - offs[i]]
        gold = k.labels[offs[i]:offs[i + 1]]
        prepare(k, i, v, ws)
        # argmax δ + (Cn/m) ⟨v, φ⟩  ==  argmax (m/Cn) δ + ⟨v, φ⟩   (v = 0 when m = 0)
        oracle(k, i, v, ws, m / Cn if m > 0 else 1.0, y)
        calls[0] += 1
        if status(k) != 0:
            done = idx
            break
        rm = m
        m += 1.0
        add_difference(k, i, gold, y, 1.0, v)
        if averaging:
            add_difference(k, i, gold, y, rm, R)
        if status(k) != 0:
            done = idx + 1
            break
    scalars[0] = m
    return done
