"""Memory is estimated before it is spent; a pending Ctrl-C or SIGTERM is seen within seconds;
``--max-iter`` means the same on both resumes."""

import math
import signal
import threading
import time
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
from dualstruct.models import GraphCRF, MultiLabelModel
from dualstruct.models.multilabel import MultiLabelDataset, label_graph, observed_support
from dualstruct.solvers import BCFW
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


def _interrupt_after(seconds):
    """A Ctrl-C to this process after ``seconds`` (from a timer thread)."""
    timer = threading.Timer(seconds, lambda: signal.raise_signal(signal.SIGINT))
    timer.start()
    return timer


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
def test_first_interrupt_stops_a_long_pass_between_kernel_calls(monkeypatch):
    monkeypatch.setattr(solver_base, "CHUNK_SECONDS", 0.02)
    monkeypatch.setattr(solver_base, "INTERRUPT_WAIT", 0.1)
    rng = np.random.default_rng(0)
    n, L, d = 240, 80, 10
    X = rng.normal(size=(n, d))
    Y = (X @ rng.normal(size=(d, L)) + rng.normal(size=(n, L)) > 0).astype(int)
    data = MultiLabelDataset(X, Y)
    model = MultiLabelModel(L, d, edges="full", inference="lp")
    warm = BCFW(model, C=1.0, max_iter=1, random_state=0, check_every=1)
    t0 = time.perf_counter()
    warm.fit(data.take(np.arange(40)))  # compiles; times a sixth of the examples
    per_pass = 6 * (time.perf_counter() - t0)
    solver = BCFW(model, C=1.0, max_iter=3, random_state=0, check_every=1)
    timer = _interrupt_after(0.3)
    try:
        solver.fit(data)
    finally:
        timer.cancel()
    assert solver.history.stop_reason == "interrupted"
    assert solver.passes == 1 and solver.train_time < 0.3 + 0.5 * per_pass
    last = solver.history.last
    assert 0 < last.extra["partial_pass"] < 1
    assert math.isnan(last.primal)  # no check after it: that would cost a pass too
    # a consistent state: its dual is a lower bound on the primal of the returned weights
    assert solver.dual() <= primal_objective(model, data, solver.weights(), 1.0) + 1e-9


class _InterruptedSetUp(InProcessEngine):
    """An engine that gets a Ctrl-C while it sets the run up (as Spark's first job does)."""

    def start(self, job, sources, states=None):
        signal.raise_signal(signal.SIGINT)
        return super().start(job, sources, states)


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
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
