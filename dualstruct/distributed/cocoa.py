"""Distributed solvers: CoCoA+ with the BCFW local solver, and mini-batch SSG, over an
engine that runs the partitions (:class:`InProcessEngine` here, the Spark engine in
:mod:`dualstruct.distributed.spark`). The driver keeps only O(dim w): ``w``, its averages
and the loss term; each partition's dual state stays with the partition.

CoCoA+ (Ma et al. 2015; Dissolve-struct, Orekondy et al.) in the C-form of
:mod:`dualstruct.solvers.objective`. The examples are split into K partitions. Each round,
every partition k starts from the shared ``w`` and runs H passes of BCFW on its local
subproblem

    G_k^{σ'}(Δq_[k]) = C Σ_{i∈k} ΔE_{q_i} δ_i − ⟨w, Δw_k⟩ − (σ'/2) ‖Δw_k‖²      (Ma et al., eq. 10)

(the line search sees the quadratic term scaled by σ', the local iterate is w + σ' Δw_k);
then the driver sets ``w ← w + γ Σ_k Δw_k`` and ``ℓ ← ℓ + γ Σ_k Δℓ_k``, and each partition
keeps ``q_[k] + γ Δq_[k]``. Adding (γ = 1, σ' = K) and averaging (γ = 1/K, σ' = 1) both
satisfy the safe bound σ' ≥ γ K under which the dual never decreases (Ma et al., Lemma 4);
γ = 1 with σ' < K can diverge and is refused.

**Proximal scheme.** As the single-machine :class:`~dualstruct.solvers.BCFW`, CoCoA+ trains
by default on ``P(w) + (κ_K/2) ‖w − z‖²`` (:class:`~dualstruct.solvers.block.ProximalPoint`):
the partitions score at ``x = (u + κ_K z) / (1 + κ_K)`` and their line search scales the
quadratic by σ'/(1 + κ_K); ``u`` (``w`` here) accumulates the dual's weights. The
driver alone moves the centre z once per round; the proximal term's κ_K = σ' (1 + κ) − 1
makes every partition's local steps exactly as long as one machine's at κ, and the
subproblem is still safe for σ' = K. With several partitions κ_K starts at
``PROXIMAL_START`` and halves only while the proximal term dominates σ' times the block
gaps or the rounds stop making progress (:meth:`CoCoA._adapt_kappa`), never below
``KAPPA_K_FLOOR`` (25, or σ' − 1): a large κ_K keeps the centre, not σ', as what holds the
partitions' correlated steps together, and the rounds to a given gap then grow about as √K
instead of K; below the floor the partitions' changes cancel (the ``agreement`` falls to
0.3–0.4) and the rounds turn sublinear. ``acceleration="catalyst"``
extrapolates the centre (Lin, Mairal, Harchaoui 2015). Every round's point is dual feasible;
the certificate is BCFW's (the best point between the gold labellings and u, or ū), against
the exact primal of x, ū or x̄, the mean of the rounds' x since κ last changed (the k-th
weighing k (k + 1), as BCFW's mean of its passes' x; kept by the driver, scored by the
partitions as every candidate). The weighted average numbers every block visit (weights 1, 2,
3, …), the partitions' visits of a round on from the same count: each block's averaged
point stays a convex combination of its iterates. With K = 1 a round is a pass of BCFW
with its defaults over the driver's order, onto the driver's state: the same ``w``.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np

from ..data.blocks import labelling_bound
from ..solvers import BCFW
from ..solvers import _block_kernels as kern
from ..solvers._proximal import PROXIMAL_START, check_proximal, mean_step, proximal_point
from ..solvers.base import PassSolver, WeightedAverageDual, _DeferredInterrupt, model_size
from ..solvers.block import (
    ProximalPoint,
    check_agrees,
    check_step_bound,
    check_step_count,
    kernel_model,
    segment_dual,
)
from ..solvers.history import History
from ..solvers.objective import primal_value
from .partition import (
    Partition,
    PartitionState,
    assign_examples,
    build_blocks,
    split_sources,
)

AGGREGATIONS = ("adding", "averaging")
ACCELERATIONS = ("auto", "catalyst", "none")
#: with σ' ≠ 1 the proximal term's κ_K halves no further than this (or σ' − 1): below it
#: the partitions' changes stop adding up and the rounds turn sublinear (BENCHMARKS.md)
KAPPA_K_FLOOR = PROXIMAL_START / 4

#: elements of ``w`` per slice where the driver reads the averaged point without its copy
AVERAGE_CHUNK = 1 << 20


class AveragedPoint(NamedTuple):
    """The weighted average ``ū = u − R / A`` of a run, kept as its parts: the driver takes
    its norm slice by slice, and the partitions make it where they score it
    (:meth:`materialize`, the same numbers in process and on Spark's executors), so the
    driver holds no copy of ``w`` for it until it is the model returned."""

    u: np.ndarray
    R: np.ndarray
    A: float

    def materialize(self) -> np.ndarray:
        out = np.divide(self.R, self.A)
        np.subtract(self.u, out, out=out)
        return out

    def sq_norm(self) -> float:
        if self.u.size <= AVERAGE_CHUNK:
            d = self.materialize()
            return float(d @ d)
        total, buffer = 0.0, np.empty(AVERAGE_CHUNK)
        for start in range(0, self.u.size, AVERAGE_CHUNK):
            part = slice(start, start + AVERAGE_CHUNK)
            d = buffer[: self.u[part].size]
            np.divide(self.R[part], self.A, out=d)
            np.subtract(self.u[part], d, out=d)
            total += float(d @ d)
        return total


def as_array(w) -> np.ndarray:
    """A candidate of a distributed solver as an array (an :class:`AveragedPoint` made)."""
    return w.materialize() if isinstance(w, AveragedPoint) else np.ascontiguousarray(w)


class Job(NamedTuple):
    """What every partition needs to know of a run (shipped once)."""

    kmodel: object
    step: str  # "pairwise" or "fw"
    size: int  # dim w
    C: float
    slack: bool
    search: int
    seed: int
    n_partitions: int


class InProcessEngine:
    """Runs the partitions one after the other in this process: the reference the Spark engine
    is tested against (same partitions, same seeds, same sums in the same order).

    Examples
    --------
    >>> from dualstruct.distributed import CoCoA, InProcessEngine
    >>> from dualstruct.models import ChainModel
    >>> solver = CoCoA(ChainModel(3, 4), n_partitions=2, engine=InProcessEngine())
    """

    name = "in-process"

    def __init__(self):
        self.partitions = None
        self._torn = False

    def start(self, job, sources, states=None):
        self.job = job
        self.partitions = []
        for index, source in enumerate(sources):
            blocks = build_blocks(source)
            state = PartitionState(job.step, blocks, job.size) if states is None else states[index]
            self.partitions.append(Partition(blocks, state, index))

    def _each(self, work):
        if self._torn:
            raise RuntimeError(
                "a round was interrupted midway and the partitions' dual state "
                "no longer matches w; resume from a checkpoint"
            )
        self._torn = True
        out = [work(p) for p in self.partitions]
        self._torn = False
        return out

    def cocoa_round(self, w, round_index, local_passes, sigma, gamma, atom_steps=0, **local):
        """A round on every partition; ``local``: further keyword arguments of
        :meth:`Partition.cocoa_round <dualstruct.distributed.partition.Partition.cocoa_round>`
        (the first pass's ``order``, the averaging's ``average_from``)."""
        j = self.job
        return self._each(
            lambda p: p.cocoa_round(
                w,
                round_index,
                j.seed,
                j.C,
                local_passes,
                sigma,
                gamma,
                j.slack,
                j.search,
                atom_steps,
                **local,
            )
        )

    def subgradient_round(self, w, round_index, fraction):
        j = self.job
        return self._each(
            lambda p: p.subgradient(w, round_index, j.seed, fraction, j.slack, j.search)
        )

    def hinge_sum(self, w):
        w = as_array(w)
        return sum(p.hinge_sum(self.job.kmodel, w, self.job.slack) for p in self.partitions)

    def state_arrays(self) -> dict:
        """Every partition's dual state, as ``p<k>/<name>`` arrays (for a checkpoint)."""
        out = {}
        for p in self.partitions or ():
            for name, arr in p.state.arrays().items():
                out[f"p{p.index}/{name}"] = arr
        return out

    def gather_states(self):
        """Every partition's dual state, ``{index: arrays}``."""
        return {p.index: p.state.arrays() for p in self.partitions}

    def load_state_arrays(self, arrays):
        for p in self.partitions:
            prefix = f"p{p.index}/"
            part = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            state = PartitionState.from_arrays(self.job.step, part)
            if self.job.step == "pairwise":
                state._check_atoms(p.blocks.label_offsets, labelling_bound(p.blocks.kernel))
            elif state.block_weights.shape != p.state.block_weights.shape:
                raise ValueError("saved partition state does not match its partition")
            p.state = state

    def stop(self):
        pass


def _partition_seed(rng) -> int:
    """The seed of the partitions' random choices, from a child of ``rng``: the parent's
    stream (the orders of the passes) stays as it would be without partitions."""
    try:
        child = rng.spawn(1)[0]
    except (TypeError, ValueError, AttributeError):  # a generator without a seed sequence
        child = rng
    return int(child.integers(2**62))


class _DistributedSolver(PassSolver):
    """The loop of :class:`PassSolver` with a round of the engine as the unit (``passes``
    counts rounds) and the primal from the partitions' hinge sums."""

    step_name, step_plural = "round", "rounds"

    def __init__(self, model, C=1.0, *, n_partitions=2, engine=None, **kwargs):
        super().__init__(model, C, **kwargs)
        if (
            isinstance(n_partitions, bool)
            or not isinstance(n_partitions, (int, np.integer))
            or n_partitions < 1
        ):
            raise ValueError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
        self.n_partitions = int(n_partitions)
        self.engine = engine if engine is not None else InProcessEngine()
        self.seed = _partition_seed(self.rng)
        self.round_log = []  # (wall seconds, slowest partition's compute seconds) per round

    _transient = PassSolver._transient + ("engine", "_stop_requested")

    state_scalars = ("seed",)

    def memory_parts(self, data):
        """The driver's copies of ``w``: its state (:meth:`_driver_copies`) and a round's
        changes from the K partitions, held together (each dense at most)."""
        size = 8 * model_size(self.model)
        return {
            "weights and their copies (driver)": size * self._driver_copies(),
            "a round's changes from the partitions (driver)": size
            * self.n_partitions
            * self._changes_per_partition(),
        }

    def _driver_copies(self):
        """The arrays as large as ``w`` that the driver holds (subclasses)."""
        return 1

    def _changes_per_partition(self):
        """The arrays as large as ``w`` a partition returns per round (subclasses)."""
        return 1

    def _job(self, step):
        kmodel = kernel_model(self.model)
        return kmodel, Job(
            kmodel,
            step,
            int(kmodel.size_joint_feature),
            self.C,
            self.rescaling == "slack",
            self.search_code,
            self.seed,
            self.n_partitions,
        )

    def _start_engine(self, step):
        kmodel, job = self._job(step)
        n = self.data.n_sequences
        if n < self.n_partitions:
            raise ValueError(f"n_partitions={self.n_partitions} exceeds the {n} examples")
        parts = assign_examples(n, self.n_partitions, self.seed)
        self.engine.start(job, split_sources(kmodel, self.data, parts))
        return kmodel

    def _primal(self, w):
        if isinstance(w, AveragedPoint):  # made by the partitions, not here
            return 0.5 * w.sq_norm() + self.C * float(self.engine.hinge_sum(w))
        return primal_value(w, self.C, self.engine.hinge_sum(np.ascontiguousarray(w)))

    def _timed_round(self, run):
        t0 = time.perf_counter()
        results = run()
        if self._stop_requested and self._interrupt is not None:  # held since the set-up
            self._interrupt.requested = True
            self._stop_requested = False
        wall = time.perf_counter() - t0
        compute = max(r.seconds for r in results)
        self.round_log.append((wall, compute))
        return results

    def diagnostics(self, check):
        if not self.round_log:
            return {}
        wall, compute = self.round_log[-1]
        return {
            "round_time": wall,
            "compute_time": compute,
            "overhead_time": max(0.0, wall - compute),
        }

    # -- checkpoints and the end of a run ------------------------------------------------------
    def run_params(self) -> dict:
        """The settings a resumed run must share with the saved one."""
        return {
            "C": self.C,
            "n_partitions": self.n_partitions,
            "rescaling": self.rescaling,
            "slack_search": self.slack_search,
            "averaging": self.averaging,
        }

    def start(self, data):
        """Set up the engine and the state (or resume the checkpointed run). A first Ctrl-C
        or SIGTERM meanwhile is held, as during a round: the set-up ends, one round is
        made and training stops there (a second one stops at once)."""
        if self.data is not None:
            return super().start(data)
        opening = getattr(self.engine, "open", None)
        if opening is not None:
            opening()  # Spark starts first: its own Ctrl-C handler is then the one in place
        with _DeferredInterrupt(self.name, self.step_name) as interrupt:
            self._start(data)
        self._stop_requested = interrupt.requested
        return self

    #: a Ctrl-C or SIGTERM came while the engine was set up: stop after the first round
    _stop_requested = False

    def _start(self, data):
        saved = self.engine.saved() if hasattr(self.engine, "saved") else None
        if saved is None:
            return super().start(data)
        meta = saved["solver_meta"]
        changed = sorted(
            k for k, v in self.run_params().items() if meta.get("run_params", {}).get(k) != v
        )
        if changed:
            raise ValueError(
                f"the checkpoint in {self.engine.checkpoint_dir!r} belongs to "
                f"another run: {', '.join(changed)} differ"
            )
        arrays = saved["arrays"]
        history = History.from_arrays(
            {k[len("history/") :]: v for k, v in arrays.items() if k.startswith("history/")},
            saved.get("stop_reason", ""),
        )
        self.load_state(
            data, meta, {k: v for k, v in arrays.items() if not k.startswith("history/")}
        )
        self.history = history
        return self

    def _record(self, check, final=False):
        validation = self.validation
        if validation is not None:  # scores an array, also for an AveragedPoint candidate
            self.validation = lambda w: validation(as_array(w))
        try:
            record = super()._record(check, final)
        finally:
            self.validation = validation
        if getattr(self.engine, "checkpoint_due", None) and self.engine.checkpoint_due(self.passes):
            self.engine.write_checkpoint(*self.state_dict(), self.history)
        return record

    def close(self):
        """Write a last checkpoint of the run (when the engine keeps them) and release the
        engine's resources (a Spark session it started)."""
        if self.data is not None and hasattr(self.engine, "final_checkpoint"):
            self.engine.final_checkpoint(*self.state_dict(), self.history)
        self.engine.stop()

    def release_weights(self):
        """Let go of the driver's arrays as large as ``w`` once the run is closed and its
        model taken (the estimator's ``coef_``): a driver that writes the model file next
        then holds one copy of ``w``, not one per array of the state. The solver can
        neither train nor give its weights afterwards (a run on Spark resumes from its
        checkpoint)."""
        for name in self.state_arrays:
            if name != "scalars":
                setattr(self, name, None)
        self._avg_cache = self._x_primal = None
        self._released = True

    _released = False

    def _require_weights(self):
        if self._released:
            raise RuntimeError(
                f"this {type(self).__name__} let go of its weights (release_weights): take "
                "the model from the estimator, or resume the run from its checkpoint"
            )

    def fit(self, data, max_iter=None):
        self._require_weights()
        return super().fit(data, max_iter)

    def candidates(self):
        self._require_weights()
        return super().candidates()

    def state_dict(self):
        self._require_weights()
        meta, arrays = super().state_dict()
        meta["run_params"] = self.run_params()
        meta["n_partitions"] = self.n_partitions
        meta["engine"] = self.engine.name
        arrays.update(self.engine.state_arrays())
        return meta, arrays

    def load_state(self, data, meta, arrays):
        if meta.get("n_partitions") != self.n_partitions:
            raise ValueError(
                f"the saved state has {meta.get('n_partitions')} partitions, "
                f"this solver {self.n_partitions}"
            )
        self.seed = int(meta["scalars"]["seed"])  # the partitions depend on it
        own = {k: v for k, v in arrays.items() if "/" not in k}
        super().load_state(data, meta, own)
        if getattr(self, "_keeps_mean", False) and "prox_mean" not in own:
            self.prox_mean[:] = self.prox_w  # saved before x̄ was kept: it restarts at x,
            self.mean_passes = 0
            if self.passes > self.centred_at:  # the last round's end
                self._take_in_x()
        try:
            self.engine.load_state_arrays({k: v for k, v in arrays.items() if "/" in k})
            self._check_restored()
        except BaseException:
            self.data = None  # left unstarted, as PassSolver.load_state leaves a bad state
            raise

    def _check_restored(self):
        """Checks of the restored state beyond shapes and ranges (subclasses)."""


class CoCoA(ProximalPoint, WeightedAverageDual, _DistributedSolver):
    """CoCoA+ with the single-machine BCFW as the local solver, inside its proximal scheme
    (the module docstring gives the algorithm).

    With one partition a round is a pass of :class:`~dualstruct.solvers.BCFW` with its
    defaults (the proximal scheme, the pairwise step with atom steps, weighted averaging),
    over the driver's order: the same ``w`` as BCFW's.

    Parameters
    ----------
    model : model object
        Any model with a kernel (chains, multi-label, multi-class, graph CRFs, a
        :class:`~dualstruct.models.UserModel`).
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    n_partitions : int, default 2
        K, the number of partitions of the examples.
    local_passes : int, default 1
        H, BCFW passes over its examples that each partition makes per round.
    aggregation : {"adding", "averaging"}, default "adding"
        ``"adding"``: γ = 1, σ' = K (safe and faster); ``"averaging"``: γ = 1/K, σ' = 1.
    sigma : float, optional
        σ', the local subproblems' scaling; by default K for adding and 1 for averaging. Values
        below γ K are refused (the dual may then decrease and diverge).
    step : {"auto", "pairwise", "fw"}, default "auto"
        The local BCFW step, as :class:`~dualstruct.solvers.BCFW`'s; ``"auto"`` takes the
        classic step with averaging. Averaging moves each block's dual point to
        ``(1 − γ) α_old + γ α_new``: with atoms, every atom a block ever had stays with a weight
        that shrinks by γ each round, and the pairwise step, whose away atom is the worst one
        however light, then stalls on them; the pairwise step is refused there.
    atom_steps : int, default 3
        The local BCFW's steps among each block's atoms after every oracle step, as
        :class:`~dualstruct.solvers.BCFW`'s.
    proximal : "auto" or float >= 0, default "auto"
        κ of the proximal scheme, as :class:`~dualstruct.solvers.BCFW`'s (``"auto"`` adapts
        it) for one machine's local steps; the proximal term's is σ' (1 + κ) − 1 (module
        docstring). 0: plain CoCoA+.
    acceleration : {"auto", "catalyst", "none"}, default "auto"
        How the centre moves after a round: ``"catalyst"`` extrapolates it,
        ``z ← x_t + β (x_t − x_{t−1})`` with ``β = (1 − √q) / (1 + √q)``, ``q = 1/(1+κ_K)``
        (Lin, Mairal, Harchaoui 2015); ``"none"`` moves it to ``x_t`` as BCFW does.
        ``"auto"``: ``"none"`` (with the large κ_K of several partitions the extrapolation
        measured no gain: BENCHMARKS.md, "Distributed training on Spark").
    engine : engine object, optional
        Where the partitions run: :class:`InProcessEngine` (default) or
        :class:`~dualstruct.distributed.spark.SparkEngine`.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver` (``max_iter`` counts
        rounds, ``check_every`` rounds between exact checks).

    Notes
    -----
    With several partitions every check's ``extra`` holds ``agreement``, the last round's
    ``‖Σ_k Δw_k‖² / Σ_k ‖Δw_k‖²``: K when the partitions moved alike (σ' = K is then
    tight), 1 when their moves were orthogonal, below 1 when they pulled against each other.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.distributed import CoCoA
    >>> from dualstruct.models import ChainModel
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> cocoa = CoCoA(ChainModel(3, 12), C=0.1, n_partitions=2, max_iter=100, tol=0.01,
    ...               random_state=0).fit(pack_sequences(X, y))     # 2 partitions, in process
    >>> cocoa.history.stop_reason
    'tol'
    """

    name = "cocoa"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        n_partitions=2,
        local_passes=1,
        aggregation="adding",
        sigma=None,
        step="auto",
        atom_steps=3,
        proximal="auto",
        acceleration="auto",
        engine=None,
        **kwargs,
    ):
        super().__init__(model, C, n_partitions=n_partitions, engine=engine, **kwargs)
        if isinstance(atom_steps, bool) or not isinstance(atom_steps, int) or atom_steps < 0:
            raise ValueError(f"atom_steps must be an integer >= 0, got {atom_steps!r}")
        self.atom_steps = atom_steps
        if (
            isinstance(local_passes, bool)
            or not isinstance(local_passes, (int, np.integer))
            or local_passes < 1
        ):
            raise ValueError(f"local_passes must be an integer >= 1, got {local_passes!r}")
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        if step not in ("auto", "pairwise", "fw"):
            raise ValueError(f"step must be 'auto', 'pairwise' or 'fw', got {step!r}")
        check_proximal(proximal)
        if acceleration not in ACCELERATIONS:
            raise ValueError(f"acceleration must be one of {ACCELERATIONS}, got {acceleration!r}")
        self.proximal = proximal if proximal == "auto" else float(proximal)
        self.acceleration = acceleration
        self.kappa = 0.0  # set when training starts
        K = self.n_partitions
        self.local_passes = int(local_passes)
        self.aggregation = aggregation
        self.gamma = 1.0 if aggregation == "adding" else 1.0 / K
        self.sigma = float(K if aggregation == "adding" else 1) if sigma is None else sigma
        if not (isinstance(self.sigma, (int, float)) and math.isfinite(self.sigma)):
            raise ValueError(f"sigma must be a finite number, got {sigma!r}")
        if self.sigma < self.gamma * K - 1e-12:
            raise ValueError(
                f"sigma={self.sigma:g} with aggregation={aggregation!r} (gamma={self.gamma:g}) "
                f"on {K} partitions is unsafe: CoCoA+ needs sigma >= gamma*K = "
                f"{self.gamma * K:g}, else the partitions' steps add up past the optimum and "
                "training diverges. Use aggregation='adding' with sigma=K (the default) or "
                "aggregation='averaging' with sigma=1"
            )
        self.step = step
        if step == "pairwise" and self.gamma < 1.0:
            raise ValueError(
                "aggregation='averaging' needs step='fw' (or 'auto'): mixing "
                "the pairwise step's atom pools leaves ever lighter atoms that "
                "stall it; aggregation='adding' (the default) takes either step"
            )

    @property
    def resolved_step(self):
        if self.step != "auto":
            return self.step
        relaxed = getattr(kernel_model(self.model), "fractional_oracle", False)
        relaxed = relaxed and self.rescaling != "slack"  # the slack oracle is exact
        return "fw" if relaxed or self.gamma < 1.0 else "pairwise"

    @property
    def resolved_acceleration(self):
        return "none" if self.acceleration == "auto" else self.acceleration

    def _effective_kappa(self):
        """The proximal term's κ_K = σ' (1 + κ) − 1 for the one-machine κ (``kappa``): the
        local steps, whose quadratic is scaled by σ' / (1 + κ_K) = 1 / (1 + κ), are then as
        long as one machine's at κ."""
        if self.sigma == 1.0:
            return self.kappa
        return self.sigma * (1.0 + self.kappa) - 1.0

    def _kappa_start(self):
        """One machine's start ``PROXIMAL_START``; with σ' ≠ 1 the proximal term's κ_K
        starts there instead (the one-machine κ of the local steps is then smaller; never
        below 0, i.e. κ_K ≥ σ' − 1)."""
        if self.sigma == 1.0:
            return PROXIMAL_START
        return max(0.0, (PROXIMAL_START + 1.0) / self.sigma - 1.0)

    def _kappa_floor(self):
        """σ' ≠ 1: the κ whose κ_K is ``KAPPA_K_FLOOR`` (0 where σ' − 1 is above it)."""
        if self.sigma == 1.0:
            return super()._kappa_floor()
        return max(0.0, (KAPPA_K_FLOOR + 1.0) / self.sigma - 1.0)

    def _adapt_kappa(self):
        """One partition: BCFW's rule. Several: κ_K halves (never below ``KAPPA_K_FLOOR``
        or σ' − 1) when the proximal term exceeds σ' times the last round's sum of block
        gaps, or when that sum has not reached a new low for ``PROXIMAL_PATIENCE`` rounds.
        Each partition measures its blocks' gaps against its own local iterate, which sees
        about 1/σ' of the round's change, hence the factor. BCFW's rule itself (factor 1,
        and κ = 0 once the average wins a check) leaves κ_K at σ' − 1 within a few rounds,
        where the partitions' correlated steps are damped as in plain CoCoA+ and the rounds
        grow about linearly with K (BENCHMARKS.md, "Distributed training on Spark")."""
        if self.sigma == 1.0:
            return super()._adapt_kappa()
        gaps = self._gap_sum()
        if np.isfinite(gaps):
            self._judge_kappa(self._proximal_term(), self.sigma * gaps, progress=gaps)

    def _halve_kappa(self):
        """σ' ≠ 1: κ_K halves, never below :meth:`_kappa_floor`'s; else one machine's rule."""
        if self.sigma == 1.0:
            return super()._halve_kappa()
        kappa = max(0.0, (0.5 * self._effective_kappa() + 1.0) / self.sigma - 1.0)
        self.kappa = max(kappa, min(self._kappa_floor(), self.kappa))

    def _init_state(self):
        kmodel = self._start_engine(self.resolved_step)
        self.w = kmodel.init_weights()  # u, the dual's weights
        self.R = np.zeros_like(self.w)
        self.scalars = np.zeros(3)  # ℓ, averaging steps (block visits), R_ℓ
        self.kappa = 0.0
        self.lowest_gaps, self.stalled = np.inf, 0
        self.best_dual = -np.inf
        self.gap_sum = 0.0
        self.agreement = float("nan")
        if self._proximal_on:
            self._restart_proximal()
            self.prox_w = self.w.copy()  # x: scores, is returned
            if self._extrapolating:  # z, and x after the previous round
                self.prox_center = self.w.copy()
                self.prox_last = self.w.copy()
            if self.averaging:  # x̄, the rounds' x since κ last changed
                self.prox_mean = self.w.copy()
        self.mean_passes = 0  # the rounds x̄ averages
        self.centred_at = 0

    state_scalars = ("seed", "kappa", "centred_at", "lowest_gaps", "stalled", "best_dual",
                     "gap_sum", "mean_passes")  # fmt: skip

    @property
    def state_arrays(self):
        if not self._proximal_on:
            return ("w", "R", "scalars")
        arrays = ("w", "R", "scalars", "prox_w")
        if self._extrapolating:
            arrays += ("prox_center", "prox_last")
        return arrays + ("prox_mean",) if self._keeps_mean else arrays

    #: absent from files saved before x̄ was kept: it restarts at x
    optional_state_arrays = ("prox_mean",)

    def _driver_copies(self):
        """u and the average's R; x with the proximal scheme, z and the last x with
        Catalyst, x̄ with averaging too; with averaging ū is made once at a check and for
        the model returned."""
        copies = 2 + self.averaging
        if self._proximal_on:
            copies += 1 + 2 * self._extrapolating + self._keeps_mean
        return copies

    def _changes_per_partition(self):
        """Δw, and ΔR with averaging."""
        return 1 + self.averaging

    @property
    def _keeps_mean(self):
        """Whether x̄ is a candidate: with the proximal scheme and averaging, as BCFW."""
        return self._proximal_on and self.averaging

    @property
    def _extrapolating(self):
        """Whether the centre z is kept: only Catalyst's extrapolation reads it after the
        round that set it. Without it the centre moves to x before every round, so
        ``x ← (u + κ z) / (1 + κ)`` is computed from x in place and the driver holds four
        copies of ``w`` (u, x, the average's ``R`` and x̄), not six."""
        return self.resolved_acceleration == "catalyst"

    def _after_load(self):
        self._avg_cache = self._x_primal = None
        self.agreement = float("nan")
        check_step_count(self.scalars[1], "scalars")
        self._check_kappa_state()
        if self.best_dual == np.inf:
            raise ValueError("the saved solver field 'best_dual' is infinite")

    def _check_restored(self):
        """The step count ``scalars[1]`` is at most the block visits made (with none the
        averaging accumulators hold nothing); in this process (the engine holds the
        partitions) ``w`` and the loss term are recomputed from the partitions' atoms or
        block shares and must agree to a relative 1e-6. The weighted average, the proximal
        iterates and the partitions' states on Spark's executors are not verifiable here
        (trusted as saved; a gross lie gives a negative gap, which stops training)."""
        m = float(self.scalars[1])
        visits = self.passes * self.local_passes * self.data.n_sequences
        check_step_bound(m, "scalars", visits, "(block visits)")
        if m == 0 and (self.scalars[2] != 0 or np.any(self.R)):
            raise ValueError(
                "saved solver arrays 'R' and 'scalars': the averaging accumulators are not "
                "zero although no round was made (scalars[1] = 0)"
            )
        if not 0 <= self.mean_passes <= self.passes:
            raise ValueError(
                f"the saved solver field 'mean_passes' must lie in 0 … {self.passes}, got "
                f"{self.mean_passes!r}"
            )
        partitions = getattr(self.engine, "partitions", None)
        if not isinstance(partitions, list):
            return
        w, loss_term = np.zeros_like(self.w), 0.0
        for p in partitions:
            st = p.state
            if self.resolved_step == "pairwise":
                loss_term += kern.atoms_dual_point(
                    p.blocks.kernel, self.C, self.rescaling == "slack", st.atom_labels,
                    st.atom_weights, st.atom_count, st.capacity, w,
                )  # fmt: skip
                p.blocks.raise_status()
            else:
                w += st.block_weights.sum(axis=0)
                loss_term += float(st.block_losses.sum())
        check_agrees("'w' and the partitions' states ('p<k>/…')", self.w, w, self.C)
        check_agrees(
            "'scalars' (the loss term) and the partitions' states ('p<k>/…')",
            self.scalars[0],
            loss_term,
            self.C,
        )

    def _gap_sum(self):
        return self.gap_sum

    # -- the weighted average ū as an AveragedPoint: no copy of w on the driver ------------
    def _average(self):
        """``(ū, ℓ̄)``, ū an :class:`AveragedPoint` (``u`` itself before the first step)."""
        m = float(self.scalars[1])
        if m == 0:
            return self.w, float(self.scalars[0])
        A = 0.5 * m * (m + 1.0)
        return AveragedPoint(self.w, self.R, A), float(self.scalars[0] - self.scalars[2] / A)

    def candidates(self):
        """x, ū and x̄ with the proximal scheme and averaging (BCFW's, in its order); ū
        and u with averaging alone."""
        self._require_weights()
        if not self.averaging:
            return super().candidates()
        average = self._average()[0]
        if not self._proximal_on:
            return [average, self.w]
        return [self.prox_w, average, self._mean_of_x()]

    #: the rounds x̄ averages (a class default for states made by hand)
    mean_passes = 0
    #: ``(rounds, P(x))`` once x is scored after a round: x̄ while it is x is not scored again
    _x_primal = None

    def _mean_of_x(self):
        """x̄: x itself while it averages one round (as BCFW's, whose mean of one pass is x)."""
        return self.prox_w if self.mean_passes <= 1 else self.prox_mean

    def _primal(self, w):
        if not (self._proximal_on and w is self.prox_w):
            return super()._primal(w)
        if self._x_primal is None or self._x_primal[0] != self.passes:
            self._x_primal = (self.passes, super()._primal(w))
        return self._x_primal[1]

    def _take_in_x(self):
        """After a round: x̄ ← x̄ + (η + 1) (x − x̄) / (k + η) with x the round's iterate as
        the k-th (η = ``MEAN_POWER``), in place and slice by slice with the numbers of
        BCFW's pass ends."""
        if self._keeps_mean:
            self.mean_passes = mean_step(self.prox_w, self.prox_mean, self.mean_passes)

    def candidate(self, index):
        cands = self.candidates()
        return as_array(cands[min(index, len(cands) - 1)])

    def weights(self):
        self._require_weights()
        choice = self._chosen if self._final_choice is None else self._final_choice
        cands = self.candidates()
        w = cands[min(choice, len(cands) - 1)]
        return w.materialize() if isinstance(w, AveragedPoint) else np.array(w)

    def dual(self):
        """As one machine's BCFW (:meth:`ProximalPoint.dual <dualstruct.solvers.block.
        ProximalPoint.dual>`), with ‖ū‖² taken slice by slice."""
        if not self.averaging:
            return super().dual()
        average, loss_average = self._average()
        sq = average.sq_norm() if isinstance(average, AveragedPoint) else float(average @ average)
        if not self._proximal_on:
            return max(self.current_dual(), loss_average - 0.5 * sq)
        for loss, norm in ((float(self.scalars[0]), float(self.w @ self.w)), (loss_average, sq)):
            self.best_dual = max(self.best_dual, segment_dual(loss, norm))
        return self.best_dual

    def _move_centre(self):
        """``"catalyst"``: ``z ← x_t + β (x_t − x_{t−1})``; else ``z ← x_t`` (then z is x
        itself: :meth:`_centre` updates x in place)."""
        if not self._extrapolating:
            return
        x = self.prox_w
        kappa = self._effective_kappa()
        if kappa > 0:
            root = math.sqrt(1.0 / (1.0 + kappa))
            beta = (1.0 - root) / (1.0 + root)
            self.prox_center[:] = x + beta * (x - self.prox_last)
        else:
            self.prox_center[:] = x
        self.prox_last[:] = x

    def _centre(self):
        if self._extrapolating:
            return super()._centre()
        if self.proximal == "auto":
            self._adapt_kappa()
        x = self.prox_w  # x ← (u + κ x) / (1 + κ), the same numbers as with z ← x first
        proximal_point(self.w, x, self._effective_kappa(), x)
        self.centred_at = self.passes

    def _one_pass(self, order, chunks):
        self._x_primal = None
        proximal = self._proximal_on
        if proximal and self.passes > self.centred_at:  # once per round
            kappa = self.kappa
            self._centre()
            if self.kappa != kappa:
                self.mean_passes = 0  # x̄ restarts: the iterates of another κ are far
        if proximal:  # score at x, the quadratic scaled by σ'/(1+κ), u accumulates
            kappa = self._effective_kappa()
            point, sigma = self.prox_w, self.sigma / (1.0 + kappa)
        else:
            point, sigma = self.w, self.sigma
        local = {}
        if self.averaging:
            local["average_from"] = float(self.scalars[1])
        if self.n_partitions == 1:  # BCFW's pass: its order, its state updated in place
            local["order"] = order
            local["onto"] = (self.w, self.R, self.scalars)
        results = self._timed_round(
            lambda: self.engine.cocoa_round(
                point, self.passes, self.local_passes, sigma, self.gamma, self.atom_steps, **local
            )
        )
        if results[0].absolute:
            calls = self._take_state(results[0])
            self._take_in_x()
            return calls
        own = sum(r.sq_norm() for r in results)  # Σ_k ‖Δw_k‖²
        along = sum(r.dot(self.w) for r in results)  # ⟨u, Σ_k Δw_k⟩
        before = float(self.w @ self.w)
        loss_change = average_loss = gap_sum = visits = 0.0
        for k, r in enumerate(results):  # in partition order: the same sums wherever the
            r.add_to(self.w)  # partitions ran; each result is let go once added
            if proximal:  # x = (u + κ z) / (1 + κ)
                r.add_to(self.prox_w, 1.0 / (1.0 + kappa))
            loss_change += r.loss_change
            gap_sum += r.gap_sum
            visits = max(visits, r.visits)
            if self.averaging:
                r.add_average_to(self.R)
                average_loss += r.average_loss
            results[k] = r._replace(delta_values=None, average_values=None)
        self.scalars[0] += loss_change
        self.scalars[1] += visits  # the partitions number their steps on from the same m
        self.scalars[2] += average_loss
        self.gap_sum = gap_sum
        moved = float(self.w @ self.w) - before - 2.0 * along  # ‖Σ_k Δw_k‖²
        self.agreement = max(moved, 0.0) / own if own > 0 else float("nan")
        self._avg_cache = None
        self._take_in_x()
        return sum(r.oracle_calls for r in results)

    def _take_state(self, r):
        """The driver's state after a round made onto it (one partition)."""
        self.w[:] = r.delta_values
        if self.averaging:
            self.R[:] = r.average_values
        self.scalars[:] = (r.loss_change, r.visits, r.average_loss)
        if self._proximal_on:
            self.prox_w[:] = r.point
        self.gap_sum = r.gap_sum
        self._avg_cache = None
        return r.oracle_calls

    def diagnostics(self, check):
        out = super().diagnostics(check)
        out["data_passes"] = float(self.passes * self.local_passes)
        if self._proximal_on:
            out.update(
                kappa=self.kappa, proximal_term=self._proximal_term(), block_gap_sum=self.gap_sum
            )
        if self._keeps_mean:
            out["mean_rounds"] = float(self.mean_passes)
        if self.n_partitions > 1:
            out["agreement"] = self.agreement
        return out

    def single_machine_solver(self):
        """A single-machine :class:`~dualstruct.solvers.BCFW` that continues this run: the
        partitions' dual states joined into one (each example keeps its atoms, or its share
        of ``w``), with the same ``w``, loss term, weighted average and proximal state (κ,
        x, z; the last round's sum of block gaps spread evenly over the blocks). Under
        CoCoA+ ``w`` stays ``A α`` for the joined dual point α (eq. 2 of Ma et al. 2015 with
        γ-scaled local updates), so the new solver's dual and gap equal this one's. This
        brings every partition's dual state to the driver: call it once training is over.
        Its ``passes`` and history go on from this run's rounds."""
        if self.data is None or self.passes == 0:
            raise RuntimeError("single_machine_solver needs a run that has made a round")
        bcfw = BCFW(
            self.model,
            self.C,
            step=self.resolved_step,
            atom_steps=self.atom_steps,
            proximal=self.proximal,
            max_iter=self.max_iter,
            tol=self.tol,
            check_every=self.check_every,
            averaging=self.averaging,
            random_state=self.seed,
            verbose=self.verbose,
            callback=self.callback,
            validation=self.validation,
            out=self.out,
            rescaling=self.rescaling,
            slack_search=self.slack_search,
        )
        bcfw.start(self.data)
        states = self.engine.gather_states()
        parts = assign_examples(self.data.n_sequences, self.n_partitions, self.seed)
        offsets = bcfw.blocks.label_offsets
        if bcfw.resolved_step == "pairwise":
            capacity = max(int(states[k]["capacity"]) for k in range(len(parts)))
            labels = np.zeros(int(offsets[-1]) * capacity, dtype=np.int32)
            weights = np.zeros((len(offsets) - 1, capacity))
            count = np.zeros(len(offsets) - 1, dtype=np.int64)
            for k, blocks in enumerate(parts):
                st, cap = states[k], int(states[k]["capacity"])
                lengths = cap * (offsets[blocks + 1] - offsets[blocks])  # each block's atoms
                local_start = np.concatenate([[0], np.cumsum(lengths)[:-1]])
                within = np.arange(lengths.sum()) - np.repeat(local_start, lengths)
                labels[np.repeat(capacity * offsets[blocks], lengths) + within] = st["atom_labels"]
                weights[blocks, :cap] = st["atom_weights"]
                count[blocks] = st["atom_count"]
            bcfw.capacity, bcfw.atom_labels, bcfw.atom_weights, bcfw.atom_count = (
                capacity,
                labels,
                weights,
                count,
            )
        else:
            for k, blocks in enumerate(parts):
                bcfw.block_weights[blocks] = states[k]["block_weights"]
                bcfw.block_losses[blocks] = states[k]["block_losses"]
        bcfw.w, bcfw.R, bcfw.scalars = self.w.copy(), self.R.copy(), self.scalars.copy()
        m, top = self.scalars[1], float(self.passes * self.data.n_sequences)
        if m > top:  # one machine makes at most n steps a pass: the same average, renumbered
            scale = top * (top + 1.0) / (m * (m + 1.0))  # A_top / A_m
            bcfw.R *= scale
            bcfw.scalars[1:] = top, self.scalars[2] * scale
        if self._proximal_on:
            bcfw.kappa, bcfw.best_dual = self.kappa, self.best_dual
            bcfw.lowest_gaps, bcfw.stalled = self.lowest_gaps, self.stalled
            bcfw.prox_w = self.prox_w.copy()
            centre = self.prox_center if self._extrapolating else self.prox_w
            bcfw.prox_center = centre.copy()
            bcfw.block_gaps[:] = self.gap_sum / self.data.n_sequences
            if self._keeps_mean:  # x̄ and its rounds, as BCFW's pass ends
                bcfw.prox_mean, bcfw.mean_passes = self.prox_mean.copy(), self.mean_passes
        bcfw._after_load()
        # the count and the history go on: the rounds made here, then passes on one machine
        bcfw.passes, bcfw.oracle_calls = self.passes, self.oracle_calls
        bcfw.centred_at = self.centred_at
        bcfw._chosen, bcfw._final_choice = self._chosen, self._final_choice
        bcfw.train_time, bcfw.eval_time = self.train_time, self.eval_time
        bcfw.history = History(list(self.history.records), self.history.stop_reason)
        return bcfw

    def run_params(self):
        return dict(
            super().run_params(),
            local_passes=self.local_passes,
            aggregation=self.aggregation,
            sigma=self.sigma,
            step=self.resolved_step,
            atom_steps=self.atom_steps,
            proximal=self.proximal,
            acceleration=self.resolved_acceleration,
        )


