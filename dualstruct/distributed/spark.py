"""The Spark engine: the partitions of a distributed solver
(:mod:`dualstruct.distributed.cocoa`) as one RDD with one element per partition, its dual
state (``pip install "dualstruct[spark]"``; Java 17).

The examples stay out of the rounds: each task carries a small recipe per partition (a reader
of the partition's input, or a broadcast of examples the driver holds, which reaches each
executor once, with its first task, and a Python worker loads only when it builds the
partition), and a Python worker builds a partition's block data from it the first time it
runs the partition and keeps it for the run. A round ships ``w`` and the state to a worker,
the state and the partition's result back. A worker that dies, or an executor that is
replaced, builds the same block data again from the same recipe.

Each round is ``mapPartitions`` over the previous round's RDD with ``w`` broadcast; the new
RDD is persisted, the previous one unpersisted, and every ``checkpoint_every`` rounds the new
one is checkpointed reliably (``RDD.checkpoint()`` into ``checkpoint_dir``), which cuts its
lineage. Until then a lost partition is rebuilt from the lineage: the broadcasts of ``w`` it
depends on stay alive until the next checkpoint, and every random choice of a partition
depends only on (seed, round, partition), so the rebuilt state is identical. The driver holds
``w`` and one round's changes of ``w``, never the partitions' dual state.

At each checkpoint the driver also writes ``dualstruct-checkpoint.npz`` into
``checkpoint_dir`` (its own state, the history and where the RDD checkpoint lies): a new
process resumes the run from the directory with ``resume=True``.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import sys
import tempfile
import uuid
from functools import partial

import numpy as np

from .. import io
from .cocoa import AveragedPoint

MANIFEST = "dualstruct-checkpoint.npz"


def read_checkpoint(checkpoint_dir) -> dict:
    """The driver's part of the run checkpointed in ``checkpoint_dir`` (its header, with the
    arrays under ``"arrays"``; ``"round"`` is the rounds it has made), read without Spark."""
    path = os.path.join(str(checkpoint_dir).removeprefix("file://"), MANIFEST)
    if not os.path.exists(path):
        raise ValueError(
            f"checkpoint_dir {str(checkpoint_dir)!r} holds no checkpoint "
            f"to resume ({MANIFEST} is missing)"
        )
    header, arrays = io.load_arrays(path)
    if header.get("kind") != "spark-checkpoint":
        raise ValueError(f"{path} is not a dualstruct Spark checkpoint")
    return dict(header, arrays=arrays)


#: glibc's ``mallopt`` parameter of the size from which blocks are mapped on their own
M_MMAP_THRESHOLD = -3
#: blocks from this size on go back to the system when freed (a driver's setting)
DRIVER_MMAP_THRESHOLD = 128 * 1024


def return_large_blocks() -> bool:
    """Make this process's allocator (glibc) map every block of 128 KiB or more on its own,
    so that it goes back to the system when freed. By default glibc raises that threshold
    to the largest block freed so far (up to 32 MiB), and a driver's copies of ``w``, a
    round's results and the buffers they arrive in (on PySpark's accumulator thread, in
    another arena) then stay in its heaps once freed. For a process that is only a Spark
    driver (the command line's); False where the allocator has no such setting."""
    try:
        libc = ctypes.CDLL(None)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, DRIVER_MMAP_THRESHOLD))
    except (OSError, AttributeError, TypeError):
        return False


