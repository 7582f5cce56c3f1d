"""Exact (loss-augmented) MAP inference for multi-label models with pairwise interactions.

A labelling ``y ∈ {0,1}^L`` of one example scores

    s(y) = Σ_l θ_l y_l + Σ_{e=(l,k)} V_e(y_l, y_k)

with unary scores ``θ_l = <U_l, x>`` and a 2×2 table ``V_e`` per edge (the "11" model uses
only ``V_e(1, 1)``). Loss augmentation with the Hamming loss ``Σ_l c_l [y_l ≠ ȳ_l]`` adds
``c_l`` to the unary score of the state ``1 − ȳ_l``, so every routine takes the augmented
unary tables ``a[l, s]`` (score of label l in state s) and the edge tables.

* :func:`enumerate_map`: all ``2^L`` labellings in Gray-code order (the model uses it up to
  L = 16; the ground truth of the tests);
* :func:`tree_map`: max-product on a forest (exact), two states per node, O(L).

Loopy graphs need the LP relaxation (issue 6), not written yet.
"""

import numpy as np
from numba import njit


def unary_tables(theta, gold=None, loss_weights=None):
    """``a[..., l, s]``: the score of label l in state s ∈ {0, 1} for unary scores ``theta``
    of shape (L,) or (n, L); loss-augmented when ``gold`` (same shape) is given (``+ c_l``
    on the state that differs from the gold one)."""
    theta = np.asarray(theta, dtype=np.float64)
    a = np.zeros(theta.shape + (2,))
    a[..., 1] = theta
    if gold is not None:
        c = np.ones(theta.shape[-1]) if loss_weights is None else np.asarray(loss_weights, float)
        gold = np.asarray(gold, dtype=np.int64)
        a[..., 0] += c * gold  # state 0 differs from a gold 1
        a[..., 1] += c * (1 - gold)
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
def _incidence(L, edges):
    """CSR incidence of the labels: for label l, ``edge[start[l]:start[l + 1]]`` are its
    edges and ``other[...]`` the labels at their other ends."""
    degree = np.zeros(L, dtype=np.int64)
    for e in range(edges.shape[0]):
        degree[edges[e, 0]] += 1
        degree[edges[e, 1]] += 1
    start = np.zeros(L + 1, dtype=np.int64)
    for l in range(L):
        start[l + 1] = start[l] + degree[l]
    edge = np.empty(max(1, start[L]), dtype=np.int64)
    other = np.empty(max(1, start[L]), dtype=np.int64)
    fill = start[:L].copy()
    for e in range(edges.shape[0]):
        for side in range(2):
            l = edges[e, side]
            edge[fill[l]] = e
            other[fill[l]] = edges[e, 1 - side]
            fill[l] += 1
    return start, edge, other


@njit(cache=True)
def enumerate_map(a, edges, V, out):
    """Exact argmax over all 2^L labellings (Gray code: one label flips per step, and only
    its unary score and incident edges are updated). Ties go to the first labelling in
    Gray-code order. Writes the argmax into ``out`` and returns its score."""
    L = a.shape[0]
    start, incident, _ = _incidence(L, edges)
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
    start, nbr_edge, nbr = _incidence(L, edges)
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


@njit(cache=True)
def map_all(A, edges, V, forest, out):
    """The argmax of every example: ``A`` (n, L, 2) unary tables, ``forest`` selects
    :func:`tree_map` over :func:`enumerate_map`. Returns the n maximal scores."""
    n = A.shape[0]
    best = np.empty(n)
    for i in range(n):
        if forest:
            best[i] = tree_map(A[i], edges, V, out[i])
        else:
            best[i] = enumerate_map(A[i], edges, V, out[i])
    return best


@njit(cache=True)
def score_all(A, edges, V, Y):
    """``labelling_score`` of the labelling ``Y[i]`` of every example."""
    out = np.empty(A.shape[0])
    for i in range(A.shape[0]):
        out[i] = labelling_score(A[i], edges, V, Y[i])
    return out
