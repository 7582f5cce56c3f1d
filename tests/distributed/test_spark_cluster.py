"""An executor lost mid-run on a local cluster (separate JVMs): the cached partitions it held
are rebuilt from the last checkpoint and the lineage after it, the new executor's Python
worker builds the examples from their broadcast, and w is identical."""

import hashlib
import os
import signal
import subprocess

import numpy as np
import pytest
from conftest import random_chain_problem, require_spark

from dualstruct.distributed import CoCoA
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences

pytestmark = pytest.mark.spark


def digest(w):
    return hashlib.sha256(np.ascontiguousarray(w).tobytes()).hexdigest()


def executor_pids():
    out = subprocess.run(
        ["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True, text=True
    ).stdout
    return [int(p) for p in out.split()]


def test_a_killed_executor_leaves_w_identical(monkeypatch, tmp_path):
    require_spark()
    from pyspark.sql import SparkSession

    from dualstruct.distributed import spark as spark_module

    active = SparkSession.getActiveSession()
    if active is not None:  # the engine would run on it instead of the local cluster
        active.stop()
    rng = np.random.default_rng(11)
    X, Y = random_chain_problem(rng, 48, 4, 6)
    X = [np.hstack([x, np.ones((len(x), 1))]) for x in X]
    model, data = ChainModel(4, 7), pack_sequences(X, Y)
    opts = dict(C=1.0, n_partitions=2, max_iter=7, tol=0, check_every=3, random_state=0)
    reference = CoCoA(model, **opts).fit(data)
    killed = []
    log = tmp_path / "builds.txt"

    def built():  # (worker pid, partition) of every build of a partition's block data
        return [tuple(line.split()[::2]) for line in log.read_text().splitlines()]

    def kill_one_executor(record):
        if record.passes == 3 and not killed:
            pids = executor_pids()
            assert len(pids) == 2
            os.kill(pids[0], signal.SIGKILL)
            killed.append(built())

    monkeypatch.setattr(spark_module, "INLINE_SOURCE_BYTES", 0)  # examples in broadcasts
    engine = spark_module.SparkEngine(
        master="local-cluster[2,1,1024]",
        checkpoint_every=2,
        spark_conf={"spark.executorEnv.DUALSTRUCT_TEST_BUILD_LOG": str(log)},
    )
    solver = CoCoA(model, engine=engine, callback=kill_one_executor, **opts)
    try:
        solver.fit(data)
    finally:
        solver.close()
    assert killed
    assert digest(solver.w) == digest(reference.w)
    before, after = killed[0], built()
    assert {k for _, k in before} == {"0", "1"}
    assert len(after) > len(before)  # the lost partition's examples built again elsewhere
    assert len(after) == len(set(after))
