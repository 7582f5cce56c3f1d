"""The certified dual of GDMM over factors: a lower bound on the optimum at every check, with
and without the proximal outer loop, and the proximal loop's penalty."""

import functools

import numpy as np
import pytest
from conftest import random_chain_problem
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
    """(P*, D*) of a problem at C, by BCFW (shared by the proximal settings)."""
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


@pytest.mark.parametrize("kappa", [0.0, 3.0])
def test_proximal_penalty_is_the_plain_one_times_a_power_of_sigma(kappa):
    """ρ and η are the plain ones times σ^p: p = −½ on the chain (sparse), ½ where the
    factor graphs' mean degree exceeds SPARSE_DEGREE, and σ^p = 1 without the scheme."""
    model, data = _chain()
    solver = FactorGDMM(model, C=10.0, proximal=kappa, max_iter=2, tol=0.0, random_state=0)
    solver.fit(data)
    assert 0 < solver.mean_degree <= SPARSE_DEGREE
    sigma = 1.0 / (1.0 + solver.kappa)
    assert (solver.kappa > 0) == (kappa > 0)
    for degree, power in ((solver.mean_degree, -0.5), (SPARSE_DEGREE + 1.0, 0.5)):
        solver.mean_degree = degree
        solver._set_penalties()
        plain = solver.penalty_scale * solver.rho_relative
        assert solver.rho == pytest.approx(plain * sigma**power if kappa else plain)
        assert solver.eta == pytest.approx(
            solver.penalty_scale * solver.eta_relative * (sigma**power if kappa else 1.0)
        )
