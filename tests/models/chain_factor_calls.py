"""Compiled calls of the chain kernel's factor functions for ``test_chain_factors`` (a
module of their own, so that numba caches them between runs)."""

import numpy as np
from numba import njit

from dualstruct.models import factors


@njit(cache=True)
def labelling_figures(k, i, w, y, phi):
    """Σ node and edge scores, Σ losses, and φ(y) by add_node/add_edge into ``phi``."""
    n, m = factors.factor_counts(k, i)
    score, loss = 0.0, 0.0
    for j in range(n):
        score += factors.node_score(k, i, w, j, y[j])
        loss += factors.node_loss(k, i, j, y[j])
        factors.add_node(k, i, j, y[j], 1.0, phi)
    for e in range(m):
        u, v = factors.edge_nodes(k, i, e)
        score += factors.edge_score(k, i, w, e, y[u], y[v])
        factors.add_edge(k, i, e, y[u], y[v], 1.0, phi)
    return score, loss


@njit(cache=True)
def counts_and_info(k, i):
    return factors.factor_counts(k, i), factors.node_info(k, i, 0)


@njit(cache=True)
def prepare(k, w):
    factors.prepare_weights(k, w)


@njit(cache=True)
def add_edge(k, a, b, c, w):
    factors.add_edge(k, 0, 0, a, b, c, w)


@njit(cache=True)
def node_oracle(k, i, w, j, C, act, mu):
    a, g = factors.node_oracle(k, i, w, j, C, act, len(act), mu)
    factors.prepare_weights(k, w)  # drops the oracle's cached scores: score from w itself
    n = factors.node_info(k, i, j)[0]
    every = np.empty(n)
    for b in range(n):
        every[b] = -C * (factors.node_score(k, i, w, j, b) + factors.node_loss(k, i, j, b))
        every[b] -= mu[b]
    return a, g, every


@njit(cache=True)
def edge_oracle(k, i, w, e, C, act_u, mu_u, act_v, mu_v):
    return factors.edge_oracle(k, i, w, e, C, act_u, len(act_u), mu_u, act_v, len(act_v), mu_v)


@njit(cache=True)
def node_difference(k, i, j, a, b, out):
    factors.add_node(k, i, j, a, 1.0, out)
    factors.add_node(k, i, j, b, -1.0, out)
    return factors.node_sq_distance(k, i, j, a, b)


@njit(cache=True)
def edge_difference(k, i, e, a, b, c, d, out):
    factors.add_edge(k, i, e, a, b, 1.0, out)
    factors.add_edge(k, i, e, c, d, -1.0, out)
    return factors.edge_sq_distance(k, i, e, a, b, c, d)


@njit(cache=True)
def add_node(k, i, j, a, out):
    factors.add_node(k, i, j, a, 1.0, out)


@njit(cache=True)
def node_sq_norm(k, i, j, a):
    return factors.node_sq_norm(k, i, j, a)


@njit(cache=True)
def node_sq_norms(k, i, j, states):
    out = np.full(len(states), np.nan)
    factors.node_sq_norms(k, i, j, states, len(states), out)
    return out
