"""One partition of a distributed run: its examples as block data, its share of the dual
state, and the work of a round on them (the CoCoA+ local solver, a mini-batch subgradient,
the hinge sum of a primal check). The same code runs in process and inside Spark tasks, so
the two give the same numbers.

Every random choice of a partition depends only on ``(seed, round, partition)``
(:func:`local_order`): a task that is retried, or a partition rebuilt from its lineage,
repeats exactly what the lost one did.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from ..data import BlockData
from ..solvers import _block_kernels as kern
from ..solvers.base import AtomPool

#: the random streams of a run, by purpose (the first word of every seed sequence)
SPLIT_STREAM, ORDER_STREAM, BATCH_STREAM = 1, 2, 3


def assign_examples(n: int, n_partitions: int, seed: int) -> list:
    """The examples of each partition (sorted indices): a random split into parts whose sizes
    differ by at most one. One partition keeps the examples in their order."""
    if n_partitions == 1:
        return [np.arange(n, dtype=np.int64)]
    perm = np.random.default_rng([SPLIT_STREAM, seed]).permutation(n)
    return [np.sort(part).astype(np.int64) for part in np.array_split(perm, n_partitions)]


def local_order(
    seed: int, round_index: int, partition: int, local_pass: int, n_local: int
) -> np.ndarray:
    """The order in which partition ``partition`` visits its ``n_local`` blocks in local pass
    ``local_pass`` of round ``round_index``."""
    rng = np.random.default_rng([ORDER_STREAM, seed, round_index, partition, local_pass])
    return rng.permutation(n_local).astype(np.int64)


def batch_blocks(
    seed: int, round_index: int, partition: int, n_local: int, fraction: float
) -> np.ndarray:
    """The mini-batch of partition ``partition`` in round ``round_index``: ``⌈fraction ·
    n_local⌉`` of its blocks drawn without replacement."""
    size = min(n_local, max(1, int(np.ceil(fraction * n_local))))
    rng = np.random.default_rng([BATCH_STREAM, seed, round_index, partition])
    return np.sort(rng.choice(n_local, size=size, replace=False)).astype(np.int64)


def split_sources(kmodel, data, parts) -> list:
    """For every part (indices of examples), what a worker needs to build that part's block
    data: ``(build, args)`` with ``build(*args)`` the block data. The training data is the
    model's own form (which can ``take`` a subset) or block data made by the model's
    ``block_data(X, Y)``; no model-specific code is involved."""
    if isinstance(data, BlockData):
        sources = []
        for part in parts:
            build, X, Y = data.source_part(part)
            sources.append((build, (X, Y)))
        return sources
    if not hasattr(data, "take"):
        raise TypeError(
            f"training data of type {type(data).__name__} cannot be split into "
            "partitions (it has no take(indices))"
        )
    return [(kmodel.block_data, (data.take(p),)) for p in parts]


def build_blocks(source) -> BlockData:
    build, args = source
    return build(*args)


class RoundResult(NamedTuple):
    """What a partition returns from a round: the change of ``w`` (dense, or the indices and
    values of its nonzeros), the change of the loss term, the oracle calls, the sum of its
    blocks' Frank-Wolfe gaps, its examples and the seconds of compute."""

    delta_index: np.ndarray | None
    delta_values: np.ndarray
    loss_change: float
    oracle_calls: int
    gap_sum: float
    n_blocks: int
    seconds: float
    #: the weighted average's accumulators: the change of ``R`` (as ``delta``), of ``R_ℓ``,
    #: and the averaging steps made (block visits)
    average_index: np.ndarray | None = None
    average_values: np.ndarray | None = None
    average_loss: float = 0.0
    visits: float = 0.0
    #: a round made ``onto`` the driver's state: the values are its new ``w``, ``R``, ``ℓ``,
    #: ``R_ℓ`` and step count (not changes), and ``point`` the scoring point's
    absolute: bool = False
    point: np.ndarray | None = None

    @staticmethod
    def _sparse(delta):
        """``(indices, values)`` of the nonzeros when they are under a third of ``delta``
        (int32 indices where they fit: 12 bytes a nonzero), else ``(None, delta)``."""
        nz = np.flatnonzero(delta)
        if 3 * nz.size < delta.size:
            index_type = np.int32 if delta.size <= np.iinfo(np.int32).max else np.int64
            return nz.astype(index_type), delta[nz]
        return None, delta

    @staticmethod
    def pack(delta, average=None, **fields):
        """Ship only the nonzeros of a change (of ``w``, of ``R``) that touches under a
        third of ``w``."""
        index, values = RoundResult._sparse(delta)
        if average is not None:
            fields["average_index"], fields["average_values"] = RoundResult._sparse(average)
        return RoundResult(index, values, **fields)

    def add_to(self, w, scale=None):
        """``w += Δw``, or ``w += scale · Δw`` (adding exact zeros where Δw is zero leaves
        ``w`` as it is). A dense Δw is scaled in place: add it unscaled first."""
        values = self.delta_values
        if scale is not None:
            values *= scale
        if self.delta_index is None:
            w += values
        else:
            w[self.delta_index] += values

    def sq_norm(self) -> float:
        """``‖Δw‖²``."""
        return float(self.delta_values @ self.delta_values)

    def dot(self, w) -> float:
        """``⟨w, Δw⟩``."""
        if self.delta_index is None:
            return float(w @ self.delta_values)
        return float(w[self.delta_index] @ self.delta_values)

    def add_average_to(self, R):
        """``R += ΔR`` (nothing without averaging)."""
        if self.average_values is None:
            return
        if self.average_index is None:
            R += self.average_values
        else:
            R[self.average_index] += self.average_values


