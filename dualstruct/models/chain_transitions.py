"""The chain's transition search: the four-case search for the best pair of a transition
factor (:func:`bigram_sorted`) over a max-tree of the training transitions, shared by the
chain's factor oracles (:mod:`dualstruct.models.chain_factors`) and the chain GDMM
(:mod:`dualstruct.solvers._gdmm_kernels`, whose docstring derives it).

Only the training transitions ("listed" pairs) can have ``W_B[a, b] > 0``: W_B is C times
the gold transition counts minus the summed edge marginals. The search needs order on the
listed pairs only; every other pair is 0 or negative.
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from .support import support_position


class Transitions(NamedTuple):
    """The bigram search's structures over the training transitions (:func:`bigram_sorted`)."""

    sorted_search: bool  # the four-case search, else brute force
    tree: np.ndarray  # the max-tree (:func:`build_transition_tree`)
    vals: np.ndarray  # their W_B
    pos_ptr: np.ndarray  # by rows, in column order
    pos_col: np.ndarray
    pos_row: np.ndarray
    cpos_ptr: np.ndarray  # by columns
    cpos_idx: np.ndarray
    top: np.ndarray  # the largest listed W_B of every row and column
    top_at: np.ndarray  # and its position


@njit(cache=True, inline="always")
def listed_position(pos_ptr, pos_col, a, b):
    """The position of (a, b) among the listed transitions ``pos_col[pos_ptr[a]:pos_ptr[a +
    1]]`` (sorted: bisection), or −1 if the pair is not listed."""
    return support_position(pos_ptr, pos_col, -1, a, b)  # (no row holds −1 entries)


@njit(cache=True)
def _wins(vals, i, j):
    """Listed transition i ranks above j: larger W_B, ties to the smaller position (which is
    the order of a·K + b)."""
    return vals[i] > vals[j] or (vals[i] == vals[j] and i < j)


@njit(cache=True)
def build_transition_tree(tree, vals):
    """Segment tree over the n listed transitions, ``vals[i]`` the W_B of the i-th
    (n = len(tree) // 2): node n + i is leaf i, node m < n holds the better leaf of nodes 2m
    and 2m + 1, node 1 the best of all."""
    n = tree.shape[0] // 2
    for i in range(n):
        tree[n + i] = i
    for m in range(n - 1, 0, -1):
        a, b = tree[2 * m], tree[2 * m + 1]
        tree[m] = a if _wins(vals, a, b) else b


@njit(cache=True, inline="always")
def tree_update(tree, vals, leaf):
    """Restore the tree after the value of ``leaf`` changed: O(log n)."""
    n = tree.shape[0] // 2
    m = (n + leaf) // 2
    while m >= 1:
        a, b = tree[2 * m], tree[2 * m + 1]
        tree[m] = a if _wins(vals, a, b) else b
        m //= 2


@njit(cache=True)
def tree_best(tree, vals, pos_row, pos_col, mark_a, mark_b, stamp, floor, stack):
    """The best listed transition (a, b) with a unmarked in ``mark_a``, b unmarked in
    ``mark_b`` and ``W_B[a, b] >= floor``, or −1.

    Depth-first search from the root that descends only below excluded subtree maxima and
    prunes subtrees whose maximum ranks below the best leaf found or lies below ``floor``:
    O((|excluded above floor| + 1) log n).
    """
    n = tree.shape[0] // 2
    best = -1
    if n == 0:
        return best
    stack[0] = 1
    sp = 1
    while sp > 0:
        sp -= 1
        m = stack[sp]
        leaf = tree[m]
        if vals[leaf] < floor:
            continue
        if best >= 0 and not _wins(vals, leaf, best):
            continue
        if mark_a[pos_row[leaf]] != stamp and mark_b[pos_col[leaf]] != stamp:
            best = leaf
            continue
        if m < n:
            a, b = tree[2 * m], tree[2 * m + 1]
            if _wins(vals, a, b):  # visit the better child first
                stack[sp] = 2 * m + 1
                stack[sp + 1] = 2 * m
            else:
                stack[sp] = 2 * m
                stack[sp + 1] = 2 * m + 1
            sp += 2
    return best


@njit(cache=True, inline="always")
def _rescan_top(vals, side, line, pos_ptr, cpos_ptr, cpos_idx, top, top_at):
    """The largest W_B among the listed pairs of row ``line`` (side 0) or column ``line``
    (side 1) and its position: ``top[side, line]``, ``top_at[side, line]`` (−inf, −1 if the
    line lists none)."""
    best, at = -np.inf, -1
    if side == 0:
        for p in range(pos_ptr[line], pos_ptr[line + 1]):
            if at < 0 or vals[p] > best:
                best, at = vals[p], p
    else:
        for q in range(cpos_ptr[line], cpos_ptr[line + 1]):
            p = cpos_idx[q]
            if at < 0 or vals[p] > best:
                best, at = vals[p], p
    top[side, line] = best
    top_at[side, line] = at


