"""Graph CRFs: inference against brute force (trees exact, the LP's bound above the maximum
and equal where certified), the kernel against the joint feature map, and the block solvers
agreeing on the optimum."""

import itertools
import math

import numpy as np
import pytest

from dualstruct.inference.graph import (
    enumerate_map,
    forest_map,
    is_forest,
    labelling_score,
    lp_map,
)
from dualstruct.models import base
from dualstruct.models.graph import EdgeFeatureGraphCRF, GraphCRF, grid_edges
from dualstruct.solvers import CuttingPlane, primal_objective
from dualstruct.solvers.block import BlockBCFW, BlockSSG


def _brute(theta, edges, pot):
    n, K = theta.shape
    return max(
        labelling_score(theta, edges, pot, np.array(x))
        for x in itertools.product(range(K), repeat=n)
    )


def _random_tree(rng, n):
    return np.array([(int(rng.integers(0, v)), v) for v in range(1, n)], dtype=np.int64)


def _potentials(rng, n, E, K):
    return rng.normal(size=(n, K)), rng.normal(size=(E, K, K))


@pytest.mark.parametrize("seed", range(6))
def test_forest_map_is_exact(seed):
    rng = np.random.default_rng(seed)
    n, K = 7, 3
    edges = _random_tree(rng, n)
    if seed % 2:  # a forest: drop an edge
        edges = edges[1:]
    theta, pot = _potentials(rng, n, len(edges), K)
    x = np.empty(n, dtype=np.int64)
    v = forest_map(theta, edges, pot, x)
    assert is_forest(n, edges)
    assert v == pytest.approx(_brute(theta, edges, pot))
    assert labelling_score(theta, edges, pot, x) == pytest.approx(v)


@pytest.mark.parametrize("seed", range(6))
def test_lp_bounds_the_maximum(seed):
    rng = np.random.default_rng(seed)
    edges, _ = grid_edges(2, 3, directions=True)
    n, K = 6, 3
    assert not is_forest(n, edges)
    theta, pot = _potentials(rng, n, len(edges), K)
    x = np.empty(n, dtype=np.int64)
    exact = enumerate_map(theta, edges, pot, x)
    assert exact == pytest.approx(_brute(theta, edges, pot))
    value, bound = lp_map(theta, edges, pot, x, 500, 1e-12)
    assert bound >= exact - 1e-9 and value <= exact + 1e-9
    assert labelling_score(theta, edges, pot, x) == pytest.approx(value)
    if bound - value <= 1e-9:  # certified: the decoded labelling is a maximizer
        assert value == pytest.approx(exact)


def test_lp_is_tight_on_trees():
    rng = np.random.default_rng(9)
    edges = _random_tree(rng, 8)
    theta, pot = _potentials(rng, 8, 7, 3)
    x = np.empty(8, dtype=np.int64)
    value, bound = lp_map(theta, edges, pot, x, 1000, 1e-12)
    assert bound == pytest.approx(value, abs=1e-8)
    assert value == pytest.approx(_brute(theta, edges, pot))


def test_grid_edges():
    e = grid_edges(2, 3)
    assert len(e) == 2 * 2 + 1 * 3
    e8, f8 = grid_edges(3, 3, connectivity=8, directions=True)
    assert len(e8) == 6 + 6 + 4 + 4 and f8.shape == (20, 4) and np.all(f8.sum(1) == 1)
    with pytest.raises(ValueError, match="connectivity"):
        grid_edges(2, 2, connectivity=6)


def _graphs(seed, n_graphs=8, K=3, d=4, edge_features=False):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for g in range(n_graphs):
        h, w = (2, 2) if g % 2 else (1, 4)  # loopy squares and chains
        edges, z = grid_edges(h, w, directions=True)
        nodes = rng.normal(size=(h * w, d))
        y = rng.integers(0, K, h * w)
        nodes[np.arange(h * w), y % d] += 1.0
        X.append((nodes, edges, z) if edge_features else (nodes, edges))
        Y.append(y)
    return X, Y


@pytest.mark.parametrize("edge_features", [False, True])
@pytest.mark.parametrize("inference", ["auto", "lp"])
def test_graph_hinge_matches_brute_force(edge_features, inference):
    X, Y = _graphs(1, edge_features=edge_features)
    model = (
        EdgeFeatureGraphCRF(3, 4, 2, inference=inference)
        if edge_features
        else GraphCRF(3, 4, inference=inference)
    )
    data = model.block_data(X, Y)
    w = np.random.default_rng(2).normal(size=model.size)
    hinge, _ = model.hinge(w, data)
    for i, (x, y) in enumerate(zip(X, Y)):
        n = len(y)
        values = [
            model.loss(y, yy) + w @ model.joint_feature(x, np.array(yy))
            for yy in itertools.product(range(3), repeat=n)
        ]
        exact = max(values) - w @ model.joint_feature(x, y)
        if inference == "lp":
            assert hinge[i] >= exact - 1e-9  # the LP's bound
        else:
            assert hinge[i] == pytest.approx(exact)


