"""Multi-label MAP inference against brute force (L ≤ 10)."""

import itertools

import numpy as np
import pytest

from dualstruct.inference.multilabel import (
    enumerate_map,
    labelling_score,
    tree_map,
    unary_tables,
)


def _brute(a, edges, V):
    L = a.shape[0]
    best, arg = -np.inf, None
    for y in itertools.product((0, 1), repeat=L):
        y = np.array(y)
        s = labelling_score(a, edges, V, y)
        if s > best:
            best, arg = s, y
    return best, arg


def _random_tree(rng, L, forest=False):
    edges = []
    for v in range(1, L):
        if forest and rng.random() < 0.3:
            continue
        u = int(rng.integers(v))
        edges.append((u, v) if rng.random() < 0.5 else (v, u))
    perm = rng.permutation(L)  # relabel so that parents do not always have smaller ids
    return np.array([(perm[u], perm[v]) for u, v in edges], dtype=np.int64).reshape(-1, 2)


def _full_graph(L):
    return np.array(list(itertools.combinations(range(L), 2)), dtype=np.int64).reshape(-1, 2)


@pytest.mark.parametrize("L", [1, 2, 3, 5, 8, 10])
@pytest.mark.parametrize("only_11", [False, True])
def test_enumeration_and_tree_max_product_match_brute_force(L, only_11):
    rng = np.random.default_rng(L + 100 * only_11)
    for trial in range(20):
        theta = rng.normal(size=L)
        gold = rng.integers(0, 2, L) if trial % 2 else None
        a = unary_tables(theta, gold, rng.uniform(0.5, 2, L) if trial % 4 == 1 else None)
        for edges in (_random_tree(rng, L), _random_tree(rng, L, forest=True), _full_graph(L)):
            V = rng.normal(size=(len(edges), 2, 2))
            if only_11:
                V[:, 0, :] = V[:, :, 0] = 0.0
            best, _ = _brute(a, edges, V)
            out = np.zeros(L, dtype=np.int64)
            assert enumerate_map(a, edges, V, out) == pytest.approx(best, abs=1e-9)
            assert labelling_score(a, edges, V, out) == pytest.approx(best, abs=1e-9)
            if len(edges) <= L - 1:  # the trees, forests and the full graph on L <= 2
                out = np.zeros(L, dtype=np.int64)
                assert tree_map(a, edges, V, out) == pytest.approx(best, abs=1e-9)
                assert labelling_score(a, edges, V, out) == pytest.approx(best, abs=1e-9)


def test_unary_tables_loss_augmentation():
    a = unary_tables([0.5, -1.0], gold=[1, 0], loss_weights=[2.0, 3.0])
    assert a.tolist() == [[2.0, 0.5], [0.0, 2.0]]


def test_tree_map_refuses_a_cycle():
    edges = np.array([[0, 1], [1, 2], [2, 0]], dtype=np.int64)
    with pytest.raises(ValueError, match="cycle"):
        tree_map(np.zeros((3, 2)), edges, np.zeros((3, 2, 2)), np.zeros(3, dtype=np.int64))
