"""BCFW and SSG, written once for every model with a kernel (:mod:`dualstruct.models.base`):
the chain, multi-label, multi-class and graph models and user-defined Python models. The
compiled passes are in :mod:`dualstruct.solvers._block_kernels`; the loop, checks, history,
checkpoints and Ctrl-C are :class:`~dualstruct.solvers.base.PassSolver`'s.

A solver is given a model and its training data in the model's own form (a
:class:`~dualstruct.sequences.PackedSequences` for a chain, a
:class:`~dualstruct.models.multilabel.MultiLabelDataset`, or the
:class:`~dualstruct.data.BlockData` of a kernel model); it trains on the model's kernel and
its block data, and measures the primal with the model's own hinge, as every solver does.
"""

from __future__ import annotations

import numpy as np

from ..data import BlockData
from ..data.blocks import labelling_bound
from ..models.loops import hinge_all
from . import _block_kernels as kern
from ._proximal import (  # noqa: F401 (MEAN_POWER, PROXIMAL_START: named in the docstrings)
    MEAN_POWER,
    PROXIMAL_START,
    ProximalKappa,
    check_proximal,
    half_sq_distance,
    mean_step,
    proximal_point,
)
from .base import (
    AtomPool,
    PassSolver,
    SubgradientAverage,
    WeightedAverageDual,
    kernel_model,
    model_size,
)
from .objective import CertificateError, block_oracle_fault, oracle_sample

#: the classic step keeps n × dim(w) numbers; refuse beyond this many bytes
CLASSIC_STEP_MAX_BYTES = 8 * 2**30


def check_step_count(value, name):
    """A restored state's step count (the averaging's m): a whole number in 0 … 2⁵³ (beyond
    it the averaging weights overflow)."""
    if not (0 <= value <= 2.0**53 and value == np.floor(value)):
        raise ValueError(
            f"saved solver array {name!r}: the step count {value!r} is not a whole number "
            "in 0 … 2**53"
        )


def check_step_bound(value, name, steps, what):
    """A restored step count cannot exceed the steps the passes made so far (``steps``)."""
    if value > steps:
        raise ValueError(
            f"saved solver array {name!r}: the step count {value:.17g} exceeds the {steps} "
            f"steps {what} made so far"
        )


#: how far restored weights and loss terms may lie from what the dual variables determine
#: (relative to the larger of the two, or C; rounding over many steps)
STATE_ROUNDING = 1e-6


def check_agrees(names, saved, determined, floor):
    """Refuse a restored array (or value) ``saved`` that differs from ``determined``, what
    the state's dual variables make of it, beyond ``STATE_ROUNDING`` relative to the larger
    of the two (at least ``floor``). ``names``: the saved arrays that disagree."""
    saved = np.asarray(saved, dtype=float)
    determined = np.asarray(determined, dtype=float)
    diffs = np.abs(saved - determined)
    diff = float(np.max(diffs, initial=0.0))
    scale = max(
        float(np.max(np.abs(saved), initial=0.0)),
        float(np.max(np.abs(determined), initial=0.0)),
        floor,
    )
    if not diff <= STATE_ROUNDING * scale:
        count = int(np.count_nonzero(~(diffs <= STATE_ROUNDING * scale)))
        raise ValueError(
            f"saved solver arrays {names} disagree: {count} of {determined.size} value(s) "
            f"differ from what the dual variables determine by up to {diff:.6g} (relative "
            f"{diff / scale:.3g}, beyond rounding {STATE_ROUNDING:g}); the state does not "
            "describe a dual point (a checkpoint or model file edited, or saved by other code?)"
        )


def segment_dual(loss, sq_norm):
    """``max_{0 ≤ s ≤ 1} s ℓ − ½ s² ‖u‖²``: the best dual value on the segment from the gold
    labellings (weights 0, loss term 0, every block's mass on its gold labelling) to a dual
    point with loss term ``loss`` = ℓ and ``sq_norm`` = ‖u‖². Every point of the segment is
    feasible, so the value is a lower bound, at least ``max(0, ℓ − ½‖u‖²)``."""
    if not loss < sq_norm:  # s = 1 (NaN stays NaN)
        return loss - 0.5 * sq_norm
    return 0.5 * loss * loss / sq_norm if loss > 0.0 else 0.0


