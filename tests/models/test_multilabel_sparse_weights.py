"""Sparse feature–label weights of the multi-label model: with the full support it is the
dense model (same steps, same optimum); with a smaller one every oracle is checked against
brute force over the restricted φ, and every solver reaches the same optimum."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp

from dualstruct import MultiLabelSVM, load
from dualstruct.models import MultiLabelModel
from dualstruct.models.multilabel import MultiLabelDataset, observed_support
from dualstruct.solvers import BCFW, SSG, CuttingPlane, MultiLabelGDMM


def _data(seed=0, n=30, d=8, L=4, density=0.35):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    X[:, -1] = 1.0  # a constant feature: it meets every label that is ever on
    W = rng.normal(size=(d, L))
    Y = (X @ W + 0.3 * rng.normal(size=(n, L)) > 0).astype(np.int64)
    return MultiLabelDataset(sp.csr_matrix(X), Y)


def _full_support(d, L):
    return np.arange(d + 1, dtype=np.int64) * L, np.tile(np.arange(L, dtype=np.int32), d)


def test_observed_support_lists_the_pairs_met_with_the_label_on():
    data = _data(1)
    X, Y = data.X.toarray(), data.Y
    d, L = X.shape[1], Y.shape[1]
    counts = {}
    for i in range(X.shape[0]):
        for f in np.flatnonzero(X[i]):
            for l in np.flatnonzero(Y[i]):
                counts[f, l] = counts.get((f, l), 0) + 1
    for min_count in (1, 3):
        indptr, labels = observed_support(data, min_count, full_rows_from=1.0)
        got = {(f, int(a)) for f in range(d) for a in labels[indptr[f] : indptr[f + 1]]}
        assert got == {pair for pair, c in counts.items() if c >= min_count}
    indptr, _ = observed_support(data, 1, full_rows_from=0.5)
    per_feature = np.diff(observed_support(data, 1, full_rows_from=1.0)[0])
    assert np.array_equal(np.diff(indptr), np.where(per_feature >= 2, L, per_feature))


def _restricted(data, edges="full", inference="exact"):
    support = observed_support(data, full_rows_from=1.0)
    d, L = data.X.shape[1], data.Y.shape[1]
    assert len(support[1]) < d * L
    return MultiLabelModel(L, d, edges=edges, inference=inference, support=support)


@pytest.mark.parametrize("edges,inference", [("full", "exact"), ("chain", "exact"), ("full", "lp")])
def test_sparse_oracles_match_brute_force(edges, inference):
    data = _data(2, n=10)
    model = _restricted(data, edges, inference)
    L = data.Y.shape[1]
    w = np.random.default_rng(2).normal(size=model.size)
    hinge, _ = model.hinge(w, data)
    pred = model.predict(w, data.X)
    slack = model.slack_hinge(w, data)[0] if inference == "exact" else None
    blocks = model.block_data(data)
    k_hinge, _ = model.hinge(w, blocks)
    np.testing.assert_allclose(k_hinge, hinge, atol=1e-9)
    for i in range(data.X.shape[0]):
        x, gold = data.X[i], data.Y[i]
        gold_score = w @ model.joint_feature(x, gold)
        best = best_slack = best_plain = -np.inf
        for y in itertools.product((0, 1), repeat=L):
            y = np.array(y)
            score = w @ model.joint_feature(x, y)
            loss = model.loss(gold, y)
            best = max(best, loss + score - gold_score)
            best_slack = max(best_slack, loss * (1 + score - gold_score))
            best_plain = max(best_plain, score)
        if inference == "exact":
            assert hinge[i] == pytest.approx(best, abs=1e-9)
            assert slack[i] == pytest.approx(best_slack, abs=1e-9)
            assert w @ model.joint_feature(x, pred[i]) == pytest.approx(best_plain, abs=1e-9)
        else:  # the LP relaxation bounds the exact maximum
            assert hinge[i] >= best - 1e-9
    # scores and the cutting plane's aggregated constraint, through the support's rows
    U = model.unary_matrix(w).toarray()
    np.testing.assert_allclose(model.label_scores(w, data.X), data.X @ U, atol=1e-12)


@pytest.mark.parametrize("solver", [BCFW, SSG, CuttingPlane, MultiLabelGDMM])
def test_full_support_is_the_dense_model(solver):
    data = _data(3)
    d, L = data.X.shape[1], data.Y.shape[1]
    inference = "lp" if solver is MultiLabelGDMM else "exact"
    dense = MultiLabelModel(L, d, edges="full", inference=inference)
    full = MultiLabelModel(L, d, edges="full", inference=inference, support=_full_support(d, L))
    assert full.size == dense.size
    # the same steps (up to the order of floating-point sums) ...
    kw = dict(max_iter=5, tol=0.0, check_every=5, random_state=0)
    if solver is BCFW:  # atom steps pick among atoms of near-equal value: ties decide
        kw["atom_steps"] = 0
    a = solver(dense, 1.0, **kw).fit(data)
    b = solver(full, 1.0, **kw).fit(data)
    np.testing.assert_allclose(b.weights(), a.weights(), rtol=0, atol=1e-12)
    # ... and the same optimum
    kw = dict(max_iter=3000, tol=1e-9, check_every=50, random_state=0)
    if solver is MultiLabelGDMM:
        kw["tol"] = 1e-6
    if solver is SSG:  # no certificate: the same number of passes
        kw.update(max_iter=300, tol=0.0)
    a = solver(dense, 1.0, **kw).fit(data)
    b = solver(full, 1.0, **kw).fit(data)
    assert b.history.last_checked().primal == pytest.approx(
        a.history.last_checked().primal, rel=1e-7
    )


def test_sparse_solvers_agree_on_the_optimum():
    data = _data(4, n=25)
    model = _restricted(data, "full", "exact")
    cp = CuttingPlane(model, 1.0, max_iter=3000, tol=1e-8, random_state=0).fit(data)
    bc = BCFW(model, 1.0, max_iter=4000, tol=1e-7, check_every=20, random_state=0).fit(data)
    assert bc.history.last_checked().primal == pytest.approx(
        cp.history.last_checked().primal, rel=1e-6
    )
    lp = _restricted(data, "full", "lp")  # GDMM solves the LP relaxation
    cp = CuttingPlane(lp, 1.0, max_iter=3000, tol=1e-8, random_state=0).fit(data)
    gd = MultiLabelGDMM(lp, 1.0, max_iter=4000, tol=1e-5, check_every=20, random_state=0).fit(data)
    assert gd.history.last_checked().relative_gap <= 1e-5
    assert gd.history.last_checked().primal == pytest.approx(
        cp.history.last_checked().primal, rel=1e-4
    )
    # w is C Σ_i (φ(ȳ_i) − φ(ŷ_i)) over the restricted φ: the classic step's block shares
    fw = BCFW(
        model, 1.0, step="fw", max_iter=10, check_every=10, averaging=False, random_state=0
    ).fit(data)
    np.testing.assert_allclose(fw.block_weights.sum(axis=0), fw.w, atol=1e-10)


def test_estimator_observed_weights_and_model_file(tmp_path):
    rng = np.random.default_rng(5)
    n, d, L = 80, 40, 20
    X = sp.random(n, d, density=0.03, random_state=5, format="csr")
    Y = (rng.random((n, L)) < 0.08).astype(int)
    Y[:, 0] = X[:, 0].toarray().ravel() > 0
    dense = MultiLabelSVM(edges="chain", max_iter=30, random_state=0).fit(X, Y)
    assert dense.model_.support is None  # auto: a small matrix stays dense
    est = MultiLabelSVM(
        edges="chain", max_iter=30, random_state=0, weights="observed", verbose=0
    ).fit(X, Y)
    assert est.model_.support is not None and est.model_.size < dense.model_.size
    assert "observed pairs" in est.weights_info_
    U = est.unary_weights_
    assert sp.issparse(U) and U.shape == (d, L)
    full = est.model_.unary_matrix(est.coef_).toarray()
    np.testing.assert_array_equal(U.toarray(), full[:-1])
    np.testing.assert_array_equal(est.intercept_, full[-1])
    top = est.top_features(3)
    assert set(top) == set(range(L))
    est.save(tmp_path / "m.npz")
    back = load(tmp_path / "m.npz")
    assert back.model_.support is not None
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    np.testing.assert_array_equal(back.coef_, est.coef_)
    # a feature that never met label l with l on has no weight for it (unless it met so many
    # labels that it got its whole row)
    met = (X.toarray() != 0).T.astype(int) @ Y > 0
    met[np.diff(est.model_.support[0])[:-1] == L] = True
    assert not met.all()
    assert np.all(U.toarray()[~met] == 0.0)


def test_memory_refusal_names_the_sparse_alternative(monkeypatch):
    """The dense weights of a wide problem are refused before training; the observed ones
    fit under the same limit."""
    rng = np.random.default_rng(6)
    n, d, L = 40, 60000, 30
    X = sp.random(n, d, density=0.001, random_state=6, format="csr")
    Y = (rng.random((n, L)) < 0.1).astype(int)
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "20M")
    with pytest.raises(MemoryError, match="weights='observed'"):
        MultiLabelSVM(edges="independent", max_iter=2, weights="dense").fit(X, Y)
    est = MultiLabelSVM(edges="independent", max_iter=2, weights="observed").fit(X, Y)
    assert est.model_.size < d * L / 10
