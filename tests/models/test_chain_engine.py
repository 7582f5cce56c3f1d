"""The chain's factor functions as GDMM's engine calls them: the label scores a node oracle
leaves behind answer ``node_score`` exactly, through steps on the same token (``add_node``)
and not after the weights moved elsewhere; the edge oracle's scan of all pairs (few labels)
and its four-case search agree with exhaustive search."""

import numpy as np
import pytest
from numba import njit
from test_chain_factors import _problem, _transition_weights

from dualstruct.models import factors
from dualstruct.models.chain_transitions import SCAN, SCAN_LABELS


@njit
def _oracle(k, i, w, j, C, act, mu):
    return factors.node_oracle(k, i, w, j, C, act, len(act), mu)


@njit
def _scores(k, i, w, j, K):
    out = np.empty(K)
    for a in range(K):
        out[a] = factors.node_score(k, i, w, j, a)
    return out


@njit
def _add(k, i, j, a, c, w):
    factors.add_node(k, i, j, a, c, w)


@njit
def _prepare(k, w):
    factors.prepare_weights(k, w)


@njit
def _edge(k, i, w, C, act, mu):
    return factors.edge_oracle(k, i, w, 0, C, act, len(act), mu, act, len(act), mu)


def _fresh(k, i, w, j, K):
    """θ_j(a) = ⟨w, φ_j(a)⟩ for every label, from the feature map (no cached scores)."""
    out = np.empty(K)
    for a in range(K):
        phi = np.zeros_like(w)
        _add(k, i, j, a, 1.0, phi)
        out[a] = w @ phi
    return out


@pytest.mark.parametrize("weights", ["dense", "observed", "thin"])
def test_node_scores_after_the_oracle_follow_the_steps(weights):
    K = 40 if weights == "thin" else 12
    X, Y, model, blocks = _problem(
        2, K=K, d=4, n=8, sparse=weights == "observed", max_len=6, thin=weights == "thin"
    )
    k = blocks.kernel
    rng = np.random.default_rng(5)
    w = rng.normal(size=model.size) * (rng.random(model.size) < 0.5)
    w[model.n_unary : model.n_unary + K * K] = 0.0
    _prepare(k, w)
    for i in range(len(X)):
        for j in range(len(Y[i])):
            act = rng.choice(K, 3, replace=False).astype(np.int32)
            mu = np.zeros(K)
            _oracle(k, i, w, j, 1.0, act, mu)
            np.testing.assert_allclose(_scores(k, i, w, j, K), _fresh(k, i, w, j, K), atol=1e-12)
            for a in (act[0], rng.integers(K)):  # an active label and any label
                _add(k, i, j, a, rng.normal(), w)
                np.testing.assert_allclose(
                    _scores(k, i, w, j, K), _fresh(k, i, w, j, K), atol=1e-12
                )
            # another token's step (its features overlap this one's) or an edge oracle call
            # ends the cached scores
            if rng.random() < 0.5:
                i2 = (i + 1) % len(X)
                _add(k, i2, 0, rng.integers(K), 5.0, w)
            else:
                _edge(k, i, w, 1.0, act, mu)
            np.testing.assert_allclose(_scores(k, i, w, j, K), _fresh(k, i, w, j, K), atol=1e-12)
            _oracle(k, i, w, j, 1.0, act, mu)
            w[: model.n_unary] *= 1.5  # w changed outside add_node: prepare_weights says so
            _prepare(k, w)
            np.testing.assert_allclose(_scores(k, i, w, j, K), _fresh(k, i, w, j, K), atol=1e-12)


@pytest.mark.parametrize("scan", [1, 0])
def test_edge_oracle_scan_and_search_agree_with_exhaustive_search(scan):
    K = 12
    X, Y, model, blocks = _problem(4, K=K, d=5, n=10, max_len=6)
    k = blocks.kernel
    assert k.factor_ints[SCAN] == int(K <= SCAN_LABELS)
    k.factor_ints[SCAN] = scan
    rng = np.random.default_rng(6)
    for _ in range(40):
        w = np.zeros(model.size)
        _transition_weights(rng, model, k, w)  # training transitions any sign, others <= 0
        W_B = w[model.n_unary : model.n_unary + K * K].reshape(K, K)
        _prepare(k, w)
        act = rng.choice(K, int(rng.integers(0, K + 1)), replace=False).astype(np.int32)
        mu = np.zeros(K)
        mu[act] = rng.normal(size=len(act))
        a, b, g = _edge(k, 0, w, 1.0, act, mu)
        table = -W_B + mu[:, None] + mu[None, :]
        assert g == pytest.approx(table.min(), rel=1e-12, abs=1e-12)
        assert table[a, b] == pytest.approx(g, rel=1e-12, abs=1e-12)


@njit
def _values_and_adds(k, i, w, j, states, coefs, scale, one_by_one):
    """node_values and add_nodes, or node_score + node_loss and add_node state by state."""
    n = len(states)
    out = np.empty(n)
    if one_by_one:
        for s in range(n):
            out[s] = factors.node_score(k, i, w, j, states[s])
            out[s] += factors.node_loss(k, i, j, states[s])
            factors.add_node(k, i, j, states[s], coefs[s] * scale, w)
    else:
        factors.node_values(k, i, w, j, states, n, out)
        factors.add_nodes(k, i, j, states, coefs, n, scale, w)
    return out


@pytest.mark.parametrize("weights", ["dense", "observed", "thin"])
def test_node_values_and_add_nodes_equal_one_state_at_a_time(weights):
    # the batched functions GDMM's exact node blocks call: bit for bit the single ones, with
    # and without the node oracle's cached scores, and the scores still exact afterwards
    K = 40 if weights == "thin" else 12
    X, Y, model, blocks = _problem(
        3, K=K, d=4, n=8, sparse=weights == "observed", max_len=6, thin=weights == "thin"
    )
    k = blocks.kernel
    rng = np.random.default_rng(7)
    w0 = rng.normal(size=model.size) * (rng.random(model.size) < 0.5)
    w0[model.n_unary : model.n_unary + K * K] = 0.0
    for i in range(len(X)):
        for j in (0, len(Y[i]) - 1):  # the start and the end weights too
            states = rng.choice(K, 5, replace=False).astype(np.int64)
            coefs = rng.normal(size=5)
            cached = rng.random() < 0.7  # scores the node oracle left behind, or none
            results = []
            for one_by_one in (True, False):
                w = w0.copy()
                _prepare(k, w)
                if cached:
                    _oracle(k, i, w, j, 1.0, states[:2].astype(np.int32), np.zeros(K))
                out = _values_and_adds(k, i, w, j, states, coefs, 0.5, one_by_one)
                results.append((out, w, _scores(k, i, w, j, K)))
                np.testing.assert_allclose(results[-1][2], _fresh(k, i, w, j, K), atol=1e-12)
            for single, batch in zip(results[0][:2], results[1][:2], strict=True):
                np.testing.assert_array_equal(single, batch)
            assert np.any(results[1][1] != w0)
