"""The training loop every pass-based solver shares: passes in random order, periodic exact
objective and gap, validation score, progress lines, callbacks, early stop, Ctrl-C.

A concrete solver supplies four things: ``_init_state()``, ``_run(order)`` (a numba pass over the
examples in ``order``), ``weights()`` (the model it would return now) and ``dual()`` (a lower
bound on the optimum, or NaN if the solver has none).
"""

from __future__ import annotations

import hashlib
import math
import numbers
import signal
import sys
import threading
import time

import numpy as np

from ..inference.slack_search import SEARCHES
from ..memory import check_memory
from ._block_kernels import grow_atom_pool, pairwise_bcfw_pass
from .history import History, Record, format_header, format_record
from .objective import (
    RESCALINGS,
    CertificateError,
    dual_objective,
    duality_gap,
    gap_is_negative,
    primal_objective,
    sampled_primal,
)

#: Examples handed to one kernel call: a pass is split so that a second Ctrl-C (which stops
#: training mid-pass) is honoured promptly.
CHUNK_TOKENS = 200_000
#: ... and further by cost, into kernel calls of about this many seconds at the measured
#: rate (the first calls of a run by an estimate of an example's cost): then a Ctrl-C or
#: SIGTERM is seen within about that long however costly one example is (a multi-label
#: model's grows with its edges)
CHUNK_SECONDS = 0.5
#: the estimated cost (:meth:`PassSolver._example_cost` units, about a nanosecond each)
#: of the first kernel call of a run, before a rate has been measured
FIRST_CHUNK_COST = 2e7
#: the cost of a labelling entry of a model without ``example_cost`` (a two-state table's)
DEFAULT_EXAMPLE_COST = 300.0
#: a first Ctrl-C or SIGTERM stops a pass part-way when the rest of it would take longer
#: than this; shorter passes end first (then resuming repeats an uninterrupted run)
INTERRUPT_WAIT = 2.0
#: the largest C: the objective's terms grow like C² and would overflow far beyond it
MAX_C = 1e100
#: with check_every="auto", the exact checks take at most this share of the training time
MONITORING_SHARE = 0.1


#: what to change when a solver's memory estimate is refused, in the terms of the model and
#: the solver (an estimator replaces it with advice in its own options,
#: :func:`~dualstruct.memory.memory_advice`)
MEMORY_ADVICE = (
    "Lower it with sparse feature-label weights (the model's support), fewer features or "
    "labels, or a subset of the examples."
)


class _DeferredInterrupt:
    """Holds a first Ctrl-C (SIGINT) or SIGTERM (how schedulers stop jobs) until the current
    pass has ended, so training stops on a pass boundary: the state is then exactly that of
    an uninterrupted run after as many passes, and resuming continues it bit for bit. A
    second one stops at once: it raises KeyboardInterrupt (through PySpark's own handler,
    which also cancels the running Spark jobs, when that is the one in place). Only where
    the default or PySpark's handler is in place (the main thread, no handler of the
    caller's own); elsewhere the signals keep their usual meaning."""

    #: signal -> (its default handler, its name in messages)
    SIGNALS = {
        signal.SIGINT: (signal.default_int_handler, "Ctrl-C"),
        signal.SIGTERM: (signal.SIG_DFL, "SIGTERM"),
    }

    def __init__(self, name, step="pass"):
        self.name = name
        self.step = step
        self.requested = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig, (default, _) in self.SIGNALS.items():
                handler = signal.getsignal(sig)
                if handler is default or _is_pyspark_handler(handler):
                    self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.requested:
            previous = self._previous.get(signum)
            if _is_pyspark_handler(previous):
                previous(signum, frame)  # cancels the Spark jobs, raises KeyboardInterrupt
            raise KeyboardInterrupt
        self.requested = True
        what = self.SIGNALS[signum][1]
        print(
            f"[{self.name}] {what}: stopping after this {self.step} ({what} again stops at once)",
            file=sys.stderr,
            flush=True,
        )

    def __exit__(self, *exc):
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        return False


def _is_pyspark_handler(handler) -> bool:
    """The SIGINT handler a SparkContext installs (it cancels the jobs, then raises
    KeyboardInterrupt)."""
    return callable(handler) and getattr(handler, "__module__", "").startswith("pyspark")


def checked_setting(name, value, word):
    """``value`` if it is an integer >= 1 (as an int) or the one other accepted value
    ``word`` (``"auto"`` for ``check_every``, None for ``primal_sample``); else ValueError."""
    if value is word or (isinstance(word, str) and isinstance(value, str) and value == word):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 or {word!r}, got {value!r}")
    return int(value)


