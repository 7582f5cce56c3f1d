"""What the estimators share: :class:`BaseSSVM` (the training parameters, their checks, the
solver that trains, the training record of a model file) and the checks and model-file
helpers its presets use."""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from .. import distributed, io
from ..memory import memory_advice
from ..models.base import effective_n_jobs
from ..models.loops import thread_setting
from ..solvers import History, solver_class
from ..solvers.base import MAX_C, checked_setting
from ..weight_support import choose_support
from .auto import AUTO, SolverChoice, given, resolved


def _problem_options(options):
    """``solver_options`` without those of a distributed run only (its local passes and
    aggregation): a run continued on one machine may drop them."""
    if not isinstance(options, dict):
        return options
    kept = {k: v for k, v in options.items() if k not in distributed.DISTRIBUTED_ONLY_OPTIONS}
    return kept or None


def _frozen(value):
    if isinstance(value, dict):
        return (
            "dict",
            tuple(sorted(((_frozen(k), _frozen(v)) for k, v in value.items()), key=repr)),
        )
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def changed_params(frozen, saved) -> list:
    """Names whose snapshot in ``frozen`` differs from ``saved``."""
    return [k for k, v in frozen.items() if v != saved.get(k)]


def check_real(name, value, low, low_ok):
    """Raise ValueError unless ``value`` is a finite real number above ``low`` (or equal to it
    with ``low_ok``)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < low
        or (value == low and not low_ok)
    ):
        bound = ">=" if low_ok else ">"
        raise ValueError(f"{name} must be a finite number {bound} {low}, got {value!r}")


def check_integer(name, value, low):
    """Raise ValueError unless ``value`` is an integer >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")


def check_bool(name, value):
    """Raise ValueError unless ``value`` is True or False (a NumPy bool too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def check_choice(name, value, choices):
    """Raise ValueError unless ``value`` is one of the strings ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def check_random_state(value):
    """Raise ValueError unless ``value`` is a seed NumPy's ``default_rng`` takes: None, an
    integer >= 0, or a Generator, BitGenerator or SeedSequence."""
    if value is None or isinstance(
        value, (np.random.Generator, np.random.BitGenerator, np.random.SeedSequence)
    ):
        return
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0:
        return
    raise ValueError(
        f"random_state must be None, an integer >= 0 or a numpy Generator, got {value!r}"
    )


def unconverged_gap(history, tol):
    """The certified relative gap when training stopped at ``max_iter`` (or at the cutting
    plane's resolution) with it still above ``tol``, else None (``tol=0`` asks for exactly
    ``max_iter`` passes; a solver without a certificate has no gap)."""
    last = history.last_checked()
    if (
        history.stop_reason not in ("max_iter", "resolution")
        or last is None
        or tol <= 0
        or math.isnan(last.relative_gap)
        or last.relative_gap <= tol
    ):
        return None
    return last.relative_gap


