"""MAP inference on pairwise graphs (numba kernels).

A labelling x of the nodes of one graph scores

    s(x) = Σ_u θ_u(x_u) + Σ_{e=(u,v)} θ_e(x_u, x_v)

with node potentials ``theta`` (n × K) and edge potentials ``pot`` (E × K × K, indexed by the
edge's first and second node). Three maximizers:

* :func:`forest_map`: exact max-product on forests (each tree rooted, one pass up and one
  down), O(E K²).
* :func:`enumerate_map`: exact enumeration of all K^n labellings, for tiny graphs (tests).
* :func:`lp_map`: the LP relaxation over the local polytope, solved in the dual by MPLP,
  block-coordinate descent over edges (Globerson and Jaakkola 2007). With messages δ the
  dual

      L(δ) = Σ_u max_{x_u} [θ_u(x_u) + Σ_{e ∋ u} δ_{e→u}(x_u)]
           + Σ_e max_{x_u, x_v} [θ_e(x_u, x_v) − δ_{e→u}(x_u) − δ_{e→v}(x_v)]

  bounds max_x s(x) from above for every δ. The update of edge e = (u, v) with
  a = b_u − δ_{e→u}, c = b_v − δ_{e→v} (b the node beliefs) is

      δ_{e→u}(x_u) = −½ a(x_u) + ½ max_{x_v} [θ_e(x_u, x_v) + c(x_v)]
      δ_{e→v}(x_v) = −½ c(x_v) + ½ max_{x_u} [θ_e(x_u, x_v) + a(x_u)]

  which makes the edge term vanish and never raises L. The labelling decoded from the
  beliefs has a score s(x̂) ≤ max s ≤ L(δ); when the two meet the LP is tight there and x̂ is
  a certified maximizer. The kernel returns (s(x̂), L(δ)).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, inline="always")  # compiled into the kernels' score functions
def labelling_score(theta, edges, pot, x):
    """s(x)."""
    s = 0.0
    for u in range(theta.shape[0]):
        s += theta[u, x[u]]
    for e in range(edges.shape[0]):
        s += pot[e, x[edges[e, 0]], x[edges[e, 1]]]
    return s


@njit(cache=True, inline="always")
def find(parent, a):
    """The root of ``a`` in the union-find forest ``parent``, halving the path."""
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


@njit(cache=True)
def is_forest(n, edges):
    """Whether the graph with ``n`` nodes and ``edges`` has no cycle (union-find)."""
    parent = np.arange(n)
    for e in range(edges.shape[0]):
        a, b = find(parent, edges[e, 0]), find(parent, edges[e, 1])
        if a == b:
            return False
        parent[a] = b
    return True


@njit(cache=True)
def forest_map(theta, edges, pot, x):
    """Exact MAP on a forest into ``x``; returns its score."""
    n, K = theta.shape
    E = edges.shape[0]
    # adjacency (CSR of incident edges)
    degree = np.zeros(n + 1, dtype=np.int64)
    for e in range(E):
        degree[edges[e, 0] + 1] += 1
        degree[edges[e, 1] + 1] += 1
    for u in range(n):
        degree[u + 1] += degree[u]
    fill = degree[:-1].copy()
    incident = np.empty(2 * E, dtype=np.int64)
    for e in range(E):
        for side in range(2):
            u = edges[e, side]
            incident[fill[u]] = e
            fill[u] += 1
    # breadth-first order of every tree, with each node's edge to its parent
    order = np.empty(n, dtype=np.int64)
    parent_edge = np.full(n, -1, dtype=np.int64)
    seen = np.zeros(n, dtype=np.bool_)
    head = tail = 0
    for root in range(n):
        if seen[root]:
            continue
        seen[root] = True
        order[tail] = root
        tail += 1
        while head < tail:
            u = order[head]
            head += 1
            for p in range(degree[u], degree[u + 1]):
                e = incident[p]
                v = edges[e, 1] if edges[e, 0] == u else edges[e, 0]
                if not seen[v]:
                    seen[v] = True
                    parent_edge[v] = e
                    order[tail] = v
                    tail += 1
    # upward: belief[v] = θ_v + messages of the children; message to the parent and argmax
    belief = theta.copy()
    best_child = np.empty((n, K), dtype=np.int64)  # argmax of v's label per parent label
    for idx in range(n - 1, -1, -1):
        v = order[idx]
        e = parent_edge[v]
        if e < 0:
            continue
        v_first = edges[e, 0] == v
        u = edges[e, 1] if v_first else edges[e, 0]
        for a in range(K):  # label of the parent u
            best = -np.inf
            arg = 0
            for b in range(K):  # label of v
                val = belief[v, b] + (pot[e, b, a] if v_first else pot[e, a, b])
                if val > best:
                    best = val
                    arg = b
            belief[u, a] += best
            best_child[v, a] = arg
    # downward: roots take their best label, children follow
    total = 0.0
    for idx in range(n):
        v = order[idx]
        e = parent_edge[v]
        if e < 0:
            arg = 0
            for a in range(1, K):
                if belief[v, a] > belief[v, arg]:
                    arg = a
            x[v] = arg
            total += belief[v, arg]
        else:
            u = edges[e, 1] if edges[e, 0] == v else edges[e, 0]
            x[v] = best_child[v, x[u]]
    return total


@njit(cache=True)
def enumerate_map(theta, edges, pot, x):
    """Exact MAP by enumerating all K^n labellings (tiny graphs); returns the score."""
    n, K = theta.shape
    cur = np.zeros(n, dtype=np.int64)
    best = -np.inf
    while True:
        s = labelling_score(theta, edges, pot, cur)
        if s > best:
            best = s
            for u in range(n):
                x[u] = cur[u]
        u = 0
        while u < n and cur[u] == K - 1:
            cur[u] = 0
            u += 1
        if u == n:
            return best
        cur[u] += 1


@njit(cache=True)
def lp_map(theta, edges, pot, x, max_sweeps, tol):
    """MPLP on the local-polytope LP from zero messages (module docstring). Writes the
    decoded labelling into ``x`` and returns ``(s(x), L)``: its score and the dual bound
    (equal when certified); stopping rules as :func:`mplp`."""
    E, K = edges.shape[0], theta.shape[1]
    to_first = np.zeros((E, K))
    to_second = np.zeros((E, K))
    belief = np.empty_like(theta)
    value, bound, _ = mplp(
        theta, edges, pot, to_first, to_second, belief, x, max_sweeps, tol, -np.inf
    )
    return value, bound


@njit(cache=True)
def mplp(theta, edges, pot, to_first, to_second, belief, x, max_sweeps, tol, target):
    """MPLP from the messages ``to_first`` (δ_{e→u}) and ``to_second`` (δ_{e→v}), updated in
    place (a warm start: any messages give a valid bound). Writes the best decoded labelling
    into ``x`` and the final node beliefs into ``belief``; returns ``(s(x), L, sweeps)``.
    Stops when ``L − s(x) ≤ tol · max(1, |L|)``, when the bound has fallen by less than
    ``1e-6 · max(1, |L|)`` over the last 10 sweeps (MPLP has stalled: the LP is not tight
    there, or descent has reached a corner of the non-smooth dual), when ``L ≤ target`` (a
    branch and bound's node that can be pruned), or after ``max_sweeps`` sweeps over the
    edges."""
    n, K = theta.shape
    E = edges.shape[0]
    for u in range(n):
        for k in range(K):
            belief[u, k] = theta[u, k]
    for e in range(E):
        u, v = edges[e, 0], edges[e, 1]
        for k in range(K):
            belief[u, k] += to_first[e, k]
            belief[v, k] += to_second[e, k]
    a = np.empty(K)
    c = np.empty(K)
    best_value = -np.inf
    bound = np.inf
    xs = np.empty(n, dtype=np.int64)
    x[:n] = 0  # a labelling even if no sweep improves on −inf (NaN potentials)
    history = np.full(10, np.inf)  # the bound over the last 10 sweeps
    sweeps = 0
    for _sweep in range(max_sweeps):
        sweeps += 1
        for e in range(E):
            u, v = edges[e, 0], edges[e, 1]
            for k in range(K):
                a[k] = belief[u, k] - to_first[e, k]
                c[k] = belief[v, k] - to_second[e, k]
            for p in range(K):
                m = -np.inf
                for q in range(K):
                    val = pot[e, p, q] + c[q]
                    if val > m:
                        m = val
                to_first[e, p] = 0.5 * (m - a[p])
            for q in range(K):
                m = -np.inf
                for p in range(K):
                    val = pot[e, p, q] + a[p]
                    if val > m:
                        m = val
                to_second[e, q] = 0.5 * (m - c[q])
            for k in range(K):
                belief[u, k] = a[k] + to_first[e, k]
                belief[v, k] = c[k] + to_second[e, k]
        # the dual value and the decoded labelling
        L = dual_value(theta, edges, pot, to_first, to_second, belief, xs)
        bound = min(bound, L)
        history[_sweep % 10] = bound
        value = labelling_score(theta, edges, pot, xs)
        if value > best_value:
            best_value = value
            for u in range(n):
                x[u] = xs[u]
        if bound - best_value <= tol * max(1.0, abs(bound)) or bound <= target:
            break
        if _sweep >= 10 and history[(_sweep + 1) % 10] - bound <= 1e-6 * max(1.0, abs(bound)):
            break
    return best_value, bound, sweeps


@njit(cache=True)
def dual_value(theta, edges, pot, to_first, to_second, belief, xs):
    """``L(δ)`` at the messages, with ``belief`` the node beliefs they give; the beliefs'
    argmax labelling into ``xs``."""
    n, K = theta.shape
    L = 0.0
    for u in range(n):
        arg = 0
        for k in range(1, K):
            if belief[u, k] > belief[u, arg]:
                arg = k
        xs[u] = arg
        L += belief[u, arg]
    for e in range(edges.shape[0]):
        m = -np.inf
        for p in range(K):
            for q in range(K):
                val = pot[e, p, q] - to_first[e, p] - to_second[e, q]
                if val > m:
                    m = val
        L += m
    return L
