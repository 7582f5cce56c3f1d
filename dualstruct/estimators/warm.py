"""Warm starts of :class:`~dualstruct.SSVM` on changed training data of the same shape (the
refits of :class:`~dualstruct.LatentSSVM`, whose imputed labellings change between rounds).

What carries over, by solver:

* BCFW with the pairwise step: its dual point, moved to the new gold labellings. The
  atoms are labellings of the examples (feasible whatever the gold labellings are); each
  keeps the entries where it differed from the old gold labelling and takes the new gold's
  elsewhere, so the old gold atom becomes the new one and every violation stays a violation.
  The weights and the loss term are then recomputed against the new data (one pass over the
  atoms, no oracle call). The
  weighted average, the blocks' gaps and the proximal scheme's κ start afresh.
* BCFW with the classic step (a relaxed oracle): the blocks' shares of w cannot be
  recomputed for new gold labellings; the dual starts afresh from zero.
* SSG: the iterate and its step count.
* the cutting plane: nothing; it starts afresh.

The history starts anew (the objective has changed); passes and training time go on.
"""

from __future__ import annotations

import numpy as np

from ..solvers import History
from ..solvers._block_kernels import atoms_dual_point
from ..solvers.base import data_fingerprint
from ..solvers.block import BlockBCFW, BlockSSG, segment_dual


def same_shape(old, new) -> bool:
    """Whether training data ``new`` has ``old``'s examples and labelling lengths."""
    a, b = _offsets(old), _offsets(new)
    return a is not None and b is not None and a.shape == b.shape and np.array_equal(a, b)


def _offsets(data):
    kernel = getattr(data, "kernel", None)
    return kernel.label_offsets if kernel is not None else getattr(data, "offsets", None)


def continue_on(solver, data) -> bool:
    """Move a started block ``solver`` to training data ``data`` of the same shape, keeping
    what the module docstring says; False when the solver keeps nothing (a new one is
    needed). Unchanged data is continued as it is."""
    if solver.data is None or not hasattr(solver, "blocks"):
        return False
    if data_fingerprint(data) == data_fingerprint(solver.data):
        solver.data = data
        solver._make_blocks(solver.kernel_model_)
        return True
    if not isinstance(solver, (BlockBCFW, BlockSSG)):
        return False
    old = solver.blocks.kernel.labels
    solver.data = data
    solver._make_blocks(solver.kernel_model_)
    if isinstance(solver, BlockBCFW):
        if solver.resolved_step == "pairwise":
            _move_atoms(solver, old, data.kernel.labels)
            _recompute_dual(solver)
        else:
            solver._init_state()
    solver._draw_sample()
    solver.history = History()
    solver._chosen, solver._checks, solver._final_choice = 0, 0, None
    solver._pending_check = False
    return True


def _move_atoms(solver, old, new):
    """Every atom keeps its entries where it differed from the old gold labelling and takes
    the new gold labelling's elsewhere (the old gold atom becomes the new one)."""
    offsets, cap = solver.blocks.label_offsets, solver.capacity
    lengths = np.diff(offsets)
    block = np.repeat(np.arange(len(lengths)), lengths * cap)
    within = np.arange(block.size) - offsets[block] * cap
    gold = offsets[block] + within % np.maximum(lengths[block], 1)
    agree = solver.atom_labels == old[gold]
    solver.atom_labels[agree] = new[gold[agree]]


def _recompute_dual(solver):
    """The weights and loss term the atoms give against the solver's (new) block data."""
    w = np.zeros_like(solver.w)
    loss = atoms_dual_point(
        solver.blocks.kernel,
        solver.C,
        solver._slack,
        solver.atom_labels,
        solver.atom_weights,
        solver.atom_count,
        solver.capacity,
        w,
    )
    solver.blocks.raise_status()
    solver.w[:] = w
    solver.scalars[0] = loss
    solver.R[:] = 0.0
    solver.scalars[1:] = 0.0
    solver.block_gaps[:] = np.nan
    solver._avg_cache = None
    # a lower bound of the new problem (the moved point, or one between it and the gold
    # labellings); the proximal scheme keeps its iterate, centre and κ
    solver.best_dual = segment_dual(float(loss), float(w @ w))
    if solver._proximal_on:
        solver.lowest_gaps, solver.stalled = np.inf, 0
