"""GDMM over factors with lazy edges (the multi-label model's null state 0): only the edges
that carry information are stored, the optimum is BCFW's, the certified dual a lower bound,
resuming exact, and models without null states keep every edge."""

import copy

import numpy as np
import pytest
from numba import njit

from dualstruct.models import MultiLabelModel, factors
from dualstruct.models.multilabel import MultiLabelDataset
from dualstruct.solvers import BCFW, FactorGDMM
from dualstruct.solvers.objective import GAP_ROUNDING

TOL = 1e-4


def _sparse_labels(n=30, L=6, d=6, seed=0, interactions="11"):
    """A full label graph over labels of which each example has one or two."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = np.zeros((n, L), dtype=int)
    Y[np.arange(n), np.argmax(X[:, :L] + 0.3 * rng.normal(size=(n, L)), axis=1)] = 1
    Y[:, 1] |= (X[:, 0] > 1.0).astype(int)
    model = MultiLabelModel(L, d, edges="full", inference="lp", interactions=interactions)
    return model, MultiLabelDataset(X, Y)


def _inactive_excess(solver):
    """``max(μ_l + μ_k − 1)`` over the inactive edges (a distribution needs <= 0)."""
    lay = solver.layout
    n, L = len(lay.node_offsets) - 1, int(np.diff(lay.node_offsets)[0])
    mass = 1.0 - np.where(solver.act == 0, solver.q, 0.0).sum(axis=1)  # null state 0
    mass = mass.reshape(n, L)
    active = np.zeros((n, L, L), dtype=bool)
    rows = solver._used_rows()
    example = np.repeat(np.arange(n), solver.row_count)
    active[example, solver.row_u[rows], solver.row_v[rows]] = True
    active |= active.transpose(0, 2, 1)
    total = mass[:, :, None] + mass[:, None, :] - 1.0
    off = ~active & ~np.eye(L, dtype=bool)[None]
    return float(total[off].max())


@pytest.fixture(scope="module")
def problem():
    model, data = _sparse_labels()
    bcfw = BCFW(model, C=1.0, max_iter=3000, tol=1e-6, check_every=10, random_state=0)
    return model, data, bcfw.fit(data).history.last_checked().primal


def test_lazy_edges_reach_the_optimum_with_fewer_edges(problem):
    model, data, optimum = problem
    solver = FactorGDMM(model, C=1.0, max_iter=3000, tol=2e-5, check_every=10, random_state=0).fit(
        data
    )
    assert solver.lazy and solver.relaxation == "local polytope"
    r = solver.history.last_checked()
    assert r.primal == pytest.approx(optimum, rel=TOL)
    assert r.dual == pytest.approx(optimum, rel=TOL)
    checked = [r for r in solver.history.records if not np.isnan(r.dual)]
    assert all(r.dual <= optimum * (1 + GAP_ROUNDING) for r in checked)
    n, L = data.Y.shape
    edges = int(solver.row_count.sum())
    assert edges == r.extra["active_edges"] < n * L * (L - 1) // 2
    assert solver.counters[4] > 0  # edges became active on the way
    gold = data.Y.sum(axis=1)
    # and some that carried nothing (no mass, no multipliers) went back to the fixed table
    assert edges < (gold * (gold - 1) // 2).sum() + solver.counters[4]
    assert _inactive_excess(solver) <= 1e-12


def test_every_edge_and_lazy_edges_agree_on_the_optimum(problem):
    model, data, optimum = problem
    full = FactorGDMM(
        model, C=1.0, max_iter=3000, tol=2e-5, check_every=10, random_state=0, lazy_edges=False
    ).fit(data)
    assert not full.lazy and full.row_count.sum() == 30 * 15
    assert full.history.last_checked().dual == pytest.approx(optimum, rel=TOL)


def test_lazy_resume_equals_uninterrupted():
    model, data = _sparse_labels(seed=1)
    kw = dict(C=1.0, check_every=4, random_state=3)
    whole = FactorGDMM(model, max_iter=14, **kw).fit(data)
    first = FactorGDMM(model, max_iter=5, **kw).fit(data)
    assert (first.row_room > 9).any()  # some rooms grew (from 8 + the gold edges)
    meta, arrays = first.state_dict()
    again = FactorGDMM(model, max_iter=14, **{**kw, "random_state": 99})
    again.load_state(data, meta, {k: np.array(v) for k, v in arrays.items()})
    again.fit(data, max_iter=9)
    np.testing.assert_array_equal(again.w, whole.w)
    assert again.history.last.dual == whole.history.last.dual
    bad = dict(arrays)
    bad["row_edge"] = arrays["row_edge"].copy()
    rows = first._used_rows()
    bad["row_edge"][rows[1]] = arrays["row_edge"][rows[0]]  # an edge named twice
    with pytest.raises(ValueError, match="wrong edge|differ|nodes"):
        FactorGDMM(model, **kw).load_state(data, meta, bad)


def _pool_rows(solver):
    """The pool's used rows in example order: every row array's, lam's and msum's two ends."""
    rows = solver._used_rows()
    ends = np.column_stack([2 * rows, 2 * rows + 1]).ravel()
    names = ("row_u", "row_v", "row_edge", "n_pair", "pair_a", "pair_b", "q_e")
    out = {name: getattr(solver, name)[rows].copy() for name in names}
    out.update({name: getattr(solver, name)[ends].copy() for name in ("lam", "msum")})
    return out


def _assert_same_rows(solver, before):
    after = _pool_rows(solver)
    for name, old in before.items():
        np.testing.assert_array_equal(after[name], old, err_msg=name)


def test_a_grown_pool_is_compacted_without_moving_the_point():
    """A room that outgrows the pool moves after the pool is resized, one that fits moves
    within it, and compaction closes the gaps: the used rows, the certified dual and the
    next pass stay those of the solver whose rooms never moved."""
    model, data = _sparse_labels(seed=2)
    solver = FactorGDMM(model, C=1.0, max_iter=6, check_every=3, random_state=0).fit(data)
    twin = copy.deepcopy(solver, {id(data): data})  # the rooms left where they are
    before = solver.certified_dual(), solver.w.copy(), solver.row_count.copy()
    rows = _pool_rows(solver)
    pool, used = len(solver.row_u), solver.pool_used
    solver._grow_rows(0, pool)  # the pool lacks the rows: it grows, then the room moves
    assert len(solver.row_u) >= used + pool and solver.row_start[0] == used
    _assert_same_rows(solver, rows)
    size, row_u = len(solver.row_u), solver.row_u
    assert solver.pool_used + 2 * solver.row_room[1] <= size  # rows free past the last room
    solver._grow_rows(1, 1)  # so the room moves in place
    assert solver.row_u is row_u and len(solver.row_u) == size
    assert solver.row_start[1] == used + pool
    _assert_same_rows(solver, rows)
    assert solver.certified_dual() == pytest.approx(before[0], rel=1e-12)
    solver._compact_pool()
    assert solver.pool_used == solver.row_room.sum()
    _assert_same_rows(solver, rows)
    assert solver.certified_dual() == pytest.approx(before[0], rel=1e-12)
    np.testing.assert_array_equal(solver.w, before[1])
    np.testing.assert_array_equal(solver.row_count, before[2])
    meta, arrays = solver.state_dict()
    FactorGDMM(model, C=1.0).load_state(data, meta, arrays)  # w agrees with the marginals
    solver.fit(data, max_iter=1)
    twin.fit(data, max_iter=1)
    np.testing.assert_array_equal(solver.w, twin.w)
    assert solver.certified_dual() == twin.certified_dual()


def test_a_room_moves_within_the_kernels_while_the_pool_has_rows_free():
    """``_move_room`` copies an example's room, doubled, past the last room (its rows and
    their two ends in lam and msum), and refuses when the pool lacks the rows."""
    from dualstruct.solvers import _factor_gdmm_kernels as kern

    R, cap = 12, 2
    rows = kern.Rows(
        np.array([0, 3]),
        np.array([2, 1]),
        np.array([3, 2]),
        *(np.arange(R) + c for c in (0, 50, 100)),
    )
    lam = np.arange(2 * R * cap, dtype=float).reshape(2 * R, cap)
    none = np.zeros((1, cap), dtype=np.int32)
    sets = kern.ActiveSets(
        none, none[0], none * 0.0, none, lam.copy(), lam + 0.5, none[0], np.zeros((0, cap))
    )
    pairs = kern.PairSupport(
        *(np.arange(4 * R, dtype=np.int32).reshape(R, 4) + c for c in (0, 1)),
        np.arange(4.0 * R).reshape(R, 4),
        np.arange(R, dtype=np.int32),
    )
    before = [a.copy() for a in (*rows[3:], *pairs, sets.lam, sets.msum)]
    assert kern._move_room(rows, sets, pairs, 0, 5)  # 6 rows from the end of the last room, 5
    assert (rows.start[0], rows.room[0]) == (5, 6)
    moved = np.arange(5, 8)
    for old, new in zip(before, (*rows[3:], *pairs, sets.lam, sets.msum)):
        if len(old) == 2 * R:  # two ends per row
            np.testing.assert_array_equal(new[10:16], old[:6])
        else:
            np.testing.assert_array_equal(new[moved], old[:3])
    assert not kern._move_room(rows, sets, pairs, 1, 3)  # 4 rows from row 11: too few
    assert (rows.start[1], rows.room[1]) == (3, 2)


def test_models_without_null_states_keep_every_edge():
    model, data = _sparse_labels(interactions="table")  # 2×2 tables: no null state
    solver = FactorGDMM(model, C=1.0, max_iter=2, random_state=0).fit(data)
    assert not solver.lazy and solver.row_count.sum() == 30 * 15
    with pytest.raises(ValueError, match="null state"):
        FactorGDMM(model, C=1.0, max_iter=2, lazy_edges=True).fit(data)
    with pytest.raises(ValueError, match="lazy_edges"):
        FactorGDMM(model, lazy_edges="yes")
    chain = MultiLabelModel(6, 6, edges="chain", inference="lp")  # O(L) edges: all active
    solver = FactorGDMM(chain, C=1.0, max_iter=1, random_state=0).fit(data)
    assert not solver.lazy and solver.row_count.sum() == 30 * 5


def test_the_memory_estimate_follows_the_pool():
    model, data = _sparse_labels(n=40, L=20, d=20)
    lazy = FactorGDMM(model).memory_parts(data)
    full = FactorGDMM(model, lazy_edges=False).memory_parts(data)
    assert any(key.startswith("active edges") for key in lazy)
    assert sum(lazy.values()) < sum(full.values())


def test_a_restored_inactive_edge_must_stand_at_the_fixed_table():
    """An edited state whose inactive edges cannot stand at T (a gold edge left inactive, or
    two nodes with more than unit mass off null between them) would certify a gap that is no
    bound: it is refused."""
    model, data = _sparse_labels(seed=1)
    solver = FactorGDMM(model, C=1.0, max_iter=4, check_every=2, random_state=0).fit(data)
    meta, arrays = solver.state_dict()
    L = data.Y.shape[1]
    two = int(np.flatnonzero(data.Y.sum(axis=1) == 2)[0])  # an example with a gold edge
    bad = {k: np.array(v) for k, v in arrays.items()}
    bad["row_count"][two] = 0
    with pytest.raises(ValueError, match="fixed table"):
        FactorGDMM(model, C=1.0).load_state(data, meta, bad)
    one = int(np.flatnonzero(data.Y.sum(axis=1) == 1)[0])
    label = int(np.flatnonzero(data.Y[one])[0])
    other = (label + 1) % L
    g = one * L + other  # its node `other` gets all the mass off null, as the gold one has
    bad = {k: np.array(v) for k, v in arrays.items()}
    bad["row_count"][one] = 0
    bad["act"][g, :2], bad["q"][g, :2], bad["n_act"][g] = (0, 1), (0.0, 1.0), 2
    with pytest.raises(ValueError, match="fixed table"):
        FactorGDMM(model, C=1.0).load_state(data, meta, bad)


@njit
def _tree_search(k, w, other, C, gain, outside, active, raise_e, raise_by):
    """The multi-label model's search after ``prepare_weights`` and one ``add_edge`` on the
    (1, 1) pair of edge ``raise_e`` of w, one on ``other`` (which the tree must ignore)."""
    factors.prepare_weights(k, w)
    factors.add_edge(k, 0, raise_e, 1, 1, raise_by, w)
    factors.add_edge(k, 0, (raise_e + 1) % len(k.edges), 1, 1, -raise_by, w)
    factors.add_edge(k, 0, raise_e, 1, 1, 1e6, other)
    return factors.best_inactive_edge(k, 0, w, C, gain, outside, active, 0.0)


def test_the_tree_search_finds_the_scans_best_inactive_edge():
    """Branch and bound over the max tree of the (1, 1) weights (kept up to date by
    add_edge) finds the same edge as a scan, among labels outside and edges inactive."""
    model, data = _sparse_labels(n=4, L=23, d=23)
    k = model.block_data(data).kernel
    assert len(k.pair_tree)  # the full graph: lazy edges, the tree search
    E, C = len(k.edges), 0.7
    rng = np.random.default_rng(3)
    for trial in range(40):
        w = rng.normal(size=model.n_unary + E) * (0.01 if trial % 2 else 1.0)
        gain = np.zeros((23, 2))
        gain[:, 1] = rng.normal(size=23) - (0.0 if trial % 3 else 2.0)
        outside = (rng.random(23) < 0.8).astype(np.int64)
        active = np.where(rng.random(E) < 0.1, 0, -1).astype(np.int64)
        raise_e, raise_by = int(rng.integers(E)), float(rng.random() * 3)
        if trial % 4 == 0:  # the raised edge active: another must win
            active[raise_e] = 0
        e, g = _tree_search(k, w, np.zeros_like(w), C, gain, outside, active, raise_e, raise_by)
        l, m = k.edges[:, 0], k.edges[:, 1]
        want = C * w[model.n_unary :] + gain[l, 1] + gain[m, 1]
        want[(active >= 0) | (outside[l] == 0) | (outside[m] == 0)] = -np.inf
        if want.max() > 0.0:
            assert (e, g) == (int(np.argmax(want)), pytest.approx(want.max()))
        else:
            assert (e, g) == (-1, 0.0)


@njit
def _gain_bounds(k, w, other, moves, out):
    """The multi-label model's ``edge_gain_bound`` of every label after ``prepare_weights``
    and the (1, 1) changes ``moves`` (edge, amount) on w, and one on ``other``, which the
    bounds must ignore; then the bound for ``other`` (none: ∞)."""
    factors.prepare_weights(k, w)
    for m in range(moves.shape[0]):
        factors.add_edge(k, 0, int(moves[m, 0]), 1, 1, moves[m, 1], w)
    factors.add_edge(k, 0, 0, 1, 1, -1e6, other)
    for j in range(len(out)):
        out[j] = factors.edge_gain_bound(k, 0, w, j)
    return factors.edge_gain_bound(k, 0, other, 0)


def test_the_edge_gain_bound_stays_above_the_positive_weights():
    """A label's bound is at least the sum of its edges' positive (1, 1) weights while w
    moves by add_edge (exact right after prepare_weights), and none for another w."""
    L = 17
    model, data = _sparse_labels(n=4, L=L, d=L)
    k = model.block_data(data).kernel
    E = len(k.edges)
    rng = np.random.default_rng(5)
    for trial in range(10):
        w = rng.normal(size=model.n_unary + E)
        moves = np.column_stack([rng.integers(E, size=30), rng.normal(size=30)])
        moves = moves[: 0 if trial == 0 else None]
        out = np.zeros(L)
        assert _gain_bounds(k, w, w.copy(), moves, out) == np.inf
        V = np.maximum(w[model.n_unary :], 0.0)
        exact = np.bincount(k.edges[:, 0], V, L) + np.bincount(k.edges[:, 1], V, L)
        assert np.all(out >= exact - 1e-12)
        if trial == 0:
            np.testing.assert_allclose(out, exact, rtol=1e-12, atol=1e-12)


class _Watched(FactorGDMM):
    """FactorGDMM that counts its capacity growths (the kernel loop returned a NEED_* code
    and resumed) and, once, raises KeyboardInterrupt (a second Ctrl-C) right after the
    first kernel call of pass ``stop_at`` (0-based; None: never)."""

    stop_at = None

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.grown, self.stopped = 0, False

    def _grow(self, need):
        self.grown += 1
        super()._grow(need)

    def _grow_rows(self, i, rows):
        self.grown += 1
        super()._grow_rows(i, rows)

    @property
    def _kern(self):
        real, solver = FactorGDMM._kern.fget(self), self

        class Calls:
            def __getattr__(self, name):
                return getattr(real, name)

            def factor_pass(self, *args):
                out = real.factor_pass(*args)
                if solver.passes == solver.stop_at and not solver.stopped:
                    solver.stopped = True
                    raise KeyboardInterrupt
                return out

        return Calls()


def _both_averages(data, model, stop_at=None, **kw):
    """The same fit with R once per pass and with R in the kernels (``pass_level_average``
    True / False); with ``stop_at``, interrupted there and then resumed for 3 passes."""
    runs = []
    for per_pass in (True, False):
        solver = _Watched(model, C=1.0, check_every=2, random_state=0, **kw)
        solver.pass_level_average, solver.stop_at = per_pass, stop_at
        solver.fit(data)
        assert solver._pass_level_average() is per_pass
        if stop_at is not None:
            assert solver.history.stop_reason == "interrupted" and solver.passes == stop_at
            runs.append(solver.R.copy())
            solver.fit(data, max_iter=3)
        runs.append(solver)
    return runs


def _assert_same_average(a, b):
    np.testing.assert_array_equal(a.w, b.w)  # R does not move the iterates
    scale = np.abs(b.averaged_weights()).max()
    np.testing.assert_allclose(
        a.averaged_weights(), b.averaged_weights(), rtol=1e-10, atol=1e-14 * scale
    )


@pytest.mark.parametrize("proximal", [0.0, "auto"])
def test_the_average_once_per_pass_equals_the_kernels(proximal):
    """R += A_{m−1} (u_end − u_start) once per pass is the kernels' R += A_{m−1} Δu at every
    step, up to rounding: the same averaged weights, with the proximal scheme too (R follows
    u, recovered after the pass), across the kernel loop's returns to grow capacity."""
    model, data = _sparse_labels(seed=4)
    per_pass, in_kernels = _both_averages(data, model, proximal=proximal, max_iter=8)
    assert per_pass.grown > 0 and in_kernels.grown == per_pass.grown
    assert per_pass.passes == 8 and per_pass._proximal_on == (proximal == "auto")
    _assert_same_average(per_pass, in_kernels)


