"""What the chain and multi-label GDMMs share: the penalty scale and the schedules of ρ and
η, the certified dual that never falls, and the checks of a restored state."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


def penalty_unit(C, loss_mean, sq_norm_mean):
    """The penalty scale ``κ = C^{3/2} (δ̄ ψ̄²)^{1/2}`` of a GDMM problem, in which ρ and η are
    given (:class:`ScaleFreePenalty`).

    Parameters
    ----------
    C : float
        Regularization constant.
    loss_mean : float
        δ̄, the mean loss of a wrong label in one unigram factor.
    sq_norm_mean : float
        ψ̄², the mean squared norm of a unigram factor's joint feature (a token's or an
        example's features, intercept included).

    Returns
    -------
    float

    Examples
    --------
    >>> from dualstruct.solvers._gdmm_common import penalty_unit
    >>> penalty_unit(1.0, 1.0, 4.0)
    2.0
    >>> round(penalty_unit(10.0, 10.0, 4.0) / 10.0**2, 12)  # (C, δ) → (aC, aδ): κ → a² κ
    2.0
    """
    unit = float(C) ** 1.5 * math.sqrt(max(float(loss_mean), 0.0) * max(float(sq_norm_mean), 0.0))
    return unit if unit > 0.0 else 1.0


class ScaleFreePenalty:
    """ρ and η of GDMM in units of the problem's penalty scale κ (:func:`penalty_unit`).

    **Why a unit.** Written in the marginals q (α / C), the dual is
    ``G(q) = ½ C² ‖Ψ q‖² − C <δ, q>``. Two changes of the data leave its minimizer q*
    unchanged and scale G: (C, δ) → (aC, aδ) multiplies G by a², and scaling every joint
    feature by s together with C → C/s² multiplies G by 1/s². The augmented Lagrangian adds
    ``<λ, r> + ρ/2 ‖r‖²`` with residuals r in units of probability, so GDMM's iterates q are
    the same under both changes exactly when ρ, η (and λ) scale as G does. A factor's two
    scales do: its linear term ``C δ̄`` and its curvature ``C² ψ̄²`` (the Hessian of a unigram
    block, ``C² ‖x_t‖²``). ρ = ρ̃ κ with κ their geometric mean, ``C^{3/2} (δ̄ ψ̄²)^{1/2}``, makes the
    trajectory depend only on ρ̃ under both changes. Between the two, the geometric mean is a
    measured choice: the multipliers must grow to the size of the gradient, about ``C δ̄``, a
    step η at a time, while a penalty far above the curvature makes the block steps short.
    The best fixed ρ spans decades over C, while ρ / κ stays in a narrow range at every C
    (BENCHMARKS.md, "Training across C").

    Subclasses set ``self.penalty_scale`` (κ) in their set-up and call
    :meth:`_set_penalties` before each pass; ``self.rho`` and ``self.eta`` are then the
    absolute values the kernels use, ``rho_relative`` and ``eta_relative`` the schedules'.
    """

    penalty_scale = 1.0

    def _init_schedules(self, rho, eta):
        self.rho_schedule = _schedule("rho", rho)
        self.eta_schedule = self.rho_schedule if eta is None else _schedule("eta", eta)
        self._set_penalties()

    def _set_penalties(self):
        """ρ and η of the next pass, absolute: the schedules' values times κ."""
        self.rho_relative = value_at(self.rho_schedule, self.passes)
        self.eta_relative = value_at(self.eta_schedule, self.passes)
        self.rho = self.penalty_scale * self.rho_relative
        self.eta = self.penalty_scale * self.eta_relative

    def _penalty_figures(self):
        """A record's ρ and η (in units of κ) and κ."""
        return {"rho": self.rho_relative, "eta": self.eta_relative, "kappa": self.penalty_scale}


class BestCertifiedDual:
    """The dual GDMM reports: the largest :meth:`certified_dual` at this and every earlier
    check at the current C (``best_dual``, state; 0, the gold labelling's, at the start and
    after a change of C). Each is the dual value of a feasible point, so the largest is one
    too, and the reported dual never falls."""

    best_dual = 0.0

    def dual(self):
        self.best_dual = max(self.best_dual, self.certified_dual())
        return self.best_dual


#: how far a restored marginal may stray from [0, 1], and a distribution's sum from 1
MARGINAL_ROUNDING = 1e-9
SUM_ROUNDING = 1e-6


def check_distributions(name, q, live):
    """Refuse a restored state whose rows of ``q`` (entries where ``live``) are not
    distributions: entries in [0, 1] and sums 1, up to rounding. The certified dual is a
    dual point only when they are."""
    held = np.where(live, q, 0.0)
    low, high = held.min(initial=0.0), held.max(initial=0.0)
    if low < -MARGINAL_ROUNDING or high > 1.0 + MARGINAL_ROUNDING:
        raise ValueError(
            f"inconsistent GDMM state: the array {name!r} holds marginals outside [0, 1] "
            f"(from {low:.6g} to {high:.6g})"
        )
    sums = held.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1.0) > SUM_ROUNDING)
    if bad.size:
        raise ValueError(
            f"inconsistent GDMM state: row {int(bad[0])} of the array {name!r} sums to "
            f"{sums[bad[0]]:.9g}, not 1 (its rows are distributions)"
        )


def _schedule(name, value):
    """A number or a list of (pass, value) points as a sorted tuple of points."""
    try:
        points = (
            tuple((int(p), float(v)) for p, v in value)
            if isinstance(value, (list, tuple))
            else ((0, float(value)),)
        )
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a number or a list of (pass, value) points, got {value!r}"
        ) from None
    if not points:
        raise ValueError(f"{name}: the schedule has no points")
    if any(v <= 0 or not math.isfinite(v) for _, v in points):
        raise ValueError(f"{name} must be positive, got {value!r}")
    if any(p < 0 for p, _ in points) or any(b[0] < a[0] for a, b in zip(points, points[1:])):
        raise ValueError(f"{name}: schedule passes must be >= 0 and non-decreasing, got {value!r}")
    return points


def value_at(points, passes):
    """The schedule's value after ``passes`` passes: geometric between points, constant
    before the first and after the last."""
    if passes <= points[0][0]:
        return points[0][1]
    for (p0, v0), (p1, v1) in zip(points, points[1:]):
        if passes < p1:
            return v0 * (v1 / v0) ** ((passes - p0) / (p1 - p0))
    return points[-1][1]


def widen_columns(a, width):
    """``a`` with ``width`` columns, the new ones zero."""
    out = np.zeros((a.shape[0], width), dtype=a.dtype)
    out[:, : a.shape[1]] = a
    return out


@njit(cache=True)
def random_below(seed, a, b, n):
    """A pseudo-random int in [0, n) from the key (seed, a, b) (splitmix64 finalizer), so the
    factor order and sampled groups do not depend on where a kernel call starts."""
    z = (
        np.uint64(seed)
        + np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)
        + np.uint64(b) * np.uint64(0xBF58476D1CE4E5B9)
    )
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return np.int64(z % np.uint64(n))
