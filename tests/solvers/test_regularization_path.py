"""Training at any C: GDMM's scale-free penalties, warm starts at a new C (``set_C``) and
the regularization path helper."""

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError
from test_gdmm_chain import _problem as chain_problem
from test_multilabel_solvers import _problem as multilabel_problem

from dualstruct import MultiLabelSVM, StructuredSVM, regularization_path
from dualstruct.datasets import make_chain
from dualstruct.models import ChainModel, MultiLabelModel
from dualstruct.solvers import GDMM, BlockBCFW, BlockSSG, CuttingPlane, MultiLabelGDMM


def _checked(history):
    return [r for r in history if not np.isnan(r.primal)]


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_chain_gdmm_certifies_the_optimum_at_every_C(C):
    """The default penalties work over four decades of C: GDMM certifies 1e-7 and its
    primal agrees with BCFW's certified optimum to 1e-6."""
    data, model = chain_problem(11, K=3)
    bcfw = BlockBCFW(model, C, max_iter=50000, tol=1e-10, check_every=50, random_state=0)
    optimum = bcfw.fit(data).history.last.primal
    assert bcfw.history.last.relative_gap <= 1e-10
    gdmm = GDMM(model, C, max_iter=20000, tol=1e-7, check_every=20, random_state=0).fit(data)
    assert gdmm.history.stop_reason == "tol"
    assert gdmm.history.last.primal == pytest.approx(optimum, rel=1e-6)
    assert all(r.dual <= optimum * (1 + 1e-10) for r in _checked(gdmm.history))


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_multilabel_gdmm_certifies_the_optimum_at_every_C(C):
    model, data = multilabel_problem(0, edges="full", inference="lp")
    gdmm = MultiLabelGDMM(model, C, max_iter=20000, tol=1e-7, check_every=20, random_state=0)
    gdmm.fit(data)
    assert gdmm.history.stop_reason == "tol" and gdmm.history.last.relative_gap <= 1e-7
    duals = [r.dual for r in _checked(gdmm.history)]
    assert duals == sorted(duals)  # the reported (best) dual never falls


def _chain_with_loss(scale):
    data, _ = chain_problem(13, K=4)
    return data, ChainModel(4, 4, loss_weights=np.full(4, scale))


def _multilabel_with_loss(scale):
    model, data = multilabel_problem(2, edges="full", inference="lp")
    scaled = MultiLabelModel(
        model.n_labels,
        model.n_features,
        edges=model.edges,
        inference="lp",
        loss_weights=scale * model.loss_weights,
    )
    return data, scaled


@pytest.mark.parametrize(
    "make, solver, a",
    [
        (_chain_with_loss, GDMM, 1 / 16),
        (_multilabel_with_loss, MultiLabelGDMM, 0.01),
        (_chain_with_loss, BlockBCFW, 1 / 16),
    ],
)
def test_scaling_C_and_the_loss_together_leaves_the_trajectory(make, solver, a):
    """(C, δ) → (aC, aδ) multiplies the dual by a² at the same marginals and the weights by
    a: with ρ and η in units of κ (which scales by a²) GDMM takes the same steps, and so
    does BCFW (its line search is scale-free), so the relative gaps and the predictions
    agree at every pass. The multi-label GDMM's steps treat gradients within rounding as ties;
    BCFW's oracle and the pairwise steps of GDMM over factors do not (after an exact step two
    states can tie, and rounding picks one), so those are checked at a power of two, where
    scaling is exact."""
    runs = []
    for scale in (1.0, a):
        data, model = make(scale)
        s = solver(model, scale * 1.0, max_iter=50, tol=0, check_every=1, random_state=0)
        runs.append((s.fit(data), model, data))
    (s1, m1, data), (s2, m2, _) = runs
    gaps1 = [r.relative_gap for r in _checked(s1.history)]
    gaps2 = [r.relative_gap for r in _checked(s2.history)]
    assert len(gaps1) == 50 and np.allclose(gaps1, gaps2, rtol=1e-6, atol=1e-9)
    assert np.allclose(s2.weights(), a * s1.weights(), rtol=1e-6, atol=1e-12)
    assert np.array_equal(m1.predict(s1.weights(), data), m2.predict(s2.weights(), data))