@pytest.mark.parametrize("proximal", [0.0, "auto"])
def test_the_average_once_per_pass_holds_through_an_interrupt(monkeypatch, proximal):
    """A KeyboardInterrupt part-way through a pass (after one kernel call of one example):
    R holds the changes the pass made, as the kernels' R does, and resuming keeps them."""
    from dualstruct.solvers import base as solver_base

    monkeypatch.setattr(solver_base, "FIRST_CHUNK_COST", 1.0)  # kernel calls of one example
    monkeypatch.setattr(solver_base, "CHUNK_SECONDS", 0.0)
    model, data = _sparse_labels(seed=4)
    R_pass, per_pass, R_kernels, in_kernels = _both_averages(
        data, model, stop_at=3, proximal=proximal, max_iter=6
    )
    scale = np.abs(R_kernels).max()
    np.testing.assert_allclose(R_pass, R_kernels, rtol=1e-10, atol=1e-14 * scale)
    assert per_pass.passes == 6
    _assert_same_average(per_pass, in_kernels)


def test_the_average_once_per_pass_by_the_size_of_w(monkeypatch):
    """By default R is kept once per pass when w has at most PASS_AVERAGE_WEIGHTS_PER_NODE
    entries per node factor, else in the kernels."""
    from dualstruct.solvers import factor_gdmm

    model, data = _sparse_labels()  # 51 weights, 180 nodes
    solver = FactorGDMM(model, C=1.0, max_iter=1, random_state=0).fit(data)
    assert solver.w.size <= len(solver.gold) and solver._pass_level_average()
    monkeypatch.setattr(factor_gdmm, "PASS_AVERAGE_WEIGHTS_PER_NODE", 0.1)
    assert not solver._pass_level_average()