class PassSolver:
    """Base class of every solver: passes over the examples with checks of the primal and the
    gap (BCFW, SSG, the cutting plane, GDMM for chains and for multi-label models, and the
    distributed CoCoA+ and mini-batch SSG).

    Parameters
    ----------
    model : a model object (e.g. :class:`~dualstruct.models.ChainModel`)
    C : float
        Regularization constant of the C-form primal ``½‖w‖² + C Σ_i H_i(w)``.
    max_iter : int
        Maximum number of passes over the data.
    tol : float
        Stop when the relative duality gap ``(P − D) / P`` is at most ``tol`` (solvers with a
        dual only). A gap below zero beyond rounding (``GAP_ROUNDING``) is no certificate:
        training stops with a :class:`~dualstruct.solvers.CertificateError` naming the
        oracle and example at fault, or the solver state. After every pass the solvers that
        keep labellings also check the oracle on a few examples (its maximum is never below
        the gold labelling's value nor below that of a labelling it returned before). A
        fit that raises leaves ``history.stop_reason == "error"``; a KeyboardInterrupt before
        the first whole pass is raised (there is no model to keep).
    check_every : int or "auto"
        Compute the exact primal, the gap and the validation score every this many passes
        (and after the last pass). Each check costs one loss-augmented decoding of every
        example per candidate model, timed separately as ``eval_time`` (the chain and
        multi-class models share it among the threads of the enclosing
        :func:`~dualstruct.models.loops.thread_setting`, the estimator's ``n_jobs``, with the
        same values whatever their number). ``"auto"`` checks
        after the first pass and then spaces the checks so that each costs at most
        ``MONITORING_SHARE`` (10%) of the training time since the previous one: after a check
        that took c seconds, with passes of t seconds on average, the next comes
        ``⌈c / (0.1 t)⌉`` passes later. ``tol`` stops training at a check only.
    primal_sample : int or None
        Also estimate the primal of the model to return after every pass, from a fixed
        uniform sample of this many training examples (drawn once, without replacement):
        ``P̂ = ½‖w‖² + C n · mean_sample H_i(w)``, recorded with its standard error
        ``C n s_H √((1 − m/n) / m)`` (s_H the sample's standard deviation of the hinge,
        m the sample size; the finite-population factor makes it 0 when the sample is the
        whole set) as ``extra["sampled_primal"]``, ``extra["sampled_primal_se"]`` and
        ``extra["sample_size"]``. P̂ ± 2 se covers the exact primal about 95% of the time.
        It shows progress between exact checks where those are costly; it never stops
        training (``tol`` needs a certified gap).
    averaging : bool
        Keep the weighted average of the iterates as well; each check keeps whichever of the
        average and the last iterate has the lower primal (the average usually wins early,
        the iterate once it has converged).
    random_state : int, numpy Generator or None
        Seeds the order of the examples in each pass.
    verbose : int
        0 silent; 1 one line per checked pass; 2 one line per pass.
    rescaling : {"margin", "slack"}
        Margin rescaling ``max_y δ + s(y) − s(ȳ)`` or slack rescaling
        ``max_y δ (1 + s(y) − s(ȳ))`` in the hinge (Tsochantaridis et al. 2005).
    slack_search : {"exact", "angular", "bisecting", "binary"}
        How the slack-rescaled oracle is computed (:mod:`dualstruct.inference.slack_search`):
        the exact dynamic program, or a search over (constrained) λ-oracle calls.
    callback : callable ``callback(record) -> bool`` or None
        Called after every pass with its :class:`Record`; returning True stops training.
    validation : callable ``validation(w) -> float`` or None
        Held-out score of the weights ``w``, evaluated at each check.
    """

    has_dual = True
    name = "base"
    #: what one iteration is called in messages and in the progress table's first column
    step_name, step_plural = "pass", "passes"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        max_iter=100,
        tol=1e-3,
        check_every=5,
        averaging=True,
        random_state=None,
        verbose=0,
        callback=None,
        validation=None,
        out=None,
        rescaling="margin",
        slack_search="exact",
        primal_sample=None,
    ):
        if not 0 < C <= MAX_C:
            raise ValueError(f"C must be positive and at most {MAX_C:g}, got {C}")
        if int(max_iter) < 0:
            raise ValueError(f"max_iter must be >= 0, got {max_iter}")
        check_every = checked_setting("check_every", check_every, "auto")
        self.primal_sample = checked_setting("primal_sample", primal_sample, None)
        self._sample = None
        if rescaling not in RESCALINGS:
            raise ValueError(f"rescaling must be one of {RESCALINGS}, got {rescaling!r}")
        if slack_search not in SEARCHES:
            raise ValueError(f"slack_search must be one of {tuple(SEARCHES)}, got {slack_search!r}")
        self.rescaling = rescaling
        self.slack_search = slack_search
        self.search_code = SEARCHES[slack_search]
        if rescaling == "slack":
            kmodel = kernel_model(model)
            kmodel.check_slack()
            if slack_search not in kmodel.slack_searches:
                raise ValueError(
                    f"slack_search={slack_search!r} is not available for "
                    f"{type(model).__name__}; choose one of "
                    f"{kmodel.slack_searches}"
                )
        self.model = model
        self.C = float(C)
        self.max_iter = int(max_iter)
        self.tol = float(tol)
        self.check_every = check_every
        self._next_check = 1  # with check_every="auto": the pass of the next check
        self.averaging = bool(averaging)
        self.rng = np.random.default_rng(random_state)
        self.verbose = int(verbose)
        self.callback = callback
        self.validation = validation
        self.out = out if out is not None else sys.stdout
        self.history = History()
        self.passes = 0
        self.oracle_calls = 0
        self.train_time = 0.0
        self.eval_time = 0.0
        self.data = None
        self._chosen = 0
        self._checks = 0
        self._final_choice = None  # the candidate the check that ended training chose
        self._pending_check = False  # a scheduled check was cut short by a second Ctrl-C

    # -- to be provided by subclasses ---------------------------------------------------------
    def _init_state(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _run(self, order: np.ndarray) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def candidates(self) -> list:  # pragma: no cover - abstract
        """Weight vectors the solver could return (for example [averaged, last iterate]
        with averaging, [last iterate] without). Each check keeps the one with the lower
        primal."""
        raise NotImplementedError

    def weights(self) -> np.ndarray:
        """The model to return (a copy): the candidate with the lower primal at the check
        that ended training, else at the last scheduled check."""
        choice = self._chosen if self._final_choice is None else self._final_choice
        return np.array(self.candidate(choice))

    def candidate(self, index: int) -> np.ndarray:
        """Candidate ``index`` of :meth:`candidates` (the last one past the end); solvers
        whose candidates cost a copy of ``w`` compute only this one."""
        cands = self.candidates()
        return cands[min(index, len(cands) - 1)]

    def dual(self) -> float:
        """The best dual value the solver can certify (NaN without a dual)."""
        return math.nan

    def set_C(self, C: float) -> None:
        """Continue at the regularization constant ``C`` from the current state.

        Every dual constraint of the structural SVM reads ``Σ_y α_i(y) = C`` (for the
        1-slack cutting plane ``Σ_c α_c <= C``), so the current dual point α scaled by
        ``C / C_old`` is feasible for the new C, and so is every point
        ``s α + (C − s C_old) e_gold`` with ``0 <= s <= C / C_old`` (the gold labellings
        ``e_gold`` carry no loss and add nothing to w). Such a point has the weights ``s w``
        and the loss term ``s ℓ``; its dual value ``s ℓ − ½ s² ‖w‖²`` is largest at
        ``s = min(C / C_old, ℓ / ‖w‖²)``. Solvers that keep a dual point start the new C
        there (:meth:`_scale_dual`): for a smaller C that is the scaled point, for a larger
        one near the old optimum (where ``ℓ = ‖w‖²``) it keeps the old weights, a warm start
        along a path of C. The history starts anew (the objective has changed); the pass
        count and the training time go on.

        Parameters
        ----------
        C : float
            The new regularization constant (positive).

        Examples
        --------
        >>> from dualstruct import pack_sequences
        >>> from dualstruct.datasets import make_chain
        >>> from dualstruct.models import ChainModel
        >>> from dualstruct.solvers import BCFW
        >>> X, y = make_chain(20, 5, 4, 10, random_state=0)
        >>> data = pack_sequences(X, y)
        >>> solver = BCFW(ChainModel(4, 10), C=0.1, max_iter=50, random_state=0).fit(data)
        >>> solver.set_C(1.0)
        >>> solver.fit(data).C
        1.0
        """
        C = float(C)
        if not 0 < C <= MAX_C:
            raise ValueError(f"C must be positive and at most {MAX_C:g}, got {C}")
        if self.data is not None and C != self.C:
            if not self.carries_dual:
                raise ValueError(
                    f"{type(self).__name__} keeps no dual point to carry to a new C: train "
                    "anew at the new C"
                )
            ratio = C / self.C
            loss, sq_norm = self._dual_terms()
            s = ratio if sq_norm <= 0.0 else min(ratio, max(loss, 0.0) / sq_norm)
            self.C = C
            self._scale_dual(s, s / ratio, ratio)
        self.C = C
        self.history = History()
        self._chosen, self._checks, self._final_choice = 0, 0, None
        self._pending_check = False  # a check cut short at the old C is not redone

    #: whether :meth:`set_C` can carry the state to a new C
    carries_dual = False

    def _dual_terms(self) -> tuple[float, float]:  # pragma: no cover - abstract
        """The loss term ℓ and ``‖w‖²`` of the current dual point."""
        raise NotImplementedError

    def _scale_dual(self, s: float, t: float, ratio: float) -> None:  # pragma: no cover - abstract
        """Move to ``s α + (C − s C_old) e_gold``: weights and loss term times ``s``, the
        normalized weights (marginals) to ``t β + (1 − t) e_gold`` with ``t = s C_old / C``;
        ``ratio = C / C_old`` (``self.C`` is already the new C)."""
        raise NotImplementedError

    #: what to change when the memory estimate is refused
    memory_advice = MEMORY_ADVICE
    #: ``(estimator parameter, what to set)`` pairs that lower this solver's own memory
    memory_levers: tuple = ()

    def memory_parts(self, data) -> dict:
        """The large arrays training on ``data`` will hold, name -> bytes (an estimate made
        before anything is allocated; subclasses add their state)."""
        return {"weights and their copies": 8 * 4 * model_size(self.model)}

    def diagnostics(self, check: bool) -> dict:
        """Solver-specific figures for a record's ``extra`` (computed as monitoring)."""
        return {}

    def _converged(self, record) -> bool:
        """Whether training stops at ``record``: the relative duality gap is at most ``tol``.
        A gap below zero beyond rounding is no certificate: :class:`CertificateError`."""
        if math.isnan(record.relative_gap) or not self.has_dual:
            return False
        if gap_is_negative(record.primal, record.dual):
            raise self._certificate_error(record)
        return record.relative_gap <= self.tol

    def _at_resolution(self) -> bool:
        """Whether the last pass left a state that further passes repeat (the cutting plane
        with no constraint violated by more than its ``epsilon``: its gap no longer falls,
        beyond the QP's tolerance): training then stops with ``stop_reason ==
        "resolution"``. Only the cutting plane reaches such a state."""
        return False

    def _certificate_error(self, record) -> CertificateError:
        """The error for a dual above the primal at ``record``: the oracle and example at
        fault when :meth:`_inconsistency` finds them, else the solver state."""
        what = None
        try:
            what = self._inconsistency()
        except CertificateError as exc:
            what = str(exc)
        except Exception:  # noqa: BLE001 - the negative gap is the error to report
            what = None
        if what is None:
            what = (
                "the solver state is inconsistent (a checkpoint or model file edited, "
                "or saved by other code?) or an oracle misses maxima"
            )
        return CertificateError(
            f"[{self.name}] the dual {record.dual:.6g} exceeds the primal {record.primal:.6g} "
            f"(relative gap {record.relative_gap:.3g}) after {self.passes} {self.step_plural}: "
            f"{what}"
        )

    def _check_oracles(self) -> None:
        """After every pass: a cheap check of the oracle on a sample of examples
        (:class:`CertificateError` if it misses a maximum); solvers that can, override it."""

    def _inconsistency(self) -> str | None:
        """What makes the dual exceed the primal, when the solver can tell (an oracle on an
        example, at the returned weights); None otherwise."""
        return None

    def current_dual(self) -> float:
        """The dual value of the current iterate only (cheap; NaN without a dual)."""
        return math.nan

    #: names of the array attributes that make up the solver state (set by subclasses)
    state_arrays: tuple = ()
    state_scalars: tuple = ()
    #: arrays added after a release: a saved state without them keeps _init_state's value
    optional_state_arrays: tuple = ()

    # -- copies -------------------------------------------------------------------------------
    #: attributes that belong to the current fit call, not to the state: the callback and
    #: validation closures and the output stream, which cannot be pickled
    _transient = ("callback", "validation", "out", "_interrupt")

    def __getstate__(self):
        """For pickle, joblib and deepcopy of a fitted estimator (whose ``solver_`` this is);
        model files use :meth:`state_dict` instead and never pickle."""
        state = dict(self.__dict__)
        for k in self._transient:
            state[k] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.out is None:
            self.out = sys.stdout
        if self.data is not None:
            self._after_load()  # the views into w (and R, v) were copied as separate arrays

    # -- checkpoints --------------------------------------------------------------------------
    def state_dict(self):
        """``(meta, arrays)``: everything needed to resume training exactly (JSON + arrays)."""
        if self.data is None:
            raise ValueError("the solver has not started; there is no state to save")
        meta = {
            "solver": self.name,
            "data_fingerprint": data_fingerprint(self.data),
            "passes": self.passes,
            "oracle_calls": self.oracle_calls,
            "train_time": self.train_time,
            "eval_time": self.eval_time,
            "chosen": self._chosen,
            "checks": self._checks,
            "next_check": self._next_check,
            "final_choice": self._final_choice,
            "pending_check": self._pending_check,
            "rng": self.rng.bit_generator.state,
            "scalars": {k: getattr(self, k) for k in self.state_scalars},
        }
        return meta, {k: getattr(self, k) for k in self.state_arrays}

    def load_state(self, data, meta, arrays):
        """Restore a :meth:`state_dict` for training on ``data`` (which must be the same).
        Everything is checked before training can read it (the kernels index with the
        state's labels and counts unchecked): the arrays' shapes and dtypes, finite values,
        the scalars' types, label and index ranges. A file written by someone else is
        refused with a ValueError naming the array or field at fault, and the solver is left
        unstarted."""
        try:
            self._load_state(data, meta, arrays)
        except BaseException as exc:
            self.data = None
            if isinstance(exc, (KeyError, TypeError, AttributeError, IndexError, OverflowError)):
                raise ValueError(
                    f"the saved solver state is missing or has invalid fields ({exc!r})"
                ) from None
            raise

    #: float state arrays that may hold NaN (e.g. the blocks' gaps before the first pass
    #: at a new C); every other float array of a loaded state must be finite
    nan_state_arrays: tuple = ()

    def _load_state(self, data, meta, arrays):
        if not isinstance(meta, dict) or not isinstance(arrays, dict):
            raise ValueError("the saved solver state must be a header dict and arrays")
        if meta.get("solver") != self.name:
            raise ValueError(
                f"the saved state is of solver {meta.get('solver')!r}, not {self.name!r}: "
                "train without warm_start (the weights load and predict as they are)"
            )
        if meta.get("data_fingerprint") != data_fingerprint(data):
            raise ValueError("the saved solver state belongs to different training data")
        self.data = data
        self._init_state()
        self._draw_sample()
        for k in self.state_arrays:
            cur = getattr(self, k, None)
            if k not in arrays:
                if k in self.optional_state_arrays:  # absent from older files: the default
                    continue
                raise ValueError(f"the saved solver state lacks the array {k!r}")
            arr = np.asarray(arrays[k])
            if arr.dtype.kind not in "biuf":
                raise ValueError(f"saved solver array {k!r} has the non-numeric dtype {arr.dtype}")
            if cur is not None and (
                cur.dtype != arr.dtype or (k not in self.growable_arrays and cur.shape != arr.shape)
            ):
                raise ValueError(
                    f"saved solver array {k!r} has shape {arr.shape} "
                    f"{arr.dtype}, expected {cur.shape} {cur.dtype}"
                )
            if arr.dtype.kind == "f" and k not in self.nan_state_arrays:
                if not np.isfinite(arr).all():
                    raise ValueError(f"saved solver array {k!r} holds NaN or infinite values")
            elif arr.dtype.kind == "f" and np.isinf(arr).any():
                raise ValueError(f"saved solver array {k!r} holds infinite values")
            setattr(self, k, np.array(arr))
        scalars = meta["scalars"]
        if not isinstance(scalars, dict):
            raise ValueError("the saved solver state's scalars must be a dict")
        for k, v in scalars.items():
            if k not in self.state_scalars:
                raise ValueError(f"unknown solver state field {k!r}")
            setattr(self, k, _checked_scalar(k, v, getattr(self, k, None)))
        self.passes = _count("passes", meta["passes"])
        self.oracle_calls = _count("oracle_calls", meta["oracle_calls"])
        self.train_time = _seconds("train_time", meta["train_time"])
        self.eval_time = _seconds("eval_time", meta["eval_time"])
        self._chosen = _count("chosen", meta["chosen"])
        choice = meta.get("final_choice")
        self._final_choice = None if choice is None else _count("final_choice", choice)
        self._pending_check = bool(meta.get("pending_check", False))
        self._checks = _count("checks", meta.get("checks", 0))
        self._next_check = _count("next_check", meta.get("next_check", 1))
        try:
            self.rng.bit_generator.state = meta["rng"]
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"the saved random generator state is invalid ({exc!r})") from None
        self._after_load()

    growable_arrays: tuple = ()

    def _after_load(self):
        """Rebuild views into restored arrays (subclasses)."""

    def _one_pass(self, order, chunks) -> int:
        """One pass over the examples in kernel calls (:meth:`_pass_parts`); part of one
        when a pending Ctrl-C or SIGTERM stops it."""
        return sum(self._run(part) for part in self._pass_parts(order, chunks))

    #: the share of its examples the last pass made when a Ctrl-C or SIGTERM stopped it
    #: part-way (recorded as ``extra["partial_pass"]``), else None
    partial_pass = None
    #: seconds per example measured over the last kernel calls (None: not yet)
    _seconds_per_example = None
    #: the pending-signal handler of the current fit (set by :meth:`fit`)
    _interrupt = None

    def _example_cost(self) -> float:
        """The model's estimate of one example's cost in a kernel call, about a nanosecond a
        unit (its ``example_cost(data)``; DEFAULT_EXAMPLE_COST a labelling entry without one)."""
        model, data = self.model, self.data
        estimate = getattr(model, "example_cost", None)
        if estimate is None:
            n = max(1, int(getattr(data, "n_sequences", 1)))
            return DEFAULT_EXAMPLE_COST * float(getattr(data, "n_tokens", n)) / n
        cost = estimate(data)
        if isinstance(cost, bool) or not isinstance(cost, numbers.Real) or not cost > 0:
            raise ValueError(
                f"{type(model).__name__}.example_cost must return a positive number, "
                f"got {cost!r:.80}"
            )
        return float(cost)

    def _pass_parts(self, order, chunks):
        """The kernel calls of a pass over ``order``: ``chunks`` parts of about CHUNK_TOKENS
        tokens, each cut into pieces of about CHUNK_SECONDS at the rate measured so far
        (the first pieces of a run sized by :meth:`_example_cost`, growing at most 4× a
        call). Between pieces a pending Ctrl-C or SIGTERM of this fit ends the pass early
        when the rest would take longer than INTERRUPT_WAIT: the state is consistent (every
        kernel call ends on a block boundary), the pass is recorded as partial and resuming
        continues from there, but no longer exactly as an uninterrupted run."""
        self.partial_pass = None
        n, done = len(order), 0
        size = None
        for part in np.array_split(order, chunks):
            pos = 0
            while pos < len(part):
                rate = self._seconds_per_example
                if rate is None:
                    want = FIRST_CHUNK_COST / max(self._example_cost(), 1.0)
                else:
                    want = CHUNK_SECONDS / max(rate, 1e-12)
                if size is not None:
                    want = min(want, 4 * size)
                size = int(min(max(want, 1), len(part) - pos))
                t0 = time.perf_counter()
                yield part[pos : pos + size]
                spent = time.perf_counter() - t0
                pos += size
                done += size
                self._seconds_per_example = spent / size  # (calls grow at most 4× a time)
                interrupt = self._interrupt
                if (
                    interrupt is not None
                    and interrupt.requested
                    and done < n
                    and (n - done) * self._seconds_per_example > INTERRUPT_WAIT
                ):
                    self.partial_pass = done / n
                    print(
                        f"[{self.name}] stopped part-way through {self.step_name} "
                        f"{self.passes + 1} ({done} of {n} examples): the model is "
                        "consistent; resuming continues from here, not exactly as an "
                        "uninterrupted run",
                        file=sys.stderr,
                        flush=True,
                    )
                    return

    # -- the loop -----------------------------------------------------------------------------
    def start(self, data):
        """Set up the state for training on ``data`` (a labelled :class:`PackedSequences`), once;
        :meth:`fit` calls it. A set-up that fails leaves the solver unstarted."""
        if self.data is None:
            check_memory(
                f"{type(self).__name__} on {type(self.model).__name__}",
                self.memory_parts(data),
                self.memory_advice,
            )
            self.data = data
            try:
                self._init_state()
                self._draw_sample()
            except BaseException:
                self.data = None
                raise
        elif data is not self.data:
            raise ValueError("a solver continues only on the data it was started with")
        return self

    def fit(self, data, max_iter=None):
        """Train on ``data`` (a labelled :class:`PackedSequences`); calling again continues
        from the current state for up to ``max_iter`` more passes."""
        self.start(data)
        n = data.n_sequences
        chunks = max(1, int(math.ceil(data.n_tokens / CHUNK_TOKENS)))
        max_iter = self.max_iter if max_iter is None else int(max_iter)
        with_val = self.validation is not None
        if self.verbose:
            print(
                f"[{self.name}] {n} sequences, {data.n_tokens} tokens, C={self.C:g}", file=self.out
            )
            print(format_header(with_val, self.step_name), file=self.out, flush=True)
        # "running" until the loop ends: what a checkpoint taken by a callback records
        self.history.stop_reason = "running"
        with _DeferredInterrupt(self.name, self.step_name) as interrupt:
            self._interrupt = interrupt  # polled between kernel calls (_pass_parts)
            try:
                if self._pending_check:  # finish the check a second Ctrl-C cut short
                    if self.history.last is not None and self.history.last.passes == self.passes:
                        self.history.records.pop()
                    record = self._record(check=True)
                    if self._converged(record):  # as the uninterrupted run would have stopped
                        self.history.stop_reason = "tol"
                        self._end_on(record, False, with_val)
                        max_iter = 0
                self._loop(max_iter, n, chunks, with_val, interrupt)
                if self.history.stop_reason == "running":
                    self.history.stop_reason = "max_iter"
            except KeyboardInterrupt:  # a second Ctrl-C (or one a user method raised)
                self.history.stop_reason = "interrupted"
                if not self.passes:  # no whole pass: there is no model to keep
                    raise
                last = self.history.last
                if self.passes and (last is None or last.passes < self.passes):
                    self._record(check=False)  # the last whole pass, without a check
                if self.verbose:
                    print(
                        f"[{self.name}] stopped at once after {self.passes} whole "
                        f"{self.step_plural}; "
                        "keeping the current model",
                        file=self.out,
                        flush=True,
                    )
            except BaseException:
                self.history.stop_reason = "error"  # what a model file saved now says
                raise
        return self

    def _loop(self, max_iter, n, chunks, with_val, interrupt):
        for k in range(max_iter):
            order = self.rng.permutation(n).astype(np.int64)
            self._final_choice = None  # the model moves on: the checks' own choice again
            t0 = time.perf_counter()
            self.oracle_calls += self._one_pass(order, chunks)
            self.train_time += time.perf_counter() - t0
            self.passes += 1
            t0 = time.perf_counter()
            self._check_oracles()
            self.eval_time += time.perf_counter() - t0
            # the checks follow their own schedule; a pass that ends training is checked on
            # top of it (every candidate), so the last record describes the returned model
            # and a resumed run checks exactly what an uninterrupted one does
            checked = self._check_due()
            final = k == max_iter - 1 or interrupt.requested
            if self.partial_pass is not None:  # stopped part-way: a check would cost a pass
                checked = final = False
            record = self._record(check=checked, final=final)
            converged = self._converged(record)
            shown = self.verbose >= 2 or (self.verbose and (checked or final))
            stop = self.callback is not None and bool(self.callback(record))
            if converged:
                self.history.stop_reason = "tol"
            elif self._at_resolution():
                self.history.stop_reason = "resolution"
            elif interrupt.requested:
                self.history.stop_reason = "interrupted"
            elif stop:
                self.history.stop_reason = "callback"
            else:
                if shown:
                    print(format_record(record, with_val), file=self.out, flush=True)
                continue
            self._end_on(record, final, with_val)
            if interrupt.requested and self.verbose:
                print(
                    f"[{self.name}] interrupted after {self.passes} {self.step_plural}; "
                    "keeping the current model",
                    file=self.out,
                    flush=True,
                )
            break

    def _end_on(self, record, final, with_val):
        """Training ends at ``record``: unless it was already a final record, check the
        returned model in place of it; show the last line once."""
        if not final and self.partial_pass is None:
            self.history.records.pop()
            record = self._record(check=False, final=True)
            self._converged(record)  # its certificate too (raises if the gap is negative)
        elif self.partial_pass is not None:  # no check after a partial pass: finite at least
            w = self.weights()
            with np.errstate(all="ignore"):
                self._require_finite(float(w @ w) if np.isfinite(w).all() else math.nan)
        if self.verbose:
            print(format_record(record, with_val), file=self.out, flush=True)

    def _draw_sample(self):
        """The fixed sample of ``primal_sample`` examples (the same at every pass and after
        resuming: drawn from its own seed)."""
        self._sample = None
        if self.primal_sample is None:
            return
        take = getattr(self.data, "take", None)
        if take is None:
            raise ValueError(
                f"primal_sample needs training data that can be subset; "
                f"{type(self.data).__name__} cannot"
            )
        n = self.data.n_sequences
        picks = np.random.default_rng(0).choice(n, min(self.primal_sample, n), replace=False)
        self._sample = take(np.sort(picks))

    def _check_due(self) -> bool:
        """Whether the pass just made gets a scheduled check."""
        if self.check_every == "auto":
            return self.passes >= self._next_check
        return self.passes % self.check_every == 0

    def _schedule_next_check(self, cost: float) -> None:
        """``check_every="auto"``: the next check once the passes since this one have taken
        ``cost / MONITORING_SHARE`` seconds (at the mean pass time so far)."""
        per_pass = self.train_time / max(self.passes, 1)
        gap = 1 if per_pass <= 0 else math.ceil(cost / (MONITORING_SHARE * per_pass))
        self._next_check = self.passes + max(1, gap)

    def _sampled_primal(self) -> dict:
        """``extra`` entries of the sampled primal estimate (``primal_sample``)."""
        estimate, se = sampled_primal(
            self.model,
            self._sample,
            self.data.n_sequences,
            self.weights(),
            self.C,
            self.rescaling,
        )
        return {
            "sampled_primal": estimate,
            "sampled_primal_se": se,
            "sample_size": self._sample.n_sequences,
        }

    def _record(self, check: bool, final: bool = False) -> Record:
        """The record of the pass just made. ``check``: a scheduled check (every
        ``check_every`` passes), which evaluates every candidate at the first and every third
        check and in between only the one that won last time (each evaluation is a full pass
        of decoding). ``final``: the pass ends training; every candidate is evaluated and the
        best is returned, without changing what the scheduled checks do next."""
        rec = Record(passes=self.passes, time=self.train_time, oracle_calls=self.oracle_calls)
        t0 = time.perf_counter()
        # between checks only the cheap dual of the current iterate; at a check the best dual
        rec.dual = self.dual() if check or final else self.current_dual()
        cands = primals = None
        if check:
            # the schedule's state changes in one step once the check is complete; a second
            # Ctrl-C before that leaves _pending_check set, and the next fit redoes the check
            self._pending_check = True
            cands = self.candidates()
            checks = self._checks + 1
            if len(cands) == 1 or checks % 3 == 1:
                primals = [self._finite_primal(w) for w in cands]
                chosen = int(np.argmin(primals))
                rec.primal = primals[chosen]
            else:
                chosen = min(self._chosen, len(cands) - 1)
                rec.primal = self._finite_primal(cands[chosen])
                if final:  # the final evaluation below reuses this one
                    primals = [rec.primal if i == chosen else None for i in range(len(cands))]
            self.__dict__.update(_checks=checks, _chosen=chosen, _pending_check=False)
        if final:
            cands = self.candidates()
            primals = [
                self._finite_primal(w) if p is None else p
                for w, p in zip(cands, primals or [None] * len(cands))
            ]
            self._final_choice = int(np.argmin(primals))
            rec.primal = primals[self._final_choice]
        if check or final:
            w = cands[self._final_choice if final else self._chosen]
            if self.has_dual:
                rec.gap, rec.relative_gap = duality_gap(rec.primal, rec.dual)
            if self.validation is not None:
                rec.validation_score = float(self.validation(w))
        rec.extra = self.diagnostics(check or final)
        if self.partial_pass is not None:  # a Ctrl-C or SIGTERM stopped the pass part-way
            rec.extra["partial_pass"] = self.partial_pass
        if self._sample is not None:
            rec.extra.update(self._sampled_primal())
        cost = time.perf_counter() - t0
        self.eval_time += cost
        if check and self.check_every == "auto":
            self._schedule_next_check(cost)
        rec.eval_time = self.eval_time
        self.history.append(rec)
        return rec

    def _primal(self, w):
        return primal_objective(self.model, self.data, w, self.C, self.rescaling)

    def _finite_primal(self, w):
        """The primal of a candidate model at a check (:meth:`_require_finite`)."""
        value = self._primal(w)
        self._require_finite(value)
        return value

    def _require_finite(self, value):
        """A model with a NaN or infinite weight (``value``, its primal or ``‖w‖²``, is not
        finite) stops training with an error instead of being returned."""
        if not math.isfinite(value):
            raise ValueError(
                f"[{self.name}] the model is not finite after {self.step_name} {self.passes} "
                f"({value}): the state overflowed (a restored counter or accumulator out of "
                "range?)"
            )


