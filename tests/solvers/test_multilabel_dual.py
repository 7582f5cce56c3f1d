"""The dual bound of BCFW on a multi-label model with a full label graph: the proximal
scheme's steps are too long for the original dual, whose bound is then the best point
between the gold labellings and the iterate; never below 0, never above a primal."""

import numpy as np
import pytest

from dualstruct.models.multilabel import MultiLabelDataset, MultiLabelModel
from dualstruct.solvers import BCFW, primal_objective
from dualstruct.solvers.block import segment_dual
from dualstruct.solvers.objective import dual_objective


def _problem(n=30, L=12, d=5, inference="lp"):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    Y = (X @ rng.normal(size=(d, L)) + rng.normal(size=(n, L)) > 0).astype(int)
    return MultiLabelModel(L, d, edges="full", inference=inference), MultiLabelDataset(X, Y)


def test_segment_dual_is_the_best_point_between_gold_and_the_iterate():
    s = np.linspace(0.0, 1.0, 100001)
    for loss, sq_norm in [(3.0, 100.0), (50.0, 20.0), (4.0, 4.0), (0.0, 9.0), (2.0, 0.0)]:
        best = np.max(s * loss - 0.5 * s**2 * sq_norm)
        assert segment_dual(loss, sq_norm) == pytest.approx(best, abs=1e-8)
        assert segment_dual(loss, sq_norm) >= max(0.0, loss - 0.5 * sq_norm)
    assert np.isnan(segment_dual(np.nan, 1.0))


@pytest.mark.parametrize(
    "inference,step,L", [("lp", "fw", 12), ("exact", "pairwise", 6), ("exact", "fw", 6)]
)
def test_proximal_dual_is_never_negative_nor_above_a_primal(inference, step, L):
    """At κ = 100 the first passes leave D(u) = ℓ − ½‖u‖² far below 0 (a valid, useless
    bound); the reported bound lies in [max(0, D(u), D(ū)), every primal]."""
    model, data = _problem(L=L, inference=inference)
    u_duals = []

    def watch(record):
        u_duals.append(dual_objective(solver.w, solver.scalars[0]))
        lower = max(0.0, u_duals[-1], dual_objective(*solver._averaged()))
        assert record.dual >= lower - 1e-9 * max(1.0, abs(lower))

    solver = BCFW(
        model, 1.0, step=step, max_iter=4, tol=0, check_every=1, random_state=0, callback=watch
    )
    solver.fit(data)
    assert len(u_duals) == 4 and u_duals[0] < -10 * solver.history.records[0].primal
    duals = [r.dual for r in solver.history.records]
    primals = [r.primal for r in solver.history.records]
    assert duals == sorted(duals) and duals[0] > 0  # the best so far
    # below every primal seen, and below the primal of plain BCFW's weights after more passes
    plain = BCFW(model, 1.0, step=step, proximal=0, max_iter=30, tol=0, random_state=0).fit(data)
    upper = min(min(primals), primal_objective(model, data, plain.weights(), 1.0))
    assert max(duals) <= upper
    assert plain.history.last.dual <= upper


def test_proximal_dual_at_the_optimum_is_plain_bcfws():
    """Near the optimum ℓ ≈ ‖u‖² and the bound is D(u): both schemes certify the same
    optimum of the LP-relaxed problem."""
    model, data = _problem(n=20, L=6)
    kw = dict(max_iter=3000, tol=1e-5, check_every=10, random_state=0)
    prox = BCFW(model, 0.1, **kw).fit(data)
    plain = BCFW(model, 0.1, proximal=0, **kw).fit(data)
    assert prox.history.stop_reason == plain.history.stop_reason == "tol"
    assert prox.dual() == pytest.approx(plain.dual(), rel=2e-5)
    assert 0 <= prox.history.last.relative_gap <= 1e-5
