"""What the estimators share: parameter checks, warm starts and checkpoints, the training
call that keeps an estimator consistent when training fails, and model-file helpers."""

from __future__ import annotations

import contextlib
import functools
import math
import numbers
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.exceptions import ConvergenceWarning

from .. import distributed, io
from ..memory import memory_advice
from ..models.support import support_size_summary
from ..solvers import History, solver_class
from ..solvers.base import MAX_C, checked_setting
from .auto import AUTO, SolverChoice, given, resolved


def frozen_params(est, names) -> dict:
    """A deep, immutable snapshot of the parameters ``names`` of ``est``, in a form that
    compares equal across a model file's round trip (tuples for lists and arrays, Python
    numbers for NumPy scalars, dicts as sorted item tuples). Warm starts and resumes compare
    these, so a parameter changed in place (``solver_options["rho"] = …``) is seen."""
    return {
        k: _frozen(_problem_options(getattr(est, k)) if k == "solver_options" else getattr(est, k))
        for k in names
    }


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


def check_training_params(est):
    """The parameters every estimator shares: C, tol, max_iter, check_every, averaging,
    random_state, verbose, warm_start, callback and solver_options."""
    check_real("C", est.C, 0, False)
    if est.C > MAX_C:
        raise ValueError(
            f"C must be at most {MAX_C:g} (the objective would overflow), got {est.C!r}"
        )
    check_real("tol", est.tol, 0, True)
    check_integer("max_iter", est.max_iter, 1)  # 0 passes would return an untrained model
    checked_setting("check_every", est.check_every, "auto")
    check_bool("averaging", est.averaging)
    check_random_state(est.random_state)
    check_integer("verbose", est.verbose, 0)
    if hasattr(est, "warm_start"):
        check_bool("warm_start", est.warm_start)
    if est.callback is not None and not callable(est.callback):
        raise ValueError(f"callback must be callable, got {est.callback!r}")
    if est.solver_options is not None and not isinstance(est.solver_options, dict):
        raise ValueError(f"solver_options must be a dict, got {est.solver_options!r}")


def continues_training(est) -> bool:
    """Whether ``fit`` continues the estimator's solver (``warm_start`` and a solver whose
    set-up succeeded; an error or Ctrl-C in a first fit leaves none)."""
    return (
        est.warm_start
        and getattr(est, "solver_", None) is not None
        and est.solver_.data is not None
    )


def train(est, solver, data, state):
    """Train ``solver`` on ``data`` for ``est.max_iter`` passes as ``est``'s solver. Once the
    solver is set up, the estimator follows it, also if training raises: restoring the
    previous attributes (:func:`restore_on_error`) would pair them with a solver that has
    moved on."""
    est.solver_ = solver
    est._state_params = state
    solver.memory_advice = memory_advice(est, solver)  # in the estimator's own options
    starting = getattr(est.callback, "training_starts", None)
    if starting is not None:  # e.g. the command line's progress lines say the solver first
        starting(est)
    try:
        solver.start(data)
        est._committed = True
        try:
            solver.fit(data, max_iter=est.max_iter)
        finally:
            est._set_weights(solver)
    finally:
        if hasattr(solver, "close"):  # a distributed run: last checkpoint, release Spark
            try:
                keep = (getattr(est, "backend_options", None) or {}).get("keep_dual_state")
                if keep and solver.passes and hasattr(solver, "single_machine_solver"):
                    est.solver_ = solver.single_machine_solver()
            finally:
                solver.close()
    warn_if_not_converged(est, solver.history)
    return est


def make_solver(est, model, **kwargs):
    """The solver ``est.solver`` (or the one ``"auto"`` chose) for ``model``: in process, or
    on the estimator's distributed ``backend`` with ``est.n_partitions`` partitions."""
    options = dict(est.solver_options or {})
    name = resolved(est)
    if getattr(est, "backend", "local") == "local":
        return solver_class(name, model)(model, **kwargs, **options)
    return distributed.distributed_solver(
        name, model, est.n_partitions, est.backend_options, **kwargs, **options
    )


def check_backend_params(est):
    """``backend``, ``n_partitions`` and ``backend_options``; a warm start on Spark resumes
    from the checkpoint directory instead."""
    solver = "bcfw" if est.solver == AUTO else est.solver  # what "auto" trains on Spark
    distributed.check_backend(est.backend, est.n_partitions, est.backend_options, solver)
    if est.backend != "local" and est.warm_start:
        raise ValueError(
            "warm_start does not apply to backend='spark': resume a run from its "
            "checkpoint with backend_options={'checkpoint_dir': ..., "
            "'resume': True}"
        )


def unconverged_gap(history, tol):
    """The certified relative gap when training stopped at ``max_iter`` with it still above
    ``tol``, else None (``tol=0`` asks for exactly ``max_iter`` passes; a solver without a
    certificate has no gap)."""
    last = history.last_checked()
    if (
        history.stop_reason != "max_iter"
        or last is None
        or tol <= 0
        or math.isnan(last.relative_gap)
        or last.relative_gap <= tol
    ):
        return None
    return last.relative_gap


