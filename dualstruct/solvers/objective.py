"""The one primal objective, dual objective and duality gap (C-form), used by every solver,
benchmark and test.

    P(w) = ½‖w‖² + C Σ_i H_i(w),    H_i(w) = max_y [δ(ȳ_i, y) + s(x_i, y; w) − s(x_i, ȳ_i; w)]
    D(q) = C Σ_i E_{q_i}[δ(ȳ_i, ·)] − ½‖w(q)‖²  =  loss_term − ½‖w‖²
    gap  = P(w) − D(q) ≥ 0

The λ-form of the BCFW papers is ``P(w) / (C n)`` with ``λ = 1 / (C n)``.
"""

from __future__ import annotations

import math

import numpy as np

RESCALINGS = ("margin", "slack")


def primal_objective(model, data, w: np.ndarray, C: float, rescaling: str = "margin") -> float:
    """The exact primal ``P(w) = ½‖w‖² + C Σ_i H_i(w)``: one loss-augmented decoding of every
    training example.

    Parameters
    ----------
    model : model object
    data : the model's training data
    w : ndarray
        Weights.
    C : float
    rescaling : {"margin", "slack"}, default "margin"
        The hinge: ``max_y δ + s(y) − s(ȳ)``, or ``max_y δ (1 + s(y) − s(ȳ))``
        (Tsochantaridis et al. 2005), computed exactly by the model's dynamic program.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import primal_objective
    >>> data = pack_sequences([np.eye(2)], [np.array([0, 1])])
    >>> model = ChainModel(2, 2)
    >>> primal_objective(model, data, model.init_weights(), C=1.0)  # w = 0: the largest loss, 2
    2.0
    """
    return primal_value(w, C, float(hinges(model, data, w, rescaling).sum()))


def hinges(model, data, w: np.ndarray, rescaling: str = "margin") -> np.ndarray:
    """Every example's hinge ``H_i(w)`` under margin or slack rescaling."""
    if rescaling == "margin":
        hinge, _ = model.hinge(w, data)
    elif rescaling == "slack":
        hinge, _ = model.slack_hinge(w, data)
    else:
        raise ValueError(f"rescaling must be one of {RESCALINGS}, got {rescaling!r}")
    return np.asarray(hinge, dtype=np.float64)


def primal_value(w: np.ndarray, C: float, hinge_total: float) -> float:
    """``P(w) = ½‖w‖² + C Σ_i H_i(w)`` given the hinge sum (computed elsewhere, e.g. on
    the partitions of a distributed run)."""
    return 0.5 * float(w @ w) + C * float(hinge_total)


def sampled_primal(model, sample, n_sequences: int, w: np.ndarray, C: float, rescaling="margin"):
    """Unbiased estimate of ``P(w)`` from a uniform sample (without replacement) of m of the
    n training examples, and its standard error:

        P̂ = ½‖w‖² + C n · mean_sample H_i(w),   se = C n s_H √((1 − m/n) / m),

    with s_H the sample standard deviation of the hinge (the finite-population factor makes
    se = 0 for the whole set). Returns ``(P̂, se)``."""
    hinge = hinges(model, sample, w, rescaling)
    m, n = len(hinge), int(n_sequences)
    estimate = primal_value(w, C, n * float(hinge.mean()))
    se = 0.0
    if 1 < m < n:
        se = C * n * float(hinge.std(ddof=1)) * math.sqrt((1.0 - m / n) / m)
    return estimate, se


def dual_objective(w: np.ndarray, loss_term: float) -> float:
    """The dual value ``D(q) = C Σ_i E_{q_i} δ_i − ½‖w(q)‖²``.

    Parameters
    ----------
    w : ndarray
        ``w(q)``, the weights of the dual point.
    loss_term : float
        ``C Σ_i E_{q_i} δ_i``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.solvers import dual_objective
    >>> dual_objective(np.array([1.0, 2.0]), loss_term=4.0)   # 4 - (1 + 4) / 2
    1.5
    """
    return float(loss_term) - 0.5 * float(w @ w)


def scaled_dual(loss_term: float, sq_norm: float) -> float:
    """The best dual value on the segment from the gold labelling to a feasible point q:
    ``max_{s ∈ [0, 1]} s L − ½ s² ‖w‖²`` with ``L`` the loss term and ``‖w‖² = sq_norm`` of
    q. The gold labelling is feasible with w = 0 and D = 0, and w(q) and the loss term are
    linear in q − ȳ, so every point of the segment is feasible with these values. The
    maximum is at ``s = min(1, L / ‖w‖²)`` and never below ``D(q)``; at the optimum
    ``L = ‖w‖²`` and s = 1."""
    if loss_term <= 0.0:
        return 0.0
    if sq_norm <= loss_term:  # s = 1
        return float(loss_term) - 0.5 * float(sq_norm)
    return 0.5 * float(loss_term) ** 2 / float(sq_norm)


def duality_gap(primal: float, dual: float) -> tuple[float, float]:
    """The absolute and relative duality gap.

    Parameters
    ----------
    primal, dual : float

    Returns
    -------
    gap : float
        ``P − D``.
    relative_gap : float
        ``(P − D) / |P|``.

    Examples
    --------
    >>> from dualstruct.solvers import duality_gap
    >>> duality_gap(10.0, 9.5)
    (0.5, 0.05)
    """
    gap = primal - dual
    return gap, gap / max(abs(primal), 1e-300)


def lambda_form(value: float, C: float, n: int) -> float:
    """Convert a C-form objective value to the λ-form of the BCFW papers (λ = 1/(C n))."""
    return value / (C * n)
