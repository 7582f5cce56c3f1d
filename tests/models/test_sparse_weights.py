"""Sparse feature–label weights of the chain model: a weight only for the (feature, label)
pairs of a support. With the full support the model is the dense one (same optimum); with a
smaller one every oracle is checked against brute force over the restricted φ."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from dualstruct.models import ChainModel
from dualstruct.models.chain import observed_support
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, SSG, CuttingPlane


def _data(seed=0, n=12, K=3, d=8, density=0.2):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(1, 5))
        x = rng.normal(size=(T, d)) * (rng.random((T, d)) < density)
        X.append(sp.csr_matrix(x))
        y.append(rng.integers(0, K, T).astype(np.int32))
    return pack_sequences(X, y)


def _full_support(d, K):
    return np.arange(d + 1, dtype=np.int64) * K, np.tile(np.arange(K, dtype=np.int32), d)


def test_observed_support_lists_the_pairs_met_in_training():
    data = _data(1)
    indptr, labels = observed_support(data, 3, full_rows_from=1.0)
    X = data.X.toarray()
    met = {(f, int(data.labels[t])) for t in range(X.shape[0]) for f in np.flatnonzero(X[t])}
    got = {(f, int(a)) for f in range(X.shape[1]) for a in labels[indptr[f] : indptr[f + 1]]}
    assert got == met
    assert len(labels) < 3 * X.shape[1]  # not every pair is met
    counts = {}
    for t in range(X.shape[0]):
        for f in np.flatnonzero(X[t]):
            counts[f, int(data.labels[t])] = counts.get((f, int(data.labels[t])), 0) + 1
    indptr, labels = observed_support(data, 3, min_count=2, full_rows_from=1.0)
    got = {(f, int(a)) for f in range(X.shape[1]) for a in labels[indptr[f] : indptr[f + 1]]}
    assert got == {pair for pair, c in counts.items() if c >= 2}
    # a feature that met 2 of the 3 labels gets all 3 (a contiguous row)
    indptr2, labels2 = observed_support(data, 3, full_rows_from=0.6)
    per_feature = np.diff(observed_support(data, 3, full_rows_from=1.0)[0])
    assert np.array_equal(np.diff(indptr2), np.where(per_feature >= 2, 3, per_feature))


@pytest.mark.parametrize("solver", [BCFW, SSG, CuttingPlane])
def test_full_support_is_the_dense_model(solver):
    data = _data(2)
    K, d = 3, data.n_features
    dense = ChainModel(K, d)
    full = ChainModel(K, d, support=_full_support(d, K))
    assert full.size == dense.size
    kw = dict(max_iter=3000 if solver is SSG else 2000, tol=1e-10, check_every=50, random_state=0)
    a = solver(dense, 1.0, **kw).fit(data)
    b = solver(full, 1.0, **kw).fit(data)
    assert b.history.last.primal == pytest.approx(a.history.last.primal, rel=1e-9)
    np.testing.assert_allclose(b.weights(), a.weights(), atol=1e-9)


def test_sparse_oracles_match_brute_force():
    data = _data(4, n=8, K=3, d=6, density=0.25)
    K, d = 3, data.n_features
    support = observed_support(data, K, full_rows_from=1.0)  # full rows and lists
    assert 0 < np.sum(np.diff(support[0]) == K) < data.n_features
    model = ChainModel(K, d, support=support)
    w = np.random.default_rng(4).normal(size=model.size)
    hinge, yhat = model.hinge(w, data)
    slack, _ = model.slack_hinge(w, data)
    pred = model.predict(w, data)
    for i in range(data.n_sequences):
        s0, s1 = data.offsets[i], data.offsets[i + 1]
        x, gold = data.X[s0:s1], data.labels[s0:s1]
        gold_score = w @ model.joint_feature(x, gold)
        best = best_slack = -np.inf
        best_plain = -np.inf
        for y in itertools.product(range(K), repeat=s1 - s0):
            y = np.array(y)
            score = w @ model.joint_feature(x, y)
            loss = model.loss(gold, y)
            best = max(best, loss + score - gold_score)
            best_slack = max(best_slack, loss * (1 + score - gold_score))
            best_plain = max(best_plain, score)
        assert hinge[i] == pytest.approx(best, abs=1e-9)
        assert slack[i] == pytest.approx(best_slack, abs=1e-9)
        assert w @ model.joint_feature(x, pred[s0:s1]) == pytest.approx(best_plain, abs=1e-9)
        assert (
            w @ model.joint_feature(x, yhat[s0:s1]) + model.loss(gold, yhat[s0:s1]) - gold_score
        ) == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("rescaling", ["margin", "slack"])
def test_sparse_solvers_agree_and_keep_w_in_step(rescaling):
    data = _data(5, n=10)
    K, d = 3, data.n_features
    model = ChainModel(K, d, support=observed_support(data, K, full_rows_from=0.6))
    assert model.size < ChainModel(K, d).size
    kw = dict(rescaling=rescaling, random_state=0)
    cp = CuttingPlane(model, 1.0, max_iter=3000, tol=1e-8, **kw).fit(data)
    bc = BCFW(model, 1.0, max_iter=5000, tol=1e-7, check_every=20, **kw).fit(data)
    fw = BCFW(model, 1.0, step="fw", max_iter=20, check_every=20, averaging=False, **kw).fit(data)
    assert bc.history.last.primal == pytest.approx(cp.history.last.primal, rel=1e-5)
    assert min(r.gap for r in bc.history.records if r.gap == r.gap) >= -1e-9
    # w equals the blocks' shares, each C Σ (φ(ȳ) − φ(y)) over the restricted φ
    np.testing.assert_allclose(fw.block_weights.sum(axis=0), fw.w, atol=1e-10)
    if rescaling == "margin":
        C = 1.0
        w = np.zeros(model.size)
        for i in range(data.n_sequences):
            s0, s1 = data.offsets[i], data.offsets[i + 1]
            T = s1 - s0
            base = s0 * bc.capacity
            for a in range(bc.atom_count[i]):
                y = bc.atom_labels[base + a * T : base + (a + 1) * T]
                x = data.X[s0:s1]
                w += (
                    C
                    * bc.atom_weights[i, a]
                    * (model.joint_feature(x, data.labels[s0:s1]) - model.joint_feature(x, y))
                )
        np.testing.assert_allclose(w, bc.w, atol=1e-8)


def test_support_errors():
    with pytest.raises(ValueError, match="increasing"):
        ChainModel(3, 2, support=(np.array([0, 2, 3]), np.array([1, 0, 2])))
    with pytest.raises(ValueError, match="0..2"):
        ChainModel(3, 2, support=(np.array([0, 1, 2]), np.array([1, 3])))
    with pytest.raises(ValueError, match="3 entries"):
        ChainModel(3, 2, support=(np.array([0, 2]), np.array([1, 2])))


def test_gdmm_full_support_takes_the_dense_steps():
    """GDMM on the full support walks the dense model's path (same weights after every
    pass)."""
    from dualstruct.solvers import GDMM

    data = _data(7, n=20, K=4)
    K, d = 4, data.n_features
    kw = dict(max_iter=15, tol=0.0, check_every=5, random_state=3)
    dense = GDMM(ChainModel(K, d), 1.0, **kw).fit(data)
    full = GDMM(ChainModel(K, d, support=_full_support(d, K)), 1.0, **kw).fit(data)
    np.testing.assert_allclose(full.w, dense.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(full.weights(), dense.weights(), rtol=0, atol=1e-12)


def test_gdmm_reaches_the_sparse_models_optimum():
    """On a restricted support GDMM and BCFW minimize the same (restricted) objective."""
    from dualstruct.solvers import GDMM

    data = _data(8, n=10, K=5)
    model = ChainModel(5, data.n_features, support=observed_support(data, 5, full_rows_from=1.0))
    assert len(model.support[1]) < 5 * data.n_features
    bcfw = BCFW(model, 1.0, max_iter=3000, tol=1e-8, check_every=50, random_state=0).fit(data)
    gdmm = GDMM(model, 1.0, max_iter=3000, tol=1e-4, check_every=25, random_state=0).fit(data)
    p_b = bcfw.history.last_checked().primal
    p_g = gdmm.history.last_checked().primal
    assert gdmm.history.last_checked().relative_gap <= 1e-4
    assert p_g == pytest.approx(p_b, rel=2e-4)


def test_estimator_weights_choice_and_model_file(tmp_path, monkeypatch):
    import dualstruct
    from dualstruct import weight_support

    rng = np.random.default_rng(7)
    names = np.array(list("ABCDEF"))
    codes = [rng.integers(0, 6, 4) for _ in range(15)]
    X = []
    for c in codes:  # features j and j + 6 belong to label j (plus some noise on j)
        x = np.zeros((4, 12))
        x[np.arange(4), c] = 1.0 + rng.random(4)
        x[np.arange(4), c + 6] = 1.0
        X.append(sp.csr_matrix(x))
    y = [names[c] for c in codes]
    dense = dualstruct.StructuredSVM(max_iter=20, random_state=0).fit(X, y)
    assert dense.model_.support is None  # auto: a small matrix stays dense
    sparse = dualstruct.StructuredSVM(max_iter=20, random_state=0, weights="observed").fit(X, y)
    assert sparse.model_.support is not None and sparse.model_.size < dense.model_.size
    assert sparse.unigram_weights_.shape == dense.unigram_weights_.shape
    assert sp.issparse(sparse.unigram_weights_)  # the support's pairs only
    full = sparse.model_.unary_matrix(sparse.coef_).toarray()
    np.testing.assert_array_equal(sparse.intercept_, full[-1])
    np.testing.assert_array_equal(sparse.unigram_weights_.toarray(), full[:-1].T)
    # auto goes sparse once the dense matrix would be large (the limit lowered for the test)
    monkeypatch.setattr(weight_support, "AUTO_DENSE_MAX_BYTES", 0)
    auto = dualstruct.StructuredSVM(max_iter=20, random_state=0, verbose=1).fit(X, y)
    assert auto.model_.support is not None
    np.testing.assert_array_equal(auto.coef_, sparse.coef_)
    auto.save(tmp_path / "m.npz")
    back = dualstruct.load(tmp_path / "m.npz")
    assert back.model_.support is not None
    np.testing.assert_array_equal(back.model_.support[1], sparse.model_.support[1])
    assert [list(p) for p in back.predict(X)] == [list(p) for p in sparse.predict(X)]
    with pytest.raises(ValueError, match="weights must be one of"):
        dualstruct.StructuredSVM(weights="sparse").fit(X, y)


def test_memory_estimate_refuses_before_training(monkeypatch):
    import dualstruct
    from dualstruct.memory import check_memory, parse_bytes

    assert parse_bytes("512M") == 512 * 2**20 and parse_bytes("2.5G") == int(2.5 * 2**30)
    assert parse_bytes("1500") == 1500 and parse_bytes("3GiB") == 3 * 2**30
    with pytest.raises(ValueError, match="DUALSTRUCT_MEMORY_LIMIT"):
        parse_bytes("lots")
    data = _data(8)
    X = [data.X[data.offsets[i] : data.offsets[i + 1]] for i in range(data.n_sequences)]
    y = [data.labels[data.offsets[i] : data.offsets[i + 1]] for i in range(data.n_sequences)]
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "2K")
    est = dualstruct.StructuredSVM(max_iter=5)
    with pytest.raises(
        MemoryError,
        match=r"BlockBCFW on ChainModel would need about .* "
        r"DUALSTRUCT_MEMORY_LIMIT is 2.0 KiB.*observed",
    ):
        est.fit(X, y)
    assert not hasattr(est, "coef_")  # nothing was trained
    with pytest.raises(MemoryError, match="working set"):
        dualstruct.StructuredSVM(solver="cutting_plane", max_iter=5).fit(X, y)
    with pytest.raises(MemoryError, match="GDMM on ChainModel.*active sets"):
        dualstruct.StructuredSVM(solver="gdmm", max_iter=5).fit(X, y)
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "1G")
    dualstruct.StructuredSVM(max_iter=5).fit(X, y)
    assert check_memory("x", {"a": 10}) == 10