@njit(cache=True)
def tops_build(vals, pos_ptr, cpos_ptr, cpos_idx, top, top_at):
    """Every row's and column's largest listed W_B (:func:`_rescan_top`)."""
    for line in range(top.shape[1]):
        _rescan_top(vals, 0, line, pos_ptr, cpos_ptr, cpos_idx, top, top_at)
        _rescan_top(vals, 1, line, pos_ptr, cpos_ptr, cpos_idx, top, top_at)


@njit(cache=True, inline="always")
def _top_changed(vals, side, line, p, pos_ptr, cpos_ptr, cpos_idx, top, top_at):
    """Listed pair p of a row or column changed its value: O(1) unless it was the line's
    top and went down (then the line is rescanned)."""
    value = vals[p]
    if top_at[side, line] == p:
        if value >= top[side, line]:
            top[side, line] = value
        else:
            _rescan_top(vals, side, line, pos_ptr, cpos_ptr, cpos_idx, top, top_at)
    elif value > top[side, line]:
        top[side, line] = value
        top_at[side, line] = p


@njit(cache=True, inline="always")
def _listed_changed(value, p, a, b, tree, vals, pos_ptr, cpos_ptr, cpos_idx, top, top_at):
    """W_B[a, b] of listed pair p (a training transition) changed to ``value``: its copy in
    ``vals``, the max-tree and the tops of row a and column b are restored.

    Every other pair has ``W_B = −C·(its mass) <= 0`` exactly, so the pass drops the rounding
    residue of an emptied unlisted pair back to 0: the bigram search relies on the sign."""
    vals[p] = value
    tree_update(tree, vals, p)
    _top_changed(vals, 0, a, p, pos_ptr, cpos_ptr, cpos_idx, top, top_at)
    _top_changed(vals, 1, b, p, pos_ptr, cpos_ptr, cpos_idx, top, top_at)


# ------------------------------------------------------------------------------------------
# factorwise maximization oracles
# ------------------------------------------------------------------------------------------
@njit(cache=True)
def _pair_wins(g, a, b, best_g, best_a, best_b, K):
    return best_a < 0 or g < best_g or (g == best_g and a * K + b < best_a * K + best_b)


@njit(cache=True)
def _floor(best_a, best_g, mu, C):
    if best_a < 0:
        return -np.inf
    t = (mu - best_g) / C
    # the rounding error of t scales with its summands, not with t
    return t - 1e-9 * (1.0 + abs(t) + (abs(mu) + abs(best_g)) / C)


@njit(cache=True)
def bigram_brute(W_B, C, act_a, n_a, mu_a, act_b, n_b, mu_b, dense_a, dense_b):
    """argmin over all K² pairs of ``−C W_B[a, b] + μ^L(a) + μ^R(b)`` (messages given on the
    active slots); ``dense_a``/``dense_b`` are zeroed K-vectors of scratch. Returns
    ``(a, b, gradient)``."""
    K = W_B.shape[0]
    for s in range(n_a):
        dense_a[act_a[s]] = mu_a[s]
    for s in range(n_b):
        dense_b[act_b[s]] = mu_b[s]
    best_a, best_b, best_g = -1, -1, 0.0
    for a in range(K):
        # the row's first minimum (strict <), then rows in order (strict <): the same
        # smallest-index tie-break as _pair_wins, with the same rounding of g
        mu = dense_a[a]
        row_b = 0
        row_g = -C * W_B[a, 0] + mu + dense_b[0]
        for b in range(1, K):
            g = -C * W_B[a, b] + mu + dense_b[b]
            if g < row_g:
                row_b, row_g = b, g
        if best_a < 0 or row_g < best_g:
            best_a, best_b, best_g = a, row_b, row_g
    for s in range(n_a):
        dense_a[act_a[s]] = 0.0
    for s in range(n_b):
        dense_b[act_b[s]] = 0.0
    return best_a, best_b, best_g


@njit(cache=True)
def _first_zero(W_B, fixed, mark, stamp, by_row):
    """The smallest unmarked index i with W_B[fixed, i] == 0 (``by_row``) or W_B[i, fixed] == 0,
    or −1."""
    K = W_B.shape[0]
    for i in range(K):
        if mark[i] != stamp:
            v = W_B[fixed, i] if by_row else W_B[i, fixed]
            if v == 0.0:
                return i
    return -1


