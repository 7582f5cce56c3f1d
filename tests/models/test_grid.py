"""Grid CRFs: the graphs they build, training identical to the graph models they stand for,
exact inference on small grids against brute force, label images in and out."""

import itertools

import numpy as np
import pytest

import dualstruct
from dualstruct.models import (
    DirectionalGridCRF,
    EdgeFeatureGraphCRF,
    EdgeFeatureGridCRF,
    GraphCRF,
    GridCRF,
    grid_edges,
)


def _hand_edges(h, w, neighborhood):
    """Grid edges listed pixel by pixel: (edge, direction) pairs."""
    steps = [(0, 1), (1, 0)] + ([(1, 1), (1, -1)] if neighborhood == 8 else [])
    out = []
    for d, (dr, dc) in enumerate(steps):
        for r in range(h):
            for c in range(w):
                if 0 <= r + dr < h and 0 <= c + dc < w:
                    out.append((r * w + c, (r + dr) * w + c + dc, d))
    return out


def _data(rng, n=6, h=3, w=4, d=2):
    X = [rng.normal(size=(h, w, d)) for _ in range(n)]
    Y = [(x[:, :, 0] + 0.5 * x[:, :, 1] > 0).astype(int) for x in X]
    return X, Y


@pytest.mark.parametrize("neighborhood", [4, 8])
def test_edges_are_the_grid_graph(neighborhood):
    X, Y = _data(np.random.default_rng(0), n=1, h=3, w=4)
    hand = _hand_edges(3, 4, neighborhood)
    k = GridCRF(2, 2, neighborhood=neighborhood).block_data(X, Y).kernel
    assert k.edges.tolist() == [[u, v] for u, v, _ in hand]
    k = DirectionalGridCRF(2, 2, neighborhood=neighborhood).block_data(X, Y).kernel
    onehot = np.eye(neighborhood // 2)[[d for _, _, d in hand]]
    np.testing.assert_array_equal(k.edge_features, onehot)
    assert k.labels.tolist() == Y[0].ravel().tolist()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["grid", "directional", "edge_features"])
def test_training_equals_the_graph_model(kind):
    rng = np.random.default_rng(1)
    X, Y = _data(rng)
    nb = 8 if kind == "directional" else 4
    edges, directions = grid_edges(3, 4, nb, directions=True)
    if kind == "grid":
        grid, graph = GridCRF(2, 2), GraphCRF(2, 2)
        G = [(x.reshape(12, 2), edges) for x in X]
    elif kind == "directional":
        grid, graph = DirectionalGridCRF(2, 2, neighborhood=8), EdgeFeatureGraphCRF(2, 2, 4)
        G = [(x.reshape(12, 2), edges, directions) for x in X]
    else:
        Z = [rng.normal(size=(len(edges), 3)) for _ in X]
        grid, graph = EdgeFeatureGridCRF(2, 2, 3), EdgeFeatureGraphCRF(2, 2, 3)
        X = [(x, z) for x, z in zip(X, Z)]
        G = [(x.reshape(12, 2), edges, z) for (x, _), z in zip(X, Z)]
    kw = dict(C=1.0, max_iter=15, tol=0, random_state=0)
    a = dualstruct.SSVM(grid, **kw).fit(X, Y)
    b = dualstruct.SSVM(graph, **kw).fit(G, [y.ravel() for y in Y])
    np.testing.assert_array_equal(a.coef_, b.coef_)
    pred = a.predict(X)
    assert all(p.shape == (3, 4) for p in pred)
    assert [p.ravel().tolist() for p in pred] == [p.tolist() for p in b.predict(G)]
    assert a.score(X, Y) == b.score(G, [y.ravel() for y in Y])


@pytest.mark.parametrize("seed", range(4))
def test_inference_on_small_grids_is_exact(seed):
    rng = np.random.default_rng(seed)
    K = 3
    model = DirectionalGridCRF(K, 2, neighborhood=8, enumerate_up_to=0)  # branch and bound
    w = rng.normal(size=model.size) * 2
    x = rng.normal(size=(2, 3, 2))
    gold = rng.integers(0, K, size=(2, 3))
    best = best_aug = -np.inf
    for y in itertools.product(range(K), repeat=6):
        y = np.array(y).reshape(2, 3)
        s = float(w @ model.joint_feature(x, y))
        best = max(best, s)
        best_aug = max(best_aug, s + model.loss(gold, y))
    y_hat = model.inference(x, w)
    assert y_hat.shape == (2, 3)
    assert float(w @ model.joint_feature(x, y_hat)) == pytest.approx(best)
    y_aug = model.loss_augmented_inference(x, gold, w)
    assert y_aug.shape == (2, 3)
    value = float(w @ model.joint_feature(x, y_aug)) + model.loss(gold, y_aug)
    assert value == pytest.approx(best_aug)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_model_file_round_trip(tmp_path):
    X, Y = _data(np.random.default_rng(2))
    svm = dualstruct.SSVM(DirectionalGridCRF(2, 2, neighborhood=8), max_iter=5, random_state=0)
    svm.fit(X, Y)
    svm.save(tmp_path / "grid.npz")
    loaded = dualstruct.SSVM.load(tmp_path / "grid.npz")
    assert isinstance(loaded.model_, DirectionalGridCRF) and loaded.model_.neighborhood == 8
    for p, q in zip(svm.predict(X), loaded.predict(X)):
        np.testing.assert_array_equal(p, q)


@pytest.mark.parametrize(
    "make, x, y, match",
    [
        (lambda: GridCRF(2, 2), np.ones((12, 2)), np.zeros((3, 4)), "height, width, n_features"),
        (lambda: GridCRF(2, 2), np.ones((3, 4, 3)), np.zeros((3, 4)), "3 features per pixel"),
        (lambda: GridCRF(2, 2), np.ones((3, 4, 2)), np.zeros(12), r"Y\[0\] must be a 3 × 4"),
        (
            lambda: EdgeFeatureGridCRF(2, 2, 1),
            (np.ones((3, 4, 2)), np.ones((5, 1))),
            np.zeros((3, 4)),
            r"\(17, 1\) array",
        ),
        (lambda: EdgeFeatureGridCRF(2, 2, 1), np.ones((3, 4, 2)), None, "image, edge_features"),
    ],
)
def test_bad_inputs_are_refused(make, x, y, match):
    with pytest.raises(ValueError, match=match):
        make().block_data([x], None if y is None else [y])


def test_neighborhood_is_checked():
    with pytest.raises(ValueError, match="neighborhood must be 4 or 8"):
        GridCRF(2, 2, neighborhood=6)
