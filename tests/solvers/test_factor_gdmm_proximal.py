"""GDMM over factors with the proximal outer loop: BCFW's optimum at a large C, the gap of
the original problem, κ from the problem's scale, resuming with the centre and κ."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from dualstruct.models import GraphCRF, MultiClassModel
from dualstruct.solvers import BCFW, FactorGDMM
from dualstruct.solvers._gdmm_proximal import EDGE_WEIGHT, KAPPA_SCALE
from dualstruct.solvers.objective import GAP_ROUNDING, primal_objective, scaled_dual

TOL = 1e-4


def _digits(n=40):
    X, y = load_digits(return_X_y=True)
    model = MultiClassModel(10, 64)
    return model, model.block_data(X[:n] / 16, y[:n])


def _forest(n=6, K=3, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        m = int(rng.integers(4, 8))
        y = rng.integers(0, K, m)
        feats = rng.normal(size=(m, d))
        feats[np.arange(m), y % d] += 1.0
        X.append((feats, np.array([(int(rng.integers(0, t)), t) for t in range(1, m)])))
        Y.append(y)
    model = GraphCRF(K, d)
    return model, model.block_data(X, Y)


def _optimum(model, data, C):
    bcfw = BCFW(model, C=C, max_iter=3000, tol=1e-6, check_every=10, random_state=0).fit(data)
    return bcfw.history.last_checked().primal


@pytest.mark.parametrize("problem, C", [(_digits, 100.0), (_forest, 10.0)])
def test_proximal_gdmm_reaches_bcfw_optimum_at_a_large_C(problem, C):
    model, data = problem()
    solver = FactorGDMM(
        model, C=C, proximal="auto", max_iter=3000, tol=2e-5, check_every=5, random_state=0
    ).fit(data)
    r = solver.history.last_checked()
    optimum = _optimum(model, data, C)
    assert r.primal == pytest.approx(optimum, rel=TOL)
    assert r.dual == pytest.approx(optimum, rel=TOL)
    assert r.dual <= optimum * (1 + GAP_ROUNDING)
    assert any(rec.extra["prox_kappa"] > 0 for rec in solver.history.records)


def test_the_reported_gap_is_the_original_problem_s():
    """The primal of the returned weights and the dual of the marginals, evaluated apart from
    the solver, are the record's: not the subproblem's (whose dual differs while κ > 0)."""
    model, data = _digits(30)
    C = 10.0
    solver = FactorGDMM(
        model, C=C, proximal=3.0, max_iter=7, check_every=7, averaging=False, random_state=0
    ).fit(data)
    r = solver.history.last
    assert solver.kappa == 3.0
    assert r.primal == pytest.approx(primal_objective(model, data, solver.weights(), C), rel=1e-12)
    u = np.zeros_like(solver.w)  # the weights the marginals determine
    solver._kern.rebuild_weights(
        solver.blocks.kernel, solver.layout, solver._rows(), solver._sets(), solver._pairs(), C, u
    )
    np.testing.assert_allclose(solver.w, u, rtol=0, atol=1e-9 * np.abs(u).max())
    loss = C * sum(  # the multi-class loss: 1 for every wrong class
        float(solver.q[g, s]) for g in range(len(solver.gold)) for s in range(1, solver.n_act[g])
    )
    assert r.dual == pytest.approx(scaled_dual(loss, float(u @ u)), rel=1e-9)
    z, k = solver.prox_center, solver.kappa
    inner = loss - 0.5 * (u + k * z) @ (u + k * z) / (1 + k) + 0.5 * k * z @ z
    assert abs(inner - r.dual) > 1e-3 * abs(r.dual)  # the subproblem's dual is another number
    assert r.dual <= r.primal


def test_resume_with_the_centre_and_kappa_equals_uninterrupted():
    model, data = _forest(6, seed=2)
    kw = dict(C=100.0, proximal="auto", check_every=2, random_state=3)
    whole = FactorGDMM(model, max_iter=14, **kw).fit(data)
    first = FactorGDMM(model, max_iter=5, **kw).fit(data)
    meta, arrays = first.state_dict()
    assert meta["scalars"]["lowest_gaps"] < np.inf  # κ's patience has a state to restore
    again = FactorGDMM(model, max_iter=14, **{**kw, "random_state": 99})
    again.load_state(data, meta, {k: np.array(v) for k, v in arrays.items()})
    again.fit(data, max_iter=9)
    for name in ("w", "prox_w", "prox_center", "q"):
        np.testing.assert_array_equal(getattr(again, name), getattr(whole, name))
    assert (again.kappa, again.lowest_gaps, again.stalled) == (
        whole.kappa,
        whole.lowest_gaps,
        whole.stalled,
    )
    assert again.history.last.dual == whole.history.last.dual
    plain = FactorGDMM(model, C=100.0)
    with pytest.raises(ValueError, match="prox_w"):
        plain.load_state(data, meta, arrays)


@pytest.mark.parametrize("problem, C", [(_digits, 100.0), (_forest, 100.0)])
def test_kappa_starts_from_the_problem_s_scale_and_keeps_above_its_floor(problem, C):
    """ "auto" starts at 1 + κ = KAPPA_SCALE · c₀^{1/3}, c₀ = C ψ̄² / δ̄ + EDGE_WEIGHT ·
    (C ψ̄²_E / δ̄)², and never halves below half of that: on a graph the rounded dual's
    distance once halved κ from 100 to almost 0."""
    model, data = problem()
    solver = FactorGDMM(
        model, C=C, proximal="auto", max_iter=40, tol=0, check_every=1, random_state=0
    ).fit(data)
    loss, sq = solver._kern.penalty_figures(solver.blocks.kernel, solver.layout)
    edges = solver._kern.edge_curvature(solver.blocks.kernel, solver.layout)
    # by hand: a graph CRF's edge table is an indicator (‖Δφ_e‖² = 2 between two pairs),
    # each edge counts once for each of its nodes: ψ̄²_E = 2 E / N (0 without edges)
    n_edges = getattr(solver.blocks.kernel, "edge_offsets", [0])[-1]
    assert edges == pytest.approx(2.0 * n_edges / solver.layout.node_offsets[-1], rel=1e-12)
    assert (edges > 0) == (problem is _forest)

    def start_at(C):
        c0 = C * sq / loss + EDGE_WEIGHT * (C * edges / loss) ** 2
        return KAPPA_SCALE * c0 ** (1 / 3) - 1

    start = start_at(C)
    kappas = [rec.extra["prox_kappa"] for rec in solver.history.records]
    assert kappas[0] == pytest.approx(start, rel=1e-12) and start > 1
    assert min(kappas) >= 0.5 * (1 + start) - 1 - 1e-12
    solver.set_C(C / 1000)  # a small C: plain GDMM's scale, κ starts near 0
    assert solver.kappa == pytest.approx(max(0.0, start_at(C / 1000)), rel=1e-12)


def test_bad_proximal_is_refused():
    model, _ = _digits(2)
    for bad in (-1.0, "yes", True, np.inf):
        with pytest.raises(ValueError, match="proximal"):
            FactorGDMM(model, proximal=bad)
