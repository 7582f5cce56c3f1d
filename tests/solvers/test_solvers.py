import math

import numpy as np
import pytest
from brute import brute_primal
from conftest import random_chain_problem

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, SSG, primal_objective
from dualstruct.solvers.objective import (
    dual_objective,
    duality_gap,
    lambda_form,
    scaled_dual,
)


def _problem(seed, n=8, K=3, d=4, sparse=False, start_end=True):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=K, d=d, max_len=5, sparse=sparse)
    return X, Y, pack_sequences(X, Y), ChainModel(K, d, start_end=start_end)


def _gaps(history):
    return np.array([r.gap for r in history if not math.isnan(r.gap)])


def test_primal_objective_matches_brute_force():
    X, Y, data, model = _problem(0)
    w = np.random.default_rng(1).normal(size=model.size)
    assert primal_objective(model, data, w, 0.7) == pytest.approx(
        brute_primal(model, w, X, Y, 0.7), rel=1e-12
    )


def test_objective_helpers():
    w = np.array([3.0, 4.0])
    assert dual_objective(w, 20.0) == 7.5
    assert duality_gap(10.0, 7.5) == (2.5, 0.25)
    assert lambda_form(10.0, 2.0, 5) == 1.0


def test_scaled_dual_is_the_best_point_toward_the_gold_labelling():
    """``scaled_dual(L, ‖w‖²) = max_{s ∈ [0, 1]} s L − ½ s² ‖w‖²``, never below D(q)."""
    s = np.linspace(0.0, 1.0, 100_001)
    for loss, sq in [
        (20.0, 25.0),
        (20.0, 100.0),
        (20.0, 10.0),
        (0.0, 3.0),
        (5.0, 0.0),
        (347.2, 366.7),
    ]:
        best = float(np.max(s * loss - 0.5 * s * s * sq))
        assert scaled_dual(loss, sq) == pytest.approx(best, abs=1e-6)
        assert scaled_dual(loss, sq) >= loss - 0.5 * sq