class PartitionState(AtomPool):
    """A partition's share of the dual: for the pairwise step the atoms of its blocks
    (:class:`~dualstruct.solvers.base.AtomPool`), for the classic step every block's share
    of ``w`` and of the loss term. Plain arrays, small to ship and to checkpoint."""

    ARRAYS = {
        "pairwise": ("atom_labels", "atom_weights", "atom_count"),
        "fw": ("block_weights", "block_losses"),
    }

    def __init__(self, step, blocks, size):
        self.step = step
        if step == "pairwise":
            self._init_atoms(blocks.label_offsets, blocks.labels)
        else:
            self.block_weights = np.zeros((blocks.n_blocks, size))
            self.block_losses = np.zeros(blocks.n_blocks)

    def arrays(self) -> dict:
        out = {k: getattr(self, k) for k in self.ARRAYS[self.step]}
        if self.step == "pairwise":
            out["capacity"] = np.array(self.capacity)
        return out

    @classmethod
    def from_arrays(cls, step, arrays):
        state = cls.__new__(cls)
        state.step = step
        for k in cls.ARRAYS[step]:
            setattr(state, k, np.array(arrays[k]))
        if step == "pairwise":
            state.capacity = int(arrays["capacity"])
        return state

    def copy(self):
        return PartitionState.from_arrays(
            self.step, {k: np.copy(v) for k, v in self.arrays().items()}
        )


