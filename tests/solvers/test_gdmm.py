"""GDMM: every factorwise oracle against brute force, the max-trees, and the solver against
the BCFW optimum (the LP relaxation is tight on chains)."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_chain_problem

from dualstruct.datasets import make_chain
from dualstruct.models import ChainModel
from dualstruct.models.chain import observed_support
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW, GDMM
from dualstruct.solvers import _gdmm_kernels as kern


def _marks(K, labels, stamp=7):
    mark = np.zeros(K, dtype=np.int64)
    mark[labels] = stamp
    return mark


def _slots(K, labels):
    slot = np.zeros(K, dtype=np.int64)
    slot[labels] = np.arange(len(labels))
    return slot


def _listed_pattern(W, rng=None):
    """The bigram search's structures for table W: the listed pairs (every pair with W > 0,
    plus, with ``rng``, some with W <= 0: a superset is allowed) by rows, their rows, by
    columns, the max-tree over them, a copy of their values and the largest listed value of
    every row and column (``top``; its positions ``top_at`` are not returned:
    ``_tracked_tops`` gives both)."""
    listed = W > 0
    if rng is not None:
        listed |= rng.random(W.shape) < 0.2
    pos_row, pos_col = (x.astype(np.int32) for x in np.nonzero(listed))
    pos_ptr = np.concatenate([[0], np.cumsum(listed.sum(1))]).astype(np.int64)
    cpos_idx = np.argsort(pos_col, kind="stable").astype(np.int64)
    cpos_ptr = np.concatenate([[0], np.cumsum(listed.sum(0))]).astype(np.int64)
    vals = W[pos_row, pos_col]
    tree = np.zeros(2 * len(pos_col), dtype=np.int64)
    kern.build_transition_tree(tree, vals)
    top, _ = _tracked_tops(vals, pos_ptr, cpos_ptr, cpos_idx, W.shape[0])
    return pos_ptr, pos_col, pos_row, cpos_ptr, cpos_idx, tree, vals, top


def _transitions(pattern):
    """The bigram search's structures of :func:`_listed_pattern` as the kernels take them."""
    pos_ptr, pos_col, pos_row, cpos_ptr, cpos_idx, tree, vals, _ = pattern
    top, top_at = _tracked_tops(vals, pos_ptr, cpos_ptr, cpos_idx, len(pos_ptr) - 1)
    return kern.Transitions(
        True, tree, vals, pos_ptr, pos_col, pos_row, cpos_ptr, cpos_idx, top, top_at
    )


def _tracked_tops(vals, pos_ptr, cpos_ptr, cpos_idx, K):
    top, top_at = np.full((2, K), -np.inf), np.full((2, K), -1, dtype=np.int64)
    kern.tops_build(vals, pos_ptr, cpos_ptr, cpos_idx, top, top_at)
    return top, top_at


def _signed_table(rng, K, kind):
    """A K×K table: "normal" (both signs, no zeros), "ties" (values in {-1, 0, 1}),
    "few_positive" (negative but for 10% of the entries) or "training" (as W_B in training:
    mostly exact zeros, some negative entries, a few positive ones)."""
    if kind == "normal":
        return rng.normal(size=(K, K))
    if kind == "ties":
        return rng.integers(-1, 2, (K, K)).astype(float)
    if kind == "few_positive":
        W = -np.abs(rng.normal(size=(K, K)))
        W[rng.random((K, K)) < 0.1] *= -1.0
        return W
    u = rng.random((K, K))
    return np.where(u < 0.1, rng.random((K, K)), np.where(u < 0.4, -rng.random((K, K)), 0.0))


@pytest.mark.parametrize("K", [1, 2, 5, 9, 33])
@pytest.mark.parametrize("kind", ["normal", "ties"])
def test_listed_tree_tops_and_excluding_search_match_brute_force(K, kind):
    rng = np.random.default_rng(K + 10 * (kind == "ties"))
    W = _signed_table(rng, K, kind)
    pos_ptr, pos_col, pos_row, cpos_ptr, cpos_idx, tree, vals, _ = _listed_pattern(W, rng)
    top, top_at = _tracked_tops(vals, pos_ptr, cpos_ptr, cpos_idx, K)
    listed = np.zeros((K, K), dtype=bool)
    listed[pos_row, pos_col] = True
    stack = np.empty(130, dtype=np.int64)
    for _ in range(30):
        if len(pos_col):  # change one listed entry, then repair the tree and the tops
            p = rng.integers(len(pos_col))
            W[pos_row[p], pos_col[p]] = rng.integers(-1, 2) if kind == "ties" else rng.normal()
            a, b = pos_row[p], pos_col[p]
            kern._listed_changed(
                W[a, b], p, a, b, tree, vals, pos_ptr, cpos_ptr, cpos_idx, top, top_at
            )
        np.testing.assert_array_equal(vals, W[pos_row, pos_col])
        # each row's and column's largest listed value, -inf where none is listed
        masked = np.where(listed, W, -np.inf)
        np.testing.assert_array_equal(top, [masked.max(1), masked.max(0)])
        for side in (0, 1):
            lines = np.flatnonzero(top_at[side] >= 0)
            at = top_at[side, lines]
            assert np.all((pos_row if side == 0 else pos_col)[at] == lines)
            np.testing.assert_array_equal(W[pos_row[at], pos_col[at]], top[side, lines])
        ex_a = rng.choice(K, rng.integers(0, K + 1), replace=False)
        ex_b = rng.choice(K, rng.integers(0, K + 1), replace=False)
        ma, mb = _marks(K, ex_a), _marks(K, ex_b)
        floor = -np.inf if rng.random() < 0.5 else rng.normal()
        # the largest listed value outside the excluded rows and columns, >= floor, ties to
        # the smallest position
        values = W[pos_row, pos_col]
        ok = [
            p
            for p in range(len(pos_col))
            if ma[pos_row[p]] != 7 and mb[pos_col[p]] != 7 and values[p] >= floor
        ]
        expected = -1 if not ok else min(ok, key=lambda p: (-values[p], p))
        assert kern.tree_best(tree, vals, pos_row, pos_col, ma, mb, 7, floor, stack) == expected