def seed_to_json(seed):
    """An integer seed (Python or NumPy) as an int for the model file; a Generator or
    RandomState has no JSON form and is stored as None."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return int(seed)
    return None


def _plain_labels(flat):
    """Labels of dtype object (e.g. a pandas column) as a str or int array, which a model file
    can store; other mixtures are refused before training rather than at save."""
    if flat.dtype != object or len(flat) == 0:
        return flat
    if all(isinstance(v, str) for v in flat):
        return flat.astype(str)
    if all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in flat):
        return flat.astype(np.int64)
    kinds = sorted({type(v).__name__ for v in flat})
    raise TypeError(f"labels must be all str or all int, got a mixture of {kinds}")


def restore_on_error(fit):
    """Decorator for ``fit``: if it raises before training starts (bad input, a failed
    set-up, Ctrl-C while reading), the estimator's attributes are put back as they were, so
    the previous model stays usable and no fitted attribute is half set. Once ``fit`` sets
    ``self._committed`` (its solver is about to train) an error leaves the estimator as
    ``fit`` left it."""

    @functools.wraps(fit)
    def wrapper(self, *args, **kwargs):
        self.__dict__.pop("_committed", None)
        before = dict(self.__dict__)
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            if not self.__dict__.get("_committed", False):
                self.__dict__.clear()
                self.__dict__.update(before)
            raise
        finally:
            self.__dict__.pop("_committed", None)

    return wrapper


def _classes_to_json(classes: np.ndarray):
    kind = classes.dtype.kind
    if kind in "US":
        return [str(c) for c in classes], "str"
    if kind in "iu":
        return [int(c) for c in classes], "int"
    if kind == "f":
        return [float(c) for c in classes], "float"
    if kind == "b":
        return [bool(c) for c in classes], "bool"
    raise TypeError(
        f"labels of dtype {classes.dtype} cannot be stored in a model file; use str or int labels"
    )


def _classes_from_json(values, kind):
    dtype = {"str": str, "int": np.int64, "float": np.float64, "bool": bool}.get(kind)
    if dtype is None:
        raise ValueError(f"unknown label type {kind!r} in model file")
    return np.array(values, dtype=dtype)


def header_integer(header, key, low=0):
    """The header field ``key`` of a model file, checked: an integer >= ``low``."""
    value = header[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"the field {key!r} must be an integer >= {low}, got {value!r}")
    return int(value)


def check_loaded_array(arrays, name, expected):
    """Refuse a model file whose array ``name`` differs from ``expected``, what the
    estimator's parameters in the header give (an edited array the header does not
    describe)."""
    arr = np.asarray(arrays[name])
    expected = np.asarray(expected)
    if arr.shape != expected.shape or not np.array_equal(arr, expected):
        raise ValueError(
            f"the array {name!r} (shape {arr.shape}) does not match the estimator's "
            f"parameters in the header, which give {np.array2string(expected, threshold=8)}"
        )


def read_coef(arrays, size):
    """The weight vector of a model file, checked: ``size`` finite float64 numbers."""
    coef = arrays["coef"]
    if coef.shape != (size,) or coef.dtype != np.float64:
        raise ValueError(
            f"coef has shape {coef.shape} and dtype {coef.dtype}, expected ({size},) float64"
        )
    if not np.all(np.isfinite(coef)):
        raise ValueError("coef holds NaN or infinite values")
    return coef


def read_solver_choice(header, solver) -> SolverChoice:
    """The solver a model file was trained with and why (its ``solver_choice`` field);
    files without one were trained with an explicit ``solver``."""
    choice = header.get("solver_choice")
    if choice is None:
        if solver == AUTO:
            raise ValueError("solver is 'auto' but the field 'solver_choice' is missing")
        return given(solver)
    if (
        not isinstance(choice, list)
        or len(choice) != 2
        or not all(isinstance(v, str) for v in choice)
        or choice[0] == AUTO
        or (solver != AUTO and choice[0] != solver)
    ):
        raise ValueError(
            f"the field 'solver_choice' must be [solver, reason] naming the solver "
            f"{solver!r} or, for 'auto', the one it chose; got {choice!r}"
        )
    return SolverChoice(*choice)


def read_history(header, arrays):
    """The training history stored in a model file (its ``history.*`` columns)."""
    hist = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("history.")}
    if len({v.shape for v in hist.values()}) > 1 or any(v.ndim != 1 for v in hist.values()):
        raise ValueError("history columns differ in shape")
    return History.from_arrays(hist, header.get("stop_reason", ""))


def final_summary(history):
    """The last checked record's objective values, for a model file's header."""
    last = history.last_checked()
    return (
        None
        if last is None
        else {
            "primal": last.primal,
            "dual": last.dual,
            "gap": last.gap,
            "relative_gap": last.relative_gap,
            "passes": last.passes,
        }
    )


@contextlib.contextmanager
def model_file_errors(path):
    """Reading a model file: any fault becomes a ValueError that names the file."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, OverflowError, IndexError) as exc:
        raise ValueError(f"{path}: model file is missing or has invalid fields ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def strongest_per_row(matrix, n, names=None) -> list:
    """For every row of ``matrix`` (dense or scipy sparse), its ``n`` entries of largest
    magnitude as ``(column name or index, weight)``, strongest first (ties: lower column)."""
    out = []
    if sp.issparse(matrix):
        matrix = sp.csr_matrix(matrix)
    for r in range(matrix.shape[0]):
        if sp.issparse(matrix):
            lo, hi = matrix.indptr[r], matrix.indptr[r + 1]
            cols, vals = matrix.indices[lo:hi], matrix.data[lo:hi]
        else:
            vals = np.asarray(matrix[r]).ravel()
            cols = np.arange(len(vals))
        keep = vals != 0
        cols, vals = cols[keep], vals[keep]
        order = np.lexsort((cols, -np.abs(vals)))[:n]
        out.append(
            [
                (names[c] if names is not None else int(c), float(vals[k]))
                for k, c in zip(order, cols[order])
            ]
        )
    return out


class BaseSSVM(BaseEstimator):
    """What every estimator shares: the training parameters, their checks, the solver that
    trains (warm starts, checkpoints, Spark), and the training record of a model file.

    A preset (:class:`~dualstruct.StructuredSVM`, :class:`~dualstruct.MultiLabelSVM`,
    :class:`~dualstruct.MultiClassSVM`, :class:`~dualstruct.SSVM`) lists in its ``__init__``
    the parameters it accepts, passes those of :data:`SHARED_PARAMS` to this ``__init__``
    (which stores them as given, as scikit-learn requires) and adds its own: its input
    conversion, its model and its scoring. The shared parameters are described once, in the
    user guide (:ref:`shared-parameters`).
    """

    #: the parameters the estimators share; each preset accepts those that apply to it
    SHARED_PARAMS = (
        "model",
        "solver",
        "C",
        "max_iter",
        "tol",
        "check_every",
        "averaging",
        "rescaling",
        "random_state",
        "verbose",
        "callback",
        "solver_options",
        "warm_start",
        "backend",
        "n_partitions",
        "backend_options",
        "n_jobs",
    )
    #: the parameters that define the problem and the solver state: a warm start continues
    #: only if none of them changed (C may: a solver that keeps a dual point scales it)
    _STATE_PARAMS: tuple[str, ...] = ("solver", "C", "averaging", "solver_options")
    #: whether ``save`` can store the solver state (a checkpoint ``fit`` resumes from)
    _CHECKPOINTS = False

    def __init__(self, **shared):
        for name, value in shared.items():
            if name not in self.SHARED_PARAMS:
                raise TypeError(f"{name!r} is not a shared parameter of the estimators")
            setattr(self, name, value)

    # -- parameters ---------------------------------------------------------------------------
    def _check_shared_params(self, solvers):
        """Check the shared parameters this estimator has; ``solvers``: the solver names
        its model trains with (``"auto"`` is allowed too)."""
        names = (AUTO, *solvers)
        if self.solver not in names:
            raise ValueError(f"solver must be one of {names}, got {self.solver!r}")
        check_real("C", self.C, 0, False)
        if self.C > MAX_C:
            raise ValueError(
                f"C must be at most {MAX_C:g} (the objective would overflow), got {self.C!r}"
            )
        check_real("tol", self.tol, 0, True)
        check_integer("max_iter", self.max_iter, 1)  # 0 passes would return an untrained model
        checked_setting("check_every", self.check_every, "auto")
        check_bool("averaging", self.averaging)
        check_random_state(self.random_state)
        check_integer("verbose", self.verbose, 0)
        if hasattr(self, "warm_start"):
            check_bool("warm_start", self.warm_start)
        if self.callback is not None and not callable(self.callback):
            raise ValueError(f"callback must be callable, got {self.callback!r}")
        if self.solver_options is not None and not isinstance(self.solver_options, dict):
            raise ValueError(f"solver_options must be a dict, got {self.solver_options!r}")
        if hasattr(self, "rescaling"):
            check_choice("rescaling", self.rescaling, ("margin", "slack"))
        if hasattr(self, "n_jobs"):
            effective_n_jobs(self.n_jobs)
        if hasattr(self, "backend"):
            self._check_backend_params()

    def _check_backend_params(self):
        """``backend``, ``n_partitions`` and ``backend_options``; a warm start on Spark
        resumes from the checkpoint directory instead."""
        solver = "bcfw" if self.solver == AUTO else self.solver  # what "auto" trains on Spark
        distributed.check_backend(self.backend, self.n_partitions, self.backend_options, solver)
        if self.backend != "local" and self.warm_start:
            raise ValueError(
                "warm_start does not apply to backend='spark': resume a run from its "
                "checkpoint with backend_options={'checkpoint_dir': ..., "
                "'resume': True}"
            )

    def _frozen_params(self, names) -> dict:
        """A deep, immutable snapshot of the parameters ``names``, in a form that compares
        equal across a model file's round trip (tuples for lists and arrays, Python numbers
        for NumPy scalars, dicts as sorted item tuples). Warm starts and resumes compare
        these, so a parameter changed in place (``solver_options["rho"] = …``) is seen."""
        return {
            k: _frozen(
                _problem_options(getattr(self, k)) if k == "solver_options" else getattr(self, k)
            )
            for k in names
        }

    def _with_intercept(self, X):
        """CSR rows of ``X`` with the constant column ``intercept_scaling`` appended when
        ``fit_intercept`` (how every estimator gives each label a bias)."""
        X = sp.csr_matrix(X, dtype=np.float64)
        if self.fit_intercept:
            column = np.full((X.shape[0], 1), float(self.intercept_scaling))
            X = sp.hstack([X, column], format="csr")
        return X

    def _choose_support(self, n_features, n_labels, observed):
        """The support of the unary weights by the ``weights`` rule (None: dense)."""
        return choose_support(self, n_features, n_labels, observed)

    # -- training -----------------------------------------------------------------------------
    def _continues(self) -> bool:
        """Whether ``fit`` continues the estimator's solver (``warm_start`` and a solver
        whose set-up succeeded; an error or Ctrl-C in a first fit leaves none)."""
        return (
            getattr(self, "warm_start", False)
            and getattr(self, "solver_", None) is not None
            and self.solver_.data is not None
        )

    def _carry_over(self, solver, changed):
        """Before a warm start: refuse a changed problem, except a new C for a solver that
        keeps a dual point, which it scales to the new C
        (:meth:`~dualstruct.solvers.base.PassSolver.set_C`)."""
        if changed == ["C"] and solver.carries_dual:
            solver.set_C(self.C)
            return
        if changed:
            hint = (
                f"; solver {resolved(self)!r} keeps no dual point to carry to a new C"
                if "C" in changed
                else ""
            )
            raise ValueError(
                f"warm_start: parameters {changed} changed since the last fit; the solver "
                f"state belongs to the old problem{hint} (set warm_start=False to start anew)"
            )

    def _make_solver(self, model, **kwargs):
        """The solver ``solver`` (or the one ``"auto"`` chose) for ``model`` with the shared
        settings and ``kwargs``: in process, or on the distributed ``backend``."""
        settings = dict(
            C=self.C,
            max_iter=self.max_iter,
            tol=self.tol,
            check_every=self.check_every,
            averaging=self.averaging,
            random_state=self.random_state,
            verbose=self.verbose,
        )
        if hasattr(self, "rescaling"):
            settings["rescaling"] = self.rescaling
        settings.update(kwargs)
        options = dict(self.solver_options or {})
        name = resolved(self)
        if getattr(self, "backend", "local") == "local":
            return solver_class(name, model)(model, **settings, **options)
        return distributed.distributed_solver(
            name, model, self.n_partitions, self.backend_options, **settings, **options
        )

    def _fit_solver(self, model, data, state, validation=None, solver=None, resume=None, **kw):
        """Train on ``data``: ``solver`` (a started one that continues, with the current
        settings), else a new one for ``model`` made with ``kw``, restored from a
        checkpoint's ``resume`` state when given. ``state``: the snapshot of the
        problem's parameters a later warm start compares against."""
        callback = None
        if self.callback is not None:

            def callback(record):
                if getattr(self.callback, "reads_weights", True):
                    self._set_weights(self.solver_)
                else:  # e.g. the command line's progress lines: no copy of w per pass
                    self.history_, self.n_iter_ = self.solver_.history, self.solver_.passes
                return bool(self.callback(self, record))

        if solver is not None:
            solver.callback, solver.validation = callback, validation
            solver.verbose, solver.tol = self.verbose, self.tol
            solver.check_every = self.check_every
        else:
            solver = self._make_solver(model, callback=callback, validation=validation, **kw)
            if resume is not None:
                # the checkpoint is kept if this fails; the error names its file
                with model_file_errors(getattr(self, "_saved_state_file", "the checkpoint")):
                    solver.load_state(data, *resume)
                solver.history = self.history_
                self._saved_state = None
        return self._train(solver, data, state)

    def _train(self, solver, data, state):
        """Train ``solver`` on ``data`` for ``max_iter`` passes as the estimator's solver.
        Once the solver is set up, the estimator follows it, also if training raises:
        restoring the previous attributes (:func:`restore_on_error`) would pair them with a
        solver that has moved on."""
        self.solver_ = solver
        self._state_params = state
        solver.memory_advice = memory_advice(self, solver)  # in the estimator's own options
        starting = getattr(self.callback, "training_starts", None)
        if starting is not None:  # e.g. the command line's progress lines say the solver first
            starting(self)
        try:
            with thread_setting(getattr(self, "n_jobs", None)):  # the checks' hinge threads
                solver.start(data)
                self._committed = True
                try:
                    solver.fit(data, max_iter=self.max_iter)
                finally:
                    self._set_weights(solver)
        finally:
            if hasattr(solver, "close"):  # a distributed run: last checkpoint, release Spark
                try:
                    keep = (getattr(self, "backend_options", None) or {}).get("keep_dual_state")
                    if keep and solver.passes and hasattr(solver, "single_machine_solver"):
                        self.solver_ = solver.single_machine_solver()
                finally:
                    solver.close()
        self._warn_if_not_converged(solver.history)
        return self

    def _warn_if_not_converged(self, history):
        """scikit-learn's ``ConvergenceWarning`` when :func:`unconverged_gap` has a gap."""
        gap = unconverged_gap(history, self.tol)
        if gap is None:
            return
        if history.stop_reason == "resolution":
            warnings.warn(
                f"{type(self).__name__}: the cutting plane found no constraint violated by "
                f"more than its epsilon, with a relative duality gap of {gap:.3%} above "
                f"tol={self.tol:g}; more iterations would not lower it. Lower epsilon "
                "(solver_options={'epsilon': ...}) or train with solver='bcfw'.",
                ConvergenceWarning,
                stacklevel=4,
            )
            return
        if getattr(self, "backend", "local") == "local":
            steps, how = "passes", "continue training with warm_start=True"
        else:
            steps = "rounds"
            how = (
                "resume the run from its checkpoint_dir "
                "(backend_options={'checkpoint_dir': ..., 'resume': True})"
            )
        warnings.warn(
            f"{type(self).__name__} stopped after max_iter={self.max_iter} {steps} with a "
            f"relative duality gap of {gap:.3%}, above tol={self.tol:g}: the model is not at "
            f"the optimum yet. Raise max_iter, or {how}.",
            ConvergenceWarning,
            stacklevel=4,
        )

    def _set_weights(self, solver):
        """The fitted attributes from ``solver``."""
        self.__dict__.pop("coef_", None)  # the old copy goes before the new one is made
        self.coef_ = solver.weights()
        self.history_ = solver.history
        self.n_iter_ = solver.passes

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    # -- model files --------------------------------------------------------------------------
    def save(self, path, include_solver_state=False):
        """Write the fitted model to a file (``.npz`` arrays and a JSON header, no pickle).

        Parameters
        ----------
        path : str or Path
            The file to write; :func:`dualstruct.load` reads it back.
        include_solver_state : bool, default False
            Also store the solver's dual state, so that ``fit`` with ``warm_start=True`` on
            the same data resumes training exactly where it stopped (a checkpoint;
            :class:`~dualstruct.StructuredSVM` and :class:`~dualstruct.MultiLabelSVM`).

        Returns
        -------
        Path
            The file written.
        """
        if not include_solver_state:
            return io.save_arrays(path, *self.to_arrays())
        if not self._CHECKPOINTS:
            raise ValueError(
                f"include_solver_state: {type(self).__name__} files keep no solver state "
                "(StructuredSVM and MultiLabelSVM files do)"
            )
        return io.save_arrays(path, *self.to_arrays(include_solver_state=True))

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; the file's contents are validated."""
        header, arrays = io.load_arrays(path)
        return cls.from_arrays(header, arrays, path)

    def _file_params(self, leave_out=()):
        """The parameters for a model file's header: JSON values, no callback."""
        params = {k: v for k, v in self.get_params().items() if k not in ("callback", *leave_out)}
        params["random_state"] = seed_to_json(params["random_state"])
        if "backend_options" in params:
            params["backend_options"] = distributed.json_backend_options(params["backend_options"])
        return params

    def _file_header(self, model_type, params, **fields):
        """A model file's header: its type, the parameters, ``fields`` and the training
        record (passes, stop reason, last objective values, the solver and why)."""
        return {
            "model_type": model_type,
            "estimator_params": params,
            **fields,
            "n_iter": int(self.n_iter_),
            "stop_reason": self.history_.stop_reason,
            "final": final_summary(self.history_),
            "solver_choice": list(self.solver_choice_),
        }

    def _add_training_record(self, header, arrays, include_solver_state=False):
        """Add the history columns (and, for a checkpoint, the solver state) to a model
        file's ``header`` and ``arrays``."""
        for name, col in self.history_.as_arrays().items():
            arrays["history." + name] = col
        if include_solver_state and getattr(self, "solver_", None) is not None:
            if hasattr(self.solver_, "engine"):
                raise ValueError(
                    "the dual state of a run on Spark stays on the cluster (resume the run "
                    "from its checkpoint_dir); to keep it in the model file, so that "
                    "training can continue on one machine, fit with "
                    "backend_options={'keep_dual_state': True}"
                )
            meta, state = self.solver_.state_dict()
            header["solver_state"] = meta
            arrays.update({"state." + k: v for k, v in state.items()})

    def _read_training_record(self, header, arrays, path):
        """The training record of a model file (the solver and why, passes, history) and,
        for a checkpoint, the solver state that ``fit`` resumes from."""
        self.solver_choice_ = read_solver_choice(header, self.solver)
        self.n_iter_ = header_integer(header, "n_iter")
        self.history_ = read_history(header, arrays)
        if "solver_state" in header:
            if not self._CHECKPOINTS:
                raise ValueError(
                    f"{path}: a {type(self).__name__} model file never holds a solver state, "
                    "but this one has 'solver_state'"
                )
            state = {k.split(".", 1)[1]: v for k, v in arrays.items() if k.startswith("state.")}
            self._saved_state = (header["solver_state"], state)
            self._saved_state_file = str(path)
            self._state_params = self._frozen_params(self._STATE_PARAMS)
