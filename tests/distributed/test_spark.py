"""CoCoA+ on Spark (local[2,4]): the same w as the in-process run, fault tolerance (a Python
worker that dies), resume from a checkpoint directory, clear errors, and the estimators and
command line on the Spark backend. Missing pyspark or Java fails the suite in CI."""

import hashlib
import os
import sys

import numpy as np
import pytest
from conftest import random_chain_problem, require_spark

from dualstruct.distributed import CoCoA, MiniBatchSSG
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences

pytestmark = pytest.mark.spark

KILL_SPEC = ("DUALSTRUCT_TEST_KILL_WORKER", "{folder}:2:1")
BUILD_LOG = "DUALSTRUCT_TEST_BUILD_LOG"


def digest(w):
    return hashlib.sha256(np.ascontiguousarray(w).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """One local[2,4] session for the module (its Python workers know the fault folder)."""
    require_spark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:  # an earlier module's session: its workers lack the hooks' env
        active.stop()
    folder = tmp_path_factory.mktemp("faults") / "armed"
    os.environ[KILL_SPEC[0]] = KILL_SPEC[1].format(folder=folder)
    build_log = tmp_path_factory.mktemp("builds") / "builds.txt"
    os.environ[BUILD_LOG] = str(build_log)
    from dualstruct.distributed.spark import LOCAL_ROUND_CONF, ROUND_CONF

    builder = SparkSession.builder
    for key, value in {**ROUND_CONF, **LOCAL_ROUND_CONF}.items():  # the engine's own settings
        builder = builder.config(key, value)
    session = (
        builder.master("local[2,4]")
        .appName("dualstruct-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.NUMBA_NUM_THREADS", "1")
        # the Python workers' environment (the JVM's own may predate these variables)
        .config(f"spark.executorEnv.{KILL_SPEC[0]}", os.environ[KILL_SPEC[0]])
        .config(f"spark.executorEnv.{BUILD_LOG}", str(build_log))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.fault_folder = folder
    session.build_log = build_log
    yield session
    session.stop()


def engine(spark, **kwargs):
    from dualstruct.distributed.spark import SparkEngine

    return SparkEngine(session=spark, **kwargs)


@pytest.fixture
def broadcast_sources(monkeypatch):
    """Every partition's examples go into a broadcast (however small the test data)."""
    from dualstruct.distributed import spark as spark_module

    monkeypatch.setattr(spark_module, "INLINE_SOURCE_BYTES", 0)


def builds(spark, run_id):
    """(worker pid, partition) of every build of a partition's block data in the run."""
    if not spark.build_log.exists():
        return []
    lines = [line.split() for line in spark.build_log.read_text().splitlines()]
    return [(int(pid), int(k)) for pid, run, k in lines if run == run_id]


@pytest.fixture(scope="module")
def chain_problem():
    rng = np.random.default_rng(7)
    X, Y = random_chain_problem(rng, 48, 4, 6)
    X = [np.hstack([x, np.ones((len(x), 1))]) for x in X]
    return ChainModel(4, 7), pack_sequences(X, Y)


def run(model, data, eng=None, **kwargs):
    opts = dict(C=1.0, n_partitions=2, max_iter=6, tol=0, check_every=3, random_state=0)
    opts.update(kwargs)
    solver = CoCoA(model, engine=eng, **opts)
    try:
        solver.fit(data)
    finally:
        solver.close()
    return solver


@pytest.mark.parametrize("K,H,inline", [(2, 1, True), (4, 2, False)])
def test_spark_equals_the_in_process_run(spark, chain_problem, monkeypatch, K, H, inline):
    """Sources that travel with the tasks, and sources broadcast once, give the same w."""
    from dualstruct.distributed import spark as spark_module

    if not inline:
        monkeypatch.setattr(spark_module, "INLINE_SOURCE_BYTES", 0)
    model, data = chain_problem
    local = run(model, data, n_partitions=K, local_passes=H)
    remote = run(model, data, engine(spark, checkpoint_every=2), n_partitions=K, local_passes=H)
    assert digest(remote.w) == digest(local.w)
    assert [r.dual for r in remote.history] == [r.dual for r in local.history]
    last = remote.history.last_checked()
    assert last.primal == local.history.last_checked().primal
    assert {"round_time", "compute_time", "overhead_time"} <= set(last.extra)


def test_minibatch_ssg_on_spark_equals_in_process(spark, chain_problem):
    model, data = chain_problem
    opts = dict(n_partitions=3, batch_fraction=0.5, max_iter=5, check_every=5, random_state=0)
    local = MiniBatchSSG(model, 1.0, **opts).fit(data)
    remote = MiniBatchSSG(model, 1.0, engine=engine(spark), **opts)
    remote.fit(data)
    remote.close()
    assert digest(remote.w) == digest(local.w)


def test_a_dying_python_worker_leaves_w_identical(spark, chain_problem, broadcast_sources):
    """Round 2's task of partition 1 kills its Python worker, and the block data it had
    built, on its first attempt; Spark retries it (local[2,4]), a worker builds the data
    from the broadcast when it lacks it, and the result is the same."""
    model, data = chain_problem
    reference = run(model, data)
    spark.fault_folder.mkdir()
    eng = engine(spark, checkpoint_every=2)
    try:
        faulty = run(model, data, eng)
    finally:
        armed = list(spark.fault_folder.iterdir())
    assert [p.name for p in armed] == ["killed-2-1"]  # the worker did die
    assert digest(faulty.w) == digest(reference.w)
    built = builds(spark, eng.run_id)
    assert len(built) == len(set(built))  # a worker builds a partition once


def task_input_bytes(spark, group):
    """The bytes each task of the jobs of ``group`` read from Spark's storage (cached RDD
    blocks)."""
    sc = spark.sparkContext
    store = sc._jsc.sc().statusStore()
    out = []
    for job in sc.statusTracker().getJobIdsForGroup(group):
        for stage in sc.statusTracker().getJobInfo(job).stageIds:
            tasks = store.taskList(stage, 0, 1000).iterator()
            while tasks.hasNext():
                out.append(tasks.next().taskMetrics().get().inputMetrics().bytesRead())
    return out


def test_rounds_do_not_ship_the_examples(spark, broadcast_sources):
    """No task of a run reads a partition's examples from Spark's storage: they come from
    a broadcast, once per Python worker, which keeps the block data built from them for the
    rest of the run (the rounds read only the state); w is the in-process run's."""
    from pyspark import cloudpickle

    from dualstruct.distributed.partition import assign_examples, split_sources
    from dualstruct.solvers.block import kernel_model

    rng = np.random.default_rng(3)
    X, Y = random_chain_problem(rng, 40, 4, 6)
    X = [np.hstack([x, rng.normal(size=(len(x), 200))]) for x in X]  # big examples
    model, data = ChainModel(4, 206), pack_sequences(X, Y)
    local = run(model, data)
    sc = spark.sparkContext
    sc.setJobGroup("dualstruct-rounds", "the rounds of a run")
    try:
        eng = engine(spark, checkpoint_every=2)
        remote = run(model, data, eng)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert digest(remote.w) == digest(local.w)
    sources = split_sources(
        kernel_model(model), data, assign_examples(data.n_sequences, 2, remote.seed)
    )
    smallest = min(len(cloudpickle.dumps(s)) for s in sources)
    read = task_input_bytes(spark, "dualstruct-rounds")
    assert len(read) >= 2 * 6  # every round's tasks, the checkpoints and the checks
    assert max(read) < smallest / 4, (max(read), smallest)
    built = builds(spark, eng.run_id)
    assert sorted({k for _, k in built}) == [0, 1]
    assert len(built) == len(set(built))  # a worker builds a partition once


def test_resume_from_the_checkpoint_directory(spark, chain_problem, tmp_path):
    model, data = chain_problem
    whole = run(model, data, max_iter=7)
    folder = tmp_path / "ckpt"
    run(model, data, engine(spark, checkpoint_dir=folder, checkpoint_every=2), max_iter=4)
    resumed = run(model, data, engine(spark, checkpoint_dir=folder, resume=True), max_iter=3)
    assert resumed.passes == 7
    assert digest(resumed.w) == digest(whole.w)
    assert len(resumed.history) == 7
    # the directory holds this run's checkpoint: a new run refuses it, another run's
    # parameters are named, and a changed training set is recognised
    with pytest.raises(ValueError, match="holds the checkpoint of another run"):
        run(model, data, engine(spark, checkpoint_dir=folder))
    with pytest.raises(ValueError, match="another run: C differ"):
        run(model, data, engine(spark, checkpoint_dir=folder, resume=True), C=2.0)
    other = data.take(np.arange(40))
    with pytest.raises(ValueError, match="different training data"):
        run(model, other, engine(spark, checkpoint_dir=folder, resume=True))


def test_checkpoint_directory_errors(spark, tmp_path):
    from dualstruct.distributed.spark import SparkEngine

    with pytest.raises(ValueError, match="holds no checkpoint"):
        SparkEngine(session=spark, checkpoint_dir=tmp_path / "empty", resume=True)
    with pytest.raises(ValueError, match="needs the checkpoint_dir"):
        SparkEngine(session=spark, resume=True)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    model, data = ChainModel(2, 2), pack_sequences([np.ones((2, 2))], [np.array([0, 1])])
    with pytest.raises(ValueError, match="cannot be made"):
        run(model, data, engine(spark, checkpoint_dir=blocker / "sub"), n_partitions=1)
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(ValueError, match="not writable"):
            run(model, data, engine(spark, checkpoint_dir=locked), n_partitions=1)


def test_missing_pyspark_says_what_to_install(monkeypatch):
    from dualstruct.distributed.spark import require_pyspark

    monkeypatch.setitem(sys.modules, "pyspark", None)
    with pytest.raises(ImportError, match=r'pip install "dualstruct\[spark\]"'):
        require_pyspark()


def test_missing_java_is_named(monkeypatch):
    from dualstruct.distributed import spark as spark_module

    monkeypatch.setattr(spark_module.shutil, "which", lambda name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(RuntimeError, match="needs Java 17"):
        spark_module.require_pyspark()


def same_optimum(a, b):
    """Two certified runs bracket the same optimum: [D, P] intervals overlap, and the
    distributed one is within 5%."""
    assert a.dual <= b.primal + 1e-9 and b.dual <= a.primal + 1e-9
    assert a.relative_gap < 0.05


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_estimators_on_spark_write_ordinary_model_files(spark, tmp_path):
    from dualstruct import MultiLabelSVM, StructuredSVM, load

    rng = np.random.default_rng(0)
    X, Y = random_chain_problem(rng, 40, 3, 5)
    opts = {"session": spark}
    est = StructuredSVM(
        C=0.1,
        backend="spark",
        n_partitions=2,
        backend_options=opts,
        max_iter=40,
        tol=2e-2,
        check_every=5,
        random_state=0,
        solver_options={"local_passes": 10},
    ).fit(X, Y)
    local = StructuredSVM(C=0.1, max_iter=1000, tol=1e-3, random_state=0).fit(X, Y)
    same_optimum(est.history_.last_checked(), local.history_.last_checked())
    path = est.save(tmp_path / "chain.npz")
    loaded = load(path)
    assert loaded.backend == "spark" and "session" not in loaded.backend_options
    assert loaded.score(X, Y) == est.score(X, Y)

    Xm = rng.normal(size=(60, 4))
    Ym = (Xm[:, :3] + 0.3 * rng.normal(size=(60, 3)) > 0).astype(int)
    ml = MultiLabelSVM(
        backend="spark",
        n_partitions=3,
        backend_options=opts,
        max_iter=40,
        tol=2e-2,
        random_state=0,
        solver_options={"local_passes": 10},
    ).fit(Xm, Ym)
    ml_local = MultiLabelSVM(max_iter=1000, tol=1e-3, random_state=0).fit(Xm, Ym)
    same_optimum(ml.history_.last_checked(), ml_local.history_.last_checked())
    with pytest.raises(ValueError, match="does not run on Spark"):
        StructuredSVM(solver="gdmm", backend="spark").fit(X, Y)
    with pytest.raises(ValueError, match="backend must be one of"):
        StructuredSVM(backend="dask").fit(X, Y)
    with pytest.raises(ValueError, match="unknown \\['masters'\\]"):
        StructuredSVM(backend="spark", backend_options={"masters": "x"}).fit(X, Y)


def test_an_unreachable_master_is_named():
    from dualstruct.distributed.spark import check_master_reachable

    with pytest.raises(RuntimeError, match="cannot reach the Spark master 'spark://127.0.0.1:9'"):
        check_master_reachable("spark://127.0.0.1:9", timeout=2)
    check_master_reachable("local[2,4]")  # nothing to reach


def test_ctrl_c_keeps_the_last_whole_round(spark, chain_problem, tmp_path):
    """Ctrl-C during round 3 stops training; the model and the checkpoint are those of the
    last whole round, and resuming gives the uninterrupted result."""
    import signal

    model, data = chain_problem
    whole = run(model, data, max_iter=6)
    folder = tmp_path / "ckpt"

    def interrupt(record):
        if record.passes == 2:
            os.kill(os.getpid(), signal.SIGINT)

    first = run(model, data, engine(spark, checkpoint_dir=folder), max_iter=6, callback=interrupt)
    assert first.history.stop_reason == "interrupted"
    assert 2 <= first.passes < 6
    resumed = run(
        model, data, engine(spark, checkpoint_dir=folder, resume=True), max_iter=6 - first.passes
    )
    assert digest(resumed.w) == digest(whole.w)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_spark_run_continues_on_one_machine(spark, tmp_path):
    """keep_dual_state: the Spark run's dual state comes back as a BCFW solver; warm_start
    with backend='local' continues it in memory, and a model file saved with the solver
    state resumes it; without the option the file refuses to pretend it holds the state."""
    from dualstruct import StructuredSVM, load

    rng = np.random.default_rng(0)
    X, Y = random_chain_problem(rng, 40, 3, 5)
    common = dict(
        C=0.1,
        backend="spark",
        n_partitions=2,
        max_iter=4,
        tol=0,
        check_every=2,
        random_state=0,
        solver_options={"local_passes": 2},
    )
    est = StructuredSVM(**common, backend_options={"session": spark, "keep_dual_state": True})
    est.fit(X, Y)
    dual = est.history_.last_checked().dual
    path = est.save(tmp_path / "spark.npz", include_solver_state=True)
    est.set_params(backend="local", warm_start=True, max_iter=300, tol=1e-3, check_every=10)
    est.fit(X, Y)
    assert est.history_.stop_reason == "tol"
    assert est.history_.last_checked().dual >= dual - 1e-9
    loaded = load(path)
    loaded.set_params(
        backend="local",
        backend_options=None,
        solver_options=None,
        warm_start=True,
        max_iter=300,
        tol=1e-3,
        check_every=10,
    )
    loaded.fit(X, Y)
    assert loaded.history_.stop_reason == "tol"
    assert loaded.history_.last_checked().dual >= dual - 1e-9
    # the file resumes with the estimator's BCFW (proximal), the in-memory run with plain
    # BCFW: both certify the same optimum
    assert loaded.history_.last_checked().primal == pytest.approx(
        est.history_.last_checked().primal, rel=2e-3
    )

    plain = StructuredSVM(**common, backend_options={"session": spark}).fit(X, Y)
    with pytest.raises(ValueError, match="keep_dual_state"):
        plain.save(tmp_path / "plain.npz", include_solver_state=True)


CHUNKS = """He PRP B-NP
reckons VBZ B-VP
the DT B-NP
current JJ I-NP
account NN I-NP

Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP

Rates NNS B-NP
rose VBD B-VP
. . O
"""


def test_command_line_trains_on_spark_and_continues_here(spark, tmp_path):
    """`dualstruct train --spark-master`: an ordinary model file; with --save-state it
    resumes on this machine; a Spark run refuses --checkpoint-every and --resume."""
    import io

    from dualstruct import load
    from dualstruct.cli import main

    data = tmp_path / "train.txt"
    data.write_text(CHUNKS)
    model = tmp_path / "m.npz"

    def cli(*argv):
        out = io.StringIO()
        return main([str(a) for a in argv], out=out), out.getvalue()

    code, out = cli(
        "train",
        data,
        "-o",
        model,
        "--spark-master",
        "local[2,4]",
        "--partitions",
        2,
        "--local-passes",
        3,
        "--max-iter",
        4,
        "--check-every",
        2,
        "--save-state",
    )
    assert code == 0 and "model saved to" in out
    tagger = load(model)
    assert tagger.svm_.backend == "spark" and tagger.svm_.n_iter_ == 4
    code, out = cli(
        "train",
        data,
        "-o",
        tmp_path / "m2.npz",
        "--resume",
        model,
        "--max-iter",
        8,
        "--check-every",
        2,
    )
    assert code == 0, out
    again = load(tmp_path / "m2.npz")
    assert again.svm_.backend == "local" and again.svm_.n_iter_ == 8
    assert (
        again.svm_.history_.last_checked().dual >= tagger.svm_.history_.last_checked().dual - 1e-9
    )
    code, _ = cli(
        "train",
        data,
        "-o",
        tmp_path / "m3.npz",
        "--spark-master",
        "local[2,4]",
        "--checkpoint-every",
        2,
    )
    assert code == 2
    code, _ = cli(
        "train", data, "-o", tmp_path / "m3.npz", "--spark-master", "local[2,4]", "--resume", model
    )
    assert code == 2