def test_the_pass_keeps_the_sign_of_w_b_and_the_search_structures_exact():
    """After the pass's pairwise steps: every pair that is not a training transition has
    W_B <= 0 (emptied pairs are clamped back to 0, not left at a rounding residue), and the
    listed copy, the max-tree and the row and column tops agree with W_B."""
    X, y = make_chain(40, 6, 30, 300, nnz_per_token=6, random_state=3)
    data = pack_sequences(X, y, 300)
    s = GDMM(
        ChainModel(30, 300),
        0.7,
        max_iter=8,
        check_every=8,
        random_state=2,
        unigram_oracle="sparse",
        bigram_oracle="sorted",
    ).fit(data)
    W = s.W.transition
    listed = np.zeros(W.shape, dtype=bool)
    listed[s.pos_row, s.pos_col] = True
    assert s.history.last.extra["active_pairs"] > 1  # the steps did move mass
    assert np.all(W[~listed] <= 0.0) and np.any(W[~listed] < 0.0)
    np.testing.assert_array_equal(s.listed_vals, W[s.pos_row, s.pos_col])
    masked = np.where(listed, W, -np.inf)
    np.testing.assert_array_equal(s.top, [masked.max(1), masked.max(0)])
    best = s.tree[1]
    assert s.listed_vals[best] == s.listed_vals.max()
    assert best == np.flatnonzero(s.listed_vals == s.listed_vals.max())[0]


