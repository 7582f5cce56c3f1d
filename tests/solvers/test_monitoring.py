"""Monitoring between exact checks: the sampled primal estimate of every pass solver, and
checks spaced by their cost (check_every="auto")."""

import argparse

import numpy as np
import pytest
from conftest import random_chain_problem
from test_multilabel_solvers import _problem as multilabel_problem

from dualstruct import StructuredSVM
from dualstruct.cli import _check_every
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, GDMM, MultiLabelGDMM, primal_objective
from dualstruct.solvers.base import MONITORING_SHARE
from dualstruct.solvers.objective import sampled_primal


def _chain(seed=0, n=40):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=4, d=5, max_len=6, sparse=False)
    return pack_sequences(X, Y), ChainModel(4, 5)


@pytest.mark.parametrize("solver", [BCFW, GDMM])
def test_sampled_primal_of_the_whole_set_is_the_exact_primal(solver):
    data, model = _chain()
    s = solver(model, 1.0, max_iter=4, check_every=2, random_state=0, primal_sample=40).fit(data)
    for rec in s.history:
        assert rec.extra["sample_size"] == 40
        assert rec.extra["sampled_primal_se"] == 0.0
        if not np.isnan(rec.primal):
            assert rec.extra["sampled_primal"] == pytest.approx(rec.primal, rel=1e-12)


def test_sampled_primal_is_unbiased_with_a_standard_error():
    """Over all samples of size m the estimate averages to the exact primal, and its spread
    is what the standard error's formula gives on average."""
    data, model = _chain(1, n=9)
    w = BCFW(model, 1.0, max_iter=3, random_state=0).fit(data).weights()
    exact = primal_objective(model, data, w, 1.0)
    rng = np.random.default_rng(0)
    estimates, ses = [], []
    for _ in range(400):
        picks = np.sort(rng.choice(9, 3, replace=False))
        est, se = sampled_primal(model, data.take(picks), 9, w, 1.0)
        estimates.append(est)
        ses.append(se)
    assert np.mean(estimates) == pytest.approx(exact, rel=0.03)
    assert np.sqrt(np.mean(np.square(ses))) == pytest.approx(np.std(estimates), rel=0.25)


def test_sampled_primal_on_multilabel_data_and_input_errors():
    model, data = multilabel_problem(2, n=30, L=5, edges="full", inference="lp")
    s = MultiLabelGDMM(model, 1.0, max_iter=3, check_every=3, random_state=0, primal_sample=10)
    s.fit(data)
    last = s.history.last
    assert last.extra["sample_size"] == 10
    assert abs(last.extra["sampled_primal"] - last.primal) <= 6 * last.extra["sampled_primal_se"]
    for bad in (0, 2.5, "10"):
        with pytest.raises(ValueError, match="primal_sample"):
            BCFW(model, primal_sample=bad)
    for bad in (0, "often"):
        with pytest.raises(ValueError, match="check_every"):
            BCFW(model, check_every=bad)


def test_auto_checks_are_spaced_by_their_cost_and_survive_a_resume():
    data, model = _chain(2)
    s = BCFW(model, 1.0, max_iter=1, check_every="auto", random_state=0).fit(data)
    assert not np.isnan(s.history.last.primal)  # the first pass is checked
    # the rule: a check of c seconds after passes of t seconds waits ⌈c / (0.1 t)⌉ passes
    s.train_time, s.passes = 2.0, 10
    s._schedule_next_check(0.5)
    assert s._next_check == 10 + int(np.ceil(0.5 / (MONITORING_SHARE * 0.2)))
    s._schedule_next_check(0.0)
    assert s._next_check == 11
    # a resumed run keeps the schedule
    run = BCFW(model, 1.0, max_iter=6, check_every="auto", random_state=0).fit(data)
    meta, arrays = run.state_dict()
    again = BCFW(model, 1.0, max_iter=1, check_every="auto", random_state=0)
    again.load_state(data, meta, arrays)
    assert again._next_check == run._next_check
    checked = [r.passes for r in run.history if not np.isnan(r.primal)]
    assert checked[0] == 1 and checked[-1] == 6


def test_estimator_and_cli_accept_auto_checks():
    rng = np.random.default_rng(3)
    X, Y = random_chain_problem(rng, n=20, K=3, d=4, max_len=5, sparse=False)
    svm = StructuredSVM(
        max_iter=3, check_every="auto", random_state=0, solver_options={"primal_sample": 5}
    ).fit(X, Y)
    assert svm.n_iter_ == 3
    assert all(r.extra["sample_size"] == 5 for r in svm.history_)
    with pytest.raises(ValueError, match="'auto'"):
        StructuredSVM(check_every="sometimes").fit(X, Y)
    assert _check_every("auto") == "auto" and _check_every("7") == 7
    for bad in ("0", "often"):
        with pytest.raises(argparse.ArgumentTypeError):
            _check_every(bad)
