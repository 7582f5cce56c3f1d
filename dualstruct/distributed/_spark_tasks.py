"""The functions Spark runs in its Python workers. They live in the installed package (not in
``__main__`` or a shipped file), so each worker imports them, and loads the compiled numba
kernels from the package's cache instead of compiling them again.

The run keeps one RDD with one element per partition, ``(index, state, None)``: the
partition's :class:`~dualstruct.distributed.partition.PartitionState` (the third place is
kept for the layout of earlier checkpoints). The examples are not in it. Every task carries a
small recipe per partition, ``(build, args)`` with ``build(*args)`` the partition's block
data: a reader of the partition's input (run where the task runs), or :func:`from_broadcast`
of a broadcast that holds the pickled examples. A worker builds a partition's block data from
its recipe the first time it meets the partition in a run and keeps it, keyed by the run;
later rounds ship only ``w`` and the state. A round runs as one job; the results come back to
the driver with the tasks' completion (an accumulator), the state stays in the cluster.
"""

from __future__ import annotations

import os
import pickle

from pyspark.accumulators import AccumulatorParam

from .cocoa import AveragedPoint
from .partition import Partition, PartitionState

#: (run id, partition) -> the partition's BlockData, per worker process (a worker is reused
#: across tasks; the data never changes during a run)
_BLOCKS = {}
#: at most this many partitions' block data per worker process
_MAX_CACHED = 16


class RoundResults(AccumulatorParam):
    """An accumulator of round results keyed by (round, partition): a task run twice (a retry,
    a rebuilt partition) writes the same key with the same result."""

    def zero(self, value):
        return {}

    def addInPlace(self, value1, value2):
        value1.update(value2)
        return value1


def from_broadcast(bc):
    """The block data of a source ``(build, args)`` pickled into the broadcast ``bc``. The
    worker loads the broadcast's file only here (PySpark reads a broadcast's value lazily)
    and lets the bytes go once built."""
    blob = bc.value
    bc.__dict__.pop("_value", None)  # the built blocks are kept, not the bytes
    build, args = pickle.loads(blob)
    del blob
    return build(*args)


def _blocks(run_id, index, recipe):
    key = (run_id, index)
    blocks = _BLOCKS.get(key)
    if blocks is None:
        build, args = recipe
        blocks = build(*args)
        _build_hook(run_id, index)
        if len(_BLOCKS) >= _MAX_CACHED:
            _BLOCKS.pop(next(iter(_BLOCKS)))
        _BLOCKS[key] = blocks
    return blocks


def _build_hook(run_id, index):
    """Test hook: with ``DUALSTRUCT_TEST_BUILD_LOG=<file>``, every build of a partition's block
    data in a worker appends ``<pid> <run id> <partition>`` to <file>."""
    path = os.environ.get("DUALSTRUCT_TEST_BUILD_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()} {run_id} {index}\n")


def _fault_hook(round_index, index):
    """Test hook: with ``DUALSTRUCT_TEST_KILL_WORKER=<dir>:<round>:<partition>`` and the
    folder <dir> present, the first attempt of that task kills its Python worker (a marker
    file in <dir> records it)."""
    spec = os.environ.get("DUALSTRUCT_TEST_KILL_WORKER")
    if not spec:
        return
    folder, r, k = spec.rsplit(":", 2)
    if (int(r), int(k)) != (round_index, index) or not os.path.isdir(folder):
        return
    marker = os.path.join(folder, f"killed-{r}-{k}")
    if not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write("killed\n")
        os._exit(17)


def init_task(run_id, job_bc, recipes, indices):
    job = job_bc.value
    for index in indices:
        blocks = _blocks(run_id, index, recipes[index])
        yield index, PartitionState(job.step, blocks, job.size), None


def _partitions(run_id, recipes, elements):
    """The partitions of state elements, with their block data."""
    for index, state, _ in elements:
        yield Partition(_blocks(run_id, index, recipes[index]), state, index)


def cocoa_task(
    run_id,
    job_bc,
    recipes,
    w_bc,
    results,
    round_index,
    local_passes,
    sigma,
    gamma,
    atom_steps,
    local,
    elements,
):
    """A round on each partition of ``elements``; its result goes to the driver through the
    ``results`` accumulator (with the task's completion, so the round needs a single job),
    the new state stays in the cluster. ``local``: further keyword arguments of
    :meth:`Partition.cocoa_round <dualstruct.distributed.partition.Partition.cocoa_round>`."""
    job = job_bc.value
    for part in _partitions(run_id, recipes, elements):
        _fault_hook(round_index, part.index)
        result = part.cocoa_round(
            w_bc.value,
            round_index,
            job.seed,
            job.C,
            local_passes,
            sigma,
            gamma,
            job.slack,
            job.search,
            atom_steps,
            **local,
        )
        results.add({(round_index, part.index): result})
        yield part.index, part.state, None


def subgradient_task(run_id, job_bc, recipes, w_bc, round_index, fraction, elements):
    job = job_bc.value
    for part in _partitions(run_id, recipes, elements):
        yield part.subgradient(w_bc.value, round_index, job.seed, fraction, job.slack, job.search)


def point_value(point):
    """The weights a check scores: a broadcast's value, or for ``(u, R, A)`` (two broadcasts
    and a number) the weighted average ``ū = u − R / A``, made here (the driver never makes
    it); the copies of ``u`` and ``R`` are let go once ū is made."""
    if not isinstance(point, tuple):
        return point.value
    u_bc, R_bc, A = point
    w = AveragedPoint(u_bc.value, R_bc.value, A).materialize()
    for bc in (u_bc, R_bc):
        bc.__dict__.pop("_value", None)
    return w


def hinge_task(run_id, job_bc, recipes, point, elements):
    job = job_bc.value
    w = point_value(point)
    for part in _partitions(run_id, recipes, elements):
        yield part.index, part.hinge_sum(job.kmodel, w, job.slack)


def state_task(elements):
    for index, state, _ in elements:
        yield index, state.arrays()