@pytest.mark.parametrize("K", [1, 2, 3, 6, 12, 40])
@pytest.mark.parametrize("kind", ["normal", "ties", "few_positive", "training"])
@pytest.mark.parametrize("zero_messages", [False, True])
def test_bigram_oracles_match_brute_force(K, kind, zero_messages):
    rng = np.random.default_rng(100 * K + 10 * len(kind) + zero_messages)
    stack = np.empty(130, dtype=np.int64)
    ties = kind == "ties"
    for _trial in range(40):
        W = _signed_table(rng, K, kind)
        C = float(rng.choice([0.5, 1.0, 3.0]))
        act_a = rng.choice(K, rng.integers(0, K + 1), replace=False).astype(np.int32)
        act_b = rng.choice(K, rng.integers(0, K + 1), replace=False).astype(np.int32)
        scale = 0.0 if zero_messages else 1.0
        mu_a = scale * (rng.integers(-2, 3, len(act_a)) if ties else rng.normal(size=len(act_a)))
        mu_b = scale * (rng.integers(-2, 3, len(act_b)) if ties else rng.normal(size=len(act_b)))
        mu_a, mu_b = mu_a.astype(float), mu_b.astype(float)
        # the brute-force argmin over all K² pairs, by enumeration
        dense_a, dense_b = np.zeros(K), np.zeros(K)
        dense_a[act_a], dense_b[act_b] = mu_a, mu_b
        grads = -C * W + dense_a[:, None] + dense_b[None, :]
        g_min = grads.min()
        first = np.flatnonzero(grads.ravel() == g_min)[0]
        expected = (first // K, first % K, g_min)
        brute = kern.bigram_brute(
            W, C, act_a, len(act_a), mu_a, act_b, len(act_b), mu_b, np.zeros(K), np.zeros(K)
        )
        pattern = _listed_pattern(W, rng if _trial % 2 else None)
        fast = kern.bigram_sorted(
            _transitions(pattern),
            W,
            C,
            act_a,
            len(act_a),
            mu_a,
            act_b,
            len(act_b),
            mu_b,
            _marks(K, act_a),
            _marks(K, act_b),
            _slots(K, act_b),
            7,
            stack,
        )
        assert brute == pytest.approx(expected, abs=0)
        assert fast == pytest.approx(expected, abs=0)


def test_bigram_sorted_keeps_ties_at_large_scores():
    # (0, 0) and (1, 0) tie in floating point at the scale of C·max W: whatever the
    # both-active search skips (it once pruned rows by bounds that missed this tie), the
    # tie must reach the exact comparison and go to the smaller index
    W = np.array([[300000000.2, 0.0], [300000000.1, 0.1]])
    act_a, mu_a = np.array([1, 0], np.int32), np.array([-0.2, -0.1])
    act_b, mu_b = np.array([0, 1], np.int32), np.array([-0.2, -0.3])
    marks = np.full(2, 7, np.int64)
    brute = kern.bigram_brute(W, 1.0, act_a, 2, mu_a, act_b, 2, mu_b, np.zeros(2), np.zeros(2))
    fast = kern.bigram_sorted(
        _transitions(_listed_pattern(W)),
        W,
        1.0,
        act_a,
        2,
        mu_a,
        act_b,
        2,
        mu_b,
        marks,
        marks,
        _slots(2, act_b),
        7,
        np.empty(130, np.int64),
    )
    assert fast == brute and brute[:2] == (0, 0)


def _unigram_state(rng, K, d, density, ties):
    W_U = rng.normal(size=(d, K)) if not ties else rng.integers(-1, 2, (d, K)).astype(float)
    W_U[rng.random((d, K)) > density] = 0.0
    start = np.where(rng.random(K) < density, rng.normal(size=K), 0.0)
    end = np.where(rng.random(K) < density, rng.normal(size=K), 0.0)
    first = np.zeros(d + 2, dtype=np.int64)
    room = np.zeros(d + 2, dtype=np.int64)
    length = np.zeros(d + 2, dtype=np.int64)
    member = np.zeros((d + 2, K), dtype=np.uint8)
    lab = np.empty(4 * (d + 2) * K + 4 * (d + 2), dtype=np.int32)  # doubling segments
    used = np.zeros(1, dtype=np.int64)
    kern.build_label_lists(W_U, start, end, kern.LabelLists(first, room, lab, member, length, used))
    assert used[0] <= len(lab)
    return W_U, start, end, first, room, lab, length


@pytest.mark.parametrize("K", [1, 2, 7, 40, 300])  # lists are walked, not swept, from K = 40
@pytest.mark.parametrize("density", [0.0, 0.01, 0.05, 0.5, 1.0])
@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("common", [False, True])
def test_unigram_oracles_match_brute_force(K, density, ties, common):
    """``common``: the last feature is on every token (an intercept), whose list is long:
    the sparse oracle then sweeps it densely and walks the others."""
    rng = np.random.default_rng(K * 7 + int(density * 100) + ties + 1000 * common)
    d = 6
    W_U, start, end, first, room, lab, length = _unigram_state(rng, K, d, density, ties)
    perm = np.arange(K, dtype=np.int64)
    # sparse weights: a support holding W_U's non-zeros and some zeros, as the label lists
    support = (W_U != 0) | (rng.random((d, K)) < 0.3)
    sup_indptr = np.concatenate([[0], np.cumsum(support.sum(axis=1))]).astype(np.int64)
    sup_labels = np.nonzero(support)[1].astype(np.int32)
    w_s = W_U[support]
    all_k = np.arange(K, dtype=np.int32)
    sup_len = np.concatenate([np.diff(sup_indptr), [K, K]])
    sparse_lists = (
        np.concatenate([sup_indptr[:-1], [sup_indptr[-1], sup_indptr[-1] + K]]),
        sup_len.copy(),
        np.concatenate([sup_labels, all_k, all_k]),
        sup_len,
    )
    u_feat = d - 1
    for _trial in range(30):
        x = sp.random(1, d, density=rng.uniform(0.2, 1.0), format="csr", random_state=rng)
        if common:  # the intercept, with a positive value
            x = x.tolil()
            x[0, u_feat] = 1.0 if ties or _trial % 2 else rng.uniform(0.1, 3.0)
            x = x.tocsr()
        if ties:
            x.data[:] = 1.0
        indptr, indices = x.indptr.astype(np.int64), x.indices.astype(np.int64)
        values = x.data.astype(float)
        at_start, at_end = bool(rng.integers(2)), bool(rng.integers(2))
        act = rng.choice(K, rng.integers(1, K + 1), replace=False).astype(np.int32)
        scores = x.toarray()[0] @ W_U + at_start * start + at_end * end
        inactive = np.setdiff1d(np.arange(K), act)
        if len(inactive):
            top = scores[inactive].max()
            expected = (int(inactive[scores[inactive] == top][0]), top)
        else:
            expected = (-1, 0.0)
        n_groups = int(rng.integers(1, K + 1))
        results = {}
        groups = {}
        for mode, sparse_w in itertools.product(
            (kern.UNIGRAM_BRUTE, kern.UNIGRAM_SPARSE, kern.UNIGRAM_SAMPLED), (False, True)
        ):
            mark = _marks(K, act)
            theta = np.zeros(K)
            group = groups.setdefault(mode, int(rng.integers(n_groups)))
            lists = sparse_lists if sparse_w else (first, room, lab, length)
            none = np.zeros(1, dtype=np.int64)
            got = kern.unigram_fmo(
                kern.ChainData(
                    indptr, indices, values, none, none, np.zeros(1), np.zeros(1), True, 1
                ),
                kern.FactorWeights(
                    W_U, np.zeros((K, K)), start, end, sparse_w, w_s if sparse_w else np.zeros(0)
                ),
                kern.LabelLists(
                    lists[0], lists[1], lists[2], np.zeros((1, 1), np.uint8), lists[3], none
                ),
                mode,
                group,
                n_groups,
                perm,
                0,
                at_start,
                at_end,
                act,
                len(act),
                theta,
                mark,
                7,
                np.zeros(K),
                np.zeros(K, dtype=np.int64),
            )
            if sparse_w:  # the same answer as on the dense weights
                assert got[0] == results[mode][0]
                assert got[1] == pytest.approx(results[mode][1], abs=1e-12)
                continue
            results[mode] = got
            assert np.allclose(theta[: len(act)], scores[act], rtol=0, atol=1e-12)
            assert np.array_equal(mark, _marks(K, act))  # scratch marks are cleaned up
            if mode == kern.UNIGRAM_SAMPLED:  # the best inactive label of the drawn group
                size = -(-K // n_groups)
                members = np.setdiff1d(perm[group * size : (group + 1) * size], act)
                if len(members):
                    top = scores[members].max()
                    want = (int(members[scores[members] == top][0]), top)
                else:
                    want = (-1, 0.0)
                assert results[mode][0] == want[0]
                assert results[mode][1] == pytest.approx(want[1], abs=1e-12)
        for mode in (kern.UNIGRAM_BRUTE, kern.UNIGRAM_SPARSE):
            assert results[mode][0] == expected[0]
            assert results[mode][1] == pytest.approx(expected[1], abs=1e-12)


def _problem(seed, n=10, K=3, d=4, start_end=True):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=n, K=K, d=d, max_len=5, sparse=False)
    return pack_sequences(X, Y), ChainModel(K, d, start_end=start_end)


# (unigram oracle, bigram oracle, shrink_after, support_steps)
ORACLES = [
    ("sparse", "sorted", 0, 3),
    ("brute", "brute", 0, 3),
    ("sampled", "sorted", 0, 3),
    ("sparse", "sorted", 5, 3),
    ("sparse", "sorted", 0, 0),
]


@pytest.mark.parametrize("unigram, bigram, shrink_after, support_steps", ORACLES)
@pytest.mark.parametrize(
    "seed, C, K, start_end", [(11, 1.0, 3, True), (12, 0.3, 3, False), (13, 1.0, 6, True)]
)
def test_gdmm_reaches_the_bcfw_optimum(
    seed, C, K, start_end, unigram, bigram, shrink_after, support_steps
):
    data, model = _problem(seed, K=K, start_end=start_end)
    bcfw = BCFW(model, C, max_iter=20000, tol=1e-8, check_every=20, random_state=0).fit(data)
    gdmm = GDMM(
        model,
        C,
        max_iter=1500,
        check_every=1500,
        random_state=0,
        unigram_oracle=unigram,
        bigram_oracle=bigram,
        n_groups=2,
        shrink_after=shrink_after,
        support_steps=support_steps,
    ).fit(data)
    p = bcfw.history.last.primal
    last = gdmm.history.last
    assert last.primal == pytest.approx(p, rel=1e-3)
    assert last.primal >= p * (1 - 1e-7)  # BCFW stopped at a 1e-8 gap
    _check_w_equals_w_of_q(gdmm, model, data, C)
    if shrink_after:  # labels cycling through the active sets lose their multipliers
        return
    # consistency residual → 0, and at consistency −G(q) is the dual: no gap is left
    assert gdmm.residuals[-1] < 1e-6 * gdmm.residuals[0]
    assert -last.extra["G"] == pytest.approx(last.primal, rel=1e-6)
    assert last.extra["augmented"] == pytest.approx(last.extra["G"], rel=1e-6)


def _check_w_equals_w_of_q(gdmm, model, data, C):
    """w is kept equal to w(q): recompute it from the sparse factor marginals."""
    w = np.zeros(model.size)
    W = model.unpack(w)
    for i in range(data.n_sequences):
        x, gold = data.sequence(i)
        w += C * model.joint_feature(x, gold)
    K = model.n_labels
    q_u = np.zeros((data.n_tokens, K))
    for row in range(data.n_tokens):
        n = gdmm.n_act[row]
        q_u[row, gdmm.act[row, :n]] = gdmm.q_u[row, :n]
    assert np.allclose(q_u.sum(axis=1), 1.0) and q_u.min() >= 0
    W.unigram[:] -= C * data.X.T @ q_u
    not_last = np.ones(data.n_tokens, dtype=bool)
    not_last[data.offsets[1:] - 1] = False
    for e, row in enumerate(np.flatnonzero(not_last)):
        for p in range(gdmm.n_pair[e]):
            a = gdmm.act[row, gdmm.pair_a[e, p]]
            b = gdmm.act[row + 1, gdmm.pair_b[e, p]]
            W.transition[a, b] -= C * gdmm.q_b[e, p]
    if model.start_end:
        W.start[:] -= C * q_u[data.offsets[:-1]].sum(axis=0)
        W.end[:] -= C * q_u[data.offsets[1:] - 1].sum(axis=0)
    assert np.allclose(w, gdmm.w, atol=1e-9)


def _simplex_point(rng, n, zeros):
    v = rng.exponential(size=n) * (rng.random(n) >= zeros)
    if v.sum() == 0:
        v[rng.integers(n)] = 1.0
    return v / v.sum()


def _random_edge(rng, K, case):
    """Active sets, unigram marginals and a bigram support (distinct slot pairs) of one edge."""
    nA, nB = (1, 1) if case == "one label" else rng.integers(2, K + 1, size=2)
    act = np.zeros((2, K), dtype=np.int32)
    act[0, :nA] = rng.permutation(K)[:nA]
    act[1, :nB] = rng.permutation(K)[:nB]
    slots = np.array([(a, b) for a in range(nA) for b in range(nB)])
    pairs = slots[rng.permutation(len(slots))[: rng.integers(1, len(slots) + 1)]]
    if case == "unpaired mass" and nA > 1:  # the last slot has mass but is in no pair
        pairs = np.unique(np.c_[np.minimum(pairs[:, 0], nA - 2), pairs[:, 1]], axis=0)
    q_e = _simplex_point(rng, len(pairs), 0.2)
    q_u = np.zeros((2, K))
    if case == "consistent":
        np.add.at(q_u[0], pairs[:, 0], q_e)
        np.add.at(q_u[1], pairs[:, 1], q_e)
    else:
        q_u[0, :nA] = _simplex_point(rng, nA, 0.3)
        q_u[1, :nB] = _simplex_point(rng, nB, 0.3)
    return act, np.array([nA, nB], dtype=np.int32), q_u, pairs.astype(np.int32), q_e


def _round_edges(offsets, C, act, n_act, q_u, supports, K):
    """transport_rounding on edges given as a list of (pairs, q_e), padded into arrays."""
    width = max(len(q_e) for _, q_e in supports)
    pair_a = np.zeros((len(supports), width), dtype=np.int32)
    pair_b = np.zeros_like(pair_a)
    q_b = np.zeros((len(supports), width))
    n_pair = np.zeros(len(supports), dtype=np.int32)
    for e, (pairs, q_e) in enumerate(supports):
        n_pair[e] = len(q_e)
        pair_a[e, : len(q_e)], pair_b[e, : len(q_e)], q_b[e, : len(q_e)] = (
            pairs.T[0],
            pairs.T[1],
            q_e,
        )
    change = np.zeros((K, K))
    kern.transport_rounding(
        np.asarray(offsets), C, act, n_act, q_u, pair_a, pair_b, q_b, n_pair, change
    )
    return change


@pytest.mark.parametrize("case", ["random", "consistent", "unpaired mass", "one label"])
def test_transport_rounding_gives_pair_marginals_consistent_with_the_unigrams(case):
    """One edge at a time: ``π = q_e − ΔW_B / C`` is non-negative, its row and column sums are
    q_t and q_{t+1}, it moves q_e by at most twice the L1 inconsistency (Altschuler et al.
    2017, Lemma 7), and nothing moves when q_e is consistent."""
    rng = np.random.default_rng(7)
    K, C = 7, 0.7
    for _ in range(40):
        act, n_act, q_u, pairs, q_e = _random_edge(rng, K, case)
        change = _round_edges([0, 2], C, act, n_act, q_u, [(pairs, q_e)], K)
        dense = np.zeros((K, K))
        np.add.at(dense, (act[0, pairs[:, 0]], act[1, pairs[:, 1]]), q_e)
        pi = dense - change / C
        want_rows, want_cols = np.zeros(K), np.zeros(K)
        want_rows[act[0, : n_act[0]]] = q_u[0, : n_act[0]]
        want_cols[act[1, : n_act[1]]] = q_u[1, : n_act[1]]
        assert pi.min() >= -1e-15
        np.testing.assert_allclose(pi.sum(axis=1), want_rows, atol=1e-14)
        np.testing.assert_allclose(pi.sum(axis=0), want_cols, atol=1e-14)
        moved = np.abs(dense - pi).sum()
        inconsistency = (
            np.abs(dense.sum(axis=1) - want_rows).sum()
            + np.abs(dense.sum(axis=0) - want_cols).sum()
        )
        assert moved <= 2 * inconsistency + 1e-12
        if case == "consistent":
            assert moved == pytest.approx(0.0, abs=1e-14)


def test_transport_rounding_adds_up_the_edges_of_every_sequence():
    """Sequences of 3, 1 and 2 tokens (edges 0, 1 and 2, the middle sequence has none): the
    whole-data change of W_B is the sum of the edges' changes rounded one at a time, so
    edge indexing and the scratch reused between edges are right."""
    rng = np.random.default_rng(3)
    K, C = 6, 1.3
    offsets = [0, 3, 4, 6]
    act = np.zeros((6, K), dtype=np.int32)
    n_act = np.zeros(6, dtype=np.int32)
    q_u = np.zeros((6, K))
    for row in range(6):
        n = rng.integers(1, K + 1)
        act[row, :n], n_act[row] = rng.permutation(K)[:n], n
        q_u[row, :n] = _simplex_point(rng, n, 0.3)
    supports, expected = [], np.zeros((K, K))
    for row in (0, 1, 4):  # the rows with an edge to their right
        nA, nB = n_act[row], n_act[row + 1]
        slots = np.array([(a, b) for a in range(nA) for b in range(nB)], dtype=np.int32)
        pairs = slots[rng.permutation(len(slots))[: rng.integers(1, len(slots) + 1)]]
        q_e = _simplex_point(rng, len(pairs), 0.2)
        supports.append((pairs, q_e))
        expected += _round_edges(
            [0, 2],
            C,
            act[row : row + 2],
            n_act[row : row + 2],
            q_u[row : row + 2],
            [(pairs, q_e)],
            K,
        )
    change = _round_edges(offsets, C, act, n_act, q_u, supports, K)
    assert np.abs(expected).sum() > 0.1
    np.testing.assert_allclose(change, expected, atol=1e-14)


@pytest.mark.parametrize(
    "seed, C, K, start_end", [(11, 1.0, 3, True), (13, 1.0, 6, True), (12, 0.3, 3, False)]
)
def test_certified_dual_bounds_the_optimum_and_its_gap_closes(seed, C, K, start_end):
    """At every check GDMM's dual lies below BCFW's optimum and its own primal, it equals
    −G(q) once the marginals are consistent, and with ``tol`` the certified gap stops
    training."""
    data, model = _problem(seed, K=K, start_end=start_end)
    bcfw = BCFW(model, C, max_iter=20000, tol=1e-9, check_every=20, random_state=0).fit(data)
    optimum = bcfw.history.last.primal
    gdmm = GDMM(model, C, max_iter=1500, check_every=10, tol=0, random_state=0).fit(data)
    checks = [r for r in gdmm.history if not np.isnan(r.primal)]
    for r in checks:  # (tol = 0 stops once the gap has closed to rounding)
        assert r.dual <= optimum * (1 + 1e-9) and r.dual <= r.primal * (1 + 1e-12)
    assert checks[0].relative_gap > 1e-3  # not consistent yet: the bound is loose
    last = checks[-1]
    assert last.relative_gap < 1e-6
    assert last.dual == pytest.approx(-last.extra["G"], rel=1e-9)
    stopped = GDMM(model, C, max_iter=1500, check_every=10, tol=1e-3, random_state=0).fit(data)
    assert stopped.history.stop_reason == "tol"
    assert stopped.passes < 1500 and stopped.history.last.relative_gap <= 1e-3


@pytest.mark.parametrize("intercept", [False, True])
def test_exact_oracles_give_identical_trajectories_and_runs_are_deterministic(intercept):
    X, y = make_chain(40, 6, 60, 400, nnz_per_token=6, random_state=1)
    d = 400
    if intercept:  # a column of ones, with the longest label list
        X = [sp.hstack([sp.csr_matrix(x), np.ones((x.shape[0], 1))]).tocsr() for x in X]
        d += 1
    data = pack_sequences(X, y, d)
    model = ChainModel(60, d)
    runs = [
        GDMM(
            model, 1.0, max_iter=6, check_every=3, random_state=5, unigram_oracle=u, bigram_oracle=b
        ).fit(data)
        for u, b in [("sparse", "sorted"), ("brute", "brute"), ("sparse", "sorted")]
    ]
    _check_label_lists(runs[0], data)
    for other in runs[1:]:
        assert np.array_equal(runs[0].w, other.w)
        assert [r.primal for r in runs[0].history] == [r.primal for r in other.history]
    _check_w_equals_w_of_q(runs[0], model, data, 1.0)
    extra = runs[0].history.last.extra
    assert {
        "residual",
        "G",
        "augmented",
        "active_labels",
        "active_pairs",
        "oracle_time",
        "labels_with_mass",
    } <= set(extra)
    assert 1.0 <= extra["active_labels"] <= 60
    assert 1.0 <= extra["labels_with_mass"] <= extra["active_labels"]
    assert "streamed_rows" not in runs[1].history.last.extra  # brute force streams them all


def test_streamed_rows_counts_the_token_features_whose_list_is_long():
    """``streamed_rows``: the share of token features whose label list holds more than
    K/16 labels, counted here token by token. With 200 labels and rare features the lists
    are short after two passes and longer after five."""
    X, y = make_chain(30, 6, 200, 3000, nnz_per_token=6, random_state=2)
    data = pack_sequences(X, y, 3000)
    gdmm = GDMM(ChainModel(200, 3000), 1.0, random_state=0, unigram_oracle="sparse")
    shares = []
    for passes in (2, 5):
        gdmm.fit(data, max_iter=passes - gdmm.passes)
        streamed = [
            16 * gdmm.fl_len[j] > 200 for x in X for row in sp.csr_matrix(x) for j in row.indices
        ]
        shares.append(gdmm.history.last.extra["streamed_rows"])
        assert shares[-1] == pytest.approx(np.mean(streamed))
    assert 0.0 < shares[0] < shares[1] < 1.0


def test_auto_unigram_oracle_switches_to_brute_force_once_nearly_every_row_streams():
    """``unigram_oracle="auto"`` above 64 labels starts with the label lists and drops them
    for brute force after the first pass in which they streamed >= 95% of the rows (here
    pass 5 of 8); the argmax is the same, so the trajectory is that of "sparse". The switch
    is state: a run resumed from a later state stays on brute force, one resumed from an
    earlier state goes back to the lists."""
    X, y = make_chain(40, 6, 200, 400, nnz_per_token=6, random_state=2)
    data = pack_sequences(X, y, 400)
    model = ChainModel(200, 400)
    auto = GDMM(model, 1.0, max_iter=8, check_every=1, random_state=0).fit(data)
    lists = GDMM(model, 1.0, max_iter=8, check_every=1, random_state=0, unigram_oracle="sparse")
    lists.fit(data)
    shares = [r.extra["streamed_rows"] for r in lists.history]
    last = next(p for p, share in enumerate(shares, 1) if share >= 0.95)  # the last list pass
    assert 1 < last < 8
    assert auto.unigram_oracle == "brute" and auto.brute_unigram_since == last + 1
    assert auto.fl_label.shape == (1,) and auto.fl_member.shape == (1, 1)  # the lists are gone
    assert [r.extra.get("streamed_rows") for r in auto.history[:last]] == shares[:last]
    assert all("streamed_rows" not in r.extra for r in auto.history[last:])
    assert [r.extra.get("brute_unigram_since") for r in auto.history] == [None] * (last - 1) + [
        float(last + 1)
    ] * (9 - last)
    assert auto.streamed_rows() == 1.0  # brute force streams every row
    assert np.array_equal(auto.w, lists.w)
    assert [r.primal for r in auto.history] == [r.primal for r in lists.history]
    assert auto.history.last.extra["active_labels"] == lists.history.last.extra["active_labels"]
    # resumed after the switch: brute force at once, on the same trajectory
    meta, arrays = auto.state_dict()
    resumed = GDMM(model, 1.0, max_iter=3, check_every=1, random_state=0)
    resumed.load_state(data, meta, arrays)
    assert resumed.unigram_oracle == "brute" and resumed.brute_unigram_since == last + 1
    resumed.fit(data)
    lists.fit(data, max_iter=3)
    assert np.array_equal(resumed.w, lists.w)
    # resumed before the switch (into the solver that switched): the lists again
    early = GDMM(model, 1.0, max_iter=2, check_every=1, random_state=0).fit(data)
    meta, arrays = early.state_dict()
    assert meta["scalars"]["brute_unigram_since"] is None
    auto.load_state(data, meta, arrays)
    assert auto.unigram_oracle == "sparse" and auto.brute_unigram_since is None
    auto.fit(data, max_iter=8 - 2)
    assert auto.brute_unigram_since == last + 1
    assert np.array_equal(auto.w, GDMM(model, 1.0, max_iter=8, random_state=0).fit(data).w)


@pytest.mark.parametrize("case", ["few labels", "observed weights"])
def test_auto_unigram_oracle_never_switches_below_64_labels_or_on_observed_weights(case):
    """Up to 64 labels "auto" is brute force from the start; with observed weights the lists
    are the weights' rows and stay however many rows stream."""
    if case == "few labels":
        X, y = make_chain(30, 6, 40, 60, nnz_per_token=6, random_state=1)
        data, model, expected = pack_sequences(X, y, 60), ChainModel(40, 60), "brute"
    else:
        X, y = make_chain(40, 6, 200, 100, nnz_per_token=6, random_state=2)
        data = pack_sequences(X, y, 100)
        support = observed_support(data, 200, full_rows_from=0.01)  # nearly every row full
        model, expected = ChainModel(200, 100, support=support), "sparse"
    g = GDMM(model, 1.0, max_iter=6, check_every=1, random_state=0).fit(data)
    assert g.unigram_oracle == expected and g.brute_unigram_since is None
    assert all("brute_unigram_since" not in r.extra for r in g.history)
    if case == "observed weights":
        assert g.history.last.extra["streamed_rows"] >= 0.95


def test_labels_with_mass_counts_only_the_used_slots():
    """``labels_with_mass`` counts the labels with q_t > 0 among each token's active slots;
    dropped labels (``shrink_after``) leave stale values past ``n_act`` that must not count."""
    X, y = make_chain(40, 6, 60, 400, nnz_per_token=6, random_state=2)
    data = pack_sequences(X, y, 400)
    g = GDMM(ChainModel(60, 400), 1.0, max_iter=12, check_every=4, shrink_after=1)
    g.fit(data)
    n = g.n_act
    recount = np.mean([np.count_nonzero(g.q_u[t, : n[t]] > 0.0) for t in range(len(n))])
    assert g.history.last.extra["labels_with_mass"] == pytest.approx(recount)
    assert np.count_nonzero(g.q_u > 0.0) / len(n) > recount  # stale slots exist here


def test_label_lists_refuse_to_overflow_their_pool():
    """A push that finds no room in the pool writes nothing and flags it (fl_used past the
    end), so the caller can grow the pool and build again."""
    rng = np.random.default_rng(0)
    W_U, start, end, *_ = _unigram_state(rng, 6, 3, 1.0, False)
    guard = np.full(64, -7, dtype=np.int32)
    pool = guard[:10]  # room for two segments of four labels, not for all 30 labels
    first, room, length = (np.zeros(5, dtype=np.int64) for _ in range(3))
    member, used = np.zeros((5, 6), dtype=np.uint8), np.zeros(1, dtype=np.int64)
    kern.build_label_lists(
        W_U, start, end, kern.LabelLists(first, room, pool, member, length, used)
    )
    assert used[0] > len(pool)
    assert np.all(guard[10:] == -7)  # nothing written past the pool


def test_lazy_average_is_the_weighted_average_of_the_iterates():
    """w̄_m = Σ_{j≤m} j w_j / A_m from the kernels' sparse accumulator R equals the average
    of the iterates after each pass; a state saved with ``w_avg`` (before R) resumes to the
    same average."""
    X, y = make_chain(20, 6, 30, 200, nnz_per_token=5, random_state=4)
    data = pack_sequences(X, y, 200)
    model = ChainModel(30, 200)
    g = GDMM(model, 1.0, max_iter=1, check_every=1, random_state=0)
    iterates = []
    for _ in range(7):
        g.fit(data)
        iterates.append(g.w.copy())
    weights = np.arange(1, 8)
    expected = weights @ np.array(iterates) / weights.sum()
    assert np.allclose(g.averaged_weights(), expected, rtol=1e-12, atol=1e-12)
    assert g.candidates()[0] is g.averaged_weights()  # memoized per pass
    meta, arrays = g.state_dict()
    old = {k: v for k, v in arrays.items() if k != "R"}
    old["w_avg"] = expected
    resumed = GDMM(model, 1.0, max_iter=1, random_state=0)
    resumed.load_state(data, meta, old)
    assert np.allclose(resumed.R, g.R, rtol=1e-9, atol=1e-9)
    for solver in (g, resumed):
        solver.fit(data)
    assert np.allclose(resumed.averaged_weights(), g.averaged_weights(), atol=1e-9)


def test_shrinking_drops_idle_labels_and_keeps_the_state_consistent():
    X, y = make_chain(40, 6, 60, 400, nnz_per_token=6, random_state=2)
    data = pack_sequences(X, y, 400)
    model = ChainModel(60, 400)
    sizes = {}
    for shrink_after in (0, 1):
        g = GDMM(
            model,
            1.0,
            max_iter=15,
            check_every=15,
            random_state=0,
            shrink_after=shrink_after,
            unigram_oracle="sparse",
        ).fit(data)
        _check_w_equals_w_of_q(g, model, data, 1.0)
        _check_label_lists(g, data)
        g._prepare()  # as after loading a checkpoint: the lists are rebuilt from the state
        _check_label_lists(g, data)
        assert np.all(g.act[:, 0] == data.labels)  # the gold slot stays
        for row in range(data.n_tokens):  # no label twice in an active set
            n = g.n_act[row]
            assert len(set(g.act[row, :n].tolist())) == n
        sizes[shrink_after] = g.n_act.sum()
    assert sizes[1] < sizes[0]


def _check_label_lists(g, data):
    """The sparse unigram oracle's invariant: W_U[j, k] != 0 (start: j = d, end: j = d + 1)
    only if k is in feature j's list, and every active label is listed on its token's
    features; the lists hold exactly the members."""
    d = g.model.n_features
    weights = np.vstack([g.W.unigram, g._start, g._end])
    assert np.all(g.fl_member[weights != 0.0] == 1)
    X = data.X.tocsr()
    for row in range(data.n_tokens):
        for k in g.act[row, : g.n_act[row]]:
            assert np.all(g.fl_member[X.indices[X.indptr[row] : X.indptr[row + 1]], k] == 1)
    ends = []
    for j in range(d + 2):
        assert g.fl_len[j] <= g.fl_cap[j]
        listed = g.fl_label[g.fl_start[j] : g.fl_start[j] + g.fl_len[j]].tolist()
        assert sorted(listed) == np.flatnonzero(g.fl_member[j]).tolist()
        if g.fl_cap[j]:
            ends.append((g.fl_start[j], g.fl_start[j] + g.fl_cap[j]))
    ends.sort()  # the segments do not overlap and lie in the used part of the pool
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))
    assert not ends or ends[-1][1] <= g.fl_used[0] <= len(g.fl_label)


