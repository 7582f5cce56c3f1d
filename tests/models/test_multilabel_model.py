"""MultiLabelModel: layout, joint feature, exact prediction and hinge against brute force,
Chow–Liu edges against a direct mutual-information computation."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from dualstruct.models.multilabel import MultiLabelModel, chow_liu_edges


def _brute_map(model, w, x, gold=None):
    W = model.unpack(w)
    theta = x @ W.unary
    best, arg = -np.inf, None
    for y in itertools.product((0, 1), repeat=model.n_labels):
        y = np.array(y)
        if model.interactions == "table":
            s = theta @ y + sum(W.pairwise[e, y[i], y[k]] for e, (i, k) in enumerate(model.edges))
        else:
            s = theta @ y + sum(W.pairwise[e] * y[i] * y[k] for e, (i, k) in enumerate(model.edges))
        if gold is not None:
            s += model.loss(gold, y)
        if s > best:
            best, arg = s, y
    return best, arg


@pytest.mark.parametrize("interactions", ["11", "table"])
@pytest.mark.parametrize("edges", ["independent", "chain", "tree", "full"])
def test_predict_and_hinge_match_brute_force(edges, interactions):
    rng = np.random.default_rng(len(edges))
    L, d, n = 6, 4, 12
    X = rng.normal(size=(n, d))
    Y = rng.integers(0, 2, (n, L))
    model = MultiLabelModel(
        L, d, edges=edges, loss_weights=rng.uniform(0.5, 2, L), interactions=interactions
    ).fit_edges(Y)
    assert model.size == d * L + model.pair_size * len(model.edges)
    if edges == "tree":
        assert len(model.edges) == L - 1
    w = rng.normal(size=model.size)
    pred = model.predict(w, X)
    hinge, aug = model.hinge(w, X, Y)
    for i in range(n):
        best, _ = _brute_map(model, w, X[i])
        assert w @ model.joint_feature(X[i], pred[i]) == pytest.approx(best, abs=1e-9)
        best_aug, _ = _brute_map(model, w, X[i], Y[i])
        gold_score = w @ model.joint_feature(X[i], Y[i])
        assert hinge[i] == pytest.approx(best_aug - gold_score, abs=1e-9)
        assert w @ model.joint_feature(X[i], aug[i]) + model.loss(Y[i], aug[i]) == pytest.approx(
            best_aug, abs=1e-9
        )
        assert hinge[i] >= -1e-12


def test_chow_liu_matches_direct_mutual_information():
    rng = np.random.default_rng(0)
    n, L = 300, 7
    Y = rng.integers(0, 2, (n, L))
    Y[:, 3] = Y[:, 1] ^ (rng.random(n) < 0.1)  # strongly dependent pairs must be joined
    Y[:, 5] = Y[:, 3] ^ (rng.random(n) < 0.2)

    def mi(l, k):
        total = 0.0
        for a, b in itertools.product((0, 1), repeat=2):
            p = (np.sum((Y[:, l] == a) & (Y[:, k] == b)) + 1) / (n + 4)
            pa = (np.sum(Y[:, l] == a) + 2) / (n + 4)
            pb = (np.sum(Y[:, k] == b) + 2) / (n + 4)
            total += p * np.log(p / (pa * pb))
        return total

    edges = chow_liu_edges(Y)
    assert len(edges) == L - 1
    weight = sum(mi(i, k) for i, k in edges)
    # no spanning tree has more mutual information than the one found (scipy's MST as the
    # reference)
    import scipy.sparse.csgraph as cg

    M = np.array([[mi(i, k) if i != k else 0 for k in range(L)] for i in range(L)])
    cost = M.max() + 1 - M  # a minimum spanning tree of this is a maximum one of M
    np.fill_diagonal(cost, 0)  # no self-loops
    mst = cg.minimum_spanning_tree(sp.csr_matrix(cost))
    assert weight == pytest.approx(sum(M[i, k] for i, k in zip(*mst.nonzero())), rel=1e-9)
    assert {tuple(sorted(e)) for e in edges.tolist()} >= {(1, 3), (3, 5)}


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"edges": "star"}, "edges must be one of"),
        ({"edges": [[0, 0]]}, "to itself"),
        ({"edges": [[0, 1], [1, 0]]}, "repeated"),
        ({"edges": [[0, 9]]}, "must lie in"),
        ({"loss_weights": [1, -1, 1]}, "positive"),
    ],
)
def test_bad_model_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiLabelModel(3, 2, **kwargs)


def test_bad_labels_and_widths():
    model = MultiLabelModel(3, 2)
    w = model.init_weights()
    with pytest.raises(ValueError, match="only 0 and 1"):
        model.hinge(w, np.ones((1, 2)), [[0, 2, 1]])
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        model.hinge(w, np.ones((1, 2)), [[0, 1]])
    with pytest.raises(ValueError, match="features"):
        model.predict(w, np.ones((1, 5)))
    big = MultiLabelModel(17, 2, inference="exact")
    with pytest.raises(ValueError, match="inference='lp'"):
        big.predict(big.init_weights(), np.ones((1, 2)))
    with pytest.raises(ValueError, match="inference must be"):
        MultiLabelModel(3, 2, inference="ilp")


def test_multilabel_scores_against_direct_formulas():
    from dualstruct.metrics import multilabel_scores

    Y = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0], [0, 1, 1]])
    P = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 0], [1, 0, 1]])
    s = multilabel_scores(Y, P)
    assert s["hamming_loss"] == pytest.approx(3 / 12)
    assert s["subset_accuracy"] == pytest.approx(2 / 4)
    assert s["jaccard"] == pytest.approx((1 / 2 + 1 + 1 + 1 / 3) / 4)  # empty/empty = 1
    tp, fp, fn = 4, 1, 2
    assert s["micro_f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    per_label = [2 * 2 / (2 * 2 + 1 + 0), 2 * 1 / (2 * 1 + 0 + 1), 2 * 1 / (2 * 1 + 0 + 1)]
    assert s["macro_f1"] == pytest.approx(np.mean(per_label))
    with pytest.raises(ValueError, match="same shape"):
        multilabel_scores(Y, P[:, :2])
    with pytest.raises(ValueError, match="only 0 and 1"):
        multilabel_scores(Y, P * 2)
