"""Compiled loops over every block of a kernel model, written once over the interface of
:mod:`dualstruct.models.interface`: the hinge and its maximizers, decoding, and the 1-slack
cutting plane's aggregated constraint. :class:`~dualstruct.models.base.KernelModel` and the
solvers call them; numba compiles each once per kernel class.

:func:`run_ranges` shares the blocks among ``n_jobs`` threads in contiguous ranges (at least
:data:`MIN_BLOCKS_PER_THREAD` blocks each): the hinge and decoding of models whose
``thread_safe`` is set, and the multi-label model's MAP. The threads run compiled loops
without the GIL and write each block into its own slots, so the values do not depend on the
number of threads. ``n_jobs=None`` takes the setting of the enclosing :func:`thread_setting`
(one thread outside one; the estimators train inside one holding their ``n_jobs``).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np
from numba import njit

from .interface import (
    add_difference,
    add_oracle_difference,
    decode,
    loss,
    oracle,
    oracle_loss,
    prepare,
    score,
    slack_oracle,
    status,
    workspace,
)

#: the exact slack oracle's search code (every model's first)
EXACT_SEARCH = 0
#: fewest blocks a thread of :func:`run_ranges` takes (fewer blocks: one thread runs them)
MIN_BLOCKS_PER_THREAD = 64

_N_JOBS: ContextVar = ContextVar("dualstruct_n_jobs", default=None)


def check_n_jobs(n_jobs) -> None:
    """Refuse an ``n_jobs`` that is neither None nor a nonzero integer."""
    if n_jobs is None:
        return
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None or a nonzero integer, got {n_jobs!r}")


def effective_n_jobs(n_jobs=None) -> int:
    """Threads for ``n_jobs`` (scikit-learn's convention: None → the enclosing
    :func:`thread_setting`'s, else 1; −1 → every core, −2 → all but one); anything else than
    None or a nonzero integer is refused."""
    check_n_jobs(n_jobs)
    if n_jobs is None:
        n_jobs = _N_JOBS.get()
        if n_jobs is None:
            return 1
    if n_jobs < 0:
        return max(1, (os.cpu_count() or 1) + 1 + int(n_jobs))
    return int(n_jobs)


@contextmanager
def thread_setting(n_jobs):
    """Within the block, ``n_jobs=None`` means ``n_jobs`` (None: one thread)."""
    check_n_jobs(n_jobs)
    token = _N_JOBS.set(n_jobs)
    try:
        yield
    finally:
        _N_JOBS.reset(token)


def run_ranges(n, n_jobs, run):
    """Call ``run(start, stop)`` on ranges covering blocks ``0 … n−1``: on
    ``effective_n_jobs(n_jobs)`` threads at once, each taking at least
    :data:`MIN_BLOCKS_PER_THREAD` blocks, else once over all of them in this thread. ``run``
    must release the GIL (a ``nogil`` kernel) and write only to the slots of its range."""
    jobs = max(1, min(effective_n_jobs(n_jobs), n // MIN_BLOCKS_PER_THREAD))
    if jobs == 1:
        run(0, n)
        return
    bounds = [n * j // jobs for j in range(jobs + 1)]
    with ThreadPoolExecutor(jobs) as pool:
        done = [pool.submit(run, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        for d in done:
            d.result()


def hinge_all(k, w, slack, hinge, out, n_jobs=1):
    """``hinge[i] = H_i(w)``, margin ``max_y [δ(ȳ_i, y) + s(y)] − s(ȳ_i)`` or slack
    ``max_y δ(ȳ_i, y)(1 + s(y) − s(ȳ_i))`` (from the oracle's bound: an upper bound where
    the oracle is relaxed) and the maximizers into ``out`` (flat, the layout of ``k.labels``).
    On ``n_jobs`` threads (:func:`run_ranges`; 1, the default, for a kernel whose blocks may
    not run at once), else in order (stopping at a Python model's failed callback)."""
    n = k.label_offsets.shape[0] - 1
    run_ranges(n, n_jobs, lambda a, b: hinge_range(k, w, slack, a, b, hinge, out))


@njit(cache=True, nogil=True)
def hinge_range(k, w, slack, start, stop, hinge, out):
    """:func:`hinge_all` over blocks ``start … stop−1``, in order, with a workspace of its
    own. Without the GIL: threads take disjoint ranges at once."""
    ws = workspace(k)
    offs = k.label_offsets
    for i in range(start, stop):
        y = out[offs[i] : offs[i + 1]]
        gold_labels = k.labels[offs[i] : offs[i + 1]]
        prepare(k, i, w, ws)
        if slack:
            y[:] = gold_labels
            hinge[i], _ = slack_oracle(k, i, w, ws, 1.0, EXACT_SEARCH, gold_labels, y)
        else:
            best = oracle(k, i, w, ws, 1.0, y)
            hinge[i] = best - score(k, i, w, ws, gold_labels)
        if status(k) != 0:
            return


@njit(cache=True, nogil=True)
def decode_range(k, w, start, stop, out, scores):
    """The highest-scoring labellings of blocks ``start … stop−1`` into ``out`` (flat, laid out
    as all blocks' labellings) and their scores ``⟨w, φ(x_i, ŷ_i)⟩`` into ``scores[i]``.
    Without the GIL: threads decode disjoint ranges at once."""
    ws = workspace(k)
    offs = k.label_offsets
    for i in range(start, stop):
        prepare(k, i, w, ws)
        scores[i] = decode(k, i, w, ws, out[offs[i] : offs[i + 1]])
        if status(k) != 0:
            return


@njit(cache=True)
def aggregate_constraint_all(k, w, slack, order, hinge, out, psi, total):
    """The 1-slack cutting plane's constraint at ``w`` (Joachims et al. 2009, eq. 4) over the
    blocks ``order``: ``hinge[i]`` as :func:`hinge_all`, the maximizers μ̂_i into ``out``,
    ``psi += Σ_i g_i (φ(x_i, ȳ_i) − φ(x_i, μ̂_i))`` (``g_i = δ_i`` for slack, else 1) and
    ``total[0] += Σ_i δ_i``, accumulated in place (a pass may be split into calls); stops at
    a Python model's failed callback."""
    ws = workspace(k)
    offs = k.label_offsets
    for j in range(order.shape[0]):
        i = order[j]
        y = out[offs[i] : offs[i + 1]]
        gold_labels = k.labels[offs[i] : offs[i + 1]]
        prepare(k, i, w, ws)
        if slack:
            y[:] = gold_labels
            hinge[i], _ = slack_oracle(k, i, w, ws, 1.0, EXACT_SEARCH, gold_labels, y)
            d = loss(k, i, y)
            add_difference(k, i, gold_labels, y, d, psi)
            total[0] += d
        else:
            best = oracle(k, i, w, ws, 1.0, y)
            hinge[i] = best - score(k, i, w, ws, gold_labels)
            add_oracle_difference(k, i, ws, y, 1.0, psi)
            total[0] += oracle_loss(k, i, ws, y)
        if status(k) != 0:
            break