def test_sampled_primal_is_labelled_and_unbiased_at_full_size():
    data, model = _problem(3, n=12)
    g = GDMM(
        model, 1.0, max_iter=4, check_every=2, random_state=0, primal_sample=12, averaging=False
    ).fit(data)
    last = g.history.last
    assert last.extra["sample_size"] == 12
    assert last.extra["sampled_primal"] == pytest.approx(last.primal, rel=1e-12)
    small = GDMM(model, 1.0, max_iter=2, random_state=0, primal_sample=4).fit(data)
    assert small.history.last.extra["sample_size"] == 4


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rho": 0}, "rho"),
        ({"eta": -1}, "eta"),
        ({"unigram_oracle": "fast"}, "unigram_oracle"),
        ({"bigram_oracle": "heap"}, "bigram_oracle"),
        ({"n_groups": 0}, "n_groups"),
        ({"primal_sample": 0}, "primal_sample"),
        ({"rescaling": "slack"}, "margin"),
        ({"shrink_after": -1}, "shrink_after"),
        ({"inner_passes": 0}, "inner_passes"),
        ({"support_steps": -1}, "support_steps"),
        ({"rho": [(0, 1.0), (10, -1.0)]}, "rho"),
        ({"rho": [(10, 1.0), (5, 2.0)]}, "non-decreasing"),
        ({"eta": "fast"}, "eta"),
        ({"rho": []}, "no points"),
    ],
)
def test_bad_gdmm_parameters(kwargs, match):
    _, model = _problem(0)
    with pytest.raises(ValueError, match=match):
        GDMM(model, 1.0, **kwargs)


