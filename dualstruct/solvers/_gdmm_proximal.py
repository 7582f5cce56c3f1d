"""The proximal-point outer loop of GDMM over factors (:class:`~.factor_gdmm.GDMM`
with ``proximal="auto"`` or κ > 0).

**The subproblem.** As for BCFW (:class:`~.block.BlockBCFW`), GDMM trains on

    P_κ(w; z) = ½‖w‖² + (κ/2) ‖w − z‖² + C Σ_i H_i(w),

whose dual over the same factor marginals q, as a minimization, is

    G_κ(q) = ½ σ ‖u(q) + κ z‖² − C Σ_j <δ_j, q_j> + const,    σ = 1 / (1 + κ),

with ``u(q) = C Σ_f (φ_f(ȳ_f) − E_{q_f} φ_f)`` the plain dual's weights. Its gradient in
``q_j(a)`` is ``−C (θ_j(a; x) + δ_j(a))`` with the scores at the primal–dual map
``x = σ (u + κ z)``: GDMM's pass unchanged, with the factors (and their oracles) scoring at
``x``, which moves by σ times every change of u, and the line search's quadratic term
``C² ‖Δφ‖²`` scaled by σ (the kernels' ``Settings.scale``). The loss term is not scaled.
u is not kept during a pass: with z fixed, ``u = (1 + κ) x − κ z`` exactly, and it is
recovered after each pass (the lazy average ``R`` follows the unscaled changes, i.e. u's).

**The penalty.** Written at C, G_κ is ``1/σ`` times the plain dual at ``σ C`` (up to the
linear term of z): its curvature is σ times the plain one and its linear term unchanged.
The penalty unit of :class:`~._gdmm_common.ScaleFreePenalty`, the geometric mean of the
two, would scale by ``√σ``. The certified dual does not follow that unit: it loses to the
rounding in proportion to the consistency residual, which a smaller penalty leaves larger.
ρ and η are the plain ones times ``σ^p``, with p by the factor graphs' mean degree d̄
(measured, BENCHMARKS.md, "GDMM's proximal outer loop"): on sparse graphs (d̄ ≤
``SPARSE_DEGREE``: chains, trees, grids) p = −½, a penalty that grows with κ (with √σ
OCR-600's chain kept several times the plain GDMM's residual, and its certified dual
lagged the primal; p = 0 and p = −1 certified less); on dense label graphs p = ½ (a
larger penalty there makes the node steps short against their many edges, and yeast's
full graph stalled at a large C).

**Certificate.** The marginals stay feasible for the original dual, so the certified dual
(the transport rounding of the edge marginals) is a lower bound of the ORIGINAL problem at
every check and ``P(x)`` an upper bound: the gap the history reports is the original
structural SVM's. It splits as ``P(x) − D(q) = [P_κ(x; z) − D_κ(q; z)] + ½ ‖u − x‖²``,
the subproblem's gap plus the proximal term.

**The outer loop.** Before every pass the centre moves to the last scoring point, ``z ← x``
(and x is recomputed from u at the current κ), as BCFW's does. κ's state and rule are
BCFW's (:class:`~._proximal.ProximalKappa`), judged at every check: κ halves when the
proximal term exceeds the subproblem's gap (the centre, not the subproblem, holds the gap
up), or when the original gap has not reached a new low for ``PROXIMAL_PATIENCE`` checks.
Two departures, measured on digits (BENCHMARKS.md, "Training across C"). A win of the
average ū at a check does not end the scheme: GDMM's average wins many early checks, and
ending the scheme there loses its gain (60 digits, C = 100: 1% in 266 passes instead of
109). GDMM's gap is noisy from check to check, hence the longer patience (10 checks: κ fell
to 0.003 on digits at C = 100, 28% after 300 passes; 30 checks: 1.1%).

**κ from the problem's scale.** Each pass moves the centre once, so the outer loop needs
more passes the larger κ; a subproblem at the effective ``C / (1 + κ)`` needs more passes
the larger its scale ``c₀ / (1 + κ)``, with ``c₀ = C ψ̄² / δ̄`` the problem's own scale (δ̄
and ψ̄² of the penalty unit, :func:`~._gdmm_common.penalty_unit`: the dual's curvature
against its linear term). ``proximal="auto"`` starts at ``1 + κ = KAPPA_SCALE · c₀^{1/3}``
(0 where that is below 1) and never halves below half of that start in ``1 + κ``: at a large
C the rule's figures do not see that κ is too small, and halving on leaves a subproblem as
ill-conditioned as the original one (the rule alone, from κ = 100: yeast's full graph at
C = 100 ended at 12.8% with κ = 0.78). The constant was measured with fixed κ on digits
(passes to 1%, C = 1 / 10 / 100: best near 1 + κ = 6, 12 to 21, 16 to 26).

**The pair factors.** An edge adds curvature and no loss: ``ψ̄²_E``, the mean over the nodes
of ``‖φ_e(g_u, g_v) − φ_e(a, g_v)‖² / 2`` summed over the node's edges (a the node's next
state, as for ψ̄²; the engine's ``edge_curvature``), enters as the square of its own scale,
``c₀ = C ψ̄² / δ̄ + EDGE_WEIGHT · (C ψ̄²_E / δ̄)²``: it matters at a large C only. Measured on
yeast's full graph (ψ̄² = 2.6, ψ̄²_E = 1.96), with κ from the nodes alone: at C = 100 1 + κ =
14.7 and 1.9% after 300 passes (fixed κ = 27: 1.1%; κ = 55 or 110: 1% in 260 passes). The
sum over an example's edges added to ψ̄² (κ = 32 at C = 100) cost 10 to 35% more passes at
C ≤ 1; ψ̄²_E as a factor ``1 + 0.2 C ψ̄²_E / δ̄`` of the node scale certified yeast but cost
OCR-600's chain 4 points of gap at C = 10 (30% → 35% after 300 passes). With the square
(1 + κ = 49 at C = 100, 3.5 at C = 1 against 3.2) yeast certifies 1% at every C; OCR-600
(16.5 against 15.3 at C = 10, 50 against 33 at C = 100) ends at 31% and 75% after 300
passes against 30% and 66% (plain GDMM: 37% and 86%; BENCHMARKS.md, "Training across C"),
figures measured with ρ, η ∝ √σ, before the penalty's power by degree (with it OCR-600 ends
at 3.1% and 28%, BENCHMARKS.md, "GDMM's proximal outer loop").

The rule's proximal term is ``½ ‖u − x‖²``: the original gap less the subproblem's is that
term at the rounded ũ, which on graphs also holds the rounding's distance (it halved κ from
100 to 0.78 in ten checks on yeast's full graph at C = 100).
"""

