"""The functions Spark runs in its Python workers. They live in the installed package (not in
``__main__`` or a shipped file), so each worker imports them, and loads the compiled numba
kernels from the package's cache instead of compiling them again.

An element of the state RDD is one partition: ``(index, data, state, result)`` with ``data``
the partition's examples as pickled bytes (made once on the driver; a worker that has built
that partition's block data before keeps it, keyed by the run, and skips unpickling), the
partition's :class:`~dualstruct.distributed.partition.PartitionState` and the result of the
round that made it.
"""

from __future__ import annotations

import os
import pickle

from .partition import Partition, PartitionState, build_blocks

#: (run id, partition) -> the partition's BlockData, per worker process (a worker is reused
#: across tasks; the data never changes during a run)
_BLOCKS = {}
#: at most this many partitions' block data per worker process
_MAX_CACHED = 16


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
        yield index, data, PartitionState(job.step, blocks, job.size), None


def cocoa_task(run_id, job_bc, w_bc, round_index, local_passes, sigma, gamma, elements):
    job = job_bc.value
    for index, data, state, _ in elements:
        _fault_hook(round_index, index)
        part = Partition(_blocks(run_id, index, data), state, index)
        result = part.cocoa_round(w_bc.value, round_index, job.seed, job.C, local_passes,
                                  sigma, gamma, job.slack, job.search)
        yield index, data, part.state, result


def subgradient_task(run_id, job_bc, w_bc, round_index, fraction, elements):
    job = job_bc.value
    for index, data, state, _ in elements:
        part = Partition(_blocks(run_id, index, data), state, index)
        yield part.subgradient(w_bc.value, round_index, job.seed, fraction, job.slack,
                               job.search)


def hinge_task(run_id, job_bc, w_bc, elements):
    job = job_bc.value
    for index, data, state, _ in elements:
        part = Partition(_blocks(run_id, index, data), state, index)
        yield index, part.hinge_sum(job.kmodel, w_bc.value, job.slack)


def state_task(elements):
    for index, _, state, _ in elements:
        yield index, state.arrays()
