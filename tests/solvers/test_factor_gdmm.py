"""GDMM over factors (FactorGDMM): the multi-class model, graph CRFs on forests and loopy
graphs (local polytope), the multi-label model, a user's kernel model; the certificate,
resuming, a new C, dispatch."""

from typing import NamedTuple

import numpy as np
import pytest
from numba import njit
from sklearn.datasets import load_digits

from dualstruct.models import GraphCRF, KernelModel, MultiClassModel, MultiLabelModel, factors
from dualstruct.models.multilabel import MultiLabelDataset, observed_support
from dualstruct.solvers import BCFW, FactorGDMM, MultiLabelGDMM, solver_class, solver_names
from dualstruct.solvers.objective import GAP_ROUNDING

TOL = 1e-4


def _graphs(n, loopy, seed=0, K=3, d=4):
    """Random labelled graphs: trees (a forest per example), with two chords when loopy."""
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for _ in range(n):
        m = int(rng.integers(4, 8))
        y = rng.integers(0, K, m)
        feats = rng.normal(size=(m, d))
        feats[np.arange(m), y % d] += 1.0
        edges = [(int(rng.integers(0, t)), t) for t in range(1, m)]
        if loopy:
            edges = sorted({tuple(sorted(e)) for e in edges + [(0, m - 1), (1, m - 2)]})
        X.append((feats, np.array(edges)))
        Y.append(y)
    return X, Y


def _optimum(model, data, C, weights=False, tol=1e-6):
    bcfw = BCFW(model, C=C, max_iter=3000, tol=tol, check_every=10, random_state=0).fit(data)
    optimum = bcfw.history.last_checked().primal
    return (optimum, bcfw.weights()) if weights else optimum


def _close(solver, optimum):
    r = solver.history.last_checked()
    assert r.primal == pytest.approx(optimum, rel=TOL)
    assert r.dual == pytest.approx(optimum, rel=TOL)
    assert r.dual <= r.primal * (1 + GAP_ROUNDING)


def _fit(model, data, C, max_iter=1500, **kwargs):
    return FactorGDMM(
        model, C=C, max_iter=max_iter, tol=2e-5, check_every=10, random_state=0, **kwargs
    ).fit(data)


def test_multiclass_reaches_bcfw_optimum():
    X, y = load_digits(return_X_y=True)
    model = MultiClassModel(10, 64)
    data = model.block_data(X[:60] / 16, y[:60])
    solver = _fit(model, data, 1.0)
    _close(solver, _optimum(model, data, 1.0))
    assert solver.relaxation == "exact"


def test_forest_graph_reaches_bcfw_optimum_and_the_gap_closes():
    X, Y = _graphs(12, loopy=False)
    model = GraphCRF(3, 4)
    data = model.block_data(X, Y)
    solver = _fit(model, data, 1.0)
    _close(solver, _optimum(model, data, 1.0))
    assert solver.relaxation == "exact"
    checked = [r for r in solver.history.records if not np.isnan(r.relative_gap)]
    gaps = np.array([r.gap for r in checked])
    assert (gaps >= -GAP_ROUNDING * np.array([r.primal for r in checked])).all()
    assert checked[-1].relative_gap <= 2e-5 < checked[0].relative_gap
    assert checked[-1].extra["residual"] < checked[0].extra["residual"]


def test_loopy_graph_trains_the_local_polytope_relaxation():
    X, Y = _graphs(10, loopy=True, seed=1)
    relaxed = GraphCRF(3, 4, inference_method="lp")
    data = relaxed.block_data(X, Y)
    solver = _fit(relaxed, data, 0.1)
    assert solver.relaxation == "local polytope"
    assert solver.history.last.extra["exact"] == 0.0
    _close(solver, _optimum(relaxed, data, 0.1, tol=5e-5))  # the LP-relaxed SVM's optimum
    exact = GraphCRF(3, 4)  # its primal is the exact one, which the relaxed dual may exceed
    with pytest.raises(ValueError, match="inference_method='lp'"):
        FactorGDMM(exact, max_iter=1).fit(exact.block_data(X, Y))


