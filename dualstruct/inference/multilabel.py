"""Exact (loss-augmented) MAP inference for multi-label models with pairwise interactions.

A labelling ``y ∈ {0,1}^L`` of one example scores

    s(y) = Σ_l θ_l y_l + Σ_{e=(l,k)} V_e(y_l, y_k)

with unary scores ``θ_l = <U_l, x>`` and a 2×2 table ``V_e`` per edge (the "11" model uses
only ``V_e(1, 1)``). Loss augmentation with the Hamming loss ``Σ_l c_l [y_l ≠ ȳ_l]`` adds
``c_l`` to the unary score of the state ``1 − ȳ_l``, so every routine takes the augmented
unary tables ``a[l, s]`` (score of label l in state s) and the edge tables.

* :func:`enumerate_map`: all ``2^L`` labellings in Gray-code order (L ≤ 20; the ground truth
  the tests use);
* :func:`tree_map`: max-product on a forest (exact), two states per node, O(L).

Loopy graphs need the LP relaxation (issue 6), not written yet.
"""

import numpy as np
from numba import njit

MAX_ENUMERATION_LABELS = 20


def unary_tables(theta, gold=None, loss_weights=None):
    """``a[l, s]``: the score of label l in state s ∈ {0, 1}, loss-augmented when ``gold``
    is given (``+ c_l`` on the state that differs from the gold one)."""
    theta = np.asarray(theta, dtype=np.float64)
    a = np.zeros((theta.shape[0], 2))
    a[:, 1] = theta
    if gold is not None:
        c = np.ones(theta.shape[0]) if loss_weights is None else np.asarray(loss_weights, float)
        gold = np.asarray(gold, dtype=np.int64)
        a[np.arange(len(gold)), 1 - gold] += c
    return a


@njit(cache=True)
def labelling_score(a, edges, V, y):
    """``Σ_l a[l, y_l] + Σ_e V[e, y_l, y_k]``."""
    s = 0.0
    for l in range(a.shape[0]):
        s += a[l, y[l]]
    for e in range(edges.shape[0]):
        s += V[e, y[edges[e, 0]], y[edges[e, 1]]]
    return s


@njit(cache=True)
def enumerate_map(a, edges, V, out):
    """Exact argmax over all 2^L labellings (Gray code: one label flips per step, and only
    its unary score and incident edges are updated). Ties go to the first labelling in
    Gray-code order. Writes the argmax into ``out`` and returns its score."""
    L = a.shape[0]
    n_edges = edges.shape[0]
    # incidence lists
    degree = np.zeros(L, dtype=np.int64)
    for e in range(n_edges):
        degree[edges[e, 0]] += 1
        degree[edges[e, 1]] += 1
    start = np.zeros(L + 1, dtype=np.int64)
    for l in range(L):
        start[l + 1] = start[l] + degree[l]
    incident = np.empty(max(1, start[L]), dtype=np.int64)
    fill = start[:L].copy()
    for e in range(n_edges):
        for side in range(2):
            l = edges[e, side]
            incident[fill[l]] = e
            fill[l] += 1
    y = np.zeros(L, dtype=np.int64)
    score = labelling_score(a, edges, V, y)
    best = score
    out[:] = y
    for step in range(1, 1 << L):
        l = 0  # the bit that flips between Gray codes step - 1 and step
        while not (step >> l) & 1:
            l += 1
        old = y[l]
        new = 1 - old
        score += a[l, new] - a[l, old]
        for p in range(start[l], start[l + 1]):
            e = incident[p]
            i, k = edges[e, 0], edges[e, 1]
            before = V[e, y[i], y[k]]
            y[l] = new
            score += V[e, y[i], y[k]] - before
            y[l] = old
        y[l] = new
        if score > best:
            best = score
            out[:] = y
    return best


@njit(cache=True)
def tree_map(a, edges, V, out):
    """Exact argmax on a forest by max-product (two states per label). ``edges`` must not
    contain a cycle (checked: raises if it does). Writes the argmax into ``out`` and
    returns its score."""
    L = a.shape[0]
    n_edges = edges.shape[0]
    degree = np.zeros(L, dtype=np.int64)
    for e in range(n_edges):
        degree[edges[e, 0]] += 1
        degree[edges[e, 1]] += 1
    start = np.zeros(L + 1, dtype=np.int64)
    for l in range(L):
        start[l + 1] = start[l] + degree[l]
    nbr = np.empty(max(1, start[L]), dtype=np.int64)
    nbr_edge = np.empty(max(1, start[L]), dtype=np.int64)
    fill = start[:L].copy()
    for e in range(n_edges):
        i, k = edges[e, 0], edges[e, 1]
        nbr[fill[i]] = k
        nbr_edge[fill[i]] = e
        fill[i] += 1
        nbr[fill[k]] = i
        nbr_edge[fill[k]] = e
        fill[k] += 1
    # BFS order from a root per component; parent edge of each node
    order = np.empty(L, dtype=np.int64)
    parent = np.full(L, -1, dtype=np.int64)
    parent_edge = np.full(L, -1, dtype=np.int64)
    seen = np.zeros(L, dtype=np.bool_)
    n_order = 0
    for root in range(L):
        if seen[root]:
            continue
        seen[root] = True
        order[n_order] = root
        head = n_order
        n_order += 1
        while head < n_order:
            u = order[head]
            head += 1
            for p in range(start[u], start[u + 1]):
                v = nbr[p]
                if nbr_edge[p] == parent_edge[u]:
                    continue
                if seen[v]:
                    raise ValueError("tree_map: the edges contain a cycle")
                seen[v] = True
                parent[v] = u
                parent_edge[v] = nbr_edge[p]
                order[n_order] = v
                n_order += 1
    # upward pass: belief[u, s] = a[u, s] + Σ_children max_t (V(child edge) + belief[child, t])
    belief = a.copy()
    choice = np.zeros((L, 2), dtype=np.int64)  # best child state given the parent's state
    for r in range(L - 1, -1, -1):
        v = order[r]
        u = parent[v]
        if u < 0:
            continue
        e = parent_edge[v]
        u_first = edges[e, 0] == u
        for su in range(2):
            best_t, best_val = 0, -np.inf
            for sv in range(2):
                pair = V[e, su, sv] if u_first else V[e, sv, su]
                val = pair + belief[v, sv]
                if val > best_val:
                    best_t, best_val = sv, val
            belief[u, su] += best_val
            choice[v, su] = best_t
    total = 0.0
    for r in range(L):
        v = order[r]
        u = parent[v]
        if u < 0:
            out[v] = 0 if belief[v, 0] >= belief[v, 1] else 1
            total += belief[v, out[v]]
        else:
            out[v] = choice[v, out[u]]
    return total
