"""BCFW as an inexact proximal-point method: the iterate, the certificate's two parts, the
choice of κ, and plain BCFW at κ = 0."""

import numpy as np
import pytest
from conftest import random_chain_problem, tiny_chain_problem

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, _proximal
from dualstruct.solvers._proximal import PROXIMAL_PATIENCE, ProximalKappa
from dualstruct.solvers.block import MEAN_POWER, PROXIMAL_START
from dualstruct.solvers.objective import dual_objective


def _problem(seed=0, n=10, K=3, d=4):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=K, d=d, max_len=5)
    return pack_sequences(X, Y), ChainModel(K, d)


def _inner_dual(solver):
    """D_κ(α; z) = ℓ + min_w ½‖w‖² + (κ/2)‖w − z‖² − ⟨w, u⟩, attained at w = x."""
    u, x, z, k = solver.w, solver.prox_w, solver.prox_center, solver.kappa
    return solver.scalars[0] + 0.5 * x @ x + 0.5 * k * (x - z) @ (x - z) - x @ u


@pytest.mark.parametrize("step", ["pairwise", "fw"])
@pytest.mark.parametrize("rescaling", ["margin", "slack"])
def test_the_gap_is_the_inner_gap_plus_the_proximal_term(step, rescaling):
    """x = (u + κ z) / (1 + κ) holds through the passes, and P(x) − D(u) splits into the
    inner problem's duality gap and ½‖u − x‖²."""
    data, model = _problem()
    s = BCFW(
        model, 1.0, step=step, rescaling=rescaling, proximal=5.0, max_iter=7, tol=0, random_state=0
    )
    s.fit(data)
    u, x, z, k = s.w, s.prox_w, s.prox_center, s.kappa
    assert np.abs(x - (u + k * z) / (1 + k)).max() < 1e-12
    primal = s._primal(x)
    inner_primal = primal + 0.5 * k * (x - z) @ (x - z)
    inner_gap = inner_primal - _inner_dual(s)
    assert inner_gap >= -1e-9
    split = inner_gap + 0.5 * (u - x) @ (u - x)
    assert primal - s.current_dual() == pytest.approx(split, rel=1e-9)  # D(u)
    # the returned model is the candidate (x, ū or x̄) with the lowest primal at the last check
    primals = [s._primal(c) for c in s.candidates()]
    assert s.candidates()[0] is s.prox_w
    assert s.weights() == pytest.approx(s.candidates()[int(np.argmin(primals))])


def test_kappa_adapts_only_when_auto():
    data, model = _problem(1)
    auto = BCFW(model, 1.0, max_iter=40, tol=0, random_state=0).fit(data)
    assert 0 <= auto.kappa < PROXIMAL_START
    assert auto.history.last.extra["kappa"] == auto.kappa
    fixed = BCFW(model, 1.0, proximal=7.0, max_iter=40, tol=0, random_state=0).fit(data)
    assert fixed.kappa == 7.0


def test_proximal_zero_is_plain_bcfw_with_averaging():
    data, model = _problem(2)
    s = BCFW(model, 1.0, proximal=0, max_iter=9, tol=0, random_state=0).fit(data)
    assert not hasattr(s, "prox_w") and len(s.candidates()) == 2
    assert "prox_w" not in s.state_arrays


@pytest.mark.parametrize("C", [0.1, 10.0])
def test_proximal_bcfw_reaches_plain_bcfws_optimum(C):
    data, model = _problem(3)
    kw = dict(max_iter=20000, tol=1e-7, check_every=10, random_state=0)
    prox = BCFW(model, C, **kw).fit(data)
    plain = BCFW(model, C, proximal=0, **kw).fit(data)
    assert prox.history.stop_reason == plain.history.stop_reason == "tol"
    assert prox.history.last.primal == pytest.approx(plain.history.last.primal, rel=2e-7)
    assert prox.passes < plain.passes