def test_resume_equals_uninterrupted():
    X, Y = _graphs(6, loopy=False, seed=2)
    model = GraphCRF(3, 4)
    data = model.block_data(X, Y)
    whole = FactorGDMM(model, C=1.0, max_iter=12, check_every=4, random_state=3).fit(data)
    first = FactorGDMM(model, C=1.0, max_iter=5, check_every=4, random_state=3).fit(data)
    meta, arrays = first.state_dict()
    again = FactorGDMM(model, C=1.0, max_iter=12, check_every=4, random_state=99)
    again.load_state(data, meta, {k: np.array(v) for k, v in arrays.items()})
    again.fit(data, max_iter=7)
    np.testing.assert_array_equal(again.w, whole.w)
    assert again.history.last.dual == whole.history.last.dual
    arrays["w"] = arrays["w"] + 1.0  # w no longer what the marginals determine
    with pytest.raises(ValueError, match="disagree"):
        FactorGDMM(model, C=1.0).load_state(data, meta, arrays)


def test_shrinking_keeps_a_consistent_certified_state():
    X, Y = _graphs(6, loopy=False, seed=5)
    model = GraphCRF(3, 4)
    data = model.block_data(X, Y)
    solver = FactorGDMM(
        model, C=1.0, max_iter=60, shrink_after=1, check_every=20, random_state=0
    ).fit(data)
    assert solver.counters[3] > 0  # states left their nodes
    assert all(r.gap >= 0 for r in solver.history.records if not np.isnan(r.gap))
    meta, arrays = solver.state_dict()
    FactorGDMM(model, C=1.0).load_state(data, meta, arrays)  # w agrees with the marginals


# -- a user's kernel model: two nodes joined by a directed K × K table --------------------------
class PairKernel(NamedTuple):
    X: np.ndarray  # (n, 2, d) the two nodes' features
    labels: np.ndarray  # int32 (2n,)
    label_offsets: np.ndarray  # int64 (n + 1,)
    n_states: int


@factors.implements(factors.factor_counts, PairKernel)
def _counts(k, i):
    return 2, 1


@factors.implements(factors.node_info, PairKernel)
def _info(k, i, j):
    return k.n_states, k.labels[2 * i + j]


@factors.implements(factors.edge_nodes, PairKernel)
def _edge(k, i, e):
    return 0, 1


@factors.implements(factors.node_score, PairKernel)
def _node_score(k, i, w, j, a):
    s = 0.0
    for f in range(k.X.shape[2]):
        s += k.X[i, j, f] * w[f * k.n_states + a]
    return s


@factors.implements(factors.edge_score, PairKernel)
def _edge_score(k, i, w, e, a, b):
    return w[k.X.shape[2] * k.n_states + a * k.n_states + b]


@factors.implements(factors.node_loss, PairKernel)
def _node_loss(k, i, j, a):
    return 0.0 if a == k.labels[2 * i + j] else 1.0


@factors.implements(factors.add_node, PairKernel)
def _add_node(k, i, j, a, c, w):
    for f in range(k.X.shape[2]):
        w[f * k.n_states + a] += c * k.X[i, j, f]


@factors.implements(factors.add_edge, PairKernel)
def _add_edge(k, i, e, a, b, c, w):
    w[k.X.shape[2] * k.n_states + a * k.n_states + b] += c


@factors.implements(factors.node_sq_distance, PairKernel)
def _node_distance(k, i, j, a, b):
    s = 0.0
    for f in range(k.X.shape[2]):
        s += k.X[i, j, f] * k.X[i, j, f]
    return 0.0 if a == b else 2.0 * s


@factors.implements(factors.node_sq_norm, PairKernel)
def _node_norm(k, i, j, a):
    """Each state's features in their own block: orthogonal, so nodes take exact steps."""
    s = 0.0
    for f in range(k.X.shape[2]):
        s += k.X[i, j, f] * k.X[i, j, f]
    return s


@factors.implements(factors.edge_sq_distance, PairKernel)
def _edge_distance(k, i, e, a, b, c, d):
    return 0.0 if a == c and b == d else 2.0