def require_pyspark():
    """Import pyspark, or say what to install."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            'training on Spark needs pyspark: pip install "dualstruct[spark]" (and Java 17 '
            "or newer on the PATH or in JAVA_HOME)"
        ) from exc
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise RuntimeError(
            "training on Spark needs Java 17 or newer: install a JDK and put "
            "java on the PATH or set JAVA_HOME"
        )


def check_master_reachable(master, timeout=10.0):
    """For a standalone ``spark://host:port[,host:port]`` master, that one of its addresses
    accepts connections (else a clear error now, instead of Spark's retries)."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master[len("spark://") :].split(","):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except (OSError, ValueError) as exc:
            errors.append(f"{address}: {getattr(exc, 'strerror', None) or exc}")
    raise RuntimeError(f"cannot reach the Spark master {master!r} ({'; '.join(errors)})")


class SparkEngine:
    """Runs the partitions of a distributed solver on Spark.

    Parameters
    ----------
    master : str, default "local[2,4]"
        Where to run when no ``session`` is given: ``local[N,R]`` (N threads, R attempts of a
        failed task; plain ``local[N]`` never retries), ``local-cluster[…]``, ``spark://…``,
        ``yarn`` or ``k8s://…``. A process has one SparkContext: when a session is already
        active, the engine runs on it (as if given as ``session``).
    session : SparkSession, optional
        A session the caller already has (its master and configuration are used as they are;
        the engine never stops it).
    checkpoint_dir : str, optional
        Where the RDD checkpoints and the driver's checkpoint go (a shared filesystem such as
        HDFS on a real cluster). Default: a temporary directory removed at the end.
    checkpoint_every : int, default 10
        Rounds between reliable checkpoints.
    resume : bool, default False
        Continue the run whose checkpoint is in ``checkpoint_dir``; without it an existing
        checkpoint there is an error (it is never overwritten silently).
    spark_conf : dict, optional
        Extra Spark settings for a session the engine starts (e.g. ``spark.driver.memory``,
        4g by default: with a local master the tasks run in the driver's JVM).
    app_name : str

    Examples
    --------
    >>> from dualstruct import StructuredSVM
    >>> svm = StructuredSVM(backend="spark", n_partitions=4,                # doctest: +SKIP
    ...                     backend_options={"master": "local[2,4]", "checkpoint_dir": "runs"})
    >>> from dualstruct.distributed import CoCoA                            # the same, by hand
    >>> from dualstruct.distributed.spark import SparkEngine
    >>> engine = SparkEngine(master="local[2,4]")                           # doctest: +SKIP
    >>> solver = CoCoA(model, n_partitions=4, engine=engine).fit(data)      # doctest: +SKIP
    """

    name = "spark"

    def __init__(
        self,
        master="local[2,4]",
        session=None,
        checkpoint_dir=None,
        checkpoint_every=10,
        resume=False,
        spark_conf=None,
        app_name="dualstruct",
    ):
        if (
            isinstance(checkpoint_every, bool)
            or not isinstance(checkpoint_every, int)
            or checkpoint_every < 1
        ):
            raise ValueError(f"checkpoint_every must be an integer >= 1, got {checkpoint_every!r}")
        self.master = master
        self.session = session
        self.checkpoint_dir = None if checkpoint_dir is None else str(checkpoint_dir)
        self.checkpoint_every = checkpoint_every
        self.resume = bool(resume)
        self.spark_conf = dict(spark_conf or {})
        self.app_name = app_name
        self._own_session = False
        self._own_dir = False
        self.rdd = None
        self._broadcasts = []  # the w broadcasts the current RDD's lineage needs
        self._data_broadcasts = []  # the partitions' examples held in memory
        self._rounds = 0
        if self.resume and self.checkpoint_dir is None:
            raise ValueError("resume=True needs the checkpoint_dir of the run to resume")
        if self.resume:
            self.saved()  # a missing or foreign directory fails now, before Spark starts

    # -- the session --------------------------------------------------------------------------
    def open(self):
        """Start (or join) the Spark session: the solver does so before it sets up the run,
        so that a Ctrl-C during the set-up is held by its handler, not Spark's."""
        self._context()

    def _context(self):
        if self.session is None:
            require_pyspark()
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:  # one SparkContext per process: use it, and leave it be
                self.session = active
                return active.sparkContext
            if self.master.startswith("local"):
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            check_master_reachable(self.master)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            builder = SparkSession.builder.master(self.master).appName(self.app_name)
            conf = {
                "spark.ui.enabled": "false",
                # local masters run the tasks in the driver's JVM, whose default 1 GB
                # does not hold a few partitions with their state and w broadcasts
                "spark.driver.memory": LOCAL_DRIVER_MEMORY,
                "spark.ui.showConsoleProgress": "false",
                "spark.executorEnv.NUMBA_NUM_THREADS": "1",
                "spark.python.worker.reuse": "true",
                **ROUND_CONF,
            }
            if self.master.startswith("local"):
                conf.update(LOCAL_ROUND_CONF)
            conf.update(self.spark_conf)
            for k, v in conf.items():
                builder = builder.config(k, v)
            try:
                self.session = builder.getOrCreate()
            except Exception as exc:
                raise RuntimeError(
                    f"could not start Spark with master {self.master!r}: {exc}"
                ) from exc
            self.session.sparkContext.setLogLevel("ERROR")
            self._own_session = True
        return self.session.sparkContext

    def _prepare_dir(self, sc):
        if self.checkpoint_dir is None:
            self.checkpoint_dir = tempfile.mkdtemp(prefix="dualstruct-spark-")
            self._own_dir = True
        elif "://" not in self.checkpoint_dir or self.checkpoint_dir.startswith("file:"):
            local = self.checkpoint_dir.removeprefix("file://")
            try:
                os.makedirs(local, exist_ok=True)
            except OSError as exc:
                raise ValueError(
                    f"checkpoint_dir {self.checkpoint_dir!r} cannot be made: {exc.strerror}"
                ) from exc
            if not os.access(local, os.W_OK | os.X_OK):
                raise ValueError(f"checkpoint_dir {self.checkpoint_dir!r} is not writable")
            if not self.resume and os.path.exists(os.path.join(local, MANIFEST)):
                raise ValueError(
                    f"checkpoint_dir {self.checkpoint_dir!r} holds the checkpoint of another "
                    "run; resume it with resume=True or give an empty directory"
                )
        sc.setCheckpointDir(self.checkpoint_dir)

    # -- a run --------------------------------------------------------------------------------
    def start(self, job, sources, states=None):
        """Set up a run on ``sources``, one ``(build, args)`` per partition with
        ``build(*args)`` its block data: a small recipe (a reader of the partition's input)
        travels with every task; a big one (examples in memory) goes into a broadcast of its
        own, which a worker loads only when it builds the partition."""
        from pyspark import StorageLevel

        if states is not None:
            raise ValueError("the Spark engine takes the partitions' state from its own checkpoint")
        sc = self._context()
        self._prepare_dir(sc)
        self.sc = sc
        self.job = job
        self.run_id = uuid.uuid4().hex
        self.level = StorageLevel.MEMORY_AND_DISK
        self.job_bc = sc.broadcast(job)
        self._results = sc.accumulator({}, _tasks().RoundResults())
        self.recipes = self._recipes(sc, sources)
        saved = self._saved_state
        if saved is not None:
            rdd = sc._checkpointFile(saved["rdd"], _state_serializer())
            if rdd.getNumPartitions() != job.n_partitions:
                raise ValueError(
                    f"the checkpoint in {self.checkpoint_dir!r} has "
                    f"{rdd.getNumPartitions()} partitions, not "
                    f"{job.n_partitions}"
                )
            self.rdd = rdd.persist(self.level)
            self._rounds = saved["round"]
            return
        n = len(self.recipes)
        rdd = _with_state_serializer(
            sc.parallelize(range(n), n).mapPartitions(
                partial(_tasks().init_task, self.run_id, self.job_bc, self.recipes)
            )
        )
        self.rdd = rdd.persist(self.level)
        self.rdd.checkpoint()
        self.rdd.count()

    def _recipes(self, sc, sources):
        """What each task carries to build a partition's block data: the source itself when
        it pickles small (or holds broadcasts, which must travel with the task), else a
        reader of a broadcast holding the pickled source (sent to each executor once, loaded
        by a worker only when it builds the partition)."""
        from pyspark import cloudpickle

        for bc in self._data_broadcasts:  # a previous run's
            bc.destroy()
        recipes = []
        self._data_broadcasts = []
        for source in sources:
            registered = set(sc._pickled_broadcast_vars._registry)
            blob = cloudpickle.dumps(source)
            holds_broadcasts = set(sc._pickled_broadcast_vars._registry) != registered
            if len(blob) <= INLINE_SOURCE_BYTES or holds_broadcasts:
                recipes.append(source)
                continue
            bc = sc.broadcast(blob)
            del blob
            self._data_broadcasts.append(bc)
            recipes.append((_tasks().from_broadcast, (bc,)))
        return recipes

    def cocoa_round(self, w, round_index, local_passes, sigma, gamma, atom_steps=0, **local):
        t = _tasks()
        return self._advance(
            round_index,
            w,
            lambda w_bc: partial(
                t.cocoa_task,
                self.run_id,
                self.job_bc,
                self.recipes,
                w_bc,
                self._results,
                round_index,
                local_passes,
                sigma,
                gamma,
                atom_steps,
                local,
            ),
        )

    def _advance(self, round_index, w, make_task):
        w_bc = self.sc.broadcast(np.ascontiguousarray(w))
        new = _with_state_serializer(self.rdd.mapPartitions(make_task(w_bc)))
        new = new.persist(self.level)
        due = (round_index + 1) % self.checkpoint_every == 0
        if due:
            new.checkpoint()
        try:
            new._jrdd.count()  # one job, no Python on the way back: the results come with
            results = self._round_results(round_index)  # the tasks (an accumulator)
        except BaseException:
            new.unpersist()
            w_bc.destroy()
            raise
        # adopt the round: the previous state is no longer needed in memory
        old, self.rdd = self.rdd, new
        old.unpersist()
        self._broadcasts.append(w_bc)
        if due:  # the lineage now starts at the checkpoint: the earlier broadcasts can go
            for bc in self._broadcasts[:-1]:  # (the RDD's own function still names its own)
                bc.destroy()
            self._broadcasts = self._broadcasts[-1:]
        self._rounds = round_index + 1
        return results

    def _round_results(self, round_index):
        """The partitions' results of round ``round_index`` from the accumulator (in
        partition order; Spark merges a task's updates before its job ends); older rounds'
        entries (a rebuilt partition re-sends its round's) are dropped."""
        got = self._results.value
        results = [got.get((round_index, k)) for k in range(self.job.n_partitions)]
        for key in [key for key in got if key[0] <= round_index]:
            del got[key]
        missing = [k for k, r in enumerate(results) if r is None]
        if missing:
            raise RuntimeError(
                f"round {round_index}: the results of partitions {missing} did not reach "
                "the driver; resume from the last checkpoint"
            )
        return results

    def subgradient_round(self, w, round_index, fraction):
        w_bc = self.sc.broadcast(np.ascontiguousarray(w))
        try:
            return self.rdd.mapPartitions(
                partial(
                    _tasks().subgradient_task,
                    self.run_id,
                    self.job_bc,
                    self.recipes,
                    w_bc,
                    round_index,
                    fraction,
                )
            ).collect()
        finally:
            w_bc.destroy()

    def hinge_sum(self, w):
        """The hinge sum at ``w``, an array or an :class:`~dualstruct.distributed.cocoa.
        AveragedPoint` (its ``u`` and ``R`` broadcast as they are: the tasks make ū)."""
        if isinstance(w, AveragedPoint):
            broadcasts = [self.sc.broadcast(w.u), self.sc.broadcast(w.R)]
            point = (*broadcasts, float(w.A))
        else:
            broadcasts = [self.sc.broadcast(np.ascontiguousarray(w))]
            point = broadcasts[0]
        try:
            sums = sorted(
                self.rdd.mapPartitions(
                    partial(_tasks().hinge_task, self.run_id, self.job_bc, self.recipes, point)
                ).collect()
            )
        finally:
            for bc in broadcasts:
                bc.destroy()
        return sum(s for _, s in sums)

    def gather_states(self):
        """Every partition's dual state, ``{index: arrays}``: for moving a finished run to one
        machine (this is the only call that brings the dual state to the driver)."""
        return dict(self.rdd.mapPartitions(_tasks().state_task).collect())

    # -- checkpoints --------------------------------------------------------------------------
    def checkpoint_due(self, rounds) -> bool:
        return rounds % self.checkpoint_every == 0 and rounds == self._rounds

    def write_checkpoint(self, meta, arrays, history):
        """The driver's part of a checkpoint, after the RDD of the same round was
        checkpointed (an atomic write: a crash leaves the previous one)."""
        path = self.rdd.getCheckpointFile()
        if path is None:
            return
        self._checkpointed = self._rounds
        header = {
            "kind": "spark-checkpoint",
            "solver_meta": meta,
            "rdd": path,
            "round": self._rounds,
            "stop_reason": history.stop_reason,
        }
        arrays = dict(arrays)
        for k, v in history.as_arrays().items():
            arrays[f"history/{k}"] = v
        io.save_arrays(self._manifest_path(), header, arrays)

    def _manifest_path(self):
        return os.path.join(self.checkpoint_dir.removeprefix("file://"), MANIFEST)

    def final_checkpoint(self, meta, arrays, history):
        """Checkpoint the current round now (at the end of training), so the run can be
        resumed exactly where it stopped."""
        if self.rdd is None or self._rounds == 0 or self._checkpointed == self._rounds:
            return
        if self._own_dir:  # removed at stop: nobody can resume from it
            return
        # Spark checkpoints an RDD only if asked before its first job: checkpoint a copy
        # (read from the persisted state, so nothing is recomputed)
        copy = _with_state_serializer(self.rdd.mapPartitions(_same, preservesPartitioning=True))
        copy.checkpoint()
        copy.count()
        self.rdd = copy
        self._checkpointed = self._rounds
        self.write_checkpoint(meta, arrays, history)

    _saved_state = None
    _checkpointed = -1

    def saved(self):
        """``(header, arrays)`` of the checkpoint to resume, or None when not resuming."""
        if not self.resume:
            return None
        if self._saved_state is None:
            self._saved_state = read_checkpoint(self.checkpoint_dir)
        return self._saved_state

    def state_arrays(self) -> dict:
        return {}

    def load_state_arrays(self, arrays):
        pass

    def stop(self):
        """Release the broadcasts, the persisted RDDs and a session the engine started. After
        a failure Spark itself may be gone (a JVM out of memory): then there is nothing left
        to release, and the failure that ended training is the one reported."""
        try:
            for bc in self._broadcasts + self._data_broadcasts:
                bc.destroy()
            if self.rdd is not None:
                self.rdd.unpersist()
        except Exception:  # noqa: BLE001 - py4j's errors when the JVM has died
            pass
        self._broadcasts = []
        self._data_broadcasts = []
        if self._own_session and self.session is not None:
            try:
                self.session.stop()
            except Exception:  # noqa: BLE001
                pass
            self.session = None
        if self._own_dir:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)


