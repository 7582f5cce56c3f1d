import numpy as np
import pytest
from brute import brute_hinge, brute_scores
from conftest import random_chain_problem

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences


def _dense(x):
    return x.toarray() if hasattr(x, "toarray") else x


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("start_end", [True, False])
@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_viterbi_equals_brute_force(K, start_end, sparse):
    rng = np.random.default_rng(100 * K + 10 * start_end + sparse)
    d = 3
    X, Y = random_chain_problem(rng, n=12, K=K, d=d, max_len=5, sparse=sparse)
    model = ChainModel(K, d, start_end=start_end)
    w = rng.normal(size=model.size)
    data = pack_sequences(X, Y)
    pred = np.split(model.predict(w, data), data.offsets[1:-1])
    for x, p in zip(X, pred):
        rows = brute_scores(model, w, _dense(x))
        best = max(r[1] for r in rows)
        got = float(w @ model.joint_feature(x, p))
        assert got == pytest.approx(best, abs=1e-10)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_loss_augmented_viterbi_equals_brute_force(K, sparse):
    rng = np.random.default_rng(7 + K + 100 * sparse)
    d = 4
    X, Y = random_chain_problem(rng, n=12, K=K, d=d, max_len=5, sparse=sparse)
    lw = rng.uniform(0.5, 2.0, size=K)
    model = ChainModel(K, d, loss_weights=lw)
    w = rng.normal(size=model.size)
    data = pack_sequences(X, Y)
    hinge, argmax = model.hinge(w, data)
    argmax = np.split(argmax, data.offsets[1:-1])
    for i, (x, y) in enumerate(zip(X, Y)):
        ref = brute_hinge(model, w, _dense(x), y)
        assert hinge[i] == pytest.approx(max(ref, 0.0), abs=1e-10)
        aug = float(w @ model.joint_feature(x, argmax[i])) + model.loss(y, argmax[i])
        gold = float(w @ model.joint_feature(x, y))
        assert aug - gold == pytest.approx(ref, abs=1e-10)


def test_ties_are_deterministic():
    model = ChainModel(3, 2)
    w = np.zeros(model.size)
    data = pack_sequences([np.ones((4, 2))], [np.array([2, 1, 0, 1])])
    assert np.array_equal(model.predict(w, data), [0, 0, 0, 0])


def test_weight_layout_views_write_through():
    model = ChainModel(3, 5)
    w = model.init_weights()
    W = model.unpack(w)
    assert W.unigram.shape == (5, 3) and W.transition.shape == (3, 3)
    W.transition[1, 2] = 7.0
    W.end[0] = 2.0
    assert w[5 * 3 + 1 * 3 + 2] == 7.0 and w[-3] == 2.0
    assert model.size == 5 * 3 + 9 + 6
    with pytest.raises(ValueError, match="shape"):
        model.unpack(np.zeros(3))


@pytest.mark.parametrize("start_end", [True, False])
@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_exact_slack_oracle_equals_brute_force(K, start_end):
    rng = np.random.default_rng(50 + K + 10 * start_end)
    d = 3
    X, Y = random_chain_problem(rng, n=15, K=K, d=d, max_len=5, sparse=K % 2 == 0)
    model = ChainModel(K, d, start_end=start_end)
    data = pack_sequences(X, Y)
    for scale in (0.3, 1.0, 3.0):
        w = scale * rng.normal(size=model.size)
        hinge, argmax = model.slack_hinge(w, data)
        argmax = np.split(argmax, data.offsets[1:-1])
        for i, (x, y) in enumerate(zip(X, Y)):
            gold = float(w @ model.joint_feature(x, y))
            rows = brute_scores(model, w, _dense(x), y)
            ref = max(model.loss(y, r[0]) * (1 + r[1] - gold) for r in rows)
            assert hinge[i] == pytest.approx(max(ref, 0.0), abs=1e-9)
            got = model.loss(y, argmax[i]) * (
                1 + float(w @ model.joint_feature(x, argmax[i])) - gold
            )
            assert got == pytest.approx(max(ref, 0.0), abs=1e-9)


def test_slack_needs_unit_loss():
    model = ChainModel(2, 2, loss_weights=[1.0, 2.0])
    data = pack_sequences([np.ones((2, 2))], [np.array([0, 1])])
    with pytest.raises(ValueError, match="unit Hamming loss"):
        model.slack_hinge(model.init_weights(), data)