class PairModel(KernelModel):
    """Two K-state nodes with d features each and a directed K × K table: the weights of a
    directed GraphCRF on the graph 0 → 1. Its hinge (for the primal) by enumeration."""

    kernel_class = PairKernel

    def __init__(self, K, d):
        self.K, self.d = K, d
        self.size = d * K + K * K

    def block_data(self, X, Y):
        from dualstruct.data import BlockData

        X = np.ascontiguousarray(X, dtype=np.float64)
        k = PairKernel(
            X, np.asarray(Y, dtype=np.int32).ravel(), np.arange(0, 2 * len(X) + 1, 2), self.K
        )
        return BlockData(k, (X,))

    def hinge(self, w, data):
        k, K, d = data.kernel, self.K, self.d
        theta = np.einsum("njf,fa->nja", k.X, w[: d * K].reshape(d, K))
        gold = k.labels.reshape(-1, 2)
        score = theta[:, 0, :, None] + theta[:, 1, None, :] + w[d * K :].reshape(K, K)
        a, b = np.meshgrid(np.arange(K), np.arange(K), indexing="ij")
        loss = (a != gold[:, :1, None]).astype(float) + (b != gold[:, 1:, None])
        value = (score + loss).reshape(len(gold), -1)
        rows = np.arange(len(gold))
        best = value.max(axis=1) - score[rows, gold[:, 0], gold[:, 1]]
        return best, None


def test_user_kernel_model_registering_factor_functions():
    rng = np.random.default_rng(4)
    n, K, d = 15, 3, 4
    Y = rng.integers(0, K, (n, 2))
    X = rng.normal(size=(n, 2, d))
    X[np.arange(n)[:, None], [0, 1], Y % d] += 1.0
    user = PairModel(K, d)
    assert solver_class("gdmm", user) is FactorGDMM
    solver = _fit(user, user.block_data(X, Y), 1.0)
    graph = GraphCRF(K, d, directed=True)  # the same problem, trained by BCFW
    data = graph.block_data([(x, np.array([[0, 1]])) for x in X], list(Y))
    optimum, w = _optimum(graph, data, 1.0, weights=True)
    _close(solver, optimum)
    np.testing.assert_allclose(solver.weights(), w, atol=0.02 * np.abs(w).max())


@njit(cache=False)
def _batched_and_single(k, w, states, coefs):
    """The default node_values, add_nodes and node_sq_norms, against node_score + node_loss,
    add_node and node_sq_norm."""
    n = len(states)
    values, single = np.empty(n), np.empty(n)
    w_batch, w_single = w.copy(), w.copy()
    factors.node_values(k, 0, w, 1, states, n, values)
    factors.add_nodes(k, 0, 1, states, coefs, n, 0.5, w_batch)
    norms = np.empty(n)
    factors.node_sq_norms(k, 0, 1, states, n, norms)
    for s in range(n):
        if norms[s] != factors.node_sq_norm(k, 0, 1, states[s]) or norms[s] <= 0.0:
            raise AssertionError("node_sq_norms differs from node_sq_norm")
    for s in range(n):
        a = states[s]
        single[s] = factors.node_score(k, 0, w, 1, a) + factors.node_loss(k, 0, 1, a)
        factors.add_node(k, 0, 1, states[s], coefs[s] * 0.5, w_single)
    return values, single, w_batch, w_single


def test_the_default_batched_node_functions_equal_the_single_ones():
    user = PairModel(4, 3)
    rng = np.random.default_rng(2)
    k = user.block_data(rng.normal(size=(2, 2, 3)), [[0, 1], [2, 3]]).kernel
    w = rng.normal(size=user.size)
    values, single, w_batch, w_single = _batched_and_single(
        k, w, np.array([3, 0, 1]), np.array([0.5, -1.0, 2.0])
    )
    np.testing.assert_array_equal(values, single)
    np.testing.assert_array_equal(w_batch, w_single)
    assert values[0] == pytest.approx(k.X[0, 1] @ w[3 : 3 * 4 : 4] + 1.0)  # state 3, not gold


