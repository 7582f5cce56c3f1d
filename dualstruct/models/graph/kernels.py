"""The graph CRF's kernel: one block per graph, a labelling is one label per node.

``w = [W_U (d × K, feature-major) | W_P (F × P)]`` with F edge features and P pair
parameters per feature: K² for directed tables, K(K+1)/2 for symmetric ones
(``pair_index[a, b]`` maps a label pair to its parameter). The potentials of graph i are

    θ_u(a) = ⟨W_U[:, a], x_u⟩,      θ_e(a, b) = Σ_f z_{e,f} W_P[f, pair_index[a, b]]

(z the edge features; a graph CRF without them has one constant feature), and
φ(x, y) = (Σ_u x_u ⊗ e_{y_u}, Σ_e z_e ⊗ e_{pair_index[y_u, y_v]}), the loss the weighted
Hamming loss. With a support (:mod:`dualstruct.models.support`) W_U keeps only the allowed
(feature, state) pairs, in the support's order, and φ's node part is restricted to them.
Inference per graph (``method``): exact max-product on forests, enumeration, exact MAP by
branch and bound over MPLP bounds (``BRANCH``), or the local-polytope LP solved to optimality
(``LP``: MPLP, then PDHG where MPLP does not certify; :mod:`dualstruct.inference.graph_lp`).
The oracle returns the bound of its method. With ``LP`` the oracle's point is the LP's
optimum, fractional where the LP is not tight (``ws.node_mu``, ``ws.edge_mu``): the classic
BCFW step and SSG then train the relaxed structural SVM over the local polytope, whose
``φ(μ) = (Σ_u x_u ⊗ μ_u, Σ_e z_e ⊗ Σ_{a,b} μ_e(a, b) e_{pair_index[a, b]})`` and
``δ(ȳ, μ) = Σ_u c_{ȳ_u} (1 − μ_u(ȳ_u))`` are linear in μ. The oracle warm-starts MPLP from
the messages it left for the same graph (``warm_first``, ``warm_second``) and the search from
the labelling it returned last (``warm_labels``, the gold labelling at first). ``lp_stats``
counts [oracle calls on loopy graphs, those not certified: exact MAP for ``BRANCH``, the LP's
optimum for ``LP``]; ``search_stats`` [branch-and-bound nodes beyond the roots, PDHG
iterations].
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ...inference.graph import enumerate_map, forest_map, labelling_score, mplp
from ...inference.graph_lp import branch_and_bound, lp_optimum
from .. import base
from ..support import entry_position, entry_unigram_scores

FOREST, ENUMERATE, LP, BRANCH = 0, 1, 2, 3


class GraphKernel(NamedTuple):
    indptr: np.ndarray  # CSR node rows of all graphs
    indices: np.ndarray
    values: np.ndarray
    labels: np.ndarray  # int32 gold label per node
    label_offsets: np.ndarray  # int64 node offsets (n + 1)
    edges: np.ndarray  # int64 (E_total, 2), node indices within their graph
    edge_offsets: np.ndarray  # int64 (n + 1)
    edge_features: np.ndarray  # (E_total, F)
    loss_weights: np.ndarray  # (K,)
    pair_index: np.ndarray  # int64 (K, K)
    n_pairs: int  # P
    n_states: int
    n_features: int
    method: np.ndarray  # int64 per graph: FOREST, ENUMERATE, LP or BRANCH
    max_nodes: int
    max_edges: int
    lp_sweeps: int
    lp_tol: float
    lp_stats: np.ndarray  # int64 (2,): LP calls, not certified
    search_stats: np.ndarray  # int64 (2,): branch-and-bound nodes beyond roots, PDHG iterations
    bb_budget: int  # branch-and-bound nodes per call
    lp_iter: int  # PDHG iterations per call
    warm_first: np.ndarray  # (E_total, K) the oracle's last messages δ_{e→u}
    warm_second: np.ndarray  # (E_total, K) and δ_{e→v}
    max_entries: int  # most entries of w one labelling difference touches (×2)
    sparse: bool  # node weights only on the support, else dense d × K
    support_labels: np.ndarray  # int32, the support's states by feature row
    entry_start: np.ndarray  # sparse: int64 per node feature entry, its feature's support row
    entry_count: np.ndarray  # and int32 its length (models.support.entry_rows)
    n_unary: int  # node weights: d·K dense, the support's size sparse
    warm_labels: np.ndarray  # int64 per node: the oracle's last labelling (gold at first)


class _Workspace(NamedTuple):
    theta: np.ndarray  # (max_nodes, K) node potentials at the prepared w
    aug: np.ndarray  # (max_nodes, K) the last oracle's loss-augmented potentials
    pot: np.ndarray  # (max_edges, K, K) edge potentials
    x: np.ndarray  # int64 (max_nodes,) inference output
    scale: np.ndarray  # (1,) the last oracle's loss scale
    diff: np.ndarray  # (size,) scratch for difference norms, kept zero
    touched: np.ndarray  # int64 scratch: entries of diff in use
    row: np.ndarray  # (K,) sparse: one node's potentials being summed
    node_mu: np.ndarray  # (max_nodes, K) the last oracle's point (LP)
    edge_mu: np.ndarray  # (max_edges, K, K)
    fractional: np.ndarray  # int64 (1,): whether that point is fractional
    first: np.ndarray  # (max_edges, K) decoding's messages
    second: np.ndarray  # (max_edges, K)
    x2: np.ndarray  # int64 (max_nodes,) scratch labelling
    belief: np.ndarray  # (max_nodes, K) MPLP's beliefs


@njit(cache=True)
def _graph(k, i):
    n0, n1 = k.label_offsets[i], k.label_offsets[i + 1]
    e0, e1 = k.edge_offsets[i], k.edge_offsets[i + 1]
    return n0, n1 - n0, e0, e1 - e0


@njit(cache=True)
def _map(k, i, theta, pot, x, ws, oracle):
    """(value of the labelling found, upper bound on the maximum). The oracle warm-starts
    from the graph's stored messages and, with ``LP``, keeps the LP's optimum in ``ws``;
    decoding starts from zero messages and searches by branch and bound."""
    n0, n, e0, E = _graph(k, i)
    edges = k.edges[e0 : e0 + E]
    ws.fractional[0] = 0
    if k.method[i] == FOREST:
        v = forest_map(theta, edges, pot, x)
        return v, v
    if k.method[i] == ENUMERATE:
        v = enumerate_map(theta, edges, pot, x)
        return v, v
    if oracle:
        first = k.warm_first[e0 : e0 + E]
        second = k.warm_second[e0 : e0 + E]
    else:
        first = ws.first[:E]
        second = ws.second[:E]
        first[:] = 0.0
        second[:] = 0.0
    if k.method[i] == BRANCH or not oracle:
        start = -np.inf
        if oracle:  # the graph's last labelling is the search's first incumbent
            x[:] = k.warm_labels[n0 : n0 + n]
            start = labelling_score(theta, edges, pot, x)
        v, bound, nodes = branch_and_bound(
            theta, edges, pot, first, second, x, k.lp_sweeps, k.lp_tol, k.bb_budget, start
        )
        if oracle:
            k.search_stats[0] += nodes - 1
            k.warm_labels[n0 : n0 + n] = x
    else:
        v, bound, _ = mplp(
            theta, edges, pot, first, second, ws.belief[:n], x, k.lp_sweeps, k.lp_tol, -np.inf
        )
        if bound - v > k.lp_tol * max(1.0, abs(bound)):
            node_mu = ws.node_mu[:n]
            edge_mu = ws.edge_mu[:E]
            v2, b2, its = lp_optimum(
                theta, edges, pot, first, second, node_mu, edge_mu, ws.x2[:n], k.lp_iter, k.lp_tol
            )
            k.search_stats[1] += its
            bound = min(bound, b2)
            if v2 > v:
                v = v2
                ws.fractional[0] = 1
    if oracle:
        k.lp_stats[0] += 1
        if bound - v > k.lp_tol * max(1.0, abs(bound)):
            k.lp_stats[1] += 1
    return v, bound


@base.implements(base.workspace, GraphKernel)
def _workspace(k):
    T, E, K = max(k.max_nodes, 1), max(k.max_edges, 1), k.n_states
    size = k.n_unary + k.edge_features.shape[1] * k.n_pairs
    return _Workspace(
        np.empty((T, K)),
        np.empty((T, K)),
        np.empty((E, K, K)),
        np.empty(T, dtype=np.int64),
        np.ones(1),
        np.zeros(size),
        np.empty(max(k.max_entries, 1), dtype=np.int64),
        np.empty(K),
        np.zeros((T, K)),
        np.zeros((E, K, K)),
        np.zeros(1, dtype=np.int64),
        np.zeros((E, K)),
        np.zeros((E, K)),
        np.zeros(T, dtype=np.int64),
        np.zeros((T, K)),
    )


@base.implements(base.prepare, GraphKernel)
def _prepare(k, i, w, ws):
    n0, n, e0, E = _graph(k, i)
    K = k.n_states
    if k.sparse:
        entry_unigram_scores(
            k.indptr,
            k.entry_start,
            k.entry_count,
            k.values,
            n0,
            n0 + n,
            k.support_labels,
            w,
            ws.theta,
            ws.row,
        )
    else:
        for t in range(n):
            row = n0 + t
            for c in range(K):
                ws.theta[t, c] = 0.0
            for p in range(k.indptr[row], k.indptr[row + 1]):
                x = k.values[p]
                j = k.indices[p] * K
                for c in range(K):
                    ws.theta[t, c] += x * w[j + c]
    off = k.n_unary
    F = k.edge_features.shape[1]
    for e in range(E):
        for a in range(K):
            for b in range(K):
                q = k.pair_index[a, b]
                s = 0.0
                for f in range(F):
                    s += k.edge_features[e0 + e, f] * w[off + f * k.n_pairs + q]
                ws.pot[e, a, b] = s


@base.implements(base.score, GraphKernel)
def _score(k, i, w, ws, y):
    n0, n, e0, E = _graph(k, i)
    return labelling_score(ws.theta[:n], k.edges[e0 : e0 + E], ws.pot[:E], y)


@base.implements(base.loss, GraphKernel)
def _loss(k, i, y):
    start = k.label_offsets[i]
    return base.weighted_hamming(k.labels[start : start + y.shape[0]], k.loss_weights, y)


@base.implements(base.oracle, GraphKernel)
def _oracle(k, i, w, ws, loss_scale, y):
    n0, n, e0, E = _graph(k, i)
    ws.scale[0] = loss_scale
    for t in range(n):
        g = k.labels[n0 + t]
        extra = loss_scale * k.loss_weights[g]
        for c in range(k.n_states):
            ws.aug[t, c] = ws.theta[t, c]
            if c != g:
                ws.aug[t, c] += extra
    x = ws.x[:n]
    value, bound = _map(k, i, ws.aug[:n], ws.pot[:E], x, ws, True)
    for t in range(n):
        y[t] = x[t]
    return bound


@base.implements(base.oracle_value, GraphKernel)
def _oracle_value(k, i, w, ws, y):
    n0, n, e0, E = _graph(k, i)
    return labelling_score(ws.aug[:n], k.edges[e0 : e0 + E], ws.pot[:E], y)


@base.implements(base.decode, GraphKernel)
def _decode(k, i, w, ws, y):
    n0, n, e0, E = _graph(k, i)
    x = ws.x[:n]
    value, bound = _map(k, i, ws.theta[:n], ws.pot[:E], x, ws, False)
    for t in range(n):
        y[t] = x[t]
    return value


@njit(cache=True)
def _add_into(k, i, ya, yb, c, w, touched, n_touched):
    """w += c (φ(ya) − φ(yb)); records the entries written in ``touched`` when it has room
    (n_touched ≥ 0), and returns the new count."""
    n0, n, e0, E = _graph(k, i)
    K = k.n_states
    for t in range(n):
        a, b = ya[t], yb[t]
        if a == b:
            continue
        row = n0 + t
        for p in range(k.indptr[row], k.indptr[row + 1]):
            x = c * k.values[p]
            if k.sparse:  # a pair outside the support has no weight: dropped
                ja = entry_position(k.entry_start, k.entry_count, k.support_labels, K, p, a)
                jb = entry_position(k.entry_start, k.entry_count, k.support_labels, K, p, b)
            else:
                ja = k.indices[p] * K + a
                jb = k.indices[p] * K + b
            if ja >= 0:
                w[ja] += x
                if n_touched >= 0:
                    touched[n_touched] = ja
                    n_touched += 1
            if jb >= 0:
                w[jb] -= x
                if n_touched >= 0:
                    touched[n_touched] = jb
                    n_touched += 1
    off = k.n_unary
    F = k.edge_features.shape[1]
    for e in range(E):
        u, v = k.edges[e0 + e, 0], k.edges[e0 + e, 1]
        qa = k.pair_index[ya[u], ya[v]]
        qb = k.pair_index[yb[u], yb[v]]
        if qa == qb:
            continue
        for f in range(F):
            z = c * k.edge_features[e0 + e, f]
            w[off + f * k.n_pairs + qa] += z
            w[off + f * k.n_pairs + qb] -= z
            if n_touched >= 0:
                touched[n_touched] = off + f * k.n_pairs + qa
                touched[n_touched + 1] = off + f * k.n_pairs + qb
                n_touched += 2
    return n_touched


@base.implements(base.add_difference, GraphKernel)
def _add_difference(k, i, ya, yb, c, w):
    _add_into(k, i, ya, yb, c, w, np.empty(0, dtype=np.int64), -1)


@base.implements(base.difference_sq_norm, GraphKernel)
def _difference_sq_norm(k, i, ws, ya, yb):
    # the difference built in the zeroed scratch vector, then read and cleared entry by entry
    m = _add_into(k, i, ya, yb, 1.0, ws.diff, ws.touched, 0)
    total = 0.0
    for q in range(m):
        v = ws.diff[ws.touched[q]]
        total += v * v
        ws.diff[ws.touched[q]] = 0.0
    return total


@base.implements(base.add_oracle_difference, GraphKernel)
def _add_oracle_difference(k, i, ws, y, c, w):
    n0, n, e0, E = _graph(k, i)
    gold = k.labels[n0 : n0 + n]
    if ws.fractional[0] == 0:
        _add_into(k, i, gold, y, c, w, ws.touched, -1)
        return
    K = k.n_states
    mu = ws.node_mu
    for t in range(n):
        g = gold[t]
        row = n0 + t
        for p in range(k.indptr[row], k.indptr[row + 1]):
            xv = c * k.values[p]
            for a in range(K):
                d = (1.0 if a == g else 0.0) - mu[t, a]
                if d == 0.0:
                    continue
                if k.sparse:
                    j = entry_position(k.entry_start, k.entry_count, k.support_labels, K, p, a)
                else:
                    j = k.indices[p] * K + a
                if j >= 0:
                    w[j] += xv * d
    off = k.n_unary
    F = k.edge_features.shape[1]
    P = k.n_pairs
    for e in range(E):
        u, v = k.edges[e0 + e, 0], k.edges[e0 + e, 1]
        qg = k.pair_index[gold[u], gold[v]]
        for f in range(F):
            z = c * k.edge_features[e0 + e, f]
            if z == 0.0:
                continue
            base_f = off + f * P
            w[base_f + qg] += z
            for a in range(K):
                for b in range(K):
                    m = ws.edge_mu[e, a, b]
                    if m != 0.0:
                        w[base_f + k.pair_index[a, b]] -= z * m


@base.implements(base.oracle_loss, GraphKernel)
def _oracle_loss(k, i, ws, y):
    n0, n, e0, E = _graph(k, i)
    if ws.fractional[0] == 0:
        return base.weighted_hamming(k.labels[n0 : n0 + n], k.loss_weights, y)
    total = 0.0
    for t in range(n):
        g = k.labels[n0 + t]
        total += k.loss_weights[g] * (1.0 - ws.node_mu[t, g])
    return total


@base.implements(base.status, GraphKernel)
def _status(k):
    return 0