def test_graph_kernel_difference_matches_joint_features():
    from numba import njit

    @njit
    def run(k, i, ya, yb, w):
        base.add_difference(k, i, ya, yb, 1.0, w)
        return base.difference_sq_norm(k, i, base.workspace(k), ya, yb)

    for model, edge_features in (
        (GraphCRF(3, 4), False),
        (GraphCRF(3, 4, directed=True), False),
        (EdgeFeatureGraphCRF(3, 4, 2), True),
    ):
        X, Y = _graphs(3, edge_features=edge_features)
        data = model.block_data(X, Y)
        rng = np.random.default_rng(4)
        for i, x in enumerate(X):
            ya = rng.integers(0, 3, len(Y[i])).astype(np.int32)
            yb = rng.integers(0, 3, len(Y[i])).astype(np.int32)
            w = np.zeros(model.size)
            sq = run(data.kernel, i, ya, yb, w)
            diff = model.joint_feature(x, ya) - model.joint_feature(x, yb)
            np.testing.assert_allclose(w, diff, atol=1e-12)
            assert sq == pytest.approx(diff @ diff, abs=1e-10)


def test_block_solvers_agree_on_a_graph_crf():
    X, Y = _graphs(5, edge_features=True)
    model = EdgeFeatureGraphCRF(3, 4, 2, inference="exact")
    data = model.block_data(X, Y)
    primals = {}
    for solver in (BlockBCFW, CuttingPlane, BlockSSG):
        s = solver(
            model,
            C=1.0,
            max_iter=3000 if solver is BlockSSG else 1000,
            tol=1e-7,
            check_every=10,
            random_state=0,
        ).fit(data)
        primals[solver.name] = primal_objective(model, data, s.weights(), 1.0)
        if solver is not BlockSSG:
            assert s.history.stop_reason == "tol"
            gaps = [r.relative_gap for r in s.history if not math.isnan(r.relative_gap)]
            assert gaps[-1] <= 1e-7
    best = min(primals.values())
    assert primals["bcfw"] == pytest.approx(best, rel=1e-5)
    assert primals["cutting_plane"] == pytest.approx(best, rel=1e-5)
    assert primals["ssg"] == pytest.approx(best, rel=1e-3)


def test_graph_input_errors():
    model = GraphCRF(3, 4)
    nodes = np.zeros((3, 4))
    with pytest.raises(ValueError, match=r"X\[0\] must be \(node_features, edges\)"):
        model.block_data([nodes], [np.zeros(3, int)])
    with pytest.raises(ValueError, match=r"edges must name nodes 0 … 2"):
        model.block_data([(nodes, [[0, 3]])], [np.zeros(3, int)])
    with pytest.raises(ValueError, match="joins a node to itself"):
        model.block_data([(nodes, [[1, 1]])], [np.zeros(3, int)])
    with pytest.raises(ValueError, match=r"Y\[0\] must hold 3 labels"):
        model.block_data([(nodes, [[0, 1]])], [np.zeros(2, int)])
    big = np.zeros((9, 4))
    with pytest.raises(ValueError, match="exact inference refuses"):
        GraphCRF(3, 4, inference="exact").block_data([(big, grid_edges(3, 3))], [np.zeros(9, int)])


@pytest.fixture(scope="module")
def snakes(data_dir):
    from dualstruct.datasets import fetch_snakes

    return fetch_snakes("train", data_dir), fetch_snakes("test", data_dir)


@pytest.mark.realdata
def test_snakes_loader(snakes, tmp_path):
    from dualstruct.datasets import load_snakes

    (images, maps), (test_images, test_maps) = snakes
    assert len(images) == 200 and len(test_images) == 100
    assert sum(m.size for m in maps) == 7566 and sum(m.size for m in test_maps) == 3750
    assert all(im.shape[:2] == m.shape for im, m in zip(images, maps))
    assert {int(v) for m in maps for v in np.unique(m)} == set(range(11))
    bad = tmp_path / "snakes.npz"
    bad.write_text("not an archive")
    with pytest.raises(ValueError, match="snakes.npz: not a readable .npz"):
        load_snakes(bad)
    np.savez(bad, shapes_train=np.array([[2, 2]]), X_train=np.zeros((3, 3)), Y_train=np.zeros(3))
    with pytest.raises(ValueError, match=r"X_train must be \(4, 3\)"):
        load_snakes(bad)


@pytest.mark.realdata
def test_snakes_needs_and_learns_edge_features(snakes):
    """With colour-and-direction edge features BCFW labels the test pixels (nearly) all
    right within 10 passes; with one table per direction it cannot."""
    import dualstruct
    from dualstruct.datasets.snakes import snakes_graphs

    (images, maps), (test_images, test_maps) = snakes
    Y, Y_test = [m.ravel() for m in maps], [m.ravel() for m in test_maps]
    scores = {}
    for setting in ("colours", "direction"):
        graphs = snakes_graphs(images + test_images, edge_features=setting)
        X, X_test = graphs[:200], graphs[200:]
        model = EdgeFeatureGraphCRF(11, X[0][0].shape[1], X[0][2].shape[1], directed=True)
        svm = dualstruct.SSVM(model, C=10.0, max_iter=10, check_every=10, random_state=0)
        scores[setting] = svm.fit(X, Y).score(X_test, Y_test)
    assert scores["colours"] >= 0.98
    assert scores["direction"] < 0.95