def test_a_user_kernel_is_kept_out_of_the_compiled_cache():
    """numba's on-disk index names the class of every signature compiled: a kernel class
    of a test module (or a script's __main__) in it would break loading the engine in
    processes that cannot import that module. Such kernels use an uncached copy."""
    import pickle

    from dualstruct.solvers import _factor_gdmm_kernels as cached

    user = PairModel(3, 2)
    solver = FactorGDMM(user, max_iter=1).fit(user.block_data(np.ones((2, 2, 2)), [[0, 1], [2, 0]]))
    assert solver.relaxation == "exact"
    compiled = [str(sig) for sig in cached.factor_pass.signatures]
    assert not any("PairKernel" in sig for sig in compiled), compiled
    assert pickle.loads(pickle.dumps(solver)).w.tolist() == solver.w.tolist()


#: PairKernel's node functions and its edge's nodes, which its variants below share
PAIR_NODE_FUNCTIONS = (
    (factors.node_info, _info),
    (factors.edge_nodes, _edge),
    (factors.node_score, _node_score),
    (factors.node_loss, _node_loss),
    (factors.add_node, _add_node),
    (factors.node_sq_distance, _node_distance),
)


# -- the same two nodes with a null state 0 (the table is zero on its row and column) ---------
class NullPairKernel(NamedTuple):
    X: np.ndarray
    labels: np.ndarray
    label_offsets: np.ndarray
    n_states: int


for _generic, _impl in PAIR_NODE_FUNCTIONS + ((factors.factor_counts, _counts),):
    factors.implements(_generic, NullPairKernel)(_impl)


@factors.implements(factors.null_state, NullPairKernel)
def _null_state(k, i, j):
    return 0


@factors.implements(factors.edge_score, NullPairKernel)
def _null_edge_score(k, i, w, e, a, b):
    return 0.0 if a == 0 or b == 0 else w[k.X.shape[2] * k.n_states + a * k.n_states + b]


@factors.implements(factors.add_edge, NullPairKernel)
def _null_add_edge(k, i, e, a, b, c, w):
    if a != 0 and b != 0:
        w[k.X.shape[2] * k.n_states + a * k.n_states + b] += c


@factors.implements(factors.edge_sq_distance, NullPairKernel)
def _null_edge_distance(k, i, e, a, b, c, d):
    if a == c and b == d:
        return 0.0
    one = 1.0 if a != 0 and b != 0 else 0.0
    return one + (1.0 if c != 0 and d != 0 else 0.0)


class NullPairModel(PairModel):
    """PairModel whose table has no weights on the null state's row and column (those
    entries of w stay zero, so the enumerated hinge is the model's)."""

    kernel_class = NullPairKernel

    def block_data(self, X, Y):
        from dualstruct.data import BlockData

        k = PairModel.block_data(self, X, Y).kernel
        return BlockData(NullPairKernel(*k), (k.X,))


def test_lazy_edges_on_nodes_with_several_states_besides_null():
    """A node with all its mass off null moves it between its other states: a step that
    empties the null state is not cut short by rounding (a sliver left at null would be
    every later step's away state, and the node would never move again)."""
    rng = np.random.default_rng(1)
    n, K, d = 20, 3, 4
    Y = np.where(rng.random((n, 2)) < 0.6, 0, rng.integers(1, K, (n, 2)))
    X = rng.normal(size=(n, 2, d))
    X[np.arange(n)[:, None], [0, 1], Y % d] += 1.0
    user = NullPairModel(K, d)
    data = user.block_data(X, Y)
    every = _fit(user, data, 1.0, lazy_edges=False)
    lazy = _fit(user, data, 1.0)
    assert lazy.lazy and not every.lazy
    r = every.history.last_checked()
    assert r.relative_gap < 2e-5
    _close(lazy, r.primal)


def test_gdmm_needs_the_factor_functions():
    class Bare(NamedTuple):
        labels: np.ndarray

    class BareModel(KernelModel):
        kernel_class = Bare

    assert "gdmm" not in solver_names(BareModel())
    with pytest.raises(ValueError, match="factor_counts, node_info, node_loss"):
        solver_class("gdmm", BareModel())
    assert solver_class("gdmm", MultiClassModel) is FactorGDMM
    assert solver_class("gdmm", GraphCRF(2, 2)) is FactorGDMM