def _count(name, value) -> int:
    """A saved counter: an integer >= 0 (ValueError naming the field otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"the saved solver field {name!r} must be an integer >= 0, got {value!r}")
    return int(value)


def _seconds(name, value) -> float:
    """A saved duration: a finite number >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"the saved solver field {name!r} must be a number >= 0, got {value!r}")
    return float(value)


def _checked_scalar(name, value, default):
    """A saved state scalar, of the kind of the value a fresh state holds (``default``):
    an integer for an integer, a number (not NaN) for a float, anything JSON for None."""
    if default is None or isinstance(default, str):
        return value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"the saved solver field {name!r} must be a number, got {value!r}")
    if isinstance(default, (numbers.Integral, np.integer)) and not isinstance(default, bool):
        if not isinstance(value, numbers.Integral):
            raise ValueError(f"the saved solver field {name!r} must be an integer, got {value!r}")
        return int(value)
    if math.isnan(value):
        raise ValueError(f"the saved solver field {name!r} is NaN")
    return float(value)


def kernel_model(model):
    """``model`` itself when it is a kernel model (it has ``block_data`` and ``hinge``); a
    Python model is refused with what to wrap it in."""
    if hasattr(model, "block_data") and hasattr(model, "hinge"):
        return model
    raise TypeError(
        f"{type(model).__name__} has no kernel; wrap a Python model in "
        "dualstruct.models.UserModel (or use dualstruct.SSVM)"
    )