class MiniBatchSSG(_DistributedSolver):
    """Distributed mini-batch stochastic subgradient (Pegasos in C-form; the baseline of the
    Dissolve-struct experiments).

    Each round every partition sums the hinge subgradients of a random ``batch_fraction`` of
    its examples at ``w``, and the driver steps

        w ← (1 − η_t) w + η_t C (n / b) Σ_{i∈B} g_i (φ(ȳ_i) − φ(μ̂_i)),    η_t = 1 / t

    (the step 1/(λ t) of Pegasos with λ = 1/(C n) on the λ-form). No dual; ``tol`` unused.
    With ``averaging`` the rounds' iterates are averaged with weights t.

    Parameters
    ----------
    model : model object
        Any model with a kernel (chains, multi-label, multi-class, graph CRFs, a
        :class:`~dualstruct.models.UserModel`).
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    n_partitions : int, default 2
        K, the number of partitions of the examples.
    batch_fraction : float, default 0.1
        The share of each partition's examples in a round's mini-batch.
    engine : engine object, optional
        Where the partitions run: :class:`InProcessEngine` (default) or
        :class:`~dualstruct.distributed.spark.SparkEngine`.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver` (``max_iter`` counts
        rounds, ``check_every`` rounds between exact checks).

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.distributed import MiniBatchSSG
    >>> from dualstruct.models import ChainModel
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> ssg = MiniBatchSSG(ChainModel(3, 12), C=0.1, max_iter=20, batch_fraction=0.5,
    ...                    random_state=0).fit(pack_sequences(X, y))
    >>> ssg.history.last_checked().primal > 0
    True
    """

    name = "minibatch_ssg"
    has_dual = False

    def __init__(self, model, C=1.0, *, n_partitions=2, batch_fraction=0.1, engine=None, **kwargs):
        super().__init__(model, C, n_partitions=n_partitions, engine=engine, **kwargs)
        if not (isinstance(batch_fraction, (int, float)) and 0 < batch_fraction <= 1):
            raise ValueError(f"batch_fraction must lie in (0, 1], got {batch_fraction!r}")
        self.batch_fraction = float(batch_fraction)

    def _init_state(self):
        kmodel = self._start_engine("pairwise")
        self.w = kmodel.init_weights()
        self.w_avg = np.zeros_like(self.w)
        self.scalars = np.zeros(1)  # t

    state_arrays = ("w", "w_avg", "scalars")

    def _driver_copies(self):
        """w, its average and a round's sum of the partitions' subgradients."""
        return 3

    def candidates(self):
        self._require_weights()
        return [self.w_avg, self.w] if self.averaging else [self.w]

    def _one_pass(self, order, chunks):
        results = self._timed_round(
            lambda: self.engine.subgradient_round(self.w, self.passes, self.batch_fraction)
        )
        psi = np.zeros_like(self.w)
        b = 0
        for r in results:
            r.add_to(psi)
            b += r.n_blocks
        t = self.scalars[0] + 1.0
        eta = 1.0 / t
        self.w *= 1.0 - eta
        psi *= eta * self.C * self.data.n_sequences / b
        self.w += psi
        np.subtract(self.w, self.w_avg, out=psi)  # psi is the temporary from here
        psi *= 2.0 / (t + 1.0)
        self.w_avg += psi
        self.scalars[0] = t
        return sum(r.oracle_calls for r in results)

    def diagnostics(self, check):
        out = super().diagnostics(check)
        out["data_passes"] = float(self.passes * self.batch_fraction)
        return out

    def run_params(self):
        return dict(super().run_params(), batch_fraction=self.batch_fraction)
