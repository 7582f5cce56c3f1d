"""Memory is estimated before it is spent; a pending Ctrl-C or SIGTERM is seen within seconds;
``--max-iter`` means the same on both resumes."""

import math
import signal
import threading
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import dualstruct.solvers.base as solver_base
from dualstruct import MultiClassSVM, MultiLabelSVM, cli
from dualstruct.datasets import load_libsvm_multilabel
from dualstruct.distributed import CoCoA, InProcessEngine
from dualstruct.distributed.spark import MANIFEST
from dualstruct.estimators import SSVM
from dualstruct.models import GraphCRF, MultiClassModel, MultiLabelModel
from dualstruct.models.multilabel import MultiLabelDataset, label_graph, observed_support
from dualstruct.solvers import BCFW, CuttingPlane
from dualstruct.solvers.objective import primal_objective


def _peak_until_refused(fn):
    """(the MemoryError ``fn`` raises, the peak bytes traced until then)."""
    tracemalloc.start()
    try:
        with pytest.raises(MemoryError) as err:
            fn()
        return err.value, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_full_label_graph_refused_before_it_is_built(monkeypatch):
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "8M")
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(4, 3)), rng.integers(0, 2, size=(4, 1500))
    err, peak = _peak_until_refused(lambda: MultiLabelSVM(max_iter=1).fit(X, Y))
    assert peak < 2**20  # the 1.1 million edges (tens of MB) were never built
    assert "label graph" in str(err) and "edges='tree'" in str(err)


def test_label_graph_built_with_numpy_matches_pairs(monkeypatch):
    for L in (1, 2, 5, 17):
        pairs = [(a, b) for a in range(L) for b in range(a + 1, L)]
        assert label_graph("full", L).tolist() == [list(p) for p in pairs]
        assert label_graph("chain", L).tolist() == [[a, a + 1] for a in range(L - 1)]
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "1M")
    err, peak = _peak_until_refused(lambda: MultiLabelModel(3000, 2, edges="full"))
    assert peak < 2**20 and "full label graph over 3,000 labels" in str(err)


def test_absurd_libsvm_feature_index_names_file_and_line(tmp_path):
    path = tmp_path / "train.svm"
    path.write_text("0 1:1 2:0.5\n1 1000000000:2\n")
    with pytest.raises(ValueError, match=r"train\.svm:2: feature index 1,000,000,000"):
        load_libsvm_multilabel(path)
    X, _ = load_libsvm_multilabel(path, n_features=10**9)  # allowed when asked for
    assert X.shape == (2, 10**9)


def test_observed_support_estimated_before_allocating(monkeypatch):
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "16M")
    d = 5_000_001
    X = sp.csr_matrix((np.ones(2), np.array([0, d - 1]), np.array([0, 1, 2])), shape=(2, d))
    data = MultiLabelDataset(X, np.array([[1, 0], [0, 1]]))
    err, peak = _peak_until_refused(lambda: observed_support(data))
    assert peak < 2**20 and "5,000,001 features" in str(err)


@pytest.mark.parametrize(
    "make, absent, present",
    [
        (lambda: MultiClassSVM(max_iter=1), ("weights=", "edges=", "window"), ("features",)),
        (
            lambda: SSVM(GraphCRF(3, 400), max_iter=1),
            ("weights=", "warm_start", "edges="),
            ("support", "smaller model"),
        ),
        (lambda: MultiLabelSVM(max_iter=1), ("window", "warm_start"), ("edges=",)),
    ],
)
def test_memory_advice_names_only_the_estimators_options(monkeypatch, make, absent, present):
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "20K")
    rng = np.random.default_rng(0)
    est = make()
    if isinstance(est, SSVM):
        chain = np.array([[0, 1], [1, 2], [2, 3]])
        X = [(rng.normal(size=(4, 400)), chain) for _ in range(3)]
        Y = [rng.integers(0, 3, 4) for _ in range(3)]
        fit = lambda: est.fit(X, Y)  # noqa: E731
    elif isinstance(est, MultiLabelSVM):
        X, Y = rng.normal(size=(6, 300)), rng.integers(0, 2, size=(6, 12))
        fit = lambda: est.fit(X, Y)  # noqa: E731
    else:
        X, y = rng.normal(size=(30, 300)), rng.integers(0, 5, 30)
        fit = lambda: est.fit(X, y)  # noqa: E731
    with pytest.raises(MemoryError) as err:
        fit()
    advice = str(err.value).split("Lower it with", 1)[1]
    for word in absent:
        assert word not in advice
    for word in present:
        assert word in advice


