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
* :func:`lp_map`: the LP relaxation over the local polytope for any graph, solved exactly by
  one max-flow (roof duality, below); :func:`round_lp` turns its half-integral solution into
  a labelling.

**The LP relaxation by max-flow.** For binary labels the local polytope is parametrized by
``μ_l = q_l(1)`` and ``μ_e = q_e(1, 1)`` with ``max(0, μ_l + μ_k − 1) ≤ μ_e ≤ min(μ_l, μ_k)``
(the other three entries of ``q_e`` follow from consistency). Write a 2×2 table as
``V(y_l, y_k) = V00 + (V10 − V00) y_l + (V01 − V00) y_k + p_e y_l y_k`` with
``p_e = V11 − V10 − V01 + V00``, so the score is a quadratic pseudo-boolean function. Its LP
relaxation equals the *roof dual* (Hammer, Hansen & Simeone 1984; Boros & Hammer 2002): double
every label into ``z_l`` (meaning ``y_l``) and ``z̄_l`` (meaning ``1 − y_l``), write the energy
``−s`` as ``½[E(z) + E(1 − z̄)]`` with every pairwise term submodular — ``p_e > 0`` as
``½p_e (z_l z_k + (1 − z̄_l)(1 − z̄_k))``, ``p_e < 0`` as
``½|p_e| (z_l (1 − z̄_k) + (1 − z̄_l) z_k)`` in energy terms — and minimize it by one s–t min
cut on 2L + 2 nodes. A minimum cut gives the half-integral LP optimum
``μ_l = ½ (z_l + 1 − z̄_l) ∈ {0, ½, 1}``; the optimal ``μ_e`` is ``min(μ_l, μ_k)`` when
``p_e > 0`` and ``max(0, μ_l + μ_k − 1)`` otherwise. Labels with ``μ_l ∈ {0, 1}`` are
persistent (part of some integer optimum); the solution is *integral* when no label is ½, and
then it is an exact MAP labelling. The tests check the LP value against HiGHS.
"""

import numpy as np
from numba import njit

from .graph import labelling_score  # Σ_l a[l, y_l] + Σ_e V[e, y_l, y_k]

#: the modes of the oracles (``mode`` of :func:`map_all` and :func:`relaxed_oracle`): a tree's
#: max-product, enumeration of the labellings, the LP relaxation
TREE, ENUMERATE, LP = 0, 1, 2


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
def unary_scores(indptr, indices, values, i, U, theta):
    """``θ_l = <U[:, l], x_i>`` for every label (O(nnz(x_i) L))."""
    theta[:] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        f, v = indices[p], values[p]
        for l in range(U.shape[1]):
            theta[l] += v * U[f, l]


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
def _flip_tables(L, edges, V):
    """For the Gray-code walks: the incidence of every label (``start``, ``other`` as in
    :func:`_incidence`) and ``flip[p, o, v]``, the change of incidence p's edge score when
    its label flips from o to 1 − o while the other end holds v."""
    start, edge, other = _incidence(L, edges)
    flip = np.zeros((edge.shape[0], 2, 2))
    for l in range(L):
        for p in range(start[l], start[l + 1]):
            e = edge[p]
            for o in range(2):
                for v in range(2):
                    if edges[e, 0] == l:
                        flip[p, o, v] = V[e, 1 - o, v] - V[e, o, v]
                    else:
                        flip[p, o, v] = V[e, v, 1 - o] - V[e, v, o]
    return start, other, flip


@njit(cache=True)
def enumerate_map(a, edges, V, out):
    """Exact argmax over all 2^L labellings (Gray code: one label flips per step, and only
    its unary score and incident edges are updated). Ties go to the first labelling in
    Gray-code order. Writes the argmax into ``out`` and returns its score."""
    L = a.shape[0]
    start, other, flip = _flip_tables(L, edges, V)
    y = np.zeros(L, dtype=np.int64)
    score = labelling_score(a, edges, V, y)
    best = score
    out[:] = y
    for step in range(1, 1 << L):
        l = 0  # the bit that flips between Gray codes step - 1 and step
        while not (step >> l) & 1:
            l += 1
        old = y[l]
        score += a[l, 1 - old] - a[l, old]
        for p in range(start[l], start[l + 1]):
            score += flip[p, old, y[other[p]]]
        y[l] = 1 - old
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


@njit(cache=True, nogil=True)
def map_all(A, edges, V, mode, relaxed, out, integral):
    """The argmax of every example: ``A`` (n, L, 2) unary tables; ``mode`` 0 :func:`tree_map`,
    1 :func:`enumerate_map`, 2 :func:`lp_map` then :func:`round_lp` (returned scores are the
    LP values when ``relaxed``, else those of the rounded labellings; ``integral[i]`` says
    whether the LP optimum was integral). Returns the n maximal scores."""
    n, L = A.shape[0], A.shape[1]
    best = np.empty(n)
    mu = np.empty(L)
    mu_pair = np.empty(edges.shape[0])
    for i in range(n):
        integral[i] = True
        if mode == 0:
            best[i] = tree_map(A[i], edges, V, out[i])
        elif mode == 1:
            best[i] = enumerate_map(A[i], edges, V, out[i])
        else:
            value = lp_map(A[i], edges, V, mu, mu_pair)
            rounded, integral[i] = round_lp(A[i], edges, V, mu, out[i])
            best[i] = value if relaxed else rounded
    return best


@njit(cache=True)
def relaxed_oracle(a, edges, V, mode, mu, mu_pair, y):
    """The (loss-augmented) maximizer as a local-polytope point: ``mu`` (L) and ``mu_pair``
    (E) — the indicator of the exact argmax for modes 0 and 1, the LP optimum for mode 2 —
    and its score. ``y`` is scratch (L)."""
    if mode == 2:
        return lp_map(a, edges, V, mu, mu_pair)
    if mode == 0:
        value = tree_map(a, edges, V, y)
    else:
        value = enumerate_map(a, edges, V, y)
    for l in range(a.shape[0]):
        mu[l] = y[l]
    for e in range(edges.shape[0]):
        mu_pair[e] = y[edges[e, 0]] * y[edges[e, 1]]
    return value


@njit(cache=True)
def score_all(A, edges, V, Y):
    """``labelling_score`` of the labelling ``Y[i]`` of every example."""
    out = np.empty(A.shape[0])
    for i in range(A.shape[0]):
        out[i] = labelling_score(A[i], edges, V, Y[i])
    return out


@njit(cache=True)
def _min_cut_source_side(n_nodes, tail, head, cap, n_arcs, s, t, in_source):
    """Dinic's max-flow on arcs ``tail[j] → head[j]`` of capacity ``cap[j]`` (j < n_arcs);
    marks in ``in_source`` the nodes reachable from ``s`` in the final residual graph (the
    source side of a minimum cut). Capacities below ``1e-12 × max cap`` count as zero."""
    m = n_arcs
    biggest = 0.0
    for j in range(m):
        biggest = max(biggest, cap[j])
    eps = 1e-12 * biggest
    degree = np.zeros(n_nodes + 1, dtype=np.int64)
    for j in range(m):
        degree[tail[j] + 1] += 1
        degree[head[j] + 1] += 1
    start = np.cumsum(degree)
    fill = start[:n_nodes].copy()
    adj = np.empty(max(1, 2 * m), dtype=np.int64)
    to = np.empty(max(1, 2 * m), dtype=np.int64)
    res = np.empty(max(1, 2 * m))
    for j in range(m):  # arc 2j forward, 2j + 1 its reverse
        to[2 * j], res[2 * j] = head[j], cap[j]
        to[2 * j + 1], res[2 * j + 1] = tail[j], 0.0
        adj[fill[tail[j]]] = 2 * j
        fill[tail[j]] += 1
        adj[fill[head[j]]] = 2 * j + 1
        fill[head[j]] += 1
    level = np.empty(n_nodes, dtype=np.int64)
    queue = np.empty(n_nodes, dtype=np.int64)
    current = np.empty(n_nodes, dtype=np.int64)
    path = np.empty(n_nodes, dtype=np.int64)
    while True:
        level[:] = -1
        level[s] = 0
        queue[0] = s
        head_q, n_q = 0, 1
        while head_q < n_q:
            u = queue[head_q]
            head_q += 1
            for p in range(start[u], start[u + 1]):
                a = adj[p]
                if res[a] > eps and level[to[a]] < 0:
                    level[to[a]] = level[u] + 1
                    queue[n_q] = to[a]
                    n_q += 1
        if level[t] < 0:
            break
        current[:] = start[:n_nodes]
        depth = 0
        u = s
        while True:  # augmenting paths in the level graph, with dead-end pruning
            if u == t:
                push = np.inf
                for i in range(depth):
                    push = min(push, res[path[i]])
                for i in range(depth):
                    res[path[i]] -= push
                    res[path[i] ^ 1] += push
                depth, u = 0, s
                continue
            advanced = False
            while current[u] < start[u + 1]:
                a = adj[current[u]]
                v = to[a]
                if res[a] > eps and level[v] == level[u] + 1:
                    path[depth] = a
                    depth += 1
                    u = v
                    advanced = True
                    break
                current[u] += 1
            if not advanced:
                if u == s:
                    break
                level[u] = -1  # dead end for the rest of this phase
                depth -= 1
                u = to[path[depth] ^ 1]
                current[u] += 1
    in_source[:] = False
    in_source[s] = True
    queue[0] = s
    head_q, n_q = 0, 1
    while head_q < n_q:
        u = queue[head_q]
        head_q += 1
        for p in range(start[u], start[u + 1]):
            a = adj[p]
            if res[a] > eps and not in_source[to[a]]:
                in_source[to[a]] = True
                queue[n_q] = to[a]
                n_q += 1


@njit(cache=True)
def relaxed_score(a, edges, V, mu, mu_pair):
    """Score of a local-polytope point: ``Σ_l Σ_s a[l, s] q_l(s) + Σ_e Σ V_e q_e`` with
    ``q_l = (1 − μ_l, μ_l)`` and ``q_e`` recovered from ``(μ_l, μ_k, μ_e)``."""
    total = 0.0
    for l in range(a.shape[0]):
        total += a[l, 0] + (a[l, 1] - a[l, 0]) * mu[l]
    for e in range(edges.shape[0]):
        ml, mk, m11 = mu[edges[e, 0]], mu[edges[e, 1]], mu_pair[e]
        total += (
            V[e, 0, 0] * (1.0 - ml - mk + m11)
            + V[e, 1, 0] * (ml - m11)
            + V[e, 0, 1] * (mk - m11)
            + V[e, 1, 1] * m11
        )
    return total


@njit(cache=True)
def _labels_surely_off(L, edges, u, p):
    """The labels that are 0 in every optimum of the LP relaxation, for the energy
    ``Σ_l u_l y_l + Σ_e p_e y_l y_k`` (−score, tables reduced as in :func:`lp_map`).

    In the local polytope label l contributes ``−u_l μ_l − Σ_{e ∋ l} p_e μ_e`` to the score,
    and ``0 <= μ_e <= μ_l``, so it contributes at most ``μ_l b_l`` with
    ``b_l = −u_l + Σ_{e ∋ l} max(0, −p_e)``. When ``b_l < 0``, setting μ_l and the pair
    marginals of its edges to 0 (feasible: ``max(0, μ_l + μ_k − 1) = 0``) raises the score
    whenever μ_l > 0, so μ_l = 0 at every optimum; its edges then add nothing to the other
    labels' bounds, which are lowered and the rule applied again until no label is removed.
    Far from the gold labels most labels of a large label set go this way, so the minimum
    cut runs on the few that may be on (BENCHMARKS.md, "delicious: 983 labels")."""
    off = np.zeros(L, dtype=np.bool_)
    bound = np.empty(L)
    changed = True
    while changed:  # a few rounds of O(E), no allocation of the size of the graph
        for l in range(L):
            bound[l] = -u[l]
        for e in range(edges.shape[0]):
            i, k = edges[e, 0], edges[e, 1]
            if p[e] < 0.0 and not off[i] and not off[k]:
                bound[i] -= p[e]
                bound[k] -= p[e]
        changed = False
        for l in range(L):
            if not off[l] and bound[l] < 0.0:
                off[l] = True
                changed = True
    return off


@njit(cache=True)
def lp_map(a, edges, V, mu, mu_pair):
    """The LP relaxation of ``max_y s(y)`` over the local polytope, exactly, by one minimum
    cut (module docstring). Writes the half-integral optimum into ``mu`` (L) and ``mu_pair``
    (E) and returns its score (an upper bound on the integer optimum; equal to it on
    forests and whenever the solution is integral)."""
    L, E = a.shape[0], edges.shape[0]
    u = np.empty(L)  # energy (−score) coefficient of y_l after reducing the tables
    for l in range(L):
        u[l] = a[l, 0] - a[l, 1]
    p = np.empty(E)  # energy coefficient of y_l y_k (minus the score's p_e)
    for e in range(E):
        i, k = edges[e, 0], edges[e, 1]
        u[i] -= V[e, 1, 0] - V[e, 0, 0]
        u[k] -= V[e, 0, 1] - V[e, 0, 0]
        p[e] = -(V[e, 1, 1] - V[e, 1, 0] - V[e, 0, 1] + V[e, 0, 0])
    off = _labels_surely_off(L, edges, u, p)
    n_nodes = 2 * L + 2
    s, t = 2 * L, 2 * L + 1
    tail = np.empty(2 * E + 2 * L, dtype=np.int64)
    head = np.empty(2 * E + 2 * L, dtype=np.int64)
    cap = np.empty(2 * E + 2 * L)
    cz = np.zeros(2 * L)  # unary energy coefficient of each node variable z_v
    m = 0
    for l in range(L):  # ½ u (z_l + 1 − z̄_l)
        cz[l] += 0.5 * u[l]
        cz[L + l] -= 0.5 * u[l]
    for e in range(E):
        i, k = edges[e, 0], edges[e, 1]
        if off[i] or off[k]:
            continue  # y_i y_k = 0: the edge's linear parts are in u already
        c = 0.5 * p[e]
        if c < 0.0:
            # c z_i z_k = c z_i + |c| z_i (1 − z_k): arc k → i
            cz[i] += c
            tail[m], head[m], cap[m] = k, i, -c
            m += 1
            # c (1 − z̄_i)(1 − z̄_k) = c − c z̄_i − c z̄_k + c z̄_i z̄_k, where
            # c z̄_i z̄_k = c z̄_i + |c| z̄_i (1 − z̄_k): net −c z̄_k and arc k̄ → ī
            cz[L + k] -= c
            tail[m], head[m], cap[m] = L + k, L + i, -c
            m += 1
        elif c > 0.0:
            # c z_i (1 − z̄_k) + c (1 − z̄_i) z_k: arcs k̄ → i and ī → k
            tail[m], head[m], cap[m] = L + k, i, c
            m += 1
            tail[m], head[m], cap[m] = L + i, k, c
            m += 1
    for v in range(2 * L):
        if off[v % L]:
            continue
        if cz[v] > 0.0:  # pay when z_v = 1 (v on the sink side)
            tail[m], head[m], cap[m] = s, v, cz[v]
            m += 1
        elif cz[v] < 0.0:  # pay |cz| when z_v = 0
            tail[m], head[m], cap[m] = v, t, -cz[v]
            m += 1
    in_source = np.zeros(n_nodes, dtype=np.bool_)
    _min_cut_source_side(n_nodes, tail, head, cap, m, s, t, in_source)
    for l in range(L):
        z = 0.0 if in_source[l] else 1.0
        zbar = 0.0 if in_source[L + l] else 1.0
        mu[l] = 0.0 if off[l] else 0.5 * (z + 1.0 - zbar)
    for e in range(E):
        ml, mk = mu[edges[e, 0]], mu[edges[e, 1]]
        if p[e] < 0.0:  # the score rewards (1, 1)
            mu_pair[e] = min(ml, mk)
        else:
            mu_pair[e] = max(0.0, ml + mk - 1.0)
    return relaxed_score(a, edges, V, mu, mu_pair)


@njit(cache=True)
def round_lp(a, edges, V, mu, out):
    """A labelling from a half-integral LP solution: persistent labels keep their value, the
    ½ labels start at 0 and are improved by greedy flips (ICM) until no single flip of
    theirs raises the score. Returns the labelling's score and whether ``mu`` was
    integral."""
    L = a.shape[0]
    integral = True
    for l in range(L):
        if mu[l] > 0.75:
            out[l] = 1
        else:
            out[l] = 0
            if mu[l] > 0.25:
                integral = False
    if not integral:
        start, incident, _ = _incidence(L, edges)
        for _sweep in range(L + 1):
            changed = False
            for l in range(L):
                if mu[l] < 0.25 or mu[l] > 0.75:
                    continue
                old = out[l]
                gain = a[l, 1 - old] - a[l, old]
                for p in range(start[l], start[l + 1]):
                    e = incident[p]
                    i, k = edges[e, 0], edges[e, 1]
                    before = V[e, out[i], out[k]]
                    out[l] = 1 - old
                    gain += V[e, out[i], out[k]] - before
                    out[l] = old
                if gain > 1e-12:
                    out[l] = 1 - old
                    changed = True
            if not changed:
                break
    return labelling_score(a, edges, V, out), integral


@njit(cache=True)
def relaxed_sums(A, edges, V, mode, Y, loss_weights, mu, pair_sum):
    """For every example the loss-augmented maximizer as a local-polytope point: ``mu[i]``
    (L) and, summed over the examples, ``pair_sum[e] = Σ_i (ȳ_il ȳ_ik − μ^pair_ie)``. Returns
    the maximal (relaxed) scores and the Hamming losses of the maximizers."""
    n, L, E = A.shape[0], A.shape[1], edges.shape[0]
    best = np.empty(n)
    losses = np.empty(n)
    mu_pair = np.empty(E)
    y = np.zeros(L, dtype=np.int64)
    pair_sum[:] = 0.0
    for i in range(n):
        best[i] = relaxed_oracle(A[i], edges, V, mode, mu[i], mu_pair, y)
        loss = 0.0
        for l in range(L):
            loss += loss_weights[l] * abs(mu[i, l] - Y[i, l])
        losses[i] = loss
        for e in range(E):
            pair_sum[e] += Y[i, edges[e, 0]] * Y[i, edges[e, 1]] - mu_pair[e]
    return best, losses


@njit(cache=True)
def loss_table(a, edges, V, gold, best, best_y):
    """For every Hamming distance m = 0..L from ``gold``, the best score ``best[m]`` of a
    labelling at that distance and the labelling ``best_y[m]`` (−inf where none), by
    enumeration in Gray-code order (L ≤ 16). ``a`` holds the plain (not loss-augmented)
    unary tables. This table answers the slack-rescaled oracle exactly (for a fixed loss,
    ``δ (1 + s − s(ȳ))`` grows with the score) and the constrained λ-oracle of Choi, Meshi
    and Srebro (2016) with its two linear constraints on (h, g)."""
    L = a.shape[0]
    start, other, flip = _flip_tables(L, edges, V)
    y = np.zeros(L, dtype=np.int64)
    score = labelling_score(a, edges, V, y)
    loss = 0
    for l in range(L):
        loss += gold[l] != 0
    best[:] = -np.inf
    best[loss] = score
    best_y[loss, :] = y
    for step in range(1, 1 << L):
        l = 0
        while not (step >> l) & 1:
            l += 1
        old = y[l]
        new = 1 - old
        score += a[l, new] - a[l, old]
        for p in range(start[l], start[l + 1]):
            score += flip[p, old, y[other[p]]]
        y[l] = new
        loss += 1 if new != gold[l] else -1
        if score > best[loss]:
            best[loss] = score
            best_y[loss, :] = y
    return labelling_score(a, edges, V, gold)


@njit(cache=True)
def slack_oracle(a, edges, V, gold, scale, best, best_y, out):
    """``max_y δ(ȳ, y) (1 + scale (s(y) − s(ȳ)))`` over all labellings (unit Hamming loss)
    and its maximizer in ``out`` (ȳ itself, value 0, when no labelling beats it). Returns
    (value, loss of the maximizer)."""
    gold_score = loss_table(a, edges, V, gold, best, best_y)
    value, arg = 0.0, 0
    for m in range(1, best.shape[0]):
        if best[m] == -np.inf:
            continue
        phi = m * (1.0 + scale * (best[m] - gold_score))
        if phi > value:
            value, arg = phi, m
    if arg == 0:
        out[:] = gold
    else:
        out[:] = best_y[arg]
    return value, arg


@njit(cache=True)
def slack_all(A, edges, V, Y, out):
    """The slack-rescaled hinge of every example and its maximizers (``A`` plain tables)."""
    n, L = A.shape[0], A.shape[1]
    best = np.empty(L + 1)
    best_y = np.zeros((L + 1, L), dtype=np.int64)
    hinge = np.empty(n)
    for i in range(n):
        hinge[i], _ = slack_oracle(A[i], edges, V, Y[i], 1.0, best, best_y, out[i])
    return hinge
