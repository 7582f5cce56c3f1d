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