class Partition:
    """A partition's block data and dual state, and the work of a round on them.

    Parameters
    ----------
    blocks : BlockData
    state : PartitionState
    index : int, the partition's number (it seeds its random choices)
    """

    def __init__(self, blocks, state, index):
        self.blocks = blocks
        self.state = state
        self.index = index

    def cocoa_round(
        self,
        w,
        round_index,
        seed,
        C,
        local_passes,
        sigma,
        gamma,
        slack,
        search,
        atom_steps=0,
        *,
        order=None,
        average_from=None,
        onto=None,
    ) -> RoundResult:
        """``local_passes`` BCFW passes on the local subproblem G_k^{σ'} scored at ``w``
        (CoCoA+, Ma et al. 2015, Alg. 1 with σ' = ``sigma``, which also carries the proximal
        scheme's 1/(1+κ); :func:`~dualstruct.solvers._block_kernels.pairwise_bcfw_pass`);
        the state moves by ``gamma`` times its change (γ < 1 when the driver averages).
        ``order``: the blocks' order in the first local pass (default :func:`local_order`).
        ``average_from``: with the weighted average, the driver's step count m; the steps
        are numbered on from it and the result carries the change of the accumulators.
        ``onto``: ``(u, R, [ℓ, m, R_ℓ])``, the driver's dual state, which the steps then
        update (copies of it) in place as one machine's BCFW does, with the same rounding;
        the result carries the new values (:attr:`RoundResult.absolute`; one partition).
        ``w`` is not changed."""
        t0 = time.perf_counter()
        k = self.blocks.kernel
        n = self.blocks.n_blocks
        st = self.state
        before = st.copy() if gamma != 1.0 else None
        local_w = np.array(w, dtype=np.float64)
        delta = np.zeros_like(local_w)
        averaging = average_from is not None
        m0 = float(average_from) if averaging else 0.0
        scalars = np.array([0.0, m0, 0.0])
        R = np.zeros_like(local_w) if averaging else np.zeros(0)
        if onto is not None:
            if gamma != 1.0:
                raise ValueError("a round onto the driver's state needs gamma = 1")
            delta, R = (np.array(a, dtype=np.float64) for a in onto[:2])
            scalars = np.array(onto[2], dtype=np.float64)
            R = R if averaging else np.zeros(0)
        gaps = np.zeros(n)
        calls = np.zeros(1, dtype=np.int64)
        if st.step == "fw":
            corner = np.zeros_like(local_w)
        if order is not None:
            order = np.asarray(order, dtype=np.int64)
            if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
                raise ValueError(f"order must be a permutation of the partition's {n} blocks")
        for h in range(local_passes):
            if h > 0 or order is None:
                order = local_order(seed, round_index, self.index, h, n)
            if st.step == "fw":
                kern.classic_bcfw_pass(
                    k,
                    order,
                    C,
                    local_w,
                    R,
                    averaging,
                    st.block_weights,
                    st.block_losses,
                    corner,
                    scalars,
                    gaps,
                    slack,
                    search,
                    calls,
                    sigma,
                    delta,
                )
                self.blocks.raise_status()
                continue
            st.pairwise_pass(
                self.blocks,
                order,
                C,
                local_w,
                R,
                averaging,
                scalars,
                gaps,
                slack,
                search,
                calls,
                sigma,
                delta,
                atom_steps,
            )
        if onto is not None:
            return RoundResult(
                None,
                delta,
                float(scalars[0]),
                int(calls[0]),
                float(gaps.sum()),
                n,
                time.perf_counter() - t0,
                None,
                R if averaging else None,
                float(scalars[2]),
                float(scalars[1]),
                True,
                local_w,
            )
        loss_change, average_loss = float(scalars[0]), float(scalars[2])
        if gamma != 1.0:
            self._mix(before, gamma)
            delta *= gamma
            loss_change *= gamma
            R *= gamma
            average_loss *= gamma
        return RoundResult.pack(
            delta,
            R if averaging else None,
            loss_change=loss_change,
            oracle_calls=int(calls[0]),
            gap_sum=float(gaps.sum()),
            n_blocks=n,
            seconds=time.perf_counter() - t0,
            average_loss=average_loss,
            visits=float(scalars[1] - m0),
        )

    def _mix(self, before, gamma):
        """Move the state only ``gamma`` of the way from ``before`` to where the local solver
        took it: ``q ← (1 − γ) q_before + γ q`` (convex, so every block stays feasible; the
        classic step's shares, as averaging uses that step)."""
        st = self.state
        st.block_weights *= gamma
        st.block_weights += (1.0 - gamma) * before.block_weights
        st.block_losses *= gamma
        st.block_losses += (1.0 - gamma) * before.block_losses

    def subgradient(self, w, round_index, seed, fraction, slack, search) -> RoundResult:
        """``Σ_{i ∈ B} g_i (φ(ȳ_i) − φ(μ̂_i))`` over the round's mini-batch B at ``w``
        (:func:`batch_blocks`)."""
        t0 = time.perf_counter()
        n = self.blocks.n_blocks
        batch = batch_blocks(seed, round_index, self.index, n, fraction)
        psi = np.zeros(len(w))
        calls = np.zeros(1, dtype=np.int64)
        kern.subgradient_sum(
            self.blocks.kernel, batch, np.ascontiguousarray(w), slack, search, psi, calls
        )
        self.blocks.raise_status()
        return RoundResult.pack(
            psi,
            loss_change=0.0,
            oracle_calls=int(calls[0]),
            gap_sum=0.0,
            n_blocks=len(batch),
            seconds=time.perf_counter() - t0,
        )

    def hinge_sum(self, kmodel, w, slack) -> float:
        """``Σ_i H_i(w)`` over the partition's blocks (the primal's loss part)."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        hinge, _ = (kmodel.slack_hinge if slack else kmodel.hinge)(w, self.blocks)
        return float(hinge.sum())
