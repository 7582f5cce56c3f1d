"""The κ of the proximal-point outer loop, written once for :class:`~.block.BlockBCFW`, the
GDMM over factors (:mod:`~._gdmm_proximal`) and the distributed CoCoA+.

Each solver trains on ``P(w) + (κ/2) ‖w − z‖²`` and scores at ``x = (u + κ z) / (1 + κ)``
(u the dual's weights); its duality gap splits into the subproblem's gap and the proximal
term ``½ ‖u − x‖²`` (BlockBCFW's class docstring). :class:`ProximalKappa` holds κ and its
rule: ``proximal="auto"`` starts at :meth:`~ProximalKappa._kappa_start` and halves κ when
the proximal term exceeds the subproblem's gap (the centre, not the subproblem, holds the
gap up) or when the solver's progress figure has not reached a new low for
``kappa_patience`` judgements; below ``PROXIMAL_MIN`` κ is 0, never below
:meth:`~ProximalKappa._kappa_floor`. Each solver says when it judges and with which
figures; what differs between them is a class attribute or one of these two methods.
"""

from __future__ import annotations

import numpy as np

#: ``proximal="auto"``: the first κ (halved while the proximal term dominates the gap)
PROXIMAL_START = 100.0
#: ``proximal="auto"``: κ also halves after this many judgements without a new lowest gap
PROXIMAL_PATIENCE = 10
#: ``proximal="auto"``: below this κ the passes are the plain solver's (κ = 0)
PROXIMAL_MIN = 1e-3

#: entries of w per slice when two copies of w are combined (no temporary as large as w)
SLICE = 1 << 22

#: the power η of x̄'s weights: the k-th iterate taken in weighs k (k + 1) … (k + η − 1)
#: (polynomial-decay averaging, Shamir and Zhang 2013)
MEAN_POWER = 2


def check_proximal(proximal):
    """``proximal``: "auto" or a finite number >= 0 (ValueError otherwise)."""
    if proximal != "auto" and (
        isinstance(proximal, (bool, str))
        or not isinstance(proximal, (int, float, np.integer, np.floating))
        or not proximal >= 0
        or not np.isfinite(proximal)
    ):
        raise ValueError(f"proximal must be 'auto' or a number >= 0, got {proximal!r}")
    return proximal


def half_sq_distance(a, b):
    """``½ ‖a − b‖²``, summed slice by slice."""
    total = 0.0
    for start in range(0, a.size, SLICE):
        d = a[start : start + SLICE] - b[start : start + SLICE]
        total += float(d @ d)
    return 0.5 * total


def mean_step(x, mean, taken):
    """x̄ ← x̄ + (η + 1) (x − x̄) / (k + η), slice by slice in place: ``mean``, the mean of
    ``taken`` iterates, takes in ``x`` as the k-th (k = ``taken`` + 1, η = ``MEAN_POWER``;
    x itself when k = 1). Returns k."""
    step = (MEAN_POWER + 1.0) / (taken + 1.0 + MEAN_POWER)
    for start in range(0, x.size, SLICE):
        part = slice(start, start + SLICE)
        move = x[part] - mean[part]
        move *= step
        np.add(mean[part], move, out=mean[part])
    return taken + 1


def proximal_point(u, z, kappa, out):
    """``out ← (u + κ z) / (1 + κ)``, slice by slice (``out`` may be ``z``)."""
    for start in range(0, out.size, SLICE):
        part = slice(start, start + SLICE)
        out[part] = (u[part] + kappa * z[part]) / (1.0 + kappa)
    return out


class ProximalKappa:
    """κ of the proximal scheme and its rule (module docstring), on a solver with
    ``proximal`` ("auto" or a number >= 0) and ``passes``. State: ``kappa``, ``centred_at``
    (the pass count when the centre last moved), ``lowest_gaps`` and ``stalled`` (the
    patience).

    Parameters of the rule, as class attributes: ``kappa_patience`` (judgements without a
    new low before κ halves) and ``average_ends_scheme`` (with averaging, κ = 0 for good
    once the average ``ū``, candidate 1, has won a check)."""

    kappa_patience = PROXIMAL_PATIENCE
    average_ends_scheme = True

    kappa = 0.0
    centred_at = 0
    lowest_gaps = np.inf
    stalled = 0

    #: the scalars of a saved state
    kappa_scalars = ("kappa", "centred_at", "lowest_gaps", "stalled")

    @property
    def _proximal_on(self):
        """Whether the proximal scheme runs: ``proximal`` "auto" or positive (under "auto"
        κ may reach 0, when the scheme runs on as the plain solver)."""
        return self.proximal == "auto" or self.proximal > 0

    def _kappa_start(self):
        """The first κ of ``proximal="auto"``."""
        return PROXIMAL_START

    def _kappa_floor(self):
        """The least κ ``proximal="auto"`` halves to."""
        return 0.0

    def _restart_proximal(self):
        """κ from the start (``"auto"``) or the fixed κ, and the patience afresh."""
        if self.proximal == "auto":
            self.kappa = self._kappa_start()
        else:
            self.kappa = float(self.proximal)
        self.lowest_gaps, self.stalled = np.inf, 0

    def _centre_due(self):
        """Whether the centre moves before this pass (once per pass)."""
        return self._proximal_on and self.passes > self.centred_at

    def _average_won(self):
        """Whether the average ``ū`` won the last check and ends the scheme."""
        return self.average_ends_scheme and self.averaging and self._chosen == 1

    def _judge_kappa(self, term, gap, progress=None):
        """``proximal="auto"``: halve κ when ``term`` (the proximal term) exceeds ``gap``
        (the subproblem's), or when ``progress`` (default ``gap``) has not reached a new low
        for ``kappa_patience`` judgements. Returns whether κ changed."""
        progress = gap if progress is None else progress
        if progress < self.lowest_gaps:
            self.lowest_gaps, self.stalled = progress, 0
        else:
            self.stalled += 1
        if term > gap or self.stalled >= self.kappa_patience:
            kappa = self.kappa
            self._halve_kappa()
            self.stalled = 0
            return self.kappa != kappa
        return False

    def _halve_kappa(self):
        """κ ← κ / 2, 0 below ``PROXIMAL_MIN``, never below :meth:`_kappa_floor`."""
        kappa = 0.5 * self.kappa if self.kappa >= 2 * PROXIMAL_MIN else 0.0
        floor = self._kappa_floor()
        self.kappa = kappa if kappa >= floor else min(floor, self.kappa)

    def _check_kappa_state(self):
        """A restored κ (finite, >= 0) and its counters (``centred_at`` within the passes
        made, ``stalled`` within the patience)."""
        if not (np.isfinite(self.kappa) and self.kappa >= 0):
            raise ValueError(f"the saved solver field 'kappa' must be >= 0, got {self.kappa!r}")
        for name, top in (("centred_at", self.passes), ("stalled", self.kappa_patience)):
            if not 0 <= getattr(self, name) <= top:
                raise ValueError(
                    f"the saved solver field {name!r} must lie in 0 … {top}, got "
                    f"{getattr(self, name)!r}"
                )