def _brute_phi(model, w, x, y):
    gold = float(w @ model.joint_feature(x, y))
    return max(model.loss(y, r[0]) * (1 + r[1] - gold) for r in brute_scores(model, w, x, y))


@pytest.mark.parametrize("K", [1, 2, 3, 4])
def test_slack_searches_against_brute_force(K):
    rng = np.random.default_rng(700 + K)
    d = 3
    X, Y = random_chain_problem(rng, n=40, K=K, d=d, max_len=5)
    model = ChainModel(K, d)
    data = pack_sequences(X, Y)
    misses = {"bisecting": 0, "binary": 0}
    for scale in (0.2, 1.0, 4.0):
        w = scale * rng.normal(size=model.size)
        ref = np.array([max(_brute_phi(model, w, _dense(x), y), 0.0) for x, y in zip(X, Y)])
        for search in ("exact", "angular", "bisecting", "binary"):
            phi, calls, labels = model.slack_search(w, data, search)
            labels = np.split(labels, data.offsets[1:-1])
            # the reported Φ is the Φ of the returned labelling, never above the maximum
            for i, (x, y) in enumerate(zip(X, Y)):
                gold = float(w @ model.joint_feature(x, y))
                got = model.loss(y, labels[i]) * (
                    1 + float(w @ model.joint_feature(x, labels[i])) - gold
                )
                assert phi[i] == pytest.approx(max(got, 0.0), abs=1e-9)
            assert np.all(phi <= ref + 1e-9)
            if search in ("exact", "angular"):
                assert phi == pytest.approx(ref, abs=1e-9)
                if search == "angular":
                    lengths = data.lengths
                    assert np.all(calls <= 2 * (lengths + 1) + 1)  # Theorem 2
            else:
                misses[search] += int(np.sum(phi < ref - 1e-9))
    # the λ-oracle searches are approximate but usually right on tiny chains
    assert misses["bisecting"] <= 0.5 * 3 * len(X)
    assert misses["binary"] <= 0.5 * 3 * len(X)


def test_warm_started_slack_searches():
    """Seeded by the exact maximizer (as a block's best cached labelling seeds it), every
    search returns the labelling whose Φ it reports, never above the maximum; λ₀ = h/g of
    the maximizer puts the λ-oracle on it, so bisecting and binary search find it, and the
    bisecting search needs fewer calls than from λ₀ = 1."""
    from dualstruct.inference.chain import unigram_scores
    from dualstruct.inference.slack_search import warm_lambda

    rng = np.random.default_rng(11)
    K, d = 4, 3
    X, Y = random_chain_problem(rng, n=60, K=K, d=d, max_len=6)
    model = ChainModel(K, d)
    data = pack_sequences(X, Y)
    w = 0.5 * rng.normal(size=model.size)
    exact, _, best = model.slack_search(w, data, "exact")
    for search in ("angular", "bisecting", "binary"):
        cold_phi, cold_calls, _ = model.slack_search(w, data, search)
        phi, calls, labels = model.slack_search(w, data, search, seeds=best)
        assert np.all(phi <= exact + 1e-9)
        assert np.mean(phi >= exact - 1e-9) >= np.mean(cold_phi >= exact - 1e-9)
        if search == "angular":
            assert phi == pytest.approx(exact, abs=1e-9)
        if search == "bisecting":
            assert calls.mean() < cold_calls.mean()
    # λ₀ of the maximizer is h/g; 1 for a seed without loss (the gold labelling)
    indptr, indices, values, offsets, U, B, start, end = model._kernel_inputs(w, data, True)
    i = int(np.argmax(exact))
    s0, T = offsets[i], offsets[i + 1] - offsets[i]
    scores = np.empty((T, K))
    unigram_scores(indptr, indices, values, s0, s0 + T, U, scores)
    gold = data.labels[s0 : s0 + T]
    seed = best[s0 : s0 + T]
    g = int(np.sum(seed != gold))
    h = exact[i] / g
    assert warm_lambda(scores, T, B, start, end, gold, 1.0, seed) == pytest.approx(h / g)
    assert warm_lambda(scores, T, B, start, end, gold, 1.0, gold.copy()) == 1.0
    with pytest.raises(ValueError, match="seeds"):
        model.slack_search(w, data, "binary", seeds=best[:-1])
