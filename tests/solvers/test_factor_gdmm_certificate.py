"""The certified dual of GDMM over factors: a lower bound on the optimum at every check, with
and without the proximal outer loop, and the proximal loop's penalty."""

import functools

import numpy as np
import pytest
from conftest import random_chain_problem
from test_factor_gdmm_lazy_edges import _sparse_labels
from test_factor_gdmm_proximal import _forest

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, FactorGDMM
from dualstruct.solvers._gdmm_proximal import SPARSE_DEGREE
from dualstruct.solvers.objective import GAP_ROUNDING


def _chain(n=8, K=4, d=5, seed=1):
    X, Y = random_chain_problem(np.random.default_rng(seed), n, K, d, max_len=6)
    model = ChainModel(K, d)
    return model, model.block_data(pack_sequences(X, Y))


@functools.cache
def _optimum(problem, C):
    """(P*, D*) of a problem at C, by BCFW (shared by the proximal settings; the cache keys
    on the function, so problems must be deterministic)."""
    model, data = problem()
    bcfw = BCFW(model, C=C, max_iter=5000, tol=1e-8, check_every=10, random_state=0).fit(data)
    r = bcfw.history.last_checked()
    return r.primal, r.dual


@pytest.mark.parametrize("problem", [_forest, _chain])
@pytest.mark.parametrize("C", [1.0, 10.0])
@pytest.mark.parametrize("proximal", [0, "auto", 3.0])
def test_certified_dual_never_exceeds_the_optimum(problem, C, proximal):
    """Every check's certified dual (and the reported best) lies below P*, on problems BCFW
    solves to a 1e-8 gap, from the first passes (large consistency residuals) on."""
    model, data = problem()
    primal, dual = _optimum(problem, C)
    assert primal - dual <= 1e-6 * primal
    duals = []

    def record(rec):
        duals.append((solver.certified_dual(), rec.dual))
        return False

    solver = FactorGDMM(
        model,
        C=C,
        proximal=proximal,
        max_iter=60,
        tol=0.0,
        check_every=1,
        random_state=0,
        callback=record,
    )
    solver.fit(data)
    assert len(duals) == 60
    bound = primal * (1 + GAP_ROUNDING)
    assert all(d <= bound and best <= bound for d, best in duals)
    assert all(best >= d * (1 - 1e-12) for d, best in duals)  # the best is never lower
    assert duals[-1][1] > 0.5 * dual  # and the bound is not vacuous


def _dense_labels():
    """The multi-label model on the full graph of 10 labels: mean degree 9 (every potential
    edge counted, with lazy edges too)."""
    return _sparse_labels(n=20, L=10, d=10)


def _assert_penalties(solver, kappa, power):
    """ρ and η are the given 0.5 and 0.2 in units of the penalty scale, times σ^p under the
    loop (σ = 1/(1 + κ) at the current κ) and unscaled without it."""
    assert solver.kappa > 0 if kappa == "auto" else solver.kappa == kappa
    factor = (1.0 / (1.0 + solver.kappa)) ** power if kappa else 1.0
    assert solver.rho == pytest.approx(solver.penalty_scale * 0.5 * factor, rel=1e-12)
    assert solver.eta == pytest.approx(solver.penalty_scale * 0.2 * factor, rel=1e-12)


@pytest.mark.parametrize("kappa", [0.0, 3.0, "auto"])
@pytest.mark.parametrize("problem, power", [(_chain, -0.5), (_dense_labels, 0.5)])
def test_proximal_penalty_is_the_plain_one_times_a_power_of_sigma(problem, power, kappa):
    """ρ and η are the plain ones times σ^p: p = −½ where the factor graphs' mean degree is
    at most SPARSE_DEGREE (the chain), ½ beyond (a full label graph), σ^p = 1 without the
    scheme; after a fit, a new C and a restored state alike."""
    model, data = problem()
    kw = dict(rho=0.5, eta=0.2, proximal=kappa, tol=0.0, random_state=0)
    solver = FactorGDMM(model, C=10.0, max_iter=2, **kw).fit(data)
    assert (solver.mean_degree <= SPARSE_DEGREE) == (power < 0)
    if problem is _dense_labels:
        assert solver.lazy and solver.mean_degree == 9.0
    _assert_penalties(solver, kappa, power)
    extra = solver.history.last.extra  # the record's σ^p, at the pass's κ (none without it)
    sigma = 1.0 / (1.0 + extra.get("prox_kappa", 0.0))
    assert extra.get("penalty_factor", 1.0) == pytest.approx(sigma**power, rel=1e-12)
    assert ("penalty_factor" in extra) == bool(kappa)
    scale = solver.penalty_scale
    solver.set_C(5.0)
    assert solver.penalty_scale != scale
    _assert_penalties(solver, kappa, power)
    restored = FactorGDMM(model, C=5.0, **kw)
    restored.load_state(data, *solver.state_dict())
    assert restored.penalty_scale == solver.penalty_scale
    _assert_penalties(restored, kappa, power)
    for degree, forced in ((1.0, -0.5), (SPARSE_DEGREE, -0.5), (SPARSE_DEGREE + 1.0, 0.5)):
        solver.mean_degree = degree
        solver._set_penalties()
        _assert_penalties(solver, kappa, forced)
