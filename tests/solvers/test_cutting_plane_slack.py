"""The 1-slack cutting plane with its maximizer cache and stabilized oracle point, under slack
rescaling: the exact optimum of a tiny chain in few iterations, gaps never negative, and a
saved cache checked on loading."""

import numpy as np
import pytest
from conftest import tiny_chain_problem
from test_slack_exact_qp import _exact_dual

from dualstruct import pack_sequences
from dualstruct.models import ChainModel
from dualstruct.solvers import CuttingPlane


@pytest.mark.parametrize("C", [1.0, 3.0])
def test_slack_cutting_plane_reaches_the_exact_qp_in_few_iterations(C):
    X, Y = tiny_chain_problem()
    model = ChainModel(3, 4)
    optimum = _exact_dual(model, X, Y, C, "slack")
    # the plain method (one aggregated constraint per oracle pass) needs 25 and 36 iterations
    solver = CuttingPlane(model, C, rescaling="slack", epsilon=0.0, max_iter=20, tol=1e-7)
    history = solver.fit(pack_sequences(X, Y)).history
    assert history.stop_reason == "tol"
    assert history.last.primal == pytest.approx(optimum, rel=1e-6)
    assert history.last.dual == pytest.approx(optimum, rel=1e-6)
    for r in history.records:  # a certified gap is never negative, every dual a bound
        assert r.dual <= optimum * (1 + 1e-9) and r.primal >= optimum * (1 - 1e-9)
        assert r.primal - r.dual >= -1e-9 * optimum


def test_the_plain_method_is_kept():
    X, Y = tiny_chain_problem()
    model = ChainModel(3, 4)
    data = pack_sequences(X, Y)
    optimum = _exact_dual(model, X, Y, 1.0, "slack")
    solver = CuttingPlane(
        model, 1.0, rescaling="slack", inner_cuts=0, query_step=1.0, max_iter=500, tol=1e-7
    ).fit(data)
    assert solver.history.last.dual == pytest.approx(optimum, rel=1e-6)


@pytest.mark.parametrize(
    "kwargs, match",
    [({"cache_size": 0}, "cache_size"), ({"inner_cuts": -1}, "inner_cuts")]
    + [({"query_step": s}, "query_step") for s in (0.0, 1.5)],
)
def test_cache_option_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CuttingPlane(ChainModel(2, 2), 1.0, **kwargs)


def test_a_saved_cache_with_a_foreign_label_is_refused():
    X, Y = tiny_chain_problem()
    model = ChainModel(3, 4)
    data = pack_sequences(X, Y)
    solver = CuttingPlane(model, 1.0, rescaling="slack", max_iter=3, tol=0).fit(data)
    meta, arrays = solver.state_dict()
    assert not np.array_equal(arrays["cache"][0], data.labels)  # the oracle's maximizers
    resumed = CuttingPlane(model, 1.0, rescaling="slack", max_iter=3, tol=0)
    resumed.load_state(data, meta, arrays)  # untouched: accepted
    bad = {k: np.array(v) for k, v in arrays.items()}
    bad["cache"][1, 0] = 3
    with pytest.raises(ValueError, match="'cache' holds the label 3"):
        CuttingPlane(model, 1.0, rescaling="slack").load_state(data, meta, bad)
    meta["scalars"]["cache_slot"] = 10
    with pytest.raises(ValueError, match="'cache_slot'"):
        CuttingPlane(model, 1.0, rescaling="slack").load_state(data, meta, arrays)