def model_size(model) -> int:
    """The length of a model's weight vector (kernel or Python model)."""
    size = getattr(model, "size", None)
    if size is None:
        size = getattr(model, "size_joint_feature", 0)
    return int(size)


def data_fingerprint(data) -> str:
    """SHA-256 of the training data: a labelled PackedSequences (offsets, labels and the CSR
    arrays) or any data object with ``fingerprint_arrays()``."""
    h = hashlib.sha256()
    arrays = (
        data.fingerprint_arrays()
        if hasattr(data, "fingerprint_arrays")
        else (data.offsets, data.labels, data.X.indptr, data.X.indices, data.X.data)
    )
    for arr in arrays:
        a = np.ascontiguousarray(arr)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


class WeightedAverageDual:
    """The candidates and dual bounds of a Frank-Wolfe solver with weighted averaging
    (Lacoste-Julien et al. 2013): its state holds ``w``, ``R`` and ``scalars = [ℓ, m, R_ℓ]``
    with ``R = Σ A_{m−1} Δw`` and ``R_ℓ = Σ A_{m−1} Δℓ`` over the m steps made so far,
    ``A_m = m (m+1) / 2``, so the averaged point is ``(w − R / A_m, ℓ − R_ℓ / A_m)``.
    Both the averaged and the current point are dual feasible."""

    _avg_cache = None

    def _averaged(self):
        """(w̄, ℓ̄), memoized per step count: at a check it is needed several times."""
        m = self.scalars[1]
        cached = self._avg_cache
        if cached is not None and cached[0] == m:
            return cached[1], cached[2]
        if m == 0:
            w_avg, loss_avg = self.w.copy(), self.scalars[0]
        else:
            A = 0.5 * m * (m + 1.0)
            w_avg = np.divide(self.R, A)  # w − R / A with one copy of w
            np.subtract(self.w, w_avg, out=w_avg)
            loss_avg = self.scalars[0] - self.scalars[2] / A
        self._avg_cache = (m, w_avg, loss_avg)
        return w_avg, loss_avg

    def candidates(self):
        # read-only views: callers copy what they keep (the estimator's coef_)
        if self.averaging:
            return [self._averaged()[0], self.w]
        return [self.w]

    def current_dual(self):
        return dual_objective(self.w, self.scalars[0])

    def dual(self):
        d = self.current_dual()
        if self.averaging:
            d = max(d, dual_objective(*self._averaged()))
        return d