#: the driver JVM's heap when the engine starts the session (a local master runs its tasks
#: there); ``spark_conf={"spark.driver.memory": ...}`` chooses another
LOCAL_DRIVER_MEMORY = "4g"

#: settings of a session the engine starts that cut the cost of a round: the results (a few
#: MB a partition) come with the task's status instead of a second fetch from the block
#: manager (Spark caps this at spark.rpc.message.maxSize; bigger ones go the indirect way)
ROUND_CONF = {"spark.task.maxDirectResultSize": "64m"}
#: and with a local master (one JVM, no network to cross), compressing and checksumming
#: each round's ``w`` broadcast is pure cost
LOCAL_ROUND_CONF = {"spark.broadcast.compress": "false", "spark.broadcast.checksum": "false"}

#: a partition's source that pickles to at most this many bytes travels with every task;
#: a bigger one is broadcast once
INLINE_SOURCE_BYTES = 64 * 1024


def _state_serializer():
    from pyspark.serializers import BatchedSerializer, CloudPickleSerializer

    return BatchedSerializer(CloudPickleSerializer(), 1)


def _same(elements):
    return elements


def _with_state_serializer(rdd):
    """``rdd`` (not yet run) written in batches of one element (the serializer a resumed run
    reads the checkpointed state with)."""
    rdd._jrdd_deserializer = _state_serializer()
    return rdd


def _tasks():
    from . import _spark_tasks  # imports pyspark (the spark extra)

    return _spark_tasks