def test_the_average_of_u_is_a_candidate_and_its_win_ends_the_scheme():
    """With averaging the candidates are x and ū, the weighted average of the dual
    iterates, a dual point too; once ū wins a check, "auto" sets κ = 0 for good."""
    data, model = _problem(6)
    s = BCFW(model, 1.0, max_iter=6, tol=0, check_every=3, random_state=0).fit(data)
    x, u_avg, _ = s.candidates()  # x, ū and x̄
    assert x is s.prox_w
    w_avg, loss_avg = s._averaged()
    assert np.array_equal(u_avg, w_avg)
    assert s.dual() >= max(dual_objective(w_avg, loss_avg), s.current_dual()) - 1e-12
    assert s.dual() < s._primal(u_avg)
    assert s.kappa > 0
    s._chosen = 1  # as if ū had won the last check
    s.fit(data, max_iter=1)
    assert s.kappa == 0.0
    s.fit(data, max_iter=200)
    assert s.kappa == 0.0 and s.history.last.relative_gap < 1e-3
    # without averaging x is the only candidate and κ keeps its own rule
    lone = BCFW(model, 1.0, averaging=False, max_iter=6, tol=0, random_state=0).fit(data)
    assert len(lone.candidates()) == 1
    lone._chosen = 1
    lone.fit(data, max_iter=1)
    assert lone.kappa > 0


def test_kappa_drops_to_zero_when_the_average_wins_a_check():
    """The classic step on a tiny chain: the average of u wins checks on its own; the pass
    after the first such check runs at κ = 0, and so do all later ones."""
    data, model = pack_sequences(*tiny_chain_problem()), ChainModel(3, 4)
    s = BCFW(model, 1.0, step="fw", max_iter=10, tol=0, check_every=10, random_state=0)
    for _ in range(30):
        s.fit(data)
        if s._chosen == 1:
            break
    assert s._chosen == 1 and s.kappa > 0  # ū won this check
    s.fit(data, max_iter=1)
    assert s.kappa == 0.0
    s.fit(data, max_iter=50)
    assert s.kappa == 0.0


def test_a_plain_checkpoint_resumes_proximally():
    """A state saved by plain BCFW (no proximal arrays, κ = 0) resumes with the proximal
    scheme started afresh, centred at the model that state returned."""
    data, model = _problem(4)
    plain = BCFW(model, 1.0, proximal=0, max_iter=5, tol=0, random_state=0).fit(data)
    meta, arrays = plain.state_dict()
    s = BCFW(model, 1.0, random_state=0)
    s.load_state(data, meta, arrays)
    assert s.kappa == PROXIMAL_START
    assert np.array_equal(s.weights(), plain.weights())
    s.fit(data, max_iter=200)
    assert s.history.last.relative_gap < 1e-3
    fixed = BCFW(model, 1.0, proximal=3.0, random_state=0)
    fixed.load_state(data, *s.state_dict())  # a proximal state: κ is the constructor's
    assert fixed.kappa == 3.0
    back = BCFW(model, 1.0, proximal=0, random_state=0)
    back.load_state(data, *s.state_dict())
    assert back.kappa == 0.0 and len(back.candidates()) == 2
    # plain BCFW's candidates are [ū, u]: it returns the average, which the state carries
    assert np.array_equal(back.weights(), s.candidates()[1])
    # a proximal state saved before u was averaged: the average restarts
    meta, arrays = s.state_dict()
    old = dict(meta, scalars={k: v for k, v in meta["scalars"].items() if k != "averages_u"})
    again = BCFW(model, 1.0, random_state=0)
    again.load_state(data, old, arrays)
    assert not again.R.any() and again.scalars[1] == 0 and again.scalars[2] == 0