def test_schedules_interpolate_geometrically():
    from dualstruct.solvers.gdmm import _schedule, value_at

    points = _schedule("rho", [(0, 1.0), (100, 1.0), (300, 100.0)])
    assert [value_at(points, p) for p in (0, 50, 100, 200, 300, 1000)] == pytest.approx(
        [1.0, 1.0, 1.0, 10.0, 100.0, 100.0]
    )
    assert value_at(_schedule("rho", 3), 7) == 3.0
    assert value_at(_schedule("eta", [(10, 2.0)]), 0) == 2.0  # constant before the first point


def test_penalty_schedule_reaches_the_bcfw_optimum():
    data, model = _problem(13, K=6)
    bcfw = BCFW(model, 1.0, max_iter=20000, tol=1e-8, check_every=20, random_state=0).fit(data)
    gdmm = GDMM(
        model,
        1.0,
        max_iter=1500,
        check_every=1500,
        random_state=0,
        rho=[(0, 0.3), (200, 3.0)],
        eta=0.1,
    ).fit(data)
    assert gdmm.history.last.primal == pytest.approx(bcfw.history.last.primal, rel=1e-3)
    assert gdmm.residuals[-1] < 1e-6 * gdmm.residuals[0]
    _check_w_equals_w_of_q(gdmm, model, data, 1.0)
    # the last value, in units of κ; the kernels get it times κ
    assert gdmm.rho_relative == 3.0 and gdmm.history.last.extra["rho"] == 3.0
    assert gdmm.rho == pytest.approx(3.0 * gdmm.penalty_scale, rel=1e-15)


