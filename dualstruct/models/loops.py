"""Compiled loops over every block of a kernel model, written once over the interface of
:mod:`dualstruct.models.interface`: the hinge and its maximizers, decoding, and the 1-slack
cutting plane's aggregated constraint. :class:`~dualstruct.models.base.KernelModel` and the
solvers call them; numba compiles each once per kernel class.

:func:`hinge_all` shares the blocks of kernels registered with
:func:`~dualstruct.models.interface.parallel_blocks` among ``numba.get_num_threads()``
threads (``numba.set_num_threads``, ``NUMBA_NUM_THREADS``): each block's hinge and maximizer
go to their own slots, so the values do not depend on the number of threads. The threads run
the compiled loop without the GIL; numba's ``parallel=True`` would compile the loop a second
time for every kernel class (as long again as the serial loop).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba
from numba import njit

from .interface import (
    PARALLEL_BLOCKS,
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
#: fewest blocks a thread of :func:`hinge_all` takes
MIN_BLOCKS_PER_THREAD = 64


def hinge_all(k, w, slack, hinge, out):
    """``hinge[i] = H_i(w)``, margin ``max_y [δ(ȳ_i, y) + s(y)] − s(ȳ_i)`` or slack
    ``max_y δ(ȳ_i, y)(1 + s(y) − s(ȳ_i))`` (from the oracle's bound: an upper bound where
    the oracle is relaxed) and the maximizers into ``out`` (flat, the layout of ``k.labels``).
    On ``numba.get_num_threads()`` threads for a kernel class registered with
    :func:`~dualstruct.models.interface.parallel_blocks`, else in order (stopping at a
    Python model's failed callback)."""
    n = k.label_offsets.shape[0] - 1
    threads = 1
    if type(k) in PARALLEL_BLOCKS:
        threads = max(1, min(numba.get_num_threads(), n // MIN_BLOCKS_PER_THREAD))
    if threads == 1:
        hinge_range(k, w, slack, 0, n, hinge, out)
        return
    bounds = [n * j // threads for j in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        done = [
            pool.submit(hinge_range, k, w, slack, a, b, hinge, out)
            for a, b in zip(bounds[:-1], bounds[1:])
        ]
        for d in done:
            d.result()


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