def _signal_after_first_call(monkeypatch, at_pass, signals=1):
    """Send this process ``signals`` Ctrl-Cs right after the first kernel call of pass
    ``at_pass`` (1-based), every call one example; returns the examples each pass's kernel
    calls covered."""
    parts = solver_base.PassSolver._pass_parts
    covered = []

    def pass_parts(self, order, chunks):
        covered.append(0)
        for part in parts(self, order, chunks):
            yield part
            covered[-1] += len(part)
            if len(covered) == at_pass and covered[-1] == len(part):
                for _ in range(signals):
                    signal.raise_signal(signal.SIGINT)

    monkeypatch.setattr(solver_base.PassSolver, "_pass_parts", pass_parts)
    monkeypatch.setattr(solver_base, "FIRST_CHUNK_COST", 1.0)  # kernel calls of one example
    monkeypatch.setattr(solver_base, "CHUNK_SECONDS", 0.0)
    return covered


def _multilabel_problem(n=60, L=8, d=5):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    Y = (X @ rng.normal(size=(d, L)) + rng.normal(size=(n, L)) > 0).astype(int)
    return MultiLabelModel(L, d, edges="full", inference="lp"), MultiLabelDataset(X, Y)


_main_thread = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)


@_main_thread
@pytest.mark.parametrize("solver_class, at_pass", [(BCFW, 1), (CuttingPlane, 2)])
def test_first_interrupt_stops_a_long_pass_between_kernel_calls(monkeypatch, solver_class, at_pass):
    monkeypatch.setattr(solver_base, "INTERRUPT_WAIT", -1.0)  # the rest is always "long"
    model, data = _multilabel_problem()
    n = data.n_sequences
    covered = _signal_after_first_call(monkeypatch, at_pass)
    solver = solver_class(model, C=1.0, max_iter=4, random_state=0, check_every=1)
    solver.fit(data)
    assert solver.history.stop_reason == "interrupted"
    assert covered == [n] * (at_pass - 1) + [1]  # nothing after the first call
    assert solver.passes == at_pass and solver.oracle_calls == n * (at_pass - 1) + 1
    last = solver.history.last
    assert last.extra["partial_pass"] == 1 / n
    if solver_class is BCFW:
        assert math.isnan(last.primal)  # no check after it: that would cost a pass too
    else:  # the primal of the best weights of the whole iterations
        assert last.primal == solver.history.records[-2].primal
        assert last.dual >= solver.history.records[-2].dual
    # a consistent state: its dual is a lower bound on the primal of the returned weights
    assert solver.dual() <= primal_objective(model, data, solver.weights(), 1.0) + 1e-9


@_main_thread
@pytest.mark.parametrize("solver_class", [BCFW, CuttingPlane])
def test_first_interrupt_lets_a_short_pass_end(monkeypatch, solver_class):
    monkeypatch.setattr(solver_base, "INTERRUPT_WAIT", math.inf)  # the rest is always "short"
    model, data = _multilabel_problem()
    covered = _signal_after_first_call(monkeypatch, 2)
    solver = solver_class(model, C=1.0, max_iter=4, random_state=0, check_every=1)
    solver.fit(data)
    n = data.n_sequences
    assert solver.history.stop_reason == "interrupted" and covered == [n, n]
    assert solver.passes == 2 and "partial_pass" not in solver.history.last.extra
    assert not math.isnan(solver.history.last.primal)


@_main_thread
def test_second_interrupt_stops_a_cutting_plane_iteration_between_kernel_calls(monkeypatch):
    monkeypatch.setattr(solver_base, "INTERRUPT_WAIT", math.inf)  # no part-way stop by one
    model, data = _multilabel_problem()
    once = CuttingPlane(model, C=1.0, max_iter=1, random_state=0).fit(data)
    covered = _signal_after_first_call(monkeypatch, 2, signals=2)
    solver = CuttingPlane(model, C=1.0, max_iter=4, random_state=0, check_every=1)
    solver.fit(data)
    assert covered == [data.n_sequences, 1]  # the second iteration stopped after one call
    assert solver.history.stop_reason == "interrupted" and solver.passes == 1
    # the state of one whole iteration: the cut one changed nothing
    assert np.array_equal(solver.w, once.w) and np.array_equal(solver.psi, once.psi)
    assert solver.dual() == once.dual()


