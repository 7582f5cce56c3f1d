"""GDMM (over factors) on chains, the model it was first written for: BCFW's optimum across C,
label counts, start/end weights and shrinking; deterministic runs; the lazy average; penalty
schedules; bad parameters; the simplex projection the multi-label GDMM shares."""

import numpy as np
import pytest
from conftest import random_chain_problem

from dualstruct.datasets import make_chain
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, GDMM, FactorGDMM, solver_class
from dualstruct.solvers._gdmm_common import _schedule, value_at
from dualstruct.solvers._simplex import project_to_simplex


def _problem(seed, n=10, K=3, d=4, start_end=True):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=K, d=d, max_len=5, sparse=False)
    return pack_sequences(X, Y), ChainModel(K, d, start_end=start_end)


def _optimum(model, data, C):
    bcfw = BCFW(model, C, max_iter=20000, tol=1e-8, check_every=20, random_state=0).fit(data)
    return bcfw.history.last.primal


def test_gdmm_is_the_engine_for_chains():
    assert GDMM is FactorGDMM
    assert solver_class("gdmm", ChainModel) is FactorGDMM


@pytest.mark.parametrize("shrink_after", [0, 5])
@pytest.mark.parametrize(
    "seed, C, K, start_end", [(11, 1.0, 3, True), (12, 0.3, 3, False), (13, 1.0, 6, True)]
)
def test_gdmm_reaches_the_bcfw_optimum(seed, C, K, start_end, shrink_after):
    data, model = _problem(seed, K=K, start_end=start_end)
    p = _optimum(model, data, C)
    gdmm = GDMM(
        model, C, max_iter=1500, tol=1e-5, check_every=20, random_state=0, shrink_after=shrink_after
    ).fit(data)
    last = gdmm.history.last_checked()
    assert last.primal >= p * (1 - 1e-7) and last.dual <= p * (1 + 1e-7)
    if shrink_after:  # states cycling through the active sets lose their multipliers
        assert last.primal == pytest.approx(p, rel=1e-3)
        return
    assert gdmm.history.stop_reason == "tol"
    assert last.primal == pytest.approx(p, rel=1e-4)


@pytest.mark.parametrize("intercept", [False, True])
def test_runs_are_deterministic(intercept):
    import scipy.sparse as sp

    X, y = make_chain(40, 6, 60, 400, nnz_per_token=6, random_state=1)
    d = 400
    if intercept:  # a column of ones: every label on one feature
        X = [sp.hstack([sp.csr_matrix(x), np.ones((x.shape[0], 1))]).tocsr() for x in X]
        d += 1
    data = pack_sequences(X, y, d)
    model = ChainModel(60, d)
    runs = [GDMM(model, 1.0, max_iter=6, check_every=3, random_state=5).fit(data) for _ in range(2)]
    assert np.array_equal(runs[0].w, runs[1].w)
    assert [r.primal for r in runs[0].history] == [r.primal for r in runs[1].history]
    extra = runs[0].history.last.extra
    assert {"residual", "G", "augmented"} <= set(extra)


def test_lazy_average_is_the_weighted_average_of_the_iterates():
    """w̄_m = Σ_{j≤m} j w_j / A_m equals the average of the iterates after each pass, and a
    saved state resumes to the same average."""
    X, y = make_chain(20, 6, 30, 200, nnz_per_token=5, random_state=4)
    data = pack_sequences(X, y, 200)
    model = ChainModel(30, 200)
    g = GDMM(model, 1.0, max_iter=1, check_every=1, random_state=0)
    iterates = []
    for _ in range(7):
        g.fit(data)
        iterates.append(g.w.copy())
    weights = np.arange(1, 8)
    expected = weights @ np.array(iterates) / weights.sum()
    assert np.allclose(g.averaged_weights(), expected, rtol=1e-10, atol=1e-12)
    meta, arrays = g.state_dict()
    resumed = GDMM(model, 1.0, max_iter=1, random_state=0)
    resumed.load_state(g.data, meta, arrays)
    for solver in (g, resumed):
        solver.fit(data)
    assert np.allclose(resumed.averaged_weights(), g.averaged_weights(), atol=1e-9)