from __future__ import annotations

import numpy as np

from ._proximal import (  # noqa: F401 (check_proximal: GDMM imports it from here)
    ProximalKappa,
    check_proximal,
    half_sq_distance,
    proximal_point,
)

#: ``proximal="auto"``: κ also halves after this many checks without a new lowest gap
PROXIMAL_PATIENCE = 30
#: ``proximal="auto"``: κ starts at ``1 + κ = KAPPA_SCALE · (C ψ̄² / δ̄)^{1/3}`` and stays
#: above half of that in ``1 + κ`` (module docstring)
KAPPA_SCALE = 2.3
#: ``proximal="auto"``: the pair factors' share of ``c₀`` (module docstring)
EDGE_WEIGHT = 0.25
#: ρ and η of the subproblem are the plain ones times ``σ^p``: p = −½ on factor graphs of
#: mean degree up to this, ½ on denser ones (module docstring, "The penalty")
SPARSE_DEGREE = 8.0


class ProximalGDMM(ProximalKappa):
    """The outer loop of the module docstring, on a GDMM state whose ``w`` is u: the
    scoring point x (``prox_w``), the centre z (``prox_center``), κ and its patience
    (:class:`~._proximal.ProximalKappa`). Without the scheme both arrays are empty."""

    kappa_patience = PROXIMAL_PATIENCE
    average_ends_scheme = False
    kappa_scale = KAPPA_SCALE
    edge_weight = EDGE_WEIGHT
    #: p of the penalty's ``σ^p``; None: by the mean degree (:meth:`_penalty_power`). A
    #: benchmark and diagnostic override (``benchmarks/gdmm_proximal.py --penalty-power``),
    #: not API: no constructor parameter, not in the saved state
    penalty_power = None

    _x_primal = None
    _inner_gap_value = np.nan
    _scale_cache = None

    proximal_arrays = ("prox_w", "prox_center")
    proximal_scalars = ProximalKappa.kappa_scalars

    def _start_proximal(self):
        """κ from the start and x = z = u (empty arrays without the scheme)."""
        self._scale_cache = None  # the data may have changed since the last fit
        self._restart_proximal()
        if self._proximal_on:
            self.prox_w, self.prox_center = self.w.copy(), self.w.copy()
        else:
            self.prox_w, self.prox_center = np.zeros(0), np.zeros(0)
        self.centred_at = self.passes

    def _problem_scale(self):
        """``c₀ = C ψ̄² / δ̄ + EDGE_WEIGHT · (C ψ̄²_E / δ̄)²``, the problem's own scale
        (module docstring; the figures memoized per fit)."""
        if self._scale_cache is None:
            k, layout = self.blocks.kernel, self.layout
            loss, sq = self._kern.penalty_figures(k, layout)
            edges = self._kern.edge_curvature(k, layout)
            self._scale_cache = (float(loss), float(sq), float(edges))
        loss, sq, edges = self._scale_cache
        if not (loss > 0 and sq > 0):
            return 0.0
        return self.C * sq / loss + self.edge_weight * (self.C * edges / loss) ** 2

    def _kappa_start(self):
        """``1 + κ = KAPPA_SCALE · c₀^{1/3}`` (module docstring), at least 0."""
        return max(0.0, self.kappa_scale * self._problem_scale() ** (1.0 / 3.0) - 1.0)

    def _kappa_floor(self):
        """Half the start in ``1 + κ``, at least 0."""
        return max(0.0, 0.5 * (1.0 + self._kappa_start()) - 1.0)

    @property
    def _sigma(self):
        return 1.0 / (1.0 + self.kappa)

    def _scoring_point(self):
        """The array the factors score at and the steps move: x, or u without the scheme."""
        return self.prox_w if self._proximal_on else self.w

    def _proximal_scale(self):
        """σ for the kernels' ``Settings.scale`` (1.0 without the scheme)."""
        return self._sigma if self._proximal_on else 1.0

    def _penalty_power(self):
        """p of the subproblem's penalty ``σ^p`` times the plain one: −½ up to mean degree
        ``SPARSE_DEGREE``, ½ beyond (module docstring, "The penalty")."""
        if self.penalty_power is not None:
            return float(self.penalty_power)
        return -0.5 if self.mean_degree <= SPARSE_DEGREE else 0.5

    def _penalty_factor(self):
        """``σ^p``, the factor of the plain ρ and η (1.0 without the scheme): a record's
        ``rho`` and ``eta`` (in units of the penalty scale) leave it out."""
        return float(self._sigma ** self._penalty_power()) if self._proximal_on else 1.0

    def _set_penalties(self):
        """ρ and η times ``σ^p`` (:meth:`_penalty_factor`)."""
        super()._set_penalties()
        if self._proximal_on:
            f = self._penalty_factor()
            self.rho *= f
            self.eta *= f

    def _centre(self):
        """Before a pass: z ← x, then x = σ (u + κ z) at the current κ."""
        if not self._centre_due():
            return
        self.prox_center[:] = self.prox_w
        proximal_point(self.w, self.prox_center, self.kappa, self.prox_w)
        self.centred_at = self.passes

    def _follow_scoring_point(self):
        """After (part of) a pass: u = (1 + κ) x − κ z."""
        if self._proximal_on:
            if self.kappa > 0.0:
                np.multiply(self.prox_w, 1.0 + self.kappa, out=self.w)
                self.w -= self.kappa * self.prox_center
            else:
                self.w[:] = self.prox_w

    def _pass_parts(self, order, chunks):
        """The pass's parts; u follows x once they are done or a Ctrl-C stops them."""
        try:
            yield from super()._pass_parts(order, chunks)
        finally:
            self._follow_scoring_point()

    def _proximal_term(self):
        return half_sq_distance(self.w, self.prox_w)

    def _proximal_figures(self):
        if not self._proximal_on:
            return {}
        return {
            "prox_kappa": self.kappa,
            "penalty_factor": self._penalty_factor(),
            "proximal_term": self._proximal_term(),
            "inner_gap": self._inner_gap_value,
        }

    # -- κ at the checks ----------------------------------------------------------------------
    def _finite_primal(self, w):
        value = super()._finite_primal(w)
        if self._proximal_on and w is self.prox_w:
            self._x_primal = (self.passes, value)
        return value

    def _record(self, check, final=False):
        rec = super()._record(check, final)
        if check and self._proximal_on and self.proximal == "auto":
            self._adapt_kappa(rec)
        return rec

    def _inner_gap(self, primal_x):
        """``P_κ(x; z) − D_κ(q̃; z)`` at the rounded marginals q̃ of the certified dual."""
        loss, u = self._loss_term(), self._rounded_weights()
        k, x, z = self.kappa, self.prox_w, self.prox_center
        v = u + k * z
        return (
            primal_x
            + k * half_sq_distance(x, z)
            - loss
            + 0.5 * self._sigma * float(v @ v)
            - 0.5 * k * float(z @ z)
        )

    def _adapt_kappa(self, rec):
        """κ's rule (:meth:`~._proximal.ProximalKappa._judge_kappa`) at a check: the
        proximal term ``½ ‖u − x‖²`` against the subproblem's gap, the original gap as the
        patience's figure (the module docstring's κ from the problem's scale)."""
        if self.kappa == 0.0:
            return
        if self._x_primal is None or self._x_primal[0] != self.passes:
            return
        inner = self._inner_gap(self._x_primal[1])
        self._inner_gap_value = inner
        if self._judge_kappa(self._proximal_term(), inner, float(rec.gap)):
            self._set_penalties()

    # -- state ----------------------------------------------------------------------------------
    def _check_proximal_state(self):
        """A restored scheme: κ and its counters (:meth:`~._proximal.ProximalKappa.
        _check_kappa_state`), the arrays as wide as w (or empty without the scheme); a fixed
        κ is the constructor's."""
        want = self.w.shape if self._proximal_on else (0,)
        for name in self.proximal_arrays:
            if getattr(self, name).shape != want:
                raise ValueError(
                    f"saved solver array {name!r} has shape {getattr(self, name).shape}, "
                    f"expected {want} (saved with proximal={'0' if want != (0,) else 'on'}?)"
                )
        self._check_kappa_state()
        if self._proximal_on and self.proximal != "auto":
            self.kappa = float(self.proximal)
        if not self._proximal_on:
            self.kappa = 0.0

    def _scale_proximal(self, s):
        """A new C: x and z scale with w; κ and its patience start afresh."""
        if self._proximal_on:
            self.prox_w *= s
            self.prox_center *= s
            self._restart_proximal()
