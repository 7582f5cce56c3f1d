"""The functions Spark runs in its Python workers. They live in the installed package (not in
``__main__`` or a shipped file), so each worker imports them, and loads the compiled numba
kernels from the package's cache instead of compiling them again.

The run keeps two RDDs with one element per partition: the data RDD, ``(index, data)`` with
the partition's examples as pickled bytes (made once on the driver), and the state RDD,
``(index, state, result)`` with the partition's
:class:`~dualstruct.distributed.partition.PartitionState` and the result of the round that
made it. A round zips the two and runs as one job; the results come back to the driver with
the tasks' completion (an accumulator), the state stays in the cluster. A worker that has built a
partition's block data before keeps it, keyed by the run, and skips unpickling and building.
"""

from __future__ import annotations

import os
import pickle

from pyspark.accumulators import AccumulatorParam

from .partition import Partition, PartitionState, build_blocks

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


def _blocks(run_id, index, data):
    key = (run_id, index)
    blocks = _BLOCKS.get(key)
    if blocks is None:
        blocks = build_blocks(pickle.loads(data))
        if len(_BLOCKS) >= _MAX_CACHED:
            _BLOCKS.pop(next(iter(_BLOCKS)))
        _BLOCKS[key] = blocks
    return blocks


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


def init_task(run_id, job_bc, elements):
    job = job_bc.value
    for index, data in elements:
        blocks = _blocks(run_id, index, data)
        yield index, PartitionState(job.step, blocks, job.size), None


def _partitions(run_id, pairs):
    """The partitions of zipped (data, state) elements, with their states."""
    for (index, data), (state_index, state, _) in pairs:
        if index != state_index:  # the two RDDs must keep one partition order
            raise RuntimeError(f"data of partition {index} met the state of {state_index}")
        yield Partition(_blocks(run_id, index, data), state, index)


def cocoa_task(
    run_id, job_bc, w_bc, results, round_index, local_passes, sigma, gamma, atom_steps, pairs
):
    """A round on each partition of ``pairs``; its result goes to the driver through the
    ``results`` accumulator (with the task's completion, so the round needs a single job) and
    stays in the state element too."""
    job = job_bc.value
    for part in _partitions(run_id, pairs):
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
        )
        results.add({(round_index, part.index): result})
        yield part.index, part.state, result


def subgradient_task(run_id, job_bc, w_bc, round_index, fraction, pairs):
    job = job_bc.value
    for part in _partitions(run_id, pairs):
        yield part.subgradient(w_bc.value, round_index, job.seed, fraction, job.slack, job.search)


def hinge_task(run_id, job_bc, w_bc, pairs):
    job = job_bc.value
    for part in _partitions(run_id, pairs):
        yield part.index, part.hinge_sum(job.kmodel, w_bc.value, job.slack)


def state_task(elements):
    for index, state, _ in elements:
        yield index, state.arrays()