def test_auto_oracles_follow_the_label_count():
    from dualstruct.solvers.gdmm import AUTO_BRUTE_MAX_LABELS

    small = GDMM(ChainModel(AUTO_BRUTE_MAX_LABELS, 3), 1.0)
    assert (small.unigram_oracle, small.bigram_oracle) == ("brute", "brute")
    large = GDMM(ChainModel(AUTO_BRUTE_MAX_LABELS + 1, 3), 1.0)
    assert (large.unigram_oracle, large.bigram_oracle) == ("sparse", "sorted")
    chosen = GDMM(ChainModel(5, 3), 1.0, unigram_oracle="sampled", bigram_oracle="sorted")
    assert (chosen.unigram_oracle, chosen.bigram_oracle) == ("sampled", "sorted")


def _reference_projection(v):
    """Projection onto the simplex by sorting every entry (Held, Wolfe, Crowder 1974)."""
    u = np.sort(v)[::-1]
    cum = np.cumsum(u)
    r = np.flatnonzero(u - (cum - 1.0) / np.arange(1, len(v) + 1) > 0)[-1]
    return np.maximum(v - (cum[r] - 1.0) / (r + 1), 0.0)


@pytest.mark.parametrize("scale", [0.01, 1.0, 30.0])
def test_simplex_projection_matches_the_full_sort(scale):
    # the kernel looks only at the entries above max(v) − 1 and finds the threshold by
    # fixed-point sweeps; the result must match the full sort
    rng = np.random.default_rng(int(scale * 100))
    for n in (1, 2, 3, 7, 50, 300):
        for _ in range(20):
            v = scale * rng.normal(size=n)
            if rng.random() < 0.3:
                v = np.round(v)  # ties
            out, scratch = np.empty(n), np.empty(n)
            kern.project_to_simplex(v, n, out, scratch)
            assert out.sum() == pytest.approx(1.0) and out.min() >= 0.0
            assert np.allclose(out, _reference_projection(v), atol=1e-12)


def test_a_saved_state_with_torn_or_out_of_range_arrays_is_refused():
    data, model = _problem(14, K=6)
    g = GDMM(model, 1.0, max_iter=3, random_state=0).fit(data)
    meta, arrays = g.state_dict()
    torn = dict(
        arrays,
        q_u=arrays["q_u"][:, :-1]
        if arrays["q_u"].shape[1] > 1
        else np.hstack([arrays["q_u"], arrays["q_u"]]),
    )
    with pytest.raises(ValueError, match="one width"):
        GDMM(model, 1.0).load_state(data, meta, torn)
    bad = dict(arrays, n_act=arrays["n_act"] + arrays["act"].shape[1])
    with pytest.raises(ValueError, match="out of range"):
        GDMM(model, 1.0).load_state(data, meta, bad)
    back = GDMM(model, 1.0)
    back.load_state(data, meta, arrays)
    np.testing.assert_array_equal(back.weights(), g.weights())