# -- sparse node weights (a support) ----------------------------------------------------------
def _sparse_graphs(seed, K=3, d=6):
    """Graphs whose node features are mostly zero, so that the observed support is small."""
    X, Y = _graphs(seed, n_graphs=10, K=K, d=d, edge_features=True)
    rng = np.random.default_rng(seed)
    out = []
    for (nodes, e, z), y in zip(X, Y):  # feature a and a + K speak for state a, mostly
        keep = np.zeros(nodes.shape, dtype=bool)
        keep[np.arange(len(y)), y] = True
        keep[np.arange(len(y)), y + K] = rng.random(len(y)) < 0.5
        keep[np.arange(len(y)), rng.integers(0, d, len(y))] |= rng.random(len(y)) < 0.2
        out.append((nodes * keep, e, z))
    return out, Y


def test_sparse_graph_kernel_and_hinge_match_brute_force():
    from numba import njit

    from dualstruct.models.graph import observed_support

    @njit
    def run(k, i, ya, yb, w):
        base.add_difference(k, i, ya, yb, 1.0, w)
        return base.difference_sq_norm(k, i, base.workspace(k), ya, yb)

    X, Y = _sparse_graphs(6)
    support = observed_support(X, Y, 3, full_rows_from=1.0)
    assert len(support[1]) < 3 * 6
    for inference in ("auto", "lp"):
        model = EdgeFeatureGraphCRF(3, 6, 2, inference=inference, support=support)
        assert model.size == len(support[1]) + 2 * 9
        data = model.block_data(X, Y)
        rng = np.random.default_rng(7)
        w = rng.normal(size=model.size)
        hinge, _ = model.hinge(w, data)
        for i, (x, y) in enumerate(zip(X, Y)):
            values = [
                model.loss(y, yy) + w @ model.joint_feature(x, np.array(yy))
                for yy in itertools.product(range(3), repeat=len(y))
            ]
            exact = max(values) - w @ model.joint_feature(x, y)
            if inference == "lp":
                assert hinge[i] >= exact - 1e-9
            else:
                assert hinge[i] == pytest.approx(exact, abs=1e-9)
            ya = rng.integers(0, 3, len(y)).astype(np.int32)
            yb = rng.integers(0, 3, len(y)).astype(np.int32)
            w2 = np.zeros(model.size)
            sq = run(data.kernel, i, ya, yb, w2)
            diff = model.joint_feature(x, ya) - model.joint_feature(x, yb)
            np.testing.assert_allclose(w2, diff, atol=1e-12)
            assert sq == pytest.approx(diff @ diff, abs=1e-10)


def test_full_support_graph_crf_is_the_dense_model():
    X, Y = _sparse_graphs(8)
    full = (np.arange(7, dtype=np.int64) * 3, np.tile(np.arange(3, dtype=np.int32), 6))
    dense = EdgeFeatureGraphCRF(3, 6, 2, inference="exact")
    sparse = EdgeFeatureGraphCRF(3, 6, 2, inference="exact", support=full)
    kw = dict(C=1.0, max_iter=5, tol=0.0, check_every=5, random_state=0)
    a = BlockBCFW(dense, **kw).fit(dense.block_data(X, Y))
    b = BlockBCFW(sparse, **kw).fit(sparse.block_data(X, Y))
    np.testing.assert_allclose(b.weights(), a.weights(), rtol=0, atol=1e-12)


def test_sparse_graph_crf_solvers_agree_and_save(tmp_path):
    from dualstruct import SSVM, load
    from dualstruct.models.graph import observed_support

    X, Y = _sparse_graphs(9)
    model = EdgeFeatureGraphCRF(
        3, 6, 2, inference="exact", support=observed_support(X, Y, 3, full_rows_from=1.0)
    )
    data = model.block_data(X, Y)
    bc = BlockBCFW(model, C=1.0, max_iter=2000, tol=1e-8, check_every=10, random_state=0).fit(data)
    cp = CuttingPlane(model, C=1.0, max_iter=2000, tol=1e-8, random_state=0).fit(data)
    assert bc.history.last_checked().primal == pytest.approx(
        cp.history.last_checked().primal, rel=1e-6
    )
    est = SSVM(model, max_iter=50, random_state=0).fit(X, Y)
    est.save(tmp_path / "g.npz")
    back = load(tmp_path / "g.npz")
    np.testing.assert_array_equal(back.model_.support[1], model.support[1])
    for p, q in zip(back.predict(X), est.predict(X)):
        np.testing.assert_array_equal(p, q)
    W_U, _ = back.model_.unpack(back.coef_)
    assert W_U.shape == (6, 3) and W_U.nnz <= len(model.support[1])
    with pytest.raises(ValueError, match="states in 0"):
        observed_support(X, [y + 5 for y in Y], 3)