class KernelBlocks:
    """A solver's view of its problem as a kernel model and block data: ``kernel_model_`` and
    ``blocks``, made from the model and the training data by :meth:`_make_blocks`. They are
    rebuilt, not pickled, when the data is in the model's own form."""

    def _make_blocks(self, kmodel):
        data = self.data
        self.blocks = data if isinstance(data, BlockData) else kmodel.block_data(data)
        self.kernel_model_ = kmodel

    def __getstate__(self):
        state = super().__getstate__()
        if not isinstance(self.data, BlockData):
            state.pop("blocks", None)
            state.pop("kernel_model_", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.data is not None and "blocks" not in state:
            self._make_blocks(kernel_model(self.model))
        super().__setstate__({})


class _BlockPasses(KernelBlocks, PassSolver):
    """The set-up shared by the block solvers: the model's kernel and block data (the
    rescaling and slack search were checked against the kernel at construction)."""

    def _init_blocks(self):
        self._make_blocks(kernel_model(self.model))
        self._slack = self.rescaling == "slack"

    def _load_state(self, data, meta, arrays):
        super()._load_state(data, meta, arrays)
        self._check_restored()

    def _check_restored(self):
        """Checks of a restored state beyond shapes and ranges (subclasses): what the dual
        variables determine, the counters against the passes made."""


class ProximalPoint(ProximalKappa):
    """The inexact proximal-point scheme of :class:`BlockBCFW` (its class docstring), on a
    state with the dual's weights u (``w``), the iterate x (``prox_w``), the centre z
    (``prox_center``), κ and its patience (:class:`~._proximal.ProximalKappa`): the
    centre's move, when κ is judged, the candidates and the certified dual. The
    distributed CoCoA+ (:mod:`dualstruct.distributed`) runs it with its rounds as the
    passes."""

    def candidates(self):
        if self._proximal_on:
            if self.averaging:
                return [self.prox_w, self._averaged()[0]]
            return [self.prox_w]
        return super().candidates()

    def candidate(self, index):
        if self._proximal_on and (index == 0 or not self.averaging):
            return self.prox_w  # the average (a copy of w) is not made
        return super().candidate(index)

    def dual(self):
        """The best dual value certified so far: with the proximal scheme ``D(u)`` need not
        grow from pass to pass (u moves with the centre), and every value is a lower bound.
        The proximal scheme's bound is the best point between the gold labelling and u, and
        between it and ū (the class docstring's Certificate)."""
        if self._proximal_on:
            points = [(self.scalars[0], self.w)]
            if self.averaging:
                w_avg, loss_avg = self._averaged()
                points.append((loss_avg, w_avg))
            for loss, w in points:
                self.best_dual = max(self.best_dual, segment_dual(float(loss), float(w @ w)))
            return self.best_dual
        return super().dual()

    def _gap_sum(self):
        """The sum of the block gaps the last pass measured (each at its own visit)."""
        return float(self.block_gaps.sum())

    def _adapt_kappa(self):
        """``proximal="auto"``, before every pass: κ's rule
        (:meth:`~._proximal.ProximalKappa._judge_kappa`) with the proximal term against the
        last pass's sum of block gaps, which is also the patience's figure (the inner
        problem stalls: as κ → 0 the passes become plain BCFW's, which converge). κ = 0 for
        good once the average ``ū`` has won a check (the class docstring's Averaging)."""
        if self._average_won():
            self.kappa = 0.0  # ū won the last check: plain BCFW from here (docstring)
            return
        gaps = self._gap_sum()
        if not np.isfinite(gaps):
            return  # no pass since a new C: nothing to judge κ by
        self._judge_kappa(self._proximal_term(), gaps)

    def _proximal_term(self):
        """``½ ‖u − x‖²``, the part of the duality gap that the centre holds up."""
        return half_sq_distance(self.w, self.prox_w)

    def _centre(self):
        """Before a pass: κ adapts (``proximal="auto"``), the centre moves
        (:meth:`_move_centre`) and x follows, ``x = (u + κ z) / (1 + κ)`` with κ the
        :meth:`_effective_kappa`."""
        if self.proximal == "auto":
            self._adapt_kappa()
        self._move_centre()
        proximal_point(self.w, self.prox_center, self._effective_kappa(), self.prox_w)
        self.centred_at = self.passes

    def _effective_kappa(self):
        """The κ of the proximal term (``kappa`` here; CoCoA+ scales it to its partitions)."""
        return self.kappa

    def _move_centre(self):
        """The centre moves to the last iterate, ``z ← x``."""
        self.prox_center[:] = self.prox_w


class BlockBCFW(ProximalPoint, AtomPool, WeightedAverageDual, _BlockPasses):
    """Block-coordinate Frank–Wolfe on the structural SVM dual with exact line search and the
    duality gap as certificate, for every kernel model, run as an inexact proximal-point
    method by default.

    **Why proximal.** BCFW's exact block step is taken against the other blocks' current
    share of ``w``. When many blocks push ``w`` the same way (large C, and slack rescaling,
    whose corners ``C δ(y) (φ(ȳ) − φ(y))`` are longer by the loss δ), each block's step is
    short and the dual creeps up by about the same amount every pass, for hundreds of
    passes with slack rescaling.
    The proximal-point method (Rockafellar 1976; as an outer loop of a linearly convergent
    inner solver, Lin, Mairal, Harchaoui 2015, "Catalyst") trains instead on

        P_κ(w; z) = ½‖w‖² + (κ/2) ‖w − z‖² + C Σ_i H_i(w),

    moving the centre ``z`` to the latest iterate after every pass. Its dual over the same
    dual points α is ``ℓ(α) − ½ (1+κ)⁻¹ ‖u(α) + κ z‖² + const`` with ``u(α) = Σ_i E_{q_i}
    w_s`` (the plain dual's weights) and the primal–dual map ``x = (u + κ z) / (1+κ)``: the
    same BCFW pass with the line search's quadratic term scaled by σ = 1/(1+κ), scoring at
    ``x``, which moves by σ times each step. Steps are (1+κ) times longer, the creep goes.

    **Certificate.** Every α stays feasible for the original dual, so
    ``D(α) = ℓ − ½‖u‖²`` is a lower bound and ``P(x)`` an upper bound; their gap splits as

        P(x) − D(α) = [P_κ(x; z) − D_κ(α; z)] + ½ ‖u − x‖²,

    the inner problem's duality gap (the sum of the blocks' Frank–Wolfe gaps, which every
    pass measures) plus a proximal term ``½ (κ/(1+κ))² ‖u − z‖²``. Both vanish at the
    optimum (``x = u = z = w*``): the gap closes, and it certifies the original problem.
    The steps are taken for ``D_κ``, about (1+κ) times too long for ``D``: while κ is large
    ``D(u)`` falls far below zero (−7e5 after the first pass at κ = 100 on a full graph of
    120 labels, n = 240). The reported bound is therefore the best dual point on the segment
    from the gold labellings to α (``s α + (1 − s) e_gold``, value ``s ℓ − ½ s² ‖u‖²``, at
    best ``ℓ² / (2‖u‖²)`` when ``ℓ < ‖u‖²``), never below 0, and ``D(u)`` near the optimum.

    **Choosing κ.** A large κ makes the inner problem easy and the centre slow; a small one
    the reverse, and κ = 0 is plain BCFW. ``proximal="auto"`` starts at κ =
    ``PROXIMAL_START`` and halves κ before a pass whenever the proximal term exceeds the
    last pass's sum of block gaps, i.e. when the centre, not the inner problem, holds the
    gap up, or when that sum has not reached a new low for ``PROXIMAL_PATIENCE`` passes
    (below ``PROXIMAL_MIN`` κ is 0, plain BCFW). Its passes to a certified gap against
    plain BCFW's: BENCHMARKS.md, "OCR", "Slack rescaling and the cutting plane" and
    "Training across C".

    **Averaging.** With ``averaging=True`` the solver also keeps the weighted average ``ū``
    of the dual iterates u (weights 1, 2, 3, … per step, Lacoste-Julien et al. 2013, the
    average plain BCFW returns), a dual point too. The returned weights are whichever of
    ``x``, ``ū`` and ``x̄`` (below) has the lower primal at the last check, and the dual
    bound is the best of ``D(u)`` and ``D(ū)``. Where ``ū`` wins a check, the problem is
    limited by the primal of the returned model rather than by the steps (the average
    smooths over many more passes than ``x``'s window of about 1 + κ), and
    ``proximal="auto"`` sets κ = 0 from then on: plain BCFW, whose average keeps the
    iterates made so far (BENCHMARKS.md, "GDMM and large label sets", has a chain where this
    happens). With ``proximal=0`` the solver is plain BCFW throughout (``x = u``).

    A third candidate is ``x̄``, the average of the iterates x at the ends of the passes made
    since κ last changed, with weights growing as k^η (``x̄ ← x̄ + (η + 1) (x − x̄) / (k +
    η)`` after the k-th, η = ``MEAN_POWER`` = 2: weights 1·2, 2·3, 3·4, …; Shamir and Zhang
    2013). Where the primal is sharp (large C, many pixels per example) x stays at a
    primal well above the dual long after the dual has settled: the hinges of nearby weights
    differ by whole labellings, and the weighted mean of the recent iterates smooths over
    them (snakes at C = 10 after 100 passes: a certified gap of 1.03% where ``x`` gives
    3.2%; yeast's full graph at C = 100: 1% after 150 passes instead of 190). It is a primal point
    only; the dual bound does not use it, and its wins do not change κ.

    On tiny chains BCFW's pairwise step and the cutting plane reach the exact optimum of the
    dual QP over all labellings (solved by a generic QP solver) to 1e-7, with margin and
    slack rescaling, and the running ``w`` and loss term equal the atoms' weighted corners
    to 1e-13 after thousands of passes.

    Parameters
    ----------
    model : model object
        What is trained: a kernel model (:class:`~dualstruct.models.ChainModel`,
        :class:`~dualstruct.models.MultiLabelModel`, a graph CRF, …) or a
        :class:`~dualstruct.models.UserModel`.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    step : {"auto", "pairwise", "fw"}, default "auto"
        ``"pairwise"``: block-coordinate pairwise Frank–Wolfe (Osokin et al. 2016), which keeps
        each block's dual point as a few weighted labellings (atoms) and moves mass from the
        worst of them to the oracle's corner; it converges linearly, and its memory is
        O(labelling entries × atoms). ``"fw"``: the classic BCFW step (Lacoste-Julien et al.
        2013), which keeps each block's share of ``w`` (memory n × dim w) and steps to the
        oracle's point, also a relaxed oracle's fractional one. ``"auto"``: the classic step for
        models whose oracle is a relaxation with fractional solutions (the relaxed structural
        SVM is then solved and certified) under margin rescaling, the pairwise step otherwise
        (slack rescaling's oracle is exact).
    atom_steps : int, default 3
        With the pairwise step: after each oracle step, up to this many further pairwise
        steps among the block's own atoms (from the worst to the best at the current ``w``),
        which call no oracle. They settle the weights within a block, as the proximal scheme
        settles them across blocks.
    proximal : "auto" or float >= 0, default "auto"
        κ of the proximal scheme above, with either step: ``"auto"`` adapts it, a number
        fixes it, and 0 runs plain BCFW with weighted averaging.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`: ``max_iter``, ``tol``,
        ``check_every``, ``averaging``, ``random_state``, ``verbose``, ``callback``,
        ``validation``, ``rescaling``, ``slack_search``, ``primal_sample``.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import BCFW
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> data = pack_sequences(X, y)
    >>> solver = BCFW(ChainModel(3, 12), C=0.1, max_iter=300, tol=1e-3, random_state=0).fit(data)
    >>> solver.history.last_checked().relative_gap <= 1e-3
    True
    """

    name = "bcfw"

    def __init__(self, model, C=1.0, *, step="auto", atom_steps=3, proximal="auto", **kwargs):
        super().__init__(model, C, **kwargs)
        if step not in ("auto", "pairwise", "fw"):
            raise ValueError(f"step must be 'auto', 'pairwise' or 'fw', got {step!r}")
        self.step = step
        if isinstance(atom_steps, bool) or not isinstance(atom_steps, int) or atom_steps < 0:
            raise ValueError(f"atom_steps must be an integer >= 0, got {atom_steps!r}")
        self.atom_steps = atom_steps
        self.proximal = check_proximal(proximal)
        self.kappa = 0.0  # set when training starts

    @property
    def resolved_step(self):
        """The step in use: ``step``, with ``"auto"`` decided by the model's oracle (slack
        rescaling's oracle returns labellings even where the margin oracle is relaxed)."""
        if self.step != "auto":
            return self.step
        relaxed = getattr(kernel_model(self.model), "fractional_oracle", False)
        return "fw" if relaxed and self.rescaling != "slack" else "pairwise"

    @property
    def memory_levers(self):
        levers = ()
        if self.step == "fw":  # chosen: "auto" takes it only for a relaxed oracle
            levers += (
                ("solver_options", "the pairwise step (solver_options={'step': 'pairwise'})"),
            )
        if self._proximal_on:
            levers += (("solver_options", "no proximal term (solver_options={'proximal': 0})"),)
        return levers

    def memory_parts(self, data):
        parts = super().memory_parts(data)
        n, entries = data.n_sequences, data.n_tokens
        if self.resolved_step == "fw":
            parts["blocks' shares of w (classic step)"] = 8 * n * model_size(self.model)
        else:  # the pool starts at 4 atoms a block and doubles when a block needs more
            parts["atoms (4 per example)"] = 4 * (4 * entries) + 8 * 4 * n
        if self._proximal_on:
            parts["proximal iterate, centre and mean"] = 8 * 3 * model_size(self.model)
        return parts

    def _init_state(self):
        self._init_blocks()
        blocks = self.blocks
        n = blocks.n_blocks
        self.w = self.kernel_model_.init_weights()
        self.R = np.zeros_like(self.w)
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(n)
        self.capacity = 0
        if self.resolved_step == "pairwise":
            self._init_atoms(blocks.label_offsets, blocks.labels)
        else:
            need = 8 * n * self.w.size
            if need > CLASSIC_STEP_MAX_BYTES:
                raise MemoryError(
                    f"the classic BCFW step keeps every block's share of w: {n} blocks × "
                    f"{self.w.size} weights = {need / 2**30:.1f} GiB; use step='pairwise'"
                )
            self.block_weights = np.zeros((n, self.w.size))
            self.block_losses = np.zeros(n)
        self.kappa = 0.0
        self.lowest_gaps, self.stalled = np.inf, 0  # for κ's patience
        self.best_dual = -np.inf
        if self._proximal_on:
            self._restart_proximal()
            # x (scores, is returned) and z; w holds u, the dual's weights
            self.prox_w = self.w.copy()
            self.prox_center = self.w.copy()
            self.prox_mean = self.w.copy()  # x̄ over the pass ends since κ changed (docstring)
        self.mean_passes = 0  # the pass ends prox_mean averages
        self.centred_at = 0  # the pass count when the centre last moved

    state_scalars = (
        "capacity", "kappa", "centred_at", "lowest_gaps", "stalled", "best_dual", "averages_u",
        "mean_passes", "mean_at_pass_end",
    )  # fmt: skip
    #: the averaging accumulator R follows u under the proximal scheme (files without this
    #: field were saved when it did not)
    averages_u = 1
    #: x̄ takes in each pass's x at the pass's end (files without this field were saved
    #: when it did so at the next pass's start)
    mean_at_pass_end = 1

    @property
    def state_arrays(self):
        common = ("w", "R", "scalars", "block_gaps")
        if self._proximal_on:
            common += ("prox_w", "prox_center", "prox_mean")
        if self.resolved_step == "pairwise":
            return common + ("atom_labels", "atom_weights", "atom_count")
        return common + ("block_weights", "block_losses")

    #: absent from the files of plain BCFW: the proximal scheme then starts at the model
    #: that state returned (``prox_mean``: absent from files saved before x̄ was kept, and
    #: then restarted at x)
    optional_state_arrays = ("prox_w", "prox_center", "prox_mean")

    def load_state(self, data, meta, arrays):
        """Restore a :meth:`state_dict` (:meth:`PassSolver.load_state
        <dualstruct.solvers.base.PassSolver.load_state>` checks shapes, dtypes, finite values
        and label ranges). What the dual variables determine is recomputed once and must
        agree to a relative ``STATE_ROUNDING`` (1e-6): with the pairwise step ``w`` and the
        loss term ``scalars[0]`` from the atoms and their weights; with the classic step from
        the blocks' shares (``block_weights``, ``block_losses``), each of which must also lie
        below the block's hinge at ``w`` (one oracle pass). The step count
        ``scalars[1]`` is at most the passes × examples made, and with no step made the
        accumulators ``R`` and ``scalars[2]`` hold nothing.

        Not verifiable, and trusted as saved: the accumulators of the weighted average (the
        averaged point ``ū`` of the iterates), ``best_dual`` (the best dual of earlier
        iterates: above the current one is legitimate), the proximal iterate and centre
        (primal points, whose primal is measured exactly) and the blocks' gaps and κ's
        patience (they steer κ only). A gross lie among them gives a dual above a primal:
        the negative-gap check of every check stops training with a CertificateError."""
        if self.step == "auto" and "block_weights" in arrays and "atom_labels" not in arrays:
            self.step = "fw"  # saved by a run whose "auto" took the classic step
        super().load_state(data, meta, arrays)
        proximal_state = "prox_center" in arrays
        restart_mean = "prox_mean" not in arrays  # absent from older and plain files
        if proximal_state and "averages_u" not in meta["scalars"]:
            # saved before the proximal scheme averaged u: R did not follow the steps
            self.R[:] = 0.0
            self.scalars[1:] = 0.0
            self._avg_cache = None
        if not self._proximal_on:
            self.kappa = 0.0
            if proximal_state:  # candidates [x, ū] become [ū, u]: ū, until the next check
                self._final_choice, self._chosen = None, 0
        elif not proximal_state:  # saved by plain BCFW: start the scheme afresh
            self._restart_proximal()
            self.best_dual = WeightedAverageDual.dual(self)
            plain = WeightedAverageDual.candidates(self)  # the model that state returned
            choice = self._chosen if self._final_choice is None else self._final_choice
            self.prox_w = np.array(plain[min(choice, len(plain) - 1)])
            self.prox_center = self.prox_w.copy()
            self.centred_at = self.passes - 1  # the next pass centres at the returned model
            self._final_choice, self._chosen = None, 0
        elif self.proximal != "auto":
            if float(self.proximal) != self.kappa:
                restart_mean = True  # x̄ restarts: the file's iterates had another κ
            self.kappa = float(self.proximal)  # a fixed κ is the constructor's
        if self._proximal_on and restart_mean:
            self.prox_mean = self.prox_w.copy()
            self._restart_mean()  # x̄ restarts at x
        elif (
            self._proximal_on
            and "mean_at_pass_end" not in meta["scalars"]
            and self.averaging
            and self.passes > self.centred_at
        ):
            self._take_in_x()  # saved when x̄ took in a pass's x at the next pass's start

    def diagnostics(self, check):
        """κ, the proximal term ``½‖u − x‖²`` and the sum of the block gaps the last pass
        measured (each at its own visit; NaN before the first pass at a new C)."""
        if not self._proximal_on:
            return {}
        return {
            "kappa": self.kappa,
            "proximal_term": self._proximal_term(),
            "block_gap_sum": self._gap_sum(),
        }

    def _one_pass(self, order, chunks):
        """A pass; with the proximal scheme first the centre moves to the last iterate
        (and κ halves if the proximal term exceeded the last pass's block gaps), and with
        averaging x̄ takes in the pass's x at its end."""
        if self._centre_due():  # once per pass
            kappa = self.kappa
            self._centre()
            if self.kappa != kappa:
                self.mean_passes = 0  # x̄ restarts: the iterates of another κ are far
        calls = super()._one_pass(order, chunks)
        if self._proximal_on and self.averaging:  # x̄ is a candidate only with averaging
            self._take_in_x()
        return calls

    def _take_in_x(self):
        """x̄ ← x̄ + (η + 1) (x − x̄) / (k + η) in place, slice by slice: ``prox_mean``, the
        mean of the ``mean_passes`` pass ends taken in, takes in the current x as the k-th
        (η = ``MEAN_POWER``; x itself when k = 1)."""
        self.mean_passes = mean_step(self.prox_w, self.prox_mean, self.mean_passes)

    def _restart_mean(self):
        """x̄ restarts at x; x is its first pass end when a pass has ended since the centre
        last moved (a pass end the next pass would not take in)."""
        self.prox_mean[:] = self.prox_w
        self.mean_passes = 0
        if self.averaging and self.passes > self.centred_at:
            self._take_in_x()

    def candidates(self):
        """x, ū and x̄ (the class docstring's Averaging); x alone without averaging."""
        cands = super().candidates()
        if self._proximal_on and self.averaging:
            cands.append(self._mean_of_x())
        return cands

    def candidate(self, index):
        if self._proximal_on and self.averaging and index >= 2:
            return self._mean_of_x()
        return super().candidate(index)

    def _mean_of_x(self):
        """x̄ (``prox_mean``, no copy), x itself until it has taken in two pass ends."""
        return self.prox_w if self.mean_passes <= 1 else self.prox_mean

    carries_dual = True

    def _dual_terms(self):
        return float(self.scalars[0]), float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """w and ℓ scale by s; the atoms' convex weights mix with the gold labelling (an
        atom again where needed). The weighted average starts afresh (the iterates of the
        old C are not the new problem's), the blocks' gaps are unknown until the next pass
        (NaN), and κ and its patience start afresh."""
        self.w *= s
        # a new problem: the weighted average starts afresh from its first step
        self.R[:] = 0.0
        self.scalars[1:] = 0.0
        self.block_gaps[:] = np.nan  # the kernel writes every block's gap in a pass
        if self._proximal_on:
            self.prox_w *= s
            self.prox_center *= s
            self._restart_mean()  # x̄ restarts with the new problem
            self._restart_proximal()
            self.best_dual = -np.inf
        self.scalars[0] *= s
        if self.resolved_step == "fw":
            self.block_weights *= s
            self.block_losses *= s
        elif t < 1.0:
            offsets, gold = self.blocks.label_offsets, self.blocks.labels
            while not kern.mix_in_gold(
                offsets, gold, self.atom_labels, self.atom_weights, self.atom_count,
                self.capacity, t,
            ):  # fmt: skip
                self._grow_atoms(offsets)
        self._avg_cache = None

    #: the blocks' gaps are NaN until the first pass at a new C
    nan_state_arrays = ("block_gaps",)

    def _after_load(self):
        self._avg_cache = None
        check_step_count(self.scalars[1], "scalars")
        if not (np.isfinite(self.kappa) and self.kappa >= 0):
            raise ValueError(f"the saved solver field 'kappa' must be >= 0, got {self.kappa!r}")
        if self.best_dual == np.inf:
            raise ValueError("the saved solver field 'best_dual' is infinite")
        if self.resolved_step == "pairwise":
            self._check_atoms(self.blocks.label_offsets, labelling_bound(self.blocks.kernel))

    def _check_restored(self):
        """The step count against the passes, and the dual point (``w``, the loss term)
        against the atoms or the blocks' shares (:meth:`load_state`)."""
        m = float(self.scalars[1])
        check_step_bound(m, "scalars", self.passes * self.blocks.n_blocks, "(block visits)")
        if m == 0 and (self.scalars[2] != 0 or np.any(self.R)):
            raise ValueError(
                "saved solver arrays 'R' and 'scalars': the averaging accumulators are not "
                "zero although no step was made (scalars[1] = 0)"
            )
        for name, top in (
            ("centred_at", self.passes),
            ("stalled", self.kappa_patience),
            ("mean_passes", self.passes),
        ):
            if not 0 <= getattr(self, name) <= top:
                raise ValueError(
                    f"the saved solver field {name!r} must lie in 0 … {top}, got "
                    f"{getattr(self, name)!r}"
                )
        C = self.C
        if self.resolved_step == "pairwise":
            w = np.zeros_like(self.w)
            loss_term = kern.atoms_dual_point(
                self.blocks.kernel, C, self._slack, self.atom_labels, self.atom_weights,
                self.atom_count, self.capacity, w,
            )  # fmt: skip
            self.blocks.raise_status()
            held = "'atom_labels', 'atom_weights'"
        else:
            w = self.block_weights.sum(axis=0)
            loss_term = float(self.block_losses.sum())
            held = None
        check_agrees(f"'w' and {held or repr('block_weights')}", self.w, w, C)
        check_agrees(
            f"'scalars' (the loss term) and {held or repr('block_losses')}",
            self.scalars[0],
            loss_term,
            C,
        )
        if self.resolved_step == "fw":
            self._check_shares()

    def _check_shares(self):
        """Every block's share ``(w_i, ℓ_i)`` is a mean of the block's corners, whose values
        ``ℓ_s − ⟨w_s, w⟩`` never exceed ``C H_i(w)`` (the oracle's bound): checked at the
        restored ``w`` (one oracle pass)."""
        blocks = self.blocks
        hinge = np.zeros(blocks.n_blocks)
        hinge_all(blocks.kernel, self.w, self._slack, hinge, np.empty_like(blocks.kernel.labels))
        blocks.raise_status()
        scores = self.block_weights @ self.w
        values = self.block_losses - scores
        bound = self.C * hinge
        scale = 1.0 + np.abs(bound) + np.abs(self.block_losses) + np.abs(scores)
        bad = np.flatnonzero(values > bound + STATE_ROUNDING * scale)
        if len(bad):
            i = int(bad[0])
            raise ValueError(
                f"saved solver arrays 'block_weights' and 'block_losses': the share of block "
                f"{i} has the value {values[i]:.6g} at 'w', above C times its hinge "
                f"({bound[i]:.6g}); a mean of the block's corners never exceeds it"
            )

    def _oracle_fault(self, examples, w):
        """:func:`~dualstruct.solvers.objective.block_oracle_fault` against this solver's
        atoms or block shares."""
        if self.resolved_step == "pairwise":
            held = {"atoms": (self.atom_labels, self.atom_count, self.capacity)}
        else:
            held = {"shares": (self.block_weights, self.block_losses), "C": self.C}
        return block_oracle_fault(self.model, self.blocks, w, examples, self._slack, **held)

    def _check_oracles(self):
        """After a pass: the oracle on a few examples at the scoring point."""
        w = self.prox_w if self._proximal_on else self.w
        fault = self._oracle_fault(oracle_sample(self.blocks.n_blocks, self.passes), w)
        if fault is not None:
            raise CertificateError(fault)

    def _inconsistency(self):
        """The oracle on every example at the returned weights."""
        return self._oracle_fault(np.arange(self.blocks.n_blocks), self.weights())

    def _run(self, order):
        calls = np.zeros(1, dtype=np.int64)
        if self._proximal_on:  # score at x, the quadratic scaled by σ, u accumulates
            sigma = 1.0 / (1.0 + self.kappa)
            w, averaging, delta = self.prox_w, self.averaging, self.w
        else:
            w, averaging, sigma, delta = self.w, self.averaging, 1.0, np.zeros(0)
        if self.resolved_step == "fw":
            kern.classic_bcfw_pass(
                self.blocks.kernel,
                order,
                self.C,
                w,
                self.R,
                averaging,
                self.block_weights,
                self.block_losses,
                np.zeros_like(self.w),
                self.scalars,
                self.block_gaps,
                self._slack,
                self.search_code,
                calls,
                sigma,
                delta,
            )
            self.blocks.raise_status()
            return int(calls[0])
        self.pairwise_pass(
            self.blocks,
            order,
            self.C,
            w,
            self.R,
            averaging,
            self.scalars,
            self.block_gaps,
            self._slack,
            self.search_code,
            calls,
            sigma,
            delta,
            atom_steps=self.atom_steps,
        )
        return int(calls[0])


class BlockSSG(SubgradientAverage, _BlockPasses):
    """Pegasos stochastic subgradient for every kernel model (no dual; ``tol`` unused).

    Parameters
    ----------
    model : model object
        What is trained: a kernel model (:class:`~dualstruct.models.ChainModel`,
        :class:`~dualstruct.models.MultiLabelModel`, a graph CRF, …) or a
        :class:`~dualstruct.models.UserModel`.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    max_iter, tol, check_every, averaging, random_state, verbose : see PassSolver
        As :class:`~dualstruct.solvers.base.PassSolver`.
    callback, validation, out, rescaling, slack_search, primal_sample : see PassSolver
        As :class:`~dualstruct.solvers.base.PassSolver`.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import SSG
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> solver = SSG(ChainModel(3, 12), C=0.1, max_iter=20, random_state=0).fit(
    ...     pack_sequences(X, y))
    >>> solver.history.last_checked().primal > 0    # SSG reports the exact primal, no dual
    True
    """

    name = "ssg"

    def _init_state(self):
        self._init_blocks()
        self.v = self.kernel_model_.init_weights()
        self.R = np.zeros_like(self.v)
        self.scalars = np.array([0.0, self.C * self.blocks.n_blocks])  # m, C n

    state_arrays = ("v", "R", "scalars")

    def _after_load(self):
        check_step_count(self.scalars[0], "scalars")

    def _check_restored(self):
        """``scalars = [m, C n]``: ``C n`` is this solver's, the step count m at most the
        passes × examples made, and with m = 0 the sums ``v`` and ``R`` hold nothing (the
        iterate is ``C n v / m``)."""
        m, Cn = (float(x) for x in self.scalars)
        expected = self.C * self.blocks.n_blocks
        if not abs(Cn - expected) <= 1e-12 * expected:
            raise ValueError(
                f"saved solver array 'scalars': C n is {Cn!r}, not {expected!r} "
                f"(C = {self.C!r}, n = {self.blocks.n_blocks})"
            )
        check_step_bound(m, "scalars", self.passes * self.blocks.n_blocks, "(block visits)")
        if m == 0 and (np.any(self.v) or np.any(self.R)):
            raise ValueError(
                "saved solver arrays 'v', 'R' and 'scalars': the sums are not zero although "
                "no step was made (scalars[0] = 0)"
            )

    def _run(self, order):
        calls = np.zeros(1, dtype=np.int64)
        kern.ssg_pass(
            self.blocks.kernel,
            order,
            self.v,
            self.R,
            self.scalars,
            self.averaging,
            self._slack,
            self.search_code,
            calls,
        )
        self.blocks.raise_status()
        return int(calls[0])
