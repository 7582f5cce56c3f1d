"""The chain model's factor functions for GDMM: against the joint feature map and brute
force, the sublinear oracles against exhaustive search, and GDMM on a tiny chain
against BCFW's optimum (dense and sparse weights)."""

import chain_factor_calls as calls
import numpy as np
import pytest
from conftest import random_chain_problem

from dualstruct.models import ChainModel
from dualstruct.models.chain import observed_support
from dualstruct.models.chain_transitions import state_views
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, FactorGDMM


def _problem(seed, K=3, d=4, n=12, sparse=False, start_end=True, max_len=5, thin=False):
    """A random chain; sparse weights on the observed pairs, or (``thin``) on one or two
    random labels per feature, so that the unigram oracle walks the support's rows."""
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=K, d=d, max_len=max_len, sparse=True)
    if thin:  # non-negative features: negative weights then score a label below 0
        X = [abs(x) for x in X]
    data = pack_sequences(X, Y)
    support = observed_support(data, K, full_rows_from=1.0) if sparse else None
    if thin:
        rows = [np.unique(rng.integers(0, K, rng.integers(1, 3))) for _ in range(d)]
        indptr = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
        support = (indptr, np.concatenate(rows).astype(np.int32))
    model = ChainModel(K, d, start_end=start_end, support=support)
    return X, Y, model, model.block_data(data)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("start_end", [True, False])
def test_factor_functions_match_the_joint_feature_map(sparse, start_end):
    X, Y, model, blocks = _problem(0, sparse=sparse, start_end=start_end)
    k = blocks.kernel
    rng = np.random.default_rng(1)
    w = rng.normal(size=model.size)
    for i, (x, gold) in enumerate(zip(X, Y)):
        y = rng.integers(0, 3, len(gold))
        phi = np.zeros(model.size)
        score, loss = calls.labelling_figures(k, i, w, y, phi)
        joint = model.joint_feature(x, y)
        np.testing.assert_allclose(phi, joint, atol=1e-12)
        assert score == pytest.approx(w @ joint, rel=1e-12, abs=1e-12)
        assert loss == model.loss(gold, y)
        assert calls.counts_and_info(k, i) == ((len(y), len(y) - 1), (3, gold[0]))
        for j in range(len(y)):
            a, b = rng.integers(0, 3, 2)
            out = np.zeros(model.size)
            assert calls.node_difference(k, i, j, a, b, out) == pytest.approx(out @ out, abs=1e-12)
        for e in range(len(y) - 1):
            a, b, c, d = rng.integers(0, 3, 4)
            out = np.zeros(model.size)
            assert calls.edge_difference(k, i, e, a, b, c, d, out) == pytest.approx(out @ out)


@pytest.mark.parametrize("weights", ["dense", "observed", "thin"])
def test_node_features_are_orthogonal_with_the_norms_node_sq_norm_gives(weights):
    # GDMM's exact node blocks rest on both (a label missing from a thin support's rows
    # has a smaller norm than the others)
    K = 6
    X, Y, model, blocks = _problem(
        3, K=K, d=4, n=6, sparse=weights == "observed", thin=weights == "thin"
    )
    k = blocks.kernel
    for i, gold in enumerate(Y):
        for j in range(len(gold)):
            phi = np.zeros((K, model.size))
            for a in range(K):
                calls.add_node(k, i, j, a, phi[a])
            gram = phi @ phi.T
            np.testing.assert_allclose(gram, np.diag(np.diag(gram)), atol=1e-12)
            norms = [calls.node_sq_norm(k, i, j, a) for a in range(K)]
            np.testing.assert_allclose(norms, np.diag(gram), atol=1e-12)
            states = np.array([4, 0, 5, 2], dtype=np.int64)  # node_sq_norms: the same
            np.testing.assert_array_equal(
                calls.node_sq_norms(k, i, j, states), np.asarray(norms)[states]
            )


def _messages(rng, K, n_act, scale):
    act = rng.choice(K, n_act, replace=False).astype(np.int32)
    mu = np.zeros(K)
    mu[act] = scale * rng.normal(size=n_act) * (rng.random(n_act) < 0.8)
    return act, mu


def _transition_weights(rng, model, k, w, positive_unlisted=False):
    """W_B as GDMM keeps it: training transitions any sign, every other pair 0 or below."""
    K = model.n_labels
    W_B = -rng.exponential(size=(K, K)) * (rng.random((K, K)) < 0.3)
    sr = state_views(k.factor_ints, k.factor_floats, k.n_labels).search
    W_B[sr.pos_row, sr.pos_col] = rng.normal(size=len(sr.pos_col))
    if positive_unlisted:
        W_B[W_B == 0.0] = rng.exponential(size=int((W_B == 0.0).sum()))
    w[model.n_unary : model.n_unary + K * K] = W_B.ravel()