@njit(cache=True)
def _zero_partner(W_B, C, fixed, mu, mark, stamp, by_row, best_a, best_b, best_g):
    """The best so far against the zero entries of row ``fixed`` (``by_row``) or column
    ``fixed``, whose partners are unmarked and whose gradient is ``−C W_B + μ``: the first
    unmarked zero stands for them all; if there is none (every unmarked entry touched: tiny
    K), every unmarked entry is scanned."""
    K = W_B.shape[0]
    first = _first_zero(W_B, fixed, mark, stamp, by_row)
    lo, hi = (first, first + 1) if first >= 0 else (0, K)
    for i in range(lo, hi):
        if mark[i] == stamp:
            continue
        a, b = (fixed, i) if by_row else (i, fixed)
        g = -C * W_B[a, b] + mu
        if _pair_wins(g, a, b, best_g, best_a, best_b, K):
            best_a, best_b, best_g = a, b, g
    return best_a, best_b, best_g


@njit(cache=True)
def bigram_sorted(
    trans, W_B, C, act_a, n_a, mu_a, act_b, n_b, mu_b, mark_a, mark_b, slot_b, stamp, stack
):
    """The same argmin as :func:`bigram_brute` by the four-case search (module docstring).

    The active labels must be marked (``mark_a[act_a[s]] == stamp``, likewise for b) with
    ``slot_b[act_b[s]] == s``. ``trans`` (:class:`Transitions`): ``(pos_ptr, pos_col)`` lists,
    row by row in column order, every pair that may have ``W_B > 0`` (the training
    transitions), ``pos_row`` gives each listed pair's row, ``(cpos_ptr, cpos_idx)`` the
    listed positions column by column, ``tree`` is the max-tree over the listed pairs
    (:func:`build_transition_tree`), ``vals`` a copy of their W_B (the scans read it, not the
    whole table), ``top`` the largest listed W_B of every row (``top[0]``) and column
    (``top[1]``, :func:`tops_build`). Every unlisted pair must have ``W_B <= 0``.

    A row a (message μ) whose bound ``−C max(top[0, a], 0) + μ`` (plus the smallest column
    message where both labels are active) exceeds the best gradient found is skipped: the
    bound is computed in the order of the gradient itself, and rounding is monotone, so
    every pair of the row rounds to a gradient at least as large, ties included. Likewise
    by columns.
    """
    pos_ptr, pos_col, pos_row, top = trans.pos_ptr, trans.pos_col, trans.pos_row, trans.top
    cpos_ptr, cpos_idx, vals = trans.cpos_ptr, trans.cpos_idx, trans.vals
    K = W_B.shape[0]
    best_a, best_b, best_g = -1, -1, 0.0
    # Both endpoints active. Every unlisted pair has W_B <= 0, so its gradient is at least
    # its message sum μ^L(a) + μ^R(b) (also in floating point: −C·W_B >= 0 and rounding is
    # monotone). So: seeded by the pair of smallest messages, the listed pairs of the rows
    # whose bound can reach the best gradient (one scan for active and inactive partners),
    # then the pairs whose message sum does not exceed it: typically about one pair per
    # edge, against |A_t|·|A_{t+1}| for a scan.
    low_b = 0.0
    if n_a > 0 and n_b > 0:
        sa_min = 0
        for sa in range(1, n_a):
            if mu_a[sa] < mu_a[sa_min]:
                sa_min = sa
        sb_min = 0
        for sb in range(1, n_b):
            if mu_b[sb] < mu_b[sb_min]:
                sb_min = sb
        a, b = act_a[sa_min], act_b[sb_min]
        best_a, best_b, best_g = a, b, -C * W_B[a, b] + mu_a[sa_min] + mu_b[sb_min]
        low_b = mu_b[sb_min]
    # The listed pairs of every active row a (message μ), in one scan: with b active the
    # gradient is −C W_B[a, b] + μ + μ^R(b), with b inactive −C W_B[a, b] + μ. A row is
    # skipped where neither kind can reach best_g by its bound.
    for sa in range(n_a):
        a = act_a[sa]
        mu = mu_a[sa]
        t = top[0, a]
        both = n_b > 0 and not -C * t + mu + low_b > best_g
        one = n_b < K and not (best_a >= 0 and -C * max(t, 0.0) + mu > best_g)
        if not (both or one):
            continue
        for p in range(pos_ptr[a], pos_ptr[a + 1]):
            b = pos_col[p]
            if mark_b[b] == stamp:
                if not both:
                    continue
                g = -C * vals[p] + mu + mu_b[slot_b[b]]
            elif one:
                g = -C * vals[p] + mu
            else:
                continue
            if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                best_a, best_b, best_g = a, b, g
    if n_a > 0 and n_b > 0:
        for sa in range(n_a):
            mu = mu_a[sa]
            if mu + low_b > best_g:  # no pair of this row can reach best_g
                continue
            a = act_a[sa]
            for sb in range(n_b):
                if mu + mu_b[sb] > best_g:
                    continue
                b = act_b[sb]
                g = -C * W_B[a, b] + mu + mu_b[sb]
                if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                    best_a, best_b, best_g = a, b, g
    # One endpoint active, say a with message μ, the partner b inactive and unlisted: the
    # largest W_B is 0 unless every inactive entry is negative, and a 0 can win only if μ
    # reaches best_g, i.e. if the floor (μ − best_g) / C, relaxed by a rounding margin, is
    # <= 0. Then the winner among the zeros is the first inactive one; if there is none
    # (every inactive entry touched: tiny K), the whole row is scanned.
    if n_b < K:  # a active, b inactive
        for sa in range(n_a):
            mu = mu_a[sa]
            if _floor(best_a, best_g, mu, C) > 0.0:
                continue
            best_a, best_b, best_g = _zero_partner(
                W_B, C, act_a[sa], mu, mark_b, stamp, True, best_a, best_b, best_g
            )
    # b active, a inactive (the rows' scan covered every pair with a active): the listed
    # partners by columns, then the zeros as above
    if n_a < K:
        for sb in range(n_b):
            b = act_b[sb]
            mu = mu_b[sb]
            if best_a >= 0 and -C * max(top[1, b], 0.0) + mu > best_g:
                continue
            for q in range(cpos_ptr[b], cpos_ptr[b + 1]):
                p = cpos_idx[q]
                a = pos_row[p]
                if mark_a[a] != stamp:
                    g = -C * vals[p] + mu
                    if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                        best_a, best_b, best_g = a, b, g
            if _floor(best_a, best_g, mu, C) > 0.0:
                continue
            best_a, best_b, best_g = _zero_partner(
                W_B, C, b, mu, mark_a, stamp, False, best_a, best_b, best_g
            )
    if n_a < K and n_b < K:  # neither active: the best listed pair outside, or a zero
        floor = _floor(best_a, best_g, 0.0, C)
        p = tree_best(trans.tree, vals, pos_row, pos_col, mark_a, mark_b, stamp, floor, stack)
        if p >= 0:
            a, b = pos_row[p], pos_col[p]
            g = -C * vals[p]
            if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                best_a, best_b, best_g = a, b, g
        if floor <= 0.0:
            found = False
            for a in range(K):  # the first inactive zero in index order
                if mark_a[a] != stamp:
                    b = _first_zero(W_B, a, mark_b, stamp, True)
                    if b >= 0:
                        g = -C * W_B[a, b]
                        if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                            best_a, best_b, best_g = a, b, g
                        found = True
                        break
            if not found:  # every inactive pair touched: scan them all
                for a in range(K):
                    if mark_a[a] == stamp:
                        continue
                    for b in range(K):
                        if mark_b[b] != stamp:
                            g = -C * W_B[a, b]
                            if _pair_wins(g, a, b, best_g, best_a, best_b, K):
                                best_a, best_b, best_g = a, b, g
    return best_a, best_b, best_g


