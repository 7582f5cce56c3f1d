"""An executor lost mid-run on a local cluster (separate JVMs): the cached partitions it held
are rebuilt from the last checkpoint and the lineage after it, and w is identical."""

import hashlib
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from conftest import _require_data, random_chain_problem

from dualstruct.distributed import CoCoA
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences

pytestmark = pytest.mark.spark


def digest(w):
    return hashlib.sha256(np.ascontiguousarray(w).tobytes()).hexdigest()


def executor_pids():
    out = subprocess.run(["pgrep", "-f", "CoarseGrainedExecutorBackend"], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def test_a_killed_executor_leaves_w_identical():
    try:
        from dualstruct.distributed.spark import SparkEngine, require_pyspark

        require_pyspark()
    except (ImportError, RuntimeError) as exc:
        if _require_data():
            pytest.fail(f"Spark tests cannot run: {exc}")
        pytest.skip(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    rng = np.random.default_rng(11)
    X, Y = random_chain_problem(rng, 48, 4, 6)
    X = [np.hstack([x, np.ones((len(x), 1))]) for x in X]
    model, data = ChainModel(4, 7), pack_sequences(X, Y)
    opts = dict(C=1.0, n_partitions=2, max_iter=7, tol=0, check_every=3, random_state=0)
    reference = CoCoA(model, **opts).fit(data)
    killed = []

    def kill_one_executor(record):
        if record.passes == 3 and not killed:
            pids = executor_pids()
            assert len(pids) == 2
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    engine = SparkEngine(master="local-cluster[2,1,1024]", checkpoint_every=2)
    solver = CoCoA(model, engine=engine, callback=kill_one_executor, **opts)
    try:
        solver.fit(data)
    finally:
        solver.close()
    assert killed
    assert digest(solver.w) == digest(reference.w)
