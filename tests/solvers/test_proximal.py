"""BCFW as an inexact proximal-point method: the iterate, the certificate's two parts, the
choice of κ, and plain BCFW at κ = 0."""

import numpy as np
import pytest
from conftest import random_chain_problem, tiny_chain_problem

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW
from dualstruct.solvers.block import PROXIMAL_START
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
    assert s.weights() == pytest.approx(x)  # the returned model is the proximal iterate


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
    x, u_avg = s.candidates()
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