def _multilabel(edges, support=False, interactions="11"):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    X[X < -0.8] = 0.0  # some features absent, so that a support leaves weights out
    Y = (X[:, :4] + 0.5 * rng.normal(size=(30, 4)) > 0).astype(int)
    data = MultiLabelDataset(X, Y)
    model = MultiLabelModel(
        4,
        5,
        edges=edges,
        inference="lp",
        interactions=interactions,
        support=observed_support(data) if support else None,
    ).fit_edges(Y)
    return model, data


@pytest.mark.parametrize(
    "edges, support, interactions",
    [("independent", True, "11"), ("tree", False, "table"), ("full", True, "11")],
)
def test_multilabel_reaches_the_optimum_of_bcfw_and_its_own_gdmm(edges, support, interactions):
    model, data = _multilabel(edges, support, interactions)
    solver = _fit(model, data, 1.0, max_iter=3000)
    _close(solver, _optimum(model, data, 1.0))
    assert solver.relaxation == ("local polytope" if edges == "full" else "exact")
    if interactions == "11":
        own = MultiLabelGDMM(model, max_iter=3000, tol=2e-5, check_every=10, random_state=0)
        assert own.fit(data).history.last_checked().primal == pytest.approx(
            solver.history.last_checked().primal, rel=TOL
        )


@pytest.mark.parametrize("new_C", [0.3, 3.0])
def test_a_new_C_starts_from_the_scaled_consistent_point(new_C):
    model, data = _multilabel("tree")
    solver = _fit(model, data, 1.0, max_iter=200)
    solver.set_C(new_C)
    expected = np.zeros_like(solver.w)  # w is still the one the marginals determine
    solver._kern.rebuild_weights(
        solver.blocks.kernel,
        solver.layout,
        solver._rows(),
        solver._sets(),
        solver._pairs(),
        new_C,
        expected,
    )
    np.testing.assert_allclose(solver.w, expected, atol=1e-9)
    assert solver.dual() > 0.0  # a better point than the gold labelling's
    solver.max_iter = 3000
    _close(solver.fit(data), _optimum(model, data, new_C))


def test_the_memory_estimate_counts_every_example_s_edges():
    """Kernels without ``edge_offsets`` (the multi-label model's) have their edges counted
    with ``factor_counts``: 30 examples of 4 labels and 6 edges each."""
    model, data = _multilabel("full")
    parts = FactorGDMM(model, lazy_edges=False).memory_parts(data)
    nodes, edges = 30 * 4, 30 * 6
    assert parts["active sets (4 slots per node and edge end, 4 pairs per edge)"] == (
        96 * nodes + 192 * edges
    )


def test_one_registry_serves_the_kernel_and_the_factor_interfaces():
    from dualstruct.models import interface

    assert factors._REGISTERED is interface._REGISTERED
    assert PairKernel in interface._REGISTERED[factors.node_score]
    with pytest.raises(ValueError, match="factor interface"):
        factors.implements(interface.score, PairKernel)


def test_non_block_input_is_made_into_block_data_once(monkeypatch):
    model, data = _multilabel("tree")
    made = []
    block_data = MultiLabelModel.block_data

    def counted(self, *args, **kwargs):
        made.append(1)
        return block_data(self, *args, **kwargs)

    monkeypatch.setattr(MultiLabelModel, "block_data", counted)
    solver = FactorGDMM(model, max_iter=1).fit(data)
    assert len(made) == 1
    assert solver._estimated is None  # not held once training started


class NegativeKernel(NamedTuple):
    X: np.ndarray
    labels: np.ndarray
    label_offsets: np.ndarray
    n_states: int


for _generic, _impl in PAIR_NODE_FUNCTIONS + (
    (factors.edge_score, _edge_score),
    (factors.add_edge, _add_edge),
    (factors.edge_sq_distance, _edge_distance),
):
    factors.implements(_generic, NegativeKernel)(_impl)