class SubgradientAverage:
    """The candidates of Pegasos SSG with weighted averaging: the state holds the direction
    sum ``v``, ``R = Σ_m (m − 1) ψ_m`` and ``scalars = [m, C n]``; the iterate is
    ``C n v / m`` and the average ``C n (m v − R) / A_m``. SSG has no dual."""

    has_dual = False

    def candidates(self):
        m, Cn = self.scalars
        if m == 0:
            return [np.zeros_like(self.v)]
        last = (Cn / m) * self.v
        if self.averaging:
            return [Cn * (m * self.v - self.R) / (0.5 * m * (m + 1.0)), last]
        return [last]

    def dual(self):
        return math.nan


#: how far a restored block's atom weights may sum from 1 (rounding over many steps)
ATOM_WEIGHT_TOLERANCE = 1e-6


class AtomPool:
    """The dual points of a pairwise Frank-Wolfe solver as atoms: block i keeps up to
    ``capacity`` weighted labellings, its atom a at
    ``atom_labels[offsets[i]·capacity + a·T_i : … + T_i]`` with ``T_i = offsets[i+1] − offsets[i]``
    (``offsets`` are the blocks' labelling offsets). The pool doubles when a block needs
    more atoms than it has room for."""

    state_scalars = ("capacity",)
    growable_arrays = ("atom_labels", "atom_weights")

    def _init_atoms(self, offsets, labels):
        """Every block starts as the single atom of its gold labelling, weight 1 (w = 0)."""
        n, total = len(offsets) - 1, int(offsets[-1])
        self.capacity = 4
        self.atom_labels = np.zeros(total * self.capacity, dtype=np.int32)
        first = np.repeat(offsets[:-1], np.diff(offsets))
        self.atom_labels[first * self.capacity + np.arange(total) - first] = labels
        self.atom_weights = np.zeros((n, self.capacity))
        self.atom_weights[:, 0] = 1.0
        self.atom_count = np.ones(n, dtype=np.int64)

    def _check_atoms(self, offsets, bound=None):
        """Validate a restored pool (the kernels index with its labels and counts
        unchecked): the arrays' shapes and dtypes against the capacity, counts in
        1 … capacity, finite non-negative weights summing to 1 over each block's atoms,
        labels in ``0 … bound − 1`` (``bound``: the values a labelling entry takes, None
        when the model does not say)."""
        cap = self.capacity
        if isinstance(cap, (bool, np.bool_)) or not isinstance(cap, numbers.Integral) or cap < 1:
            raise ValueError(f"saved atom pool: capacity must be an integer >= 1, got {cap!r}")
        self.capacity = cap = int(cap)
        n, total = len(offsets) - 1, int(offsets[-1])
        labels, weights, count = self.atom_labels, self.atom_weights, self.atom_count
        expected = (
            ("atom_labels", labels, (total * cap,), np.int32),
            ("atom_weights", weights, (n, cap), np.float64),
            ("atom_count", count, (n,), np.int64),
        )
        for name, arr, shape, dtype in expected:
            if arr.shape != shape or arr.dtype != dtype:
                raise ValueError(
                    f"saved atom pool: array {name!r} has shape {arr.shape} {arr.dtype}, "
                    f"expected {shape} {np.dtype(dtype)} (capacity {cap})"
                )
        if n and (count.min() < 1 or count.max() > cap):
            bad = count[(count < 1) | (count > cap)][0]
            raise ValueError(
                f"saved atom pool: array 'atom_count' holds {bad}, outside 1 … {cap} (capacity)"
            )
        if not np.isfinite(weights).all():
            raise ValueError("saved atom pool: array 'atom_weights' holds NaN or infinite values")
        used = np.arange(cap) < count[:, None]
        if (weights[used] < 0).any():
            raise ValueError("saved atom pool: array 'atom_weights' holds negative weights")
        sums = np.where(used, weights, 0.0).sum(axis=1)
        off = np.abs(sums - 1.0) > ATOM_WEIGHT_TOLERANCE
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise ValueError(
                f"saved atom pool: array 'atom_weights' of block {i} sums to {sums[i]!r}, not 1"
            )
        if bound is not None and labels.size and (labels.min() < 0 or labels.max() >= bound):
            bad = labels[(labels < 0) | (labels >= bound)][0]
            raise ValueError(
                f"saved atom pool: array 'atom_labels' holds the label {bad}, outside "
                f"0 … {bound - 1}"
            )

    def pairwise_pass(
        self,
        blocks,
        order,
        C,
        w,
        R,
        averaging,
        scalars,
        gaps,
        slack,
        search,
        calls,
        sigma=1.0,
        delta=None,
        atom_steps=0,
    ):
        """One pairwise BCFW pass over the blocks in ``order``
        (:func:`~dualstruct.solvers._block_kernels.pairwise_bcfw_pass`, whose arguments these
        are), growing the pool whenever a block needs more atoms than it has room for."""
        delta = np.zeros(0) if delta is None else delta
        done = 0
        while done < len(order):
            done += pairwise_bcfw_pass(
                blocks.kernel,
                order[done:],
                C,
                w,
                R,
                averaging,
                self.atom_labels,
                self.atom_weights,
                self.atom_count,
                self.capacity,
                scalars,
                gaps,
                slack,
                search,
                calls,
                sigma,
                delta,
                atom_steps,
            )
            blocks.raise_status()
            if done < len(order):
                self._grow_atoms(blocks.label_offsets)

    def _grow_atoms(self, offsets):
        old, new = self.capacity, 2 * self.capacity
        labels = np.zeros(int(offsets[-1]) * new, dtype=np.int32)
        weights = np.zeros((len(offsets) - 1, new))
        grow_atom_pool(
            offsets, self.atom_labels, self.atom_weights, self.atom_count, old, new, labels, weights
        )
        self.capacity, self.atom_labels, self.atom_weights = new, labels, weights