def warn_if_not_converged(est, history):
    """scikit-learn's ``ConvergenceWarning`` when :func:`unconverged_gap` has a gap."""
    gap = unconverged_gap(history, est.tol)
    if gap is not None:
        if getattr(est, "backend", "local") == "local":
            steps, how = "passes", "continue training with warm_start=True"
        else:
            steps, how = (
                "rounds",
                (
                    "resume the run from its checkpoint_dir "
                    "(backend_options={'checkpoint_dir': ..., 'resume': True})"
                ),
            )
        warnings.warn(
            f"{type(est).__name__} stopped after max_iter={est.max_iter} {steps} with a "
            f"relative duality gap of {gap:.3%}, above tol={est.tol:g}: the model is not at "
            f"the optimum yet. Raise max_iter, or {how}.",
            ConvergenceWarning,
            stacklevel=3,
        )


def with_intercept(X, est):
    """CSR rows of ``X`` with the constant column ``est.intercept_scaling`` appended when
    ``est.fit_intercept`` (how every estimator gives each label a bias)."""
    X = sp.csr_matrix(X, dtype=np.float64)
    if est.fit_intercept:
        X = sp.hstack([X, np.full((X.shape[0], 1), float(est.intercept_scaling))], format="csr")
    return X


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


def carry_over(est, solver, changed):
    """Before a warm start: refuse a changed problem, except a new C for a solver that keeps
    a dual point, which it scales to the new C
    (:meth:`~dualstruct.solvers.base.PassSolver.set_C`)."""
    if changed == ["C"] and solver.carries_dual:
        solver.set_C(est.C)
        return
    if changed:
        hint = (
            f"; solver {resolved(est)!r} keeps no dual point to carry to a new C"
            if "C" in changed
            else ""
        )
        raise ValueError(
            f"warm_start: parameters {changed} changed since the last fit; the solver state "
            f"belongs to the old problem{hint} (set warm_start=False to start anew)"
        )


def continue_solver(est, solver, callback, validation):
    """Hand a solver that continues training the estimator's current settings."""
    solver.callback, solver.validation = callback, validation
    solver.verbose, solver.tol = est.verbose, est.tol
    solver.check_every = est.check_every


class SolverResults:
    """``_set_weights``: the estimator's fitted attributes from its solver; ``load``: the
    estimator from a model file its ``save`` wrote (through the class's ``from_arrays``)."""

    def _set_weights(self, solver):
        self.__dict__.pop("coef_", None)  # the old copy goes before the new one is made
        self.coef_ = solver.weights()
        self.history_ = solver.history
        self.n_iter_ = solver.passes

    @classmethod
    def load(cls, path):
        """Read a model written by :meth:`save`; the file's contents are validated."""
        header, arrays = io.load_arrays(path)
        return cls.from_arrays(header, arrays, path)


@contextlib.contextmanager
def model_file_errors(path):
    """Reading a model file: any fault becomes a ValueError that names the file."""
    try:
        yield
    except (KeyError, TypeError, AttributeError, OverflowError, IndexError) as exc:
        raise ValueError(f"{path}: model file is missing or has invalid fields ({exc})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def add_training_record(est, header, arrays, include_solver_state=False):
    """Add the history columns (and, for a checkpoint, the solver state) to a model file's
    ``header`` and ``arrays``."""
    for name, col in est.history_.as_arrays().items():
        arrays["history." + name] = col
    if include_solver_state and getattr(est, "solver_", None) is not None:
        if hasattr(est.solver_, "engine"):
            raise ValueError(
                "the dual state of a run on Spark stays on the cluster (resume the run from "
                "its checkpoint_dir); to keep it in the model file, so that training can "
                "continue on one machine, fit with backend_options={'keep_dual_state': True}"
            )
        meta, state = est.solver_.state_dict()
        header["solver_state"] = meta
        arrays.update({"state." + k: v for k, v in state.items()})


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


WEIGHTS = ("auto", "dense", "observed")
#: "auto" keeps the observed (feature, label) pairs only when they are fewer than this share
#: of the dense matrix
AUTO_SPARSE_FRACTION = 0.5
#: and only when the dense matrix would take more than this many bytes per copy
AUTO_DENSE_MAX_BYTES = 2**30


def check_weights_params(est):
    """Validate ``weights`` and ``weights_min_count``."""
    if est.weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {est.weights!r}")
    check_integer("weights_min_count", est.weights_min_count, 1)


def choose_support(est, n_features, n_labels, observed):
    """The support of the unary weights by the estimator's ``weights`` rule (None: dense):
    ``"dense"``; ``"observed"``, the support ``observed()`` returns; ``"auto"``, dense while
    the d × K matrix takes at most ``AUTO_DENSE_MAX_BYTES`` per copy or the observed pairs
    are at least ``AUTO_SPARSE_FRACTION`` of it. Sets ``weights_info_`` (printed when
    verbose): which weights, how many, their memory."""
    dense = n_features * n_labels
    if est.weights == "dense" or (est.weights == "auto" and 8 * dense <= AUTO_DENSE_MAX_BYTES):
        support = None
    else:
        support = observed()
        if est.weights == "auto" and len(support[1]) >= AUTO_SPARSE_FRACTION * dense:
            support = None
    n = dense if support is None else len(support[1])
    est.weights_info_ = support_size_summary(
        n, n_features, n_labels, "dense" if support is None else "observed pairs"
    )
    if est.verbose:
        print(est.weights_info_)
    return support
