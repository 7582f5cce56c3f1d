"""The graph CRF's LP oracle at the local polytope's optimum (against HiGHS), branch and bound
against brute force, and the relaxed structural SVM certified on loopy graphs."""

import itertools
import math

import numpy as np
import pytest

from dualstruct.inference.graph import enumerate_map, labelling_score, mplp
from dualstruct.inference.graph_lp import (
    branch_and_bound,
    lp_optimum,
    point_value,
    project_simplex,
    repair_edge,
)
from dualstruct.models.graph import EdgeFeatureGraphCRF, GraphCRF, grid_edges


def _highs_lp(theta, edges, pot):
    """The local-polytope LP's optimum by scipy's HiGHS."""
    from scipy.optimize import linprog

    n, K = theta.shape
    E = len(edges)
    size = n * K + E * K * K
    rows, rhs = [], []
    for u in range(n):
        r = np.zeros(size)
        r[u * K : (u + 1) * K] = 1.0
        rows.append(r)
        rhs.append(1.0)
    for e, (u, v) in enumerate(edges):
        base = n * K + e * K * K
        for a in range(K):
            r = np.zeros(size)
            r[base + a * K : base + (a + 1) * K] = 1.0
            r[u * K + a] = -1.0
            rows.append(r)
            rhs.append(0.0)
            r = np.zeros(size)
            r[base + a : base + K * K : K] = 1.0
            r[v * K + a] = -1.0
            rows.append(r)
            rhs.append(0.0)
    c = -np.concatenate([theta.ravel(), pot.ravel()])
    res = linprog(c, A_eq=np.array(rows), b_eq=rhs, bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


def _loopy(seed):
    """A small loopy graph with frustrated potentials (MPLP often stops short of the LP)."""
    rng = np.random.default_rng(seed)
    h, w = [(2, 3), (3, 3), (2, 2), (2, 4)][seed % 4]
    K = [2, 3, 4][seed % 3]
    edges = grid_edges(h, w, connectivity=8 if seed % 5 == 0 else 4)
    theta = 0.2 * rng.normal(size=(h * w, K))
    pot = 3.0 * rng.normal(size=(len(edges), K, K))
    return theta, edges, pot


# seeds where MPLP from zero messages stalls above the LP's optimum (checked below)
STUCK = (5, 20, 25, 35)


@pytest.mark.parametrize("seed", list(range(12)) + list(STUCK))
@pytest.mark.parametrize("warm", [False, True])
def test_lp_optimum_equals_highs(seed, warm):
    theta, edges, pot = _loopy(seed)
    n, K = theta.shape
    E = len(edges)
    first, second = np.zeros((E, K)), np.zeros((E, K))
    x = np.empty(n, dtype=np.int64)
    if warm:  # from MPLP's messages, as the oracle does
        mplp(theta, edges, pot, first, second, np.empty((n, K)), x, 200, 1e-9, -np.inf)
    node_mu, edge_mu = np.empty((n, K)), np.empty((E, K, K))
    value, bound, _ = lp_optimum(
        theta, edges, pot, first, second, node_mu, edge_mu, x, 10**6, 1e-10
    )
    optimum = _highs_lp(theta, edges, pot)
    assert bound == pytest.approx(optimum, abs=1e-6)
    assert value == pytest.approx(optimum, abs=1e-6)
    assert value <= bound + 1e-12
    # the point is in the local polytope and has the value returned
    assert np.all(node_mu >= 0) and np.all(edge_mu >= 0)
    np.testing.assert_allclose(node_mu.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(edge_mu.sum(2), node_mu[edges[:, 0]], atol=1e-12)
    np.testing.assert_allclose(edge_mu.sum(1), node_mu[edges[:, 1]], atol=1e-12)
    assert point_value(theta, edges, pot, node_mu, edge_mu) == pytest.approx(value, abs=1e-12)


def test_mplp_alone_stalls_where_the_lp_optimum_is_needed():
    gaps = []
    for seed in STUCK:
        theta, edges, pot = _loopy(seed)
        n, K = theta.shape
        first, second = np.zeros((len(edges), K)), np.zeros((len(edges), K))
        x = np.empty(n, dtype=np.int64)
        _, bound, _ = mplp(
            theta, edges, pot, first, second, np.empty((n, K)), x, 1000, 1e-9, -np.inf
        )
        gaps.append(bound - _highs_lp(theta, edges, pot))
    assert sum(g > 1e-3 for g in gaps) >= 3


def test_simplex_projection_and_edge_repair():
    rng = np.random.default_rng(0)
    for _ in range(50):
        v = 3 * rng.normal(size=7)
        out = np.empty(7)
        project_simplex(v, out)
        assert out.min() >= 0 and out.sum() == pytest.approx(1.0)
        # optimality: no simplex vertex is closer along the projection's normal cone
        for j in range(7):
            e = np.zeros(7)
            e[j] = 1.0
            assert (v - out) @ (e - out) <= 1e-10
        K = 4
        pu, pv = rng.dirichlet(np.ones(K)), rng.dirichlet(np.ones(K))
        q = rng.dirichlet(np.ones(K * K)).reshape(K, K)
        fixed = np.empty((K, K))
        repair_edge(q, pu, pv, fixed)
        assert fixed.min() >= 0
        np.testing.assert_allclose(fixed.sum(1), pu, atol=1e-12)
        np.testing.assert_allclose(fixed.sum(0), pv, atol=1e-12)
    consistent = np.outer(pu, pv)
    repair_edge(consistent, pu, pv, fixed)
    np.testing.assert_allclose(fixed, consistent, atol=1e-14)


@pytest.mark.parametrize("seed", range(60))
def test_branch_and_bound_equals_brute_force(seed):
    theta, edges, pot = _loopy(seed)
    n, K = theta.shape
    x = np.empty(n, dtype=np.int64)
    exact = max(
        labelling_score(theta, edges, pot, np.array(y))
        for y in itertools.product(range(K), repeat=n)
    )
    assert enumerate_map(theta, edges, pot, x) == pytest.approx(exact)
    first, second = np.zeros((len(edges), K)), np.zeros((len(edges), K))
    value, bound, nodes = branch_and_bound(theta, edges, pot, first, second, x, 200, 1e-9, 10**4)
    assert value == pytest.approx(exact, abs=1e-9)
    assert labelling_score(theta, edges, pot, x) == pytest.approx(value)
    assert bound - value <= 1e-9 * max(1.0, abs(bound))  # certified within the budget


@pytest.mark.parametrize("seed", range(20))
def test_branch_and_bound_from_an_incumbent_equals_brute_force(seed):
    """A first labelling (any, or the maximizer itself) changes the search, not its answer;
    the maximizer as incumbent is certified at the root when the LP is tight there."""
    theta, edges, pot = _loopy(seed)
    n, K = theta.shape
    rng = np.random.default_rng(seed)
    best = np.empty(n, dtype=np.int64)
    exact = enumerate_map(theta, edges, pot, best)
    for start in (rng.integers(0, K, n), best.copy()):
        x = start.astype(np.int64)
        first, second = np.zeros((len(edges), K)), np.zeros((len(edges), K))
        s = labelling_score(theta, edges, pot, x)
        value, bound, nodes = branch_and_bound(
            theta, edges, pot, first, second, x, 200, 1e-9, 10**4, s
        )
        assert value == pytest.approx(exact, abs=1e-9) and value >= s
        assert labelling_score(theta, edges, pot, x) == pytest.approx(value)
        assert bound - value <= 1e-9 * max(1.0, abs(bound))


def test_branch_and_bound_out_of_budget_still_bounds():
    found = 0
    for seed in STUCK:
        theta, edges, pot = _loopy(seed)
        n, K = theta.shape
        x = np.empty(n, dtype=np.int64)
        exact = enumerate_map(theta, edges, pot, x)
        first, second = np.zeros((len(edges), K)), np.zeros((len(edges), K))
        value, bound, nodes = branch_and_bound(theta, edges, pot, first, second, x, 200, 1e-9, 2)
        assert nodes <= 2 and value <= exact + 1e-9 and bound >= exact - 1e-9
        found += bound - value > 1e-6
    assert found  # some search needed more than two nodes


def _graphs(seed, n_graphs=6, K=3, d=4):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n_graphs):
        edges, z = grid_edges(3, 3, connectivity=8, directions=True)
        nodes = rng.normal(size=(9, d))
        y = rng.integers(0, K, 9)
        nodes[np.arange(9), y % d] += 1.0
        X.append((nodes, edges, z))
        Y.append(y)
    return X, Y


def test_auto_hinge_is_exact_on_loopy_graphs():
    """ "auto" searches by branch and bound: its hinge is the exact one (enumeration)."""
    X, Y = _graphs(1)
    searched = EdgeFeatureGraphCRF(3, 4, 4, enumerate_up_to=0)
    enumerated = EdgeFeatureGraphCRF(3, 4, 4, inference_method="exact", enumerate_up_to=3**9)
    w = 2.0 * np.random.default_rng(2).normal(size=searched.size)
    data = searched.block_data(X, Y)
    h, _ = searched.hinge(w, data)
    h_exact, _ = enumerated.hinge(w, enumerated.block_data(X, Y))
    np.testing.assert_allclose(h, h_exact, atol=1e-8)
    calls, loose = data.kernel.lp_stats
    assert calls == len(X) and loose == 0


def test_relaxed_ssvm_is_certified_on_loopy_graphs():
    """With "lp" the oracle's point is the LP optimum: BCFW (classic step) closes the gap of
    the relaxed structural SVM, whose hinge lies between the exact one and MPLP's."""
    from dualstruct.solvers.block import BlockBCFW

    X, Y = _graphs(3)
    model = GraphCRF(3, 4, directed=True, inference_method="lp")
    assert model.fractional_oracle
    data = model.block_data([x[:2] for x in X], Y)
    s = BlockBCFW(model, C=0.1, max_iter=300, tol=1e-3, check_every=10, random_state=0).fit(data)
    assert s.resolved_step == "fw"
    gaps = [r.relative_gap for r in s.history if not math.isnan(r.relative_gap)]
    assert s.history.stop_reason == "tol" and 0 <= gaps[-1] <= 1e-3
    assert data.kernel.lp_stats[1] == 0  # every LP certified at its optimum
    exact = GraphCRF(3, 4, directed=True, inference_method="exact", enumerate_up_to=3**9)
    w = s.weights()
    relaxed_hinge, _ = model.hinge(w, data)
    exact_hinge, _ = exact.hinge(w, exact.block_data([x[:2] for x in X], Y))
    assert np.all(relaxed_hinge >= exact_hinge - 1e-8)


def test_search_options_are_checked():
    with pytest.raises(ValueError, match="bb_budget must be an integer >= 1"):
        GraphCRF(3, 4, bb_budget=0)
    with pytest.raises(ValueError, match="lp_iter must be an integer >= 0"):
        GraphCRF(3, 4, lp_iter=-1)
    assert GraphCRF(3, 4, bb_budget=5).params()["bb_budget"] == 5