def training_transitions(labels, offsets, K):
    """The gold transitions (a, b) of the sequences (``labels`` per token, sequence i the
    tokens ``offsets[i]`` … ``offsets[i + 1] − 1``) as sorted rows of a CSR pattern
    ``(pos_ptr, pos_col)``."""
    last = np.zeros(len(labels), dtype=bool)
    offsets = np.asarray(offsets)
    last[offsets[1:][np.diff(offsets) > 0] - 1] = True
    rows = np.flatnonzero(~last)
    pairs = np.unique(labels[rows].astype(np.int64) * K + labels[rows + 1])
    pos_ptr = np.zeros(K + 1, dtype=np.int64)
    np.add.at(pos_ptr, pairs // K + 1, 1)
    return np.cumsum(pos_ptr), (pairs % K).astype(np.int32)


class FactorState(NamedTuple):
    """What the chain's factor oracles keep between calls (:mod:`.chain_factors`), as views
    of the kernel's two arrays (:func:`factor_state`, :func:`state_views`): the transition
    search over the listed pairs, mirroring the transition weights of one w, and scratch."""

    search: Transitions
    tracked: np.ndarray  # int64 (2,): the data address of the w mirrored, and 1 when every
    # unlisted W_B is <= 0 (the search is exact), else 0 (the edge oracle scans all pairs)
    stamp: np.ndarray  # int64 (1,): the last call's mark
    #: int64 (5,): the node whose label scores ``score`` holds — example, node, the data
    #: address of w, the node oracle's stamp — and how: 0 none, 1 every label, 2 the labels
    #: marked with that stamp (the others score 0)
    cache: np.ndarray
    mark_a: np.ndarray  # int64 (K,): labels marked with a call's stamp
    mark_b: np.ndarray
    slot_b: np.ndarray  # int64 (K,): the slot of an active label of the edge's second node
    touched: np.ndarray  # int64 (K,)
    stack: np.ndarray  # the max-tree search's
    mu_a: np.ndarray  # (K,) the messages by slot
    mu_b: np.ndarray
    score: np.ndarray  # (K,) label scores of a token


#: the integer array's head: the tracked address and flag, the stamp, the listed pairs'
#: count, the score cache (5, from ``CACHE``), 1 where the edge oracle scans (``SCAN``)
_HEAD = 10
CACHE = 4
SCAN = 9
#: up to this many labels the edge oracle scans all K² pairs (the engine's messages are dense
#: already): cheaper than the four-case search, whose bounds prune little when most labels
#: are active (as the chain GDMM's brute force below 65 labels)
SCAN_LABELS = 64
_STACK = 130


def factor_state(labels, offsets, K):
    """The chain kernel's factor state as two arrays (int64, float64) whose listed pairs
    are the gold transitions of ``labels``: two arrays, not a dozen, because every call of
    a kernel function counts references to each array of the kernel."""
    pos_ptr, pos_col = training_transitions(labels, offsets, K)
    L = len(pos_col)
    pos_row = np.repeat(np.arange(K), np.diff(pos_ptr))
    cpos_idx = np.argsort(pos_col, kind="stable")
    cpos_ptr = np.zeros(K + 1, dtype=np.int64)
    np.cumsum(np.bincount(pos_col, minlength=K), out=cpos_ptr[1:])
    ints = np.concatenate(
        [
            [0, 0, 0, L, 0, 0, 0, 0, 0, int(K <= SCAN_LABELS)],
            np.zeros(4 * K + _STACK),  # marks, slots, touched, the stack
            pos_ptr,
            cpos_ptr,
            np.full(2 * K, -1),  # top_at
            pos_col,
            pos_row,
            cpos_idx,
            np.zeros(2 * L),  # the tree
        ]
    ).astype(np.int64)
    floats = np.zeros(L + 5 * K)  # vals, top (2K), mu_a, mu_b, score
    floats[L : L + 2 * K] = -np.inf
    return ints, floats


@njit(cache=True, inline="always")
def listed_views(ints, K):
    """``(pos_ptr, pos_col)`` of the listed transitions alone, from :func:`factor_state`'s
    ints (as :func:`state_views` lays them out)."""
    p = _HEAD + 4 * K + _STACK
    q = p + 4 * K + 2
    return ints[p : p + K + 1], ints[q : q + ints[3]]


@njit(cache=True, inline="always")
def state_views(ints, floats, K):
    """The :class:`FactorState` of the arrays :func:`factor_state` made."""
    L = ints[3]
    p = _HEAD
    mark_a, mark_b = ints[p : p + K], ints[p + K : p + 2 * K]
    slot_b, touched = ints[p + 2 * K : p + 3 * K], ints[p + 3 * K : p + 4 * K]
    p += 4 * K
    stack = ints[p : p + _STACK]
    p += _STACK
    pos_ptr, pos_col = listed_views(ints, K)
    cpos_ptr = ints[p + K + 1 : p + 2 * K + 2]
    p += 2 * K + 2
    top_at = ints[p : p + 2 * K].reshape((2, K))
    p += 2 * K
    pos_row, cpos_idx = ints[p + L : p + 2 * L], ints[p + 2 * L : p + 3 * L]
    tree = ints[p + 3 * L : p + 5 * L]
    search = Transitions(
        True,
        tree,
        floats[:L],
        pos_ptr,
        pos_col,
        pos_row,
        cpos_ptr,
        cpos_idx,
        floats[L : L + 2 * K].reshape((2, K)),
        top_at,
    )
    q = L + 2 * K
    return FactorState(
        search,
        ints[0:2],
        ints[2:3],
        ints[CACHE:_HEAD],
        mark_a,
        mark_b,
        slot_b,
        touched,
        stack,
        floats[q : q + K],
        floats[q + K : q + 2 * K],
        floats[q + 2 * K : q + 3 * K],
    )