@pytest.mark.parametrize("start_end", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_pairwise_bcfw_gap_goes_to_zero(C, sparse, start_end):
    _, _, data, model = _problem(int(C * 10) + sparse, sparse=sparse, start_end=start_end)
    solver = BCFW(model, C, max_iter=20000, tol=1e-6, check_every=10, random_state=0)
    solver.fit(data)
    gaps = _gaps(solver.history)
    primal = solver.history.last.primal
    assert np.all(gaps >= -1e-9 * abs(primal))
    assert solver.history.stop_reason == "tol"
    assert solver.history.last.relative_gap <= 1e-6
    # the dual state is a convex combination of labellings
    assert np.allclose(solver.atom_weights.sum(axis=1), 1.0)
    assert np.all(solver.atom_weights >= 0)


@pytest.mark.parametrize("proximal", [0, "auto"])
def test_fw_bcfw_gap_positive_and_decreasing(proximal):
    _, _, data, model = _problem(3)
    solver = BCFW(
        model, 1.0, step="fw", max_iter=3000, tol=0, check_every=20, random_state=0,
        proximal=proximal,
    ).fit(data)  # fmt: skip
    gaps = _gaps(solver.history)
    assert np.all(gaps >= -1e-9 * solver.history.last.primal)
    assert gaps[-1] < 0.05 * gaps[0]
    assert solver.history.last.relative_gap < 2e-3
    # the blocks' shares add up to w and the loss term
    assert np.allclose(solver.block_weights.sum(axis=0), solver.w)
    assert solver.scalars[0] == pytest.approx(solver.block_losses.sum(), rel=1e-10)


def _weights_from_atoms(solver, model, data):
    """w(q) = C Σ_i (φ(ȳ_i) − Σ_a α_a φ(y^a)) recomputed from the atoms with joint_feature."""
    w = np.zeros(model.size)
    A = solver.capacity
    for i in range(data.n_sequences):
        x, gold = data.sequence(i)
        T = len(gold)
        w += solver.C * model.joint_feature(x, gold)
        s0 = data.offsets[i]
        for a in range(solver.atom_count[i]):
            y = solver.atom_labels[s0 * A + a * T : s0 * A + (a + 1) * T]
            w -= solver.C * solver.atom_weights[i, a] * model.joint_feature(x, y)
    return w


def test_pairwise_state_reproduces_weights_and_dual():
    _, Y, data, model = _problem(5)
    solver = BCFW(model, 1.0, max_iter=50, check_every=50, averaging=False, random_state=0).fit(
        data
    )
    assert np.allclose(_weights_from_atoms(solver, model, data), solver.w, atol=1e-10)
    A = solver.capacity
    loss = 0.0
    for i in range(data.n_sequences):
        gold = Y[i]
        T = len(gold)
        s0 = data.offsets[i]
        for a in range(solver.atom_count[i]):
            y = solver.atom_labels[s0 * A + a * T : s0 * A + (a + 1) * T]
            loss += solver.C * solver.atom_weights[i, a] * model.loss(gold, y)
    assert loss == pytest.approx(solver.scalars[0], abs=1e-10)


def test_all_solvers_reach_the_same_primal():
    _, _, data, model = _problem(11, n=10)
    C = 1.0
    pw = BCFW(model, C, max_iter=20000, tol=1e-7, check_every=20, random_state=0).fit(data)
    fw = BCFW(model, C, step="fw", max_iter=20000, tol=1e-4, check_every=50, random_state=1).fit(
        data
    )
    ssg = SSG(model, C, max_iter=20000, check_every=20000, random_state=2).fit(data)
    p_opt = pw.history.last.primal
    assert fw.history.last.primal == pytest.approx(p_opt, rel=1e-3)
    assert ssg.history.last.primal == pytest.approx(p_opt, rel=1e-3)
    # no solver's primal goes below the certified optimum
    for s in (fw, ssg):
        assert s.history.last.primal >= p_opt * (1 - 1e-6)


@pytest.mark.parametrize("averaging", [True, False])
def test_ssg_decreases_primal(averaging):
    _, _, data, model = _problem(2)
    s = SSG(model, 1.0, max_iter=2000, check_every=100, averaging=averaging, random_state=0).fit(
        data
    )
    p = [r.primal for r in s.history if not math.isnan(r.primal)]
    assert p[-1] < p[0]
    assert all(math.isnan(r.dual) for r in s.history)


@pytest.mark.parametrize("cls", [BCFW, SSG])
def test_same_seed_same_model(cls):
    _, _, data, model = _problem(4)
    a = cls(model, 1.0, max_iter=30, random_state=3).fit(data)
    b = cls(model, 1.0, max_iter=30, random_state=3).fit(data)
    assert np.array_equal(a.weights(), b.weights())


def test_continue_training_and_callback_stop():
    _, _, data, model = _problem(6)
    seen = []
    s = BCFW(
        model,
        1.0,
        max_iter=10,
        check_every=2,
        random_state=0,
        callback=lambda r: seen.append(r.passes) or r.passes >= 4,
    )
    s.fit(data)
    assert s.passes == 4 and s.history.stop_reason == "callback"
    s.callback = None
    s.fit(data, max_iter=3)
    assert s.passes == 7 and len(s.history) == 7


def test_keyboard_interrupt_keeps_model():
    _, _, data, model = _problem(6)

    def interrupt(record):
        if record.passes == 3:
            raise KeyboardInterrupt

    s = BCFW(model, 1.0, max_iter=100, check_every=1, random_state=0, callback=interrupt)
    s.fit(data)
    assert s.history.stop_reason == "interrupted" and s.passes == 3
    assert np.any(s.weights() != 0)


def test_solver_argument_errors():
    model = ChainModel(2, 2)
    with pytest.raises(ValueError, match="C must be positive"):
        BCFW(model, 0.0)
    with pytest.raises(ValueError, match="step"):
        BCFW(model, 1.0, step="away")
    with pytest.raises(ValueError, match="check_every"):
        SSG(model, 1.0, check_every=0)


def test_fw_step_with_zero_features_still_converges():
    # no intercept, no start/end, all-zero features: only transitions carry signal, and a
    # corner can have ‖w_i − w_s‖ = 0 with a positive gap (the step must then be γ = 1)
    rng = np.random.default_rng(0)
    X = [np.zeros((1, 2)) for _ in range(6)]
    Y = [rng.integers(0, 3, size=1) for _ in range(6)]
    data = pack_sequences(X, Y)
    model = ChainModel(3, 2, start_end=False)
    for step in ("fw", "pairwise"):
        s = BCFW(model, 1.0, step=step, max_iter=20, tol=1e-9, check_every=1, random_state=0).fit(
            data
        )
        assert s.history.last.gap == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("start_end", [True, False])
@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_cutting_plane_reaches_the_bcfw_optimum(C, start_end):
    from dualstruct.solvers import CuttingPlane

    _, _, data, model = _problem(int(C * 7) + start_end, n=10, start_end=start_end)
    bcfw = BCFW(model, C, max_iter=20000, tol=1e-8, check_every=20, random_state=0).fit(data)
    cp = CuttingPlane(model, C, max_iter=3000, tol=1e-6).fit(data)
    assert cp.history.stop_reason == "tol"
    gaps = _gaps(cp.history)
    assert np.all(gaps >= -1e-9 * cp.history.last.primal)
    assert cp.history.last.primal == pytest.approx(bcfw.history.last.primal, rel=1e-5)
    # the dual bound never exceeds the certified optimum, the reported primal never below it
    assert cp.history.last.dual <= bcfw.history.last.primal * (1 + 1e-8)
    assert cp.weights() @ cp.weights() > 0


def test_simplex_qp_matches_a_reference_solution():
    from scipy.optimize import minimize

    from dualstruct.solvers.cutting_plane import simplex_qp

    rng = np.random.default_rng(0)
    A = rng.normal(size=(6, 4))
    G = A @ A.T
    b = rng.normal(size=6)
    alpha = np.full(6, 2.0 / 6)
    simplex_qp(G, b, alpha, 2.0, 1e-12, 100_000)

    def f(a):
        return 0.5 * a @ G @ a - b @ a

    ref = minimize(
        f,
        np.full(6, 2.0 / 6),
        jac=lambda a: G @ a - b,
        method="SLSQP",
        bounds=[(0, None)] * 6,
        constraints=[{"type": "eq", "fun": lambda a: a.sum() - 2.0}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert alpha.sum() == pytest.approx(2.0) and np.all(alpha >= 0)
    assert f(alpha) <= ref.fun + 1e-9


def test_cutting_plane_estimator_and_checkpoint(tmp_path):
    import dualstruct
    from dualstruct import StructuredSVM

    X, Y, _, _ = _problem(8, n=12)
    full = StructuredSVM(solver="cutting_plane", max_iter=15, tol=0).fit(X, Y)
    part = StructuredSVM(solver="cutting_plane", max_iter=6, tol=0).fit(X, Y)
    resumed = dualstruct.load(part.save(tmp_path / "cp.npz", include_solver_state=True))
    resumed.set_params(warm_start=True, max_iter=9)
    resumed.fit(X, Y)
    assert np.allclose(resumed.coef_, full.coef_)


@pytest.mark.parametrize("start_end", [True, False])
@pytest.mark.parametrize("C", [0.3, 1.0])
def test_all_solvers_reach_the_same_slack_optimum(C, start_end):
    from dualstruct.solvers import CuttingPlane

    _, _, data, model = _problem(20 + int(C) + start_end, n=10, start_end=start_end)
    bc = BCFW(
        model, C, rescaling="slack", max_iter=20000, tol=1e-7, check_every=20, random_state=0
    ).fit(data)
    cp = CuttingPlane(model, C, rescaling="slack", max_iter=3000, tol=1e-7).fit(data)
    ssg = SSG(model, C, rescaling="slack", max_iter=30000, check_every=30000, random_state=0).fit(
        data
    )
    assert bc.history.stop_reason == "tol" and cp.history.stop_reason == "tol"
    p = bc.history.last.primal
    assert cp.history.last.primal == pytest.approx(p, rel=1e-5)
    assert ssg.history.last.primal == pytest.approx(p, rel=1e-3)
    assert np.all(_gaps(bc.history) >= -1e-9 * p)
    # the classic step, on loss-weighted corners, approaches it too (sublinearly: a 0.3–0.8%
    # gap after 2,000 passes where the pairwise step certified 1e-7)
    fw = BCFW(
        model,
        C,
        step="fw",
        rescaling="slack",
        max_iter=2000,
        tol=0,
        check_every=500,
        random_state=0,
    ).fit(data)
    assert fw.history.last.relative_gap < 1e-2
    assert fw.history.last.primal == pytest.approx(p, rel=5e-3)
    assert np.all(_gaps(fw.history) >= -1e-9 * p)
    # the slack optimum differs from the margin one
    margin = BCFW(model, C, max_iter=20000, tol=1e-7, check_every=20, random_state=0).fit(data)
    assert abs(margin.history.last.primal - p) > 1e-4 * p


def test_slack_atoms_reproduce_weights():
    _, Y, data, model = _problem(31)
    s = BCFW(
        model, 1.0, rescaling="slack", max_iter=40, check_every=40, averaging=False, random_state=0
    ).fit(data)
    w = np.zeros(model.size)
    A = s.capacity
    for i in range(data.n_sequences):
        x, gold = data.sequence(i)
        T = len(gold)
        s0 = data.offsets[i]
        for a in range(s.atom_count[i]):
            y = s.atom_labels[s0 * A + a * T : s0 * A + (a + 1) * T]
            g = model.loss(gold, y)
            w += (
                s.C
                * s.atom_weights[i, a]
                * g
                * (model.joint_feature(x, gold) - model.joint_feature(x, y))
            )
    assert np.allclose(w, s.w, atol=1e-10)


def test_slack_rescaling_errors():
    model = ChainModel(2, 2, loss_weights=[1.0, 3.0])
    with pytest.raises(ValueError, match="unit Hamming loss"):
        BCFW(model, 1.0, rescaling="slack")
    with pytest.raises(ValueError, match="rescaling must be"):
        SSG(ChainModel(2, 2), 1.0, rescaling="both")
    with pytest.raises(ValueError, match="step must be"):
        BCFW(ChainModel(2, 2), 1.0, rescaling="slack", step="classic")


@pytest.mark.parametrize("search", ["angular", "bisecting", "binary"])
def test_slack_searches_as_training_oracles(search):
    from dualstruct.solvers import CuttingPlane

    _, _, data, model = _problem(41, n=10)
    exact = BCFW(
        model, 1.0, rescaling="slack", max_iter=20000, tol=1e-7, check_every=20, random_state=0
    ).fit(data)
    p = exact.history.last.primal
    bc = BCFW(
        model,
        1.0,
        rescaling="slack",
        slack_search=search,
        max_iter=3000,
        tol=1e-7,
        check_every=20,
        random_state=0,
    ).fit(data)
    cp = CuttingPlane(
        model, 1.0, rescaling="slack", slack_search=search, max_iter=1000, tol=1e-7
    ).fit(data)
    for s in (bc, cp):
        # the reported primal is exact, so it can never undercut the optimum
        assert s.history.last.primal >= p * (1 - 1e-7)
        assert s.oracle_calls > 0
    if search == "angular":  # exact search: the same optimum
        assert bc.history.last.primal == pytest.approx(p, rel=1e-5)
        assert cp.history.last.primal == pytest.approx(p, rel=1e-5)
    else:
        assert bc.history.last.primal == pytest.approx(p, rel=0.05)


@pytest.fixture(autouse=True)
def _python_sigint_handler():
    """Python's own SIGINT handler during each test, whatever an earlier test of the process
    (a test runner's worker runs many files) left installed: the interruption tests send
    SIGINT to their own process."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _sigint_during_pass(solver, at_pass, times=1, signame="SIGINT"):
    """Make ``solver`` receive ``times`` SIGINTs (or ``signame``) in the middle of pass
    ``at_pass``."""
    import os
    import signal

    parts = solver._pass_parts  # the kernel calls of a pass: the signals come between two

    def wrapped(order, chunks):
        if solver.passes + 1 != at_pass:
            yield from parts(order, chunks)
            return
        half = len(order) // 2
        yield from parts(order[:half], 1)
        for _ in range(times):
            os.kill(os.getpid(), getattr(signal, signame))
        yield from parts(order[half:], 1)

    solver._pass_parts = wrapped


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT"), reason="needs SIGINT")
@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_ctrl_c_stops_on_a_pass_boundary_and_resumes_exactly(signame):
    """A first Ctrl-C, or a SIGTERM (how schedulers stop jobs), ends training after the
    pass in progress, and the run resumes exactly."""
    import signal

    _, _, data, model = _problem(7)
    full = BCFW(model, 1.0, max_iter=9, check_every=4, random_state=0)
    full.fit(data)
    s = BCFW(model, 1.0, max_iter=9, check_every=4, random_state=0)
    before = signal.getsignal(signal.SIGTERM)
    _sigint_during_pass(s, at_pass=3, signame=signame)
    s.fit(data)
    # the pass in progress is finished and checked, so the last record is the returned model
    assert s.history.stop_reason == "interrupted" and s.passes == 3
    assert not math.isnan(s.history.last.primal) and s.history.last.passes == 3
    assert signal.getsignal(signal.SIGTERM) is before  # the handlers are put back
    del s._pass_parts
    s.fit(data, max_iter=6)
    assert s.passes == 9
    np.testing.assert_array_equal(s.weights(), full.weights())


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT"), reason="needs SIGINT")
@pytest.mark.parametrize("seed, tol", [(3, 0.02), (4, 0.05)])
def test_resume_after_ctrl_c_stops_where_an_uninterrupted_run_does(seed, tol):
    """The check forced by the interrupt does not shift the schedule of the later checks
    (which candidates they evaluate), so the tol stop comes at the same pass."""
    _, _, data, model = _problem(seed)
    full = BCFW(model, 1.0, max_iter=500, tol=tol, check_every=2, random_state=seed)
    full.fit(data)
    s = BCFW(model, 1.0, max_iter=500, tol=tol, check_every=2, random_state=seed)
    _sigint_during_pass(s, at_pass=3)
    s.fit(data)
    assert s.passes == 3
    del s._pass_parts
    s.fit(data, max_iter=497)
    assert full.history.stop_reason == s.history.stop_reason == "tol"
    assert s.passes == full.passes
    np.testing.assert_array_equal(s.weights(), full.weights())


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT"), reason="needs SIGINT")
def test_a_second_ctrl_c_during_the_final_check_still_records_the_pass():
    import os
    import signal

    _, _, data, model = _problem(10)
    s = BCFW(model, 1.0, max_iter=20, check_every=5, random_state=0)
    _sigint_during_pass(s, at_pass=3)
    record = s._record

    def record_interrupted(check, final=False):
        if final:
            os.kill(os.getpid(), signal.SIGINT)
        return record(check, final)

    s._record = record_interrupted
    s.fit(data)
    assert s.passes == 3 and [r.passes for r in s.history] == [1, 2, 3]


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT"), reason="needs SIGINT")
def test_second_ctrl_c_stops_at_once_and_keeps_a_valid_model():
    import signal

    _, _, data, model = _problem(8)
    s = BCFW(model, 1.0, max_iter=9, check_every=4, random_state=0)
    _sigint_during_pass(s, at_pass=3, times=2)
    before = signal.getsignal(signal.SIGINT)  # Python's, or one a library installed (Spark)
    s.fit(data)
    assert s.history.stop_reason == "interrupted" and s.passes == 2
    # the dual state still matches w: its dual is a lower bound on any primal
    assert s.dual() <= primal_objective(model, data, s.weights(), 1.0) + 1e-9
    assert signal.getsignal(signal.SIGINT) is before


def test_a_stop_between_checks_checks_the_returned_model():
    _, _, data, model = _problem(9)
    seen = []
    s = BCFW(
        model,
        1.0,
        max_iter=50,
        tol=0,
        check_every=10,
        random_state=0,
        callback=lambda r: seen.append(r.passes) or r.passes == 7,
    )
    s.fit(data)
    last = s.history.last
    assert s.history.stop_reason == "callback" and last.passes == 7 and len(s.history) == 7
    assert last.primal == pytest.approx(primal_objective(model, data, s.weights(), 1.0))
    # the callback also sees the pass on which tol stops training
    seen.clear()
    t = BCFW(
        model,
        1.0,
        max_iter=5000,
        tol=0.05,
        check_every=1,
        random_state=0,
        callback=lambda r: seen.append(r.passes) and False,
    )
    t.fit(data)
    assert t.history.stop_reason == "tol" and seen[-1] == t.passes


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"max_constraints": 0}, "max_constraints"),
        ({"prune_after": -1}, "prune_after"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"qp_tol": 0.0}, "qp_tol"),
    ],
)
def test_cutting_plane_option_errors(kwargs, match):
    from dualstruct.solvers import CuttingPlane

    with pytest.raises(ValueError, match=match):
        CuttingPlane(ChainModel(2, 2), 1.0, **kwargs)


@pytest.mark.skipif(not hasattr(__import__("signal"), "SIGINT"), reason="needs SIGINT")
def test_a_scheduled_check_cut_short_is_redone_and_the_run_resumes_exactly():
    import os
    import signal

    _, _, data, model = _problem(0)
    full = BCFW(model, 1.0, max_iter=500, tol=0.03, check_every=3, random_state=0)
    full.fit(data)
    s = BCFW(model, 1.0, max_iter=500, tol=0.03, check_every=3, random_state=0)
    _sigint_during_pass(s, at_pass=12)
    primal = s._primal

    def second_ctrl_c(w):
        if s.passes == 12:
            os.kill(os.getpid(), signal.SIGINT)
        return primal(w)

    s._primal = second_ctrl_c
    s.fit(data)
    assert s.passes == 12 and s._pending_check
    s._primal = primal
    del s._pass_parts
    s.fit(data, max_iter=488)
    assert s.passes == full.passes and s.history.stop_reason == "tol"
    np.testing.assert_array_equal(s.weights(), full.weights())
    assert [r.passes for r in s.history] == list(range(1, s.passes + 1))


def test_a_fit_without_passes_keeps_the_returned_model():
    _, _, data, model = _problem(5)
    s = BCFW(model, 1.0, max_iter=7, tol=0, check_every=3, random_state=0, proximal=0)
    s.fit(data)
    assert s._final_choice != s._chosen  # the final check chose the other candidate
    w = s.weights()
    s.fit(data, max_iter=0)
    np.testing.assert_array_equal(s.weights(), w)
    meta, arrays = s.state_dict()
    back = BCFW(model, 1.0, random_state=0, proximal=0)
    back.load_state(data, meta, arrays)
    np.testing.assert_array_equal(back.weights(), w)
