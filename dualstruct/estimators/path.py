"""Training along a path of regularization constants, each fit warm-started from the last."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sklearn.base import clone


@dataclass
class PathPoint:
    """One C of a :func:`regularization_path`: the model trained there and its certificate.

    Parameters
    ----------
    C : float
        The regularization constant.
    model : estimator
        A fitted copy of the estimator at this C (weights only, no solver state).
    passes : int
        Passes (iterations) made at this C.
    seconds : float
        Training seconds at this C (monitoring excluded).
    relative_gap : float
        The certified relative duality gap at the last check (NaN for a solver without a
        dual, SSG).
    converged : bool
        Whether training at this C stopped on ``tol``.

    Examples
    --------
    >>> from dualstruct import PathPoint
    >>> PathPoint(C=1.0, model=None, passes=40, seconds=0.5, relative_gap=0.004, converged=True)
    PathPoint(C=1.0, model=None, passes=40, seconds=0.5, relative_gap=0.004, converged=True)
    """

    C: float
    model: Any
    passes: int
    seconds: float
    relative_gap: float
    converged: bool


def regularization_path(estimator, X, y, Cs, *, warm_start=True):
    """Train ``estimator`` at every C of ``Cs``, in order, each fit continuing from the last.

    A solver that keeps a dual point (BCFW, the cutting plane, GDMM) starts each new C from
    the previous C's point, scaled and mixed with the gold labelling so that it is feasible
    for the new C (:meth:`~dualstruct.solvers.base.PassSolver.set_C`): the dual value is
    certified from the first pass, and nearby Cs share most of the work. Run this before a
    grid search to see what each C costs and that it certifies; order ``Cs`` so that
    neighbours are close (ascending or descending).

    Parameters
    ----------
    estimator : StructuredSVM or MultiLabelSVM
        The settings to train with (cloned; ``estimator`` itself is not fitted). Other
        estimators (without ``warm_start``) train every C from scratch with
        ``warm_start=False``.
    X, y : training data
        As for the estimator's ``fit``.
    Cs : sequence of float
        The regularization constants, in the order to train them.
    warm_start : bool, default True
        Continue from the previous C (False: train every C from scratch).

    Returns
    -------
    list of PathPoint
        One per C: the fitted model, the passes and seconds spent there and the certified
        relative gap reached.

    Examples
    --------
    >>> from dualstruct import StructuredSVM, regularization_path
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(40, 6, 4, 20, random_state=0)
    >>> path = regularization_path(StructuredSVM(tol=0.01, random_state=0), X, y, [0.1, 1.0])
    >>> [(p.C, p.converged) for p in path]
    [(0.1, True), (1.0, True)]
    """
    Cs = [float(C) for C in Cs]
    if not Cs:
        raise ValueError("Cs: give at least one regularization constant")
    continues = "warm_start" in estimator.get_params()
    if warm_start and not continues:
        raise ValueError(
            f"{type(estimator).__name__} cannot continue a fit (it has no warm_start): "
            "pass warm_start=False"
        )
    est = clone(estimator)
    if continues:
        est.set_params(warm_start=bool(warm_start))
    points = []
    for C in Cs:
        if not warm_start:
            est = clone(estimator)
            if continues:
                est.set_params(warm_start=False)
        solver = getattr(est, "solver_", None)
        passes0 = solver.passes if solver is not None else 0
        time0 = solver.train_time if solver is not None else 0.0
        est.set_params(C=C)
        est.fit(X, y)
        solver = est.solver_
        last = est.history_.last_checked()
        gap = last.relative_gap if last is not None else math.nan
        model = type(est).from_arrays(*est.to_arrays())
        points.append(
            PathPoint(
                C=C,
                model=model,
                passes=int(solver.passes - passes0),
                seconds=float(solver.train_time - time0),
                relative_gap=float(gap),
                converged=est.history_.stop_reason == "tol",
            )
        )
    return points