def test_a_new_c_restarts_kappa():
    data, model = _problem(5)
    s = BCFW(model, 0.1, max_iter=60, tol=0, random_state=0).fit(data)
    assert s.kappa < PROXIMAL_START
    s.set_C(10.0)
    assert s.kappa == PROXIMAL_START and s.lowest_gaps == np.inf and s.stalled == 0
    assert np.isnan(s.block_gaps).all()  # the old C's gaps say nothing about the new one
    s.fit(data, max_iter=1)
    assert s.stalled == 0 and s.lowest_gaps == np.inf and s.kappa == PROXIMAL_START
    first = s.block_gaps.sum()
    s.fit(data, max_iter=1)  # κ is judged by the new C's gaps only
    assert s.lowest_gaps == first and s.stalled == 0
    s.tol = 1e-4
    s.fit(data, max_iter=3000)
    assert s.history.stop_reason == "tol"


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "yes", True, None])
def test_bad_proximal_is_refused(bad):
    with pytest.raises(ValueError, match="proximal"):
        BCFW(ChainModel(3, 4), 1.0, proximal=bad)


def _mean_weights(k):
    """x̄'s weights of its first k passes: the j-th weighs j (j + 1) … (j + η − 1)."""
    j = np.arange(1.0, k + 1)
    return np.prod([j + i for i in range(MEAN_POWER)], axis=0)


def test_the_mean_of_x_is_the_weighted_mean_of_the_pass_ends_since_kappa_changed():
    """x̄ averages the iterates x at the ends of the passes with weights j (j + 1) (η = 2),
    from the first pass after κ last changed; it is the third candidate."""
    data, model = _problem(7)
    ends, kappas = [], []

    def record(_):
        ends.append(s.prox_w.copy())
        kappas.append(s.kappa)

    s = BCFW(model, 1.0, proximal=5.0, max_iter=6, tol=0, random_state=0, callback=record)
    s.fit(data)
    assert MEAN_POWER == 2
    weights = _mean_weights(6)
    expected = weights @ np.array(ends) / weights.sum()
    assert s.mean_passes == 6  # every pass's x, taken in at the pass's end
    assert np.abs(s.candidates()[2] - expected).max() < 1e-12
    assert s.candidates()[2] is s.prox_mean  # in place: no copy of w per check
    ends.clear(), kappas.clear()
    s = BCFW(model, 1.0, max_iter=10, tol=0, random_state=0, callback=record)
    s.fit(data)
    since = max(i for i in range(10) if i == 0 or kappas[i] != kappas[i - 1])
    assert since > 0 and s.mean_passes == 10 - since  # κ changed: x̄ restarted
    weights = _mean_weights(10 - since)
    expected = weights @ np.array(ends[since:]) / weights.sum()
    assert np.abs(s.candidates()[2] - expected).max() < 1e-12


def test_the_mean_of_x_lowers_the_primal_at_a_large_c():
    """At C = 100 x's primal lies far above the optimum after 30 passes; x̄ is 3% lower,
    is returned and certifies a smaller gap."""
    rng = np.random.default_rng(1)
    X, Y = random_chain_problem(rng, n=30, K=4, d=6, max_len=8)
    data, model = pack_sequences(X, Y), ChainModel(4, 6)
    s = BCFW(model, 100.0, max_iter=30, tol=0, check_every=10, random_state=0).fit(data)
    x, _, x_mean = s.candidates()
    last = s.history.last
    assert last.primal == pytest.approx(s._primal(x_mean)) and s._primal(x_mean) < 0.98 * s._primal(
        x
    )
    assert np.array_equal(s.weights(), x_mean)
    assert last.relative_gap < (s._primal(x) - last.dual) / s._primal(x) - 0.02