@factors.implements(factors.factor_counts, NegativeKernel)
def _negative_counts(k, i):
    return 2, 1 - 2 * i  # example 1 has −1 edges


class NegativeModel(PairModel):
    kernel_class = NegativeKernel

    def block_data(self, X, Y):
        from dualstruct.data import BlockData

        k = PairModel.block_data(self, X, Y).kernel
        return BlockData(NegativeKernel(*k), (k.X,))


def test_factor_counts_are_checked_before_the_memory_estimate():
    user = NegativeModel(3, 2)
    data = user.block_data(np.ones((2, 2, 2)), [[0, 1], [2, 0]])
    message = r"factor_counts of NegativeKernel returned \(2, -1\) for example 1"
    with pytest.raises(ValueError, match=message):
        FactorGDMM(user).memory_parts(data)
    with pytest.raises(ValueError, match="example 1"):
        FactorGDMM(user, max_iter=1).fit(data)


def test_a_restored_node_listing_a_state_twice_is_refused():
    X, Y = _graphs(6, loopy=False, seed=2)
    model = GraphCRF(3, 4)
    data = model.block_data(X, Y)
    solver = FactorGDMM(model, C=1.0, max_iter=5, random_state=3).fit(data)
    meta, arrays = solver.state_dict()
    arrays = {k: np.array(v) for k, v in arrays.items()}
    g = int(np.flatnonzero(arrays["n_act"] >= 2)[0])
    arrays["act"][g, 1] = arrays["act"][g, 0]  # in range, but the same state in two slots
    with pytest.raises(ValueError, match="twice"):
        FactorGDMM(model, C=1.0).load_state(data, meta, arrays)


def test_the_default_penalty_falls_with_the_factor_graphs_degree():
    from dualstruct.solvers.factor_gdmm import default_rho

    assert default_rho(0.0) == default_rho(2.0) == default_rho(8.0) == 0.5
    assert default_rho(16.0) == pytest.approx(0.25)
    assert default_rho(158.0) == pytest.approx(4.0 / 158.0) and default_rho(1000.0) == 0.025
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(20, 3)), (rng.random(size=(20, 20)) > 0.5).astype(int)
    full = MultiLabelModel(20, 3, edges="full", inference="lp")
    solver = FactorGDMM(full, max_iter=1).fit(MultiLabelDataset(X, Y))
    assert solver.mean_degree == 19.0 and solver.rho_relative == pytest.approx(4.0 / 19.0)
    given = FactorGDMM(full, rho=0.3, max_iter=1).fit(MultiLabelDataset(X, Y))
    assert given.rho_relative == 0.3
    model, data = _multilabel("tree")
    assert _fit(model, data, 1.0, max_iter=1).rho_relative == 0.5


@njit(cache=False)
def _scores_both_ways(k, w, nodes, states):
    """Every example's node scores by ``node_scores`` and by ``node_score`` one at a time."""
    n = len(k.label_offsets) - 1
    batch, single = np.zeros((n, nodes, states)), np.zeros((n, nodes, states))
    for i in range(n):
        factors.node_scores(k, i, w, batch[i])
        for j in range(factors.factor_counts(k, i)[0]):
            for a in range(factors.node_info(k, i, j)[0]):
                single[i, j, a] = factors.node_score(k, i, w, j, a)
    return batch, single


@pytest.mark.parametrize("support", ["dense", "full rows", "partial rows"])
def test_the_multilabel_node_scores_at_once_equal_one_at_a_time(support):
    model, data = _multilabel("full", support != "dense")
    if support == "partial rows":  # features whose support rows hold some labels only
        model = MultiLabelModel(
            4,
            5,
            edges="full",
            inference="lp",
            support=observed_support(data, min_count=12, full_rows_from=1.0),
        ).fit_edges(data.Y)
    k = model.block_data(data).kernel
    if support == "partial rows":
        assert (k.entry_count < k.n_labels).any()
    w = np.random.default_rng(0).normal(size=model.size)
    batch, single = _scores_both_ways(k, w, 5, 2)
    np.testing.assert_allclose(batch, single, rtol=1e-12, atol=1e-12)
    assert np.abs(single[:, :, 1]).max() > 0