def test_example_cost_is_the_models_estimate(monkeypatch):
    from dualstruct import pack_sequences
    from dualstruct.datasets import make_chain
    from dualstruct.models import ChainModel

    X, y = make_chain(30, 5, 3, 8, random_state=0)
    solver = BCFW(ChainModel(3, 8), C=1.0)
    solver.data = data = pack_sequences(X, y)
    per = data.n_tokens / data.n_sequences
    assert solver._example_cost() == 50.0 * per * (9 + 3)
    model, ml_data = _multilabel_problem()
    solver = BCFW(model, C=1.0)
    solver.data = ml_data
    assert solver._example_cost() == 50.0 * (8 + 10 * 28)  # 28 edges of the full graph
    monkeypatch.setattr(MultiLabelModel, "example_cost", lambda self, data: float("nan"))
    with pytest.raises(ValueError, match="MultiLabelModel.example_cost must return a positive"):
        solver._example_cost()
    monkeypatch.delattr(MultiLabelModel, "example_cost")
    assert solver._example_cost() == solver_base.DEFAULT_EXAMPLE_COST  # one entry a row
    # a multi-class point costs its nonzero features times the classes (at 954 classes and
    # 300 features about a millisecond, not a constant few hundred nanoseconds)
    mc = MultiClassModel(954, 300)
    solver = BCFW(mc, C=1.0)
    solver.data = mc.block_data(np.ones((4, 300)), np.arange(4))
    assert solver._example_cost() > 3 * 954 * 300


class _InterruptedSetUp(InProcessEngine):
    """An engine that gets a Ctrl-C while it sets the run up (as Spark's first job does)."""

    def start(self, job, sources, states=None):
        signal.raise_signal(signal.SIGINT)
        return super().start(job, sources, states)


@_main_thread
def test_interrupt_while_a_distributed_run_starts_lets_the_first_round_finish():
    from dualstruct import pack_sequences
    from dualstruct.datasets import make_chain
    from dualstruct.models import ChainModel

    X, y = make_chain(30, 5, 3, 8, random_state=0)
    solver = CoCoA(ChainModel(3, 8), C=0.1, n_partitions=2, max_iter=5, engine=_InterruptedSetUp())
    solver.fit(pack_sequences(X, y))  # old: KeyboardInterrupt out of the set-up, no model
    assert solver.passes == 1 and solver.history.stop_reason == "interrupted"
    assert not math.isnan(solver.history.last.primal)


def _fake_spark_checkpoint(directory, rounds):
    from dualstruct import io

    directory.mkdir()
    header = {"kind": "spark-checkpoint", "solver_meta": {}, "rdd": "", "round": rounds}
    io.save_arrays(directory / MANIFEST, header, {"w": np.zeros(1)})


def test_max_iter_counts_rounds_in_total_on_spark_resume(tmp_path, monkeypatch):
    train = tmp_path / "train.svm"
    train.write_text("0 1:1\n1 2:1\n0,1 1:1 2:1\n")
    _fake_spark_checkpoint(tmp_path / "ck", 40)
    asked = {}

    def fit(self, X, Y, validation_data=None):
        asked["max_iter"] = self.max_iter
        raise ValueError("stopped before training")

    monkeypatch.setattr(MultiLabelSVM, "fit", fit)
    common = ["multilabel", "train", str(train), "-o", str(tmp_path / "m.npz")]
    spark = ["--spark-master", "local[1]", "--spark-checkpoint-dir", str(tmp_path / "ck")]
    assert cli.main(common + spark + ["--spark-resume", "--max-iter", "50"]) == 2
    assert asked["max_iter"] == 10  # as --resume: 50 in total, 40 made (old: 50 more)
    assert cli.main(common + spark + ["--spark-resume", "--max-iter", "40"]) == 2
    assert asked["max_iter"] == 10  # refused before training: 40 rounds already made
