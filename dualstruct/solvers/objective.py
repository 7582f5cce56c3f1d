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

from ..exceptions import CertificateError
from ._block_kernels import oracle_checks

RESCALINGS = ("margin", "slack")

#: a duality gap below ``−GAP_ROUNDING × max(|P|, |D|)`` is beyond rounding: the certificate
#: is inconsistent (the dual bound exceeds the primal) and training stops with an error
GAP_ROUNDING = 1e-9
#: an example's hinge below ``−HINGE_ROUNDING × max(1, largest hinge)`` means the oracle found
#: a maximum below the gold labelling's value
HINGE_ROUNDING = 1e-7


def _method_name(model, method) -> str:
    """``Class.method`` of a user's model, else the model's ``method``."""
    user = getattr(model, "model", None)
    if user is not None and hasattr(user, method):
        return f"{type(user).__name__}.{method}"
    return f"the {method} of {type(model).__name__}"


def oracle_name(model) -> str:
    """How messages name ``model``'s loss-augmented oracle: the user's method for a
    :class:`~dualstruct.models.UserModel`, else the model class's oracle."""
    user = getattr(model, "model", None)
    if user is not None and hasattr(user, "loss_augmented_inference"):
        return f"{type(user).__name__}.loss_augmented_inference"
    return f"the loss-augmented oracle of {type(model).__name__}"


def check_hinges(model, hinge: np.ndarray, rescaling: str = "margin") -> None:
    """Raise :class:`CertificateError` when an example's hinge ``H_i(w)`` is negative beyond
    rounding: the oracle's maximum is below the gold labelling's value (whose hinge is 0)."""
    if hinge.size == 0:
        return
    i = int(np.argmin(hinge))
    low = float(hinge[i])
    if not low < -HINGE_ROUNDING * max(1.0, float(np.max(np.abs(hinge)))):
        return
    raise CertificateError(
        f"{oracle_name(model)} on example {i}: its {rescaling}-rescaled maximum is "
        f"{-low:.6g} below the gold labelling's value (a maximum is never lower)"
    )


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
    hinge = np.asarray(hinge, dtype=np.float64)
    check_hinges(model, hinge, rescaling)
    return hinge


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
    ``L = ‖w‖²`` and s = 1.

    Computed without overflow (``½ L (L / ‖w‖²)``, not ``½ L² / ‖w‖²``); a value that is not
    finite (a loss term or norm that overflowed, or NaN) gives the gold labelling's 0, a
    bound that always holds, never an infinite certificate."""
    L, sq = float(loss_term), float(sq_norm)
    if not L > 0.0:  # also NaN
        return 0.0
    if sq <= L:  # s = 1
        value = L - 0.5 * sq
    else:
        value = 0.5 * L * (L / sq)
    return value if math.isfinite(value) else 0.0


#: examples whose oracle a block solver checks after every pass (another sample each pass):
#: at most this many and one in ``ORACLE_SAMPLE_SHARE`` of the examples, at least 2
ORACLE_SAMPLE = 8
ORACLE_SAMPLE_SHARE = 200
#: relative tolerance of those checks (they look for oracles that miss maxima, not rounding)
ORACLE_ROUNDING = 1e-7


def oracle_sample(n: int, passes: int) -> np.ndarray:
    """The examples checked after pass ``passes`` (``ORACLE_SAMPLE``), from a generator
    seeded by the pass count (the training order's generator is untouched)."""
    m = min(n, max(2, min(ORACLE_SAMPLE, n // ORACLE_SAMPLE_SHARE)))
    picks = np.random.default_rng(passes).choice(n, m, replace=False)
    return np.sort(picks).astype(np.int64)


def block_oracle_fault(model, blocks, w, examples, slack, atoms=None, shares=None, C=1.0):
    """Check the oracle of the kernel model behind ``model`` on the blocks ``examples`` at
    ``w``: its maximum may not be below the gold labelling's value nor below the value of
    what the solver holds for the block, its atoms ``(atom_labels, atom_count, capacity)``
    or its share ``(block_weights, block_losses)`` of the dual point (C-form, whose value
    is ``(ℓ_i − ⟨w, w_i⟩) / C`` above the gold's). Returns a message naming the oracle and
    the worst example, or None."""
    examples = np.ascontiguousarray(examples, dtype=np.int64)
    out = np.zeros((len(examples), 4))
    labels, count, capacity = (
        atoms if atoms is not None else (np.zeros(0, np.int32), np.zeros(0, np.int64), 0)
    )
    w = np.ascontiguousarray(w, dtype=np.float64)
    oracle_checks(blocks.kernel, w, slack, examples, labels, count, capacity, out)
    blocks.raise_status()
    hinge, held, scale, self_loss = out.T
    wrong = ~(np.abs(self_loss) <= 1e-12)
    if wrong.any():
        j = int(np.flatnonzero(wrong)[0])
        return (
            f"{_method_name(model, 'loss')} on example {int(examples[j])}: the gold "
            f"labelling's loss against itself is {self_loss[j]:g}, not 0"
        )
    what = "a labelling it returned earlier for that example"
    if shares is not None:
        weights, losses = shares
        own = weights[examples] @ w
        held = (losses[examples] - own) / C
        scale = scale + (np.abs(losses[examples]) + np.abs(own)) / C
        what = "the solver's dual point for that example"
    tol = ORACLE_ROUNDING * (1.0 + scale)
    below_gold = (-hinge - tol) / (1.0 + scale)
    below_held = (held - hinge - tol) / (1.0 + scale)
    j = int(np.argmax(np.maximum(below_gold, below_held)))
    if max(below_gold[j], below_held[j]) <= 0.0:
        return None
    i = int(examples[j])
    if below_gold[j] > 0.0:
        return (
            f"{oracle_name(model)} on example {i}: its maximum is {-hinge[j]:.6g} below "
            "the gold labelling's value (a maximum is never lower)"
        )
    return (
        f"{oracle_name(model)} on example {i}: its maximum is {held[j] - hinge[j]:.6g} "
        f"below the value of {what} (a maximum is never lower)"
    )


def gap_is_negative(primal: float, dual: float) -> bool:
    """Whether ``dual`` exceeds ``primal`` beyond rounding (``GAP_ROUNDING`` relative): by
    weak duality that never happens with exact oracles and a consistent dual point."""
    return primal - dual < -GAP_ROUNDING * max(abs(primal), abs(dual))


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
