"""BCFW and SSG written once for every kernel model (:mod:`dualstruct.models.base`): the
multi-class model, user-defined Python models, and any model that supplies a kernel. The
compiled passes are in :mod:`dualstruct.solvers._block_kernels`; the loop, checks, history,
checkpoints and Ctrl-C are :class:`~dualstruct.solvers.base.PassSolver`'s. The cutting plane
serves these models through their ``aggregate_constraint``.
"""

from __future__ import annotations

import numpy as np

from . import _block_kernels as kern
from .base import AtomPool, PassSolver, SubgradientAverage, WeightedAverageDual
from .cutting_plane import CuttingPlane


class _BlockPasses(PassSolver):
    """Checks shared by the block solvers: a kernel model and its block data."""

    def _check_problem(self):
        if getattr(self.data, "kind", None) != "block" or not hasattr(self.model, "hinge"):
            raise ValueError(f"{type(self).__name__} trains a kernel model on its BlockData "
                             "(model.block_data(X, y))")
        if self.rescaling != "margin":
            self.model.check_slack()


class BlockBCFW(AtomPool, WeightedAverageDual, _BlockPasses):
    """Block-coordinate pairwise Frank-Wolfe (Osokin et al. 2016) for any kernel model, with
    exact line search, weighted averaging and the duality gap as certificate. Each block's
    dual point is a few weighted labellings (atoms); memory is O(labelling entries × atoms).
    Parameters as :class:`~dualstruct.solvers.base.PassSolver`, plus ``step`` (only
    ``"pairwise"`` here)."""

    name = "bcfw"

    def __init__(self, model, C=1.0, *, step="pairwise", **kwargs):
        super().__init__(model, C, **kwargs)
        if step != "pairwise":
            raise ValueError(f"BCFW on {type(model).__name__} takes step='pairwise', got "
                             f"{step!r}")
        self.step = step

    def _init_state(self):
        self._check_problem()
        data = self.data
        n = data.n_blocks
        self.w = self.model.init_weights()
        self.R = self.model.init_weights()
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(n)
        self._init_atoms(data.label_offsets, data.labels)

    state_arrays = ("w", "R", "scalars", "block_gaps", "atom_labels", "atom_weights",
                    "atom_count")

    def _after_load(self):
        self._avg_cache = None
        self._check_atoms(self.data.label_offsets)

    def _run(self, order):
        done = 0
        calls = np.zeros(1, dtype=np.int64)
        while done < len(order):
            done += kern.pairwise_bcfw_pass(
                self.data.kernel, order[done:], self.C, self.w, self.R, self.averaging,
                self.atom_labels, self.atom_weights, self.atom_count, self.capacity,
                self.scalars, self.block_gaps, calls)
            self.data.raise_status()
            if done < len(order):
                self._grow_atoms(self.data.label_offsets)
        return int(calls[0])


class BlockSSG(SubgradientAverage, _BlockPasses):
    """Pegasos stochastic subgradient for any kernel model (no dual; ``tol`` unused).
    Parameters as :class:`~dualstruct.solvers.base.PassSolver`."""

    name = "ssg"

    def _init_state(self):
        self._check_problem()
        self.v = self.model.init_weights()
        self.R = self.model.init_weights()
        self.scalars = np.array([0.0, self.C * self.data.n_blocks])  # m, C n

    state_arrays = ("v", "R", "scalars")

    def _run(self, order):
        calls = np.zeros(1, dtype=np.int64)
        kern.ssg_pass(self.data.kernel, order, self.v, self.R, self.scalars, self.averaging,
                      calls)
        self.data.raise_status()
        return int(calls[0])


#: the solvers of kernel models, by the name estimators and the command line use
BLOCK_SOLVERS = {"bcfw": BlockBCFW, "ssg": BlockSSG, "cutting_plane": CuttingPlane}