def test_the_mean_of_x_is_saved_restarted_and_checked():
    data, model = _problem(8)
    ends = []
    s = BCFW(model, 1.0, proximal=5.0, max_iter=5, tol=0, random_state=0)
    s.callback = lambda _: ends.append(s.prox_w.copy())
    s.fit(data)
    meta, arrays = s.state_dict()
    back = BCFW(model, 1.0, proximal=5.0, random_state=0)
    back.load_state(data, meta, arrays)
    assert back.mean_passes == s.mean_passes > 0
    assert np.array_equal(back.prox_mean, s.prox_mean)
    assert np.array_equal(back.weights(), s.weights())
    s.fit(data, max_iter=3)
    back.fit(data, max_iter=3)
    assert np.array_equal(back.prox_mean, s.prox_mean) and back.mean_passes == s.mean_passes
    meta, arrays = s.state_dict()
    # a file saved when x̄ took in a pass's x at the start of the next pass: it does on load
    taken = _mean_weights(7)
    before = dict(arrays, prox_mean=taken @ np.array(ends[:7]) / taken.sum())
    scalars = {k: v for k, v in meta["scalars"].items() if k != "mean_at_pass_end"}
    moved = BCFW(model, 1.0, proximal=5.0, random_state=0)
    moved.load_state(data, dict(meta, scalars=dict(scalars, mean_passes=7)), before)
    assert moved.mean_passes == s.mean_passes == 8
    assert np.abs(moved.prox_mean - s.prox_mean).max() < 1e-12
    # a file saved before x̄ was kept: x̄ restarts at x
    older = BCFW(model, 1.0, proximal=5.0, random_state=0)
    old_meta = dict(meta, scalars={k: v for k, v in meta["scalars"].items() if k != "mean_passes"})
    older.load_state(data, old_meta, {k: v for k, v in arrays.items() if k != "prox_mean"})
    assert older.mean_passes == 1 and np.array_equal(older.candidates()[2], older.prox_w)
    bad = dict(meta, scalars=dict(meta["scalars"], mean_passes=s.passes + 1))
    with pytest.raises(ValueError, match="mean_passes"):
        BCFW(model, 1.0, proximal=5.0, random_state=0).load_state(data, bad, arrays)
    # resumed with another fixed κ: the file's iterates are not this κ's, x̄ restarts
    other = BCFW(model, 1.0, proximal=2.0, random_state=0)
    other.load_state(data, meta, arrays)
    assert other.kappa == 2.0 and other.mean_passes == 1  # the last pass's x, taken in
    assert np.array_equal(other.prox_mean, other.prox_w)
    s.set_C(3.0)  # a new problem: x̄ restarts
    assert s.mean_passes == 1 and np.array_equal(s.prox_mean, s.prox_w)


class _Rule(ProximalKappa):
    """κ's rule alone, with a floor of 2."""

    proximal, passes, averaging, _chosen = "auto", 0, False, 0

    def _kappa_floor(self):
        return 2.0


def test_the_kappa_rule_halves_on_the_term_or_the_patience_and_keeps_its_floor():
    rule = _Rule()
    rule._restart_proximal()
    assert rule.kappa == PROXIMAL_START and rule.stalled == 0
    assert rule._judge_kappa(term=2.0, gap=1.0)  # the term exceeds the gap: κ halves
    assert rule.kappa == PROXIMAL_START / 2 and rule.lowest_gaps == 1.0
    for _ in range(PROXIMAL_PATIENCE - 1):  # no new low, the term below the gap
        assert not rule._judge_kappa(term=0.0, gap=5.0, progress=1.0)
    assert rule._judge_kappa(term=0.0, gap=5.0, progress=1.0)  # patience runs out
    assert rule.kappa == PROXIMAL_START / 4 and rule.stalled == 0
    for _ in range(10):
        rule._judge_kappa(term=2.0, gap=1.0)
    assert rule.kappa == 2.0  # the floor
    rule.kappa = 1.5  # below the floor already: halving does not raise it
    rule._halve_kappa()
    assert rule.kappa == 1.5
    plain = ProximalKappa()
    plain.kappa = 1.5e-3
    plain._halve_kappa()
    assert plain.kappa == 0.0  # below PROXIMAL_MIN κ is 0


def test_the_proximal_point_and_distance_are_taken_slice_by_slice(monkeypatch):
    monkeypatch.setattr(_proximal, "SLICE", 3)
    rng = np.random.default_rng(0)
    u, z = rng.normal(size=10), rng.normal(size=10)
    assert _proximal.half_sq_distance(u, z) == pytest.approx(0.5 * (u - z) @ (u - z), rel=1e-14)
    out = np.empty(10)
    _proximal.proximal_point(u, z, 4.0, out)
    assert np.array_equal(out, (u + 4.0 * z) / 5.0)
    _proximal.proximal_point(u, z, 4.0, z)  # in place, out = z
    assert np.array_equal(z, out)