@pytest.mark.parametrize("weights", ["dense", "observed", "thin"])
def test_oracles_match_exhaustive_search(weights):
    K = 40 if weights == "thin" else 12
    X, Y, model, blocks = _problem(
        2, K=K, d=30, n=8, sparse=weights == "observed", max_len=6, thin=weights == "thin"
    )
    k = blocks.kernel
    rng = np.random.default_rng(3)
    checked_edges = 0
    for trial in range(60):
        w = rng.normal(size=model.size) * (rng.random(model.size) < 0.5)
        if trial % 3 == 0:  # negative unary scores: a label in no support row wins
            w[: model.n_unary] = -rng.exponential(size=model.n_unary)
        _transition_weights(rng, model, k, w, positive_unlisted=trial % 10 == 9)
        calls.prepare(k, w)
        C = float(rng.choice([0.1, 1.0, 10.0]))
        for i in range(len(X)):
            (n, m), _ = calls.counts_and_info(k, i)
            for j in range(n):
                few = rng.random() < 0.5  # few active states: an inactive one may win
                act, mu = _messages(rng, K, int(rng.integers(0, 3 if few else K + 1)), C)
                a, g, every = calls.node_oracle(k, i, w, j, C, act, mu)
                assert g == pytest.approx(every.min(), rel=1e-12, abs=1e-12)
                assert every[a] == pytest.approx(g, rel=1e-12, abs=1e-12)
            for e in range(m):
                act_u, mu_u = _messages(rng, K, int(rng.integers(0, K + 1)), C)
                act_v, mu_v = _messages(rng, K, int(rng.integers(0, K + 1)), C)
                a, b, g = calls.edge_oracle(k, i, w, e, C, act_u, mu_u, act_v, mu_v)
                table = -C * w[model.n_unary : model.n_unary + K * K].reshape(K, K)
                table += mu_u[:, None] + mu_v[None, :]
                assert g == pytest.approx(table.min(), rel=1e-12, abs=1e-12)
                assert table[a, b] == pytest.approx(g, rel=1e-12, abs=1e-12)
                checked_edges += 1
    assert checked_edges > 100


def test_add_edge_keeps_the_transition_search_up_to_date():
    """Changes through add_edge on the mirrored w reach the search (and an unlisted pair's
    residue above 0 is dropped); changes to another array do not."""
    K = 10
    X, Y, model, blocks = _problem(4, K=K, d=6, n=10, max_len=6)
    k = blocks.kernel
    rng = np.random.default_rng(5)
    w = np.zeros(model.size)
    _transition_weights(rng, model, k, w)
    calls.prepare(k, w)
    other = w.copy()
    sr = state_views(k.factor_ints, k.factor_floats, k.n_labels).search
    listed = np.zeros((K, K), dtype=bool)
    listed[sr.pos_row, sr.pos_col] = True
    unlisted = np.argwhere(~listed)[0]
    for step in range(300):
        a, b = sr.pos_row[step % len(sr.pos_row)], sr.pos_col[step % len(sr.pos_row)]
        if step % 7 == 0:
            a, b = unlisted
        c = rng.normal()
        calls.add_edge(k, a, b, c, w)
        calls.add_edge(k, a, b, 100.0, other)  # not the mirrored w: ignored
        W_B = w[model.n_unary : model.n_unary + K * K].reshape(K, K)
        assert (W_B[~listed] <= 0.0).all()
        act = np.zeros(0, dtype=np.int32)
        a, b, g = calls.edge_oracle(k, 0, w, 0, 1.0, act, np.zeros(K), act, np.zeros(K))
        assert g == -W_B.max() and W_B[a, b] == W_B.max()


def _optimum(model, data, C):
    bcfw = BCFW(model, C=C, max_iter=3000, tol=1e-6, check_every=10, random_state=0).fit(data)
    return bcfw.history.last_checked().primal


@pytest.mark.parametrize("sparse", [False, True])
def test_factor_gdmm_reaches_the_bcfw_optimum(sparse):
    _, _, model, blocks = _problem(6, K=4, d=5, n=10, sparse=sparse)
    solver = FactorGDMM(model, C=1.0, max_iter=1500, tol=2e-5, check_every=10, random_state=0).fit(
        blocks
    )
    optimum = _optimum(model, blocks, 1.0)
    r = solver.history.last_checked()
    assert solver.relaxation == "exact"
    assert r.primal == pytest.approx(optimum, rel=1e-4)
    assert r.dual == pytest.approx(optimum, rel=1e-4)


def test_factor_gdmm_certifies_a_large_C_without_the_proximal_loop():
    """At C = 100 plain GDMM (proximal=0) certifies as the chain GDMM does: each visit takes
    an example's factors in a random order (with every node and then every edge, the same
    order each pass, the consistency residual oscillated and the gap stayed near 0.2% after
    20,000 passes)."""
    X, Y = random_chain_problem(np.random.default_rng(11), n=10, K=3, d=4)
    model = ChainModel(3, 4)
    blocks = model.block_data(pack_sequences(X, Y))
    solver = FactorGDMM(
        model, C=100.0, max_iter=8000, tol=1e-4, check_every=20, random_state=0
    ).fit(blocks)
    r = solver.history.last_checked()
    assert solver.history.stop_reason == "tol" and r.relative_gap <= 1e-4