def test_sampled_primal_is_labelled_and_unbiased_at_full_size():
    data, model = _problem(3, n=12)
    g = GDMM(
        model, 1.0, max_iter=4, check_every=2, random_state=0, primal_sample=12, averaging=False
    ).fit(data)
    last = g.history.last
    assert last.extra["sample_size"] == 12
    assert last.extra["sampled_primal"] == pytest.approx(last.primal, rel=1e-12)
    small = GDMM(model, 1.0, max_iter=2, random_state=0, primal_sample=4).fit(data)
    assert small.history.last.extra["sample_size"] == 4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rho": 0}, "rho"),
        ({"eta": -1}, "eta"),
        ({"primal_sample": 0}, "primal_sample"),
        ({"rescaling": "slack"}, "margin"),
        ({"shrink_after": -1}, "shrink_after"),
        ({"steps": 0}, "steps"),
        ({"sweeps": 1.5}, "sweeps"),
        ({"lazy_edges": "yes"}, "lazy_edges"),
        ({"lazy_edges": True}, "null_state"),
        ({"rho": [(0, 1.0), (10, -1.0)]}, "rho"),
        ({"rho": [(10, 1.0), (5, 2.0)]}, "non-decreasing"),
        ({"eta": "fast"}, "eta"),
        ({"rho": []}, "no points"),
    ],
)
def test_bad_gdmm_parameters(kwargs, match):
    _, model = _problem(0)
    with pytest.raises(ValueError, match=match):
        GDMM(model, 1.0, **kwargs)


def test_schedules_interpolate_geometrically():
    points = _schedule("rho", [(0, 1.0), (100, 1.0), (300, 100.0)])
    assert [value_at(points, p) for p in (0, 50, 100, 200, 300, 1000)] == pytest.approx(
        [1.0, 1.0, 1.0, 10.0, 100.0, 100.0]
    )
    assert value_at(_schedule("rho", 3), 7) == 3.0
    assert value_at(_schedule("eta", [(10, 2.0)]), 0) == 2.0  # constant before the first point


def test_penalty_schedule_reaches_the_bcfw_optimum():
    data, model = _problem(13, K=6)
    p = _optimum(model, data, 1.0)
    gdmm = GDMM(
        model,
        1.0,
        max_iter=3000,
        tol=1e-5,
        check_every=20,
        random_state=0,
        rho=[(0, 0.3), (200, 3.0)],
        eta=0.1,
    ).fit(data)
    assert gdmm.history.last_checked().primal == pytest.approx(p, rel=1e-4)
    # the last value, in units of κ; the kernels get it times κ
    assert gdmm.rho_relative == 3.0 and gdmm.history.last.extra["rho"] == 3.0
    assert gdmm.rho == pytest.approx(3.0 * gdmm.penalty_scale, rel=1e-15)


def _reference_projection(v):
    """Projection onto the simplex by sorting every entry (Held, Wolfe, Crowder 1974)."""
    u = np.sort(v)[::-1]
    cum = np.cumsum(u)
    r = np.flatnonzero(u - (cum - 1.0) / np.arange(1, len(v) + 1) > 0)[-1]
    return np.maximum(v - (cum[r] - 1.0) / (r + 1), 0.0)


@pytest.mark.parametrize("scale", [0.01, 1.0, 30.0])
def test_simplex_projection_matches_the_full_sort(scale):
    # the kernel looks only at the entries above max(v) − 1 and finds the threshold by
    # fixed-point sweeps; the result must match the full sort
    rng = np.random.default_rng(int(scale * 100))
    for n in (1, 2, 3, 7, 50, 300):
        for _ in range(20):
            v = scale * rng.normal(size=n)
            if rng.random() < 0.3:
                v = np.round(v)  # ties
            out, scratch = np.empty(n), np.empty(n)
            project_to_simplex(v, n, out, scratch)
            assert out.sum() == pytest.approx(1.0) and out.min() >= 0.0
            assert np.allclose(out, _reference_projection(v), atol=1e-12)


def test_a_state_of_another_solver_is_refused_with_what_to_do():
    data, model = _problem(2)
    g = GDMM(model, 1.0, max_iter=2, random_state=0).fit(data)
    meta, arrays = g.state_dict()
    meta = dict(meta, solver="gdmm")  # e.g. a file of the multi-label model's own GDMM
    with pytest.raises(ValueError, match="of solver 'gdmm'.*without warm_start"):
        GDMM(model, 1.0).load_state(g.data, meta, arrays)