@pytest.mark.parametrize(
    "kind, solver, options",
    [
        ("chain", BlockBCFW, {}),
        ("chain", BlockBCFW, {"step": "fw"}),
        ("chain", CuttingPlane, {}),
        ("chain", GDMM, {}),
        ("multilabel", BlockBCFW, {}),
        ("multilabel", MultiLabelGDMM, {}),
    ],
)
@pytest.mark.parametrize("C_old, C_new", [(0.1, 1.0), (10.0, 1.0)])
def test_set_C_starts_from_a_feasible_point_and_reaches_the_new_optimum(
    kind, solver, options, C_old, C_new
):
    if kind == "chain":
        data, model = chain_problem(12, K=3)
    else:
        model, data = multilabel_problem(1, edges="tree")
    reference = BlockBCFW(model, C_new, max_iter=20000, tol=1e-9, check_every=20, random_state=0)
    optimum = reference.fit(data).history.last.primal
    s = solver(model, C_old, max_iter=100, tol=1e-6, check_every=5, random_state=0, **options)
    passes = s.fit(data).passes
    s.set_C(C_new)
    assert s.C == C_new and len(s.history) == 0
    s.tol = 1e-4  # (the classic step converges sublinearly)
    s.fit(data, max_iter=20000)
    assert s.passes > passes and s.history.stop_reason == "tol"
    assert s.history.last.primal == pytest.approx(optimum, rel=1e-4)
    # the point it starts from is feasible at the new C: every dual is a lower bound
    assert all(r.dual <= optimum * (1 + 1e-9) for r in _checked(s.history))


def test_set_C_refusals():
    data, model = chain_problem(12, K=3)
    ssg = BlockSSG(model, 0.1, max_iter=5).fit(data)
    with pytest.raises(ValueError, match="keeps no dual point"):
        ssg.set_C(1.0)
    with pytest.raises(ValueError, match="C must be positive"):
        BlockBCFW(model, 0.1).set_C(0.0)
    unstarted = GDMM(model, 0.1)
    unstarted.set_C(2.0)
    assert unstarted.C == 2.0


def test_regularization_path_warm_and_cold_agree():
    X, y = make_chain(40, 6, 4, 20, random_state=1)
    est = StructuredSVM(solver="gdmm", tol=1e-3, max_iter=2000, random_state=0)
    Cs = [0.01, 0.1, 1.0]
    warm = regularization_path(est, X, y, Cs)
    cold = regularization_path(est, X, y, Cs, warm_start=False)
    with pytest.raises(NotFittedError):
        est.predict(X)  # the estimator given is only cloned
    for w, c in zip(warm, cold):
        assert w.C == c.C and w.converged and c.converged
        assert w.relative_gap <= 1e-3 and w.passes > 0 and w.seconds > 0
        assert w.model.C == w.C and not hasattr(w.model, "solver_")
        primal_w = w.model.history_.last_checked().primal
        primal_c = c.model.history_.last_checked().primal
        assert primal_w == pytest.approx(primal_c, rel=2e-3)
    with pytest.raises(ValueError, match="at least one"):
        regularization_path(est, X, y, [])


def test_regularization_path_of_an_estimator_without_warm_start():
    from dualstruct import MultiClassSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.argmax(X[:, :3], axis=1)
    with pytest.raises(ValueError, match="no warm_start"):
        regularization_path(MultiClassSVM(), X, y, [0.1, 1.0])
    path = regularization_path(MultiClassSVM(tol=1e-3), X, y, [0.1, 1.0], warm_start=False)
    assert [p.C for p in path] == [0.1, 1.0] and all(p.converged for p in path)


def test_multilabel_warm_start_at_a_new_C():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 5))
    Y = (X[:, :4] + 0.3 * rng.normal(size=(60, 4)) > 0).astype(int)
    path = regularization_path(
        MultiLabelSVM(edges="full", solver="gdmm", tol=1e-3, max_iter=3000, random_state=0),
        X,
        Y,
        [0.1, 1.0, 10.0],
    )
    assert [p.converged for p in path] == [True, True, True]
    assert path[2].model.predict(X).shape == Y.shape
