"""Stochastic subgradient descent with the Pegasos step (ALGORITHMS.md §2), optionally with
weighted averaging of the iterates (Lacoste-Julien, Schmidt, Bach 2012). No dual: the history
holds the exact primal only."""

from __future__ import annotations

import numpy as np

from . import _chain_kernels as kern
from .base import PassSolver, SubgradientAverage


class SSG(SubgradientAverage, PassSolver):
    """Pegasos SSG for :class:`~dualstruct.models.ChainModel` (parameters as
    :class:`PassSolver`; ``tol`` is unused because SSG has no duality gap)."""

    name = "ssg"

    def _init_state(self):
        if self.model.kind != "chain":
            raise ValueError(f"SSG supports chain models here, got {self.model.kind!r}")
        self.arrays = self.data.kernel_arrays()
        self.v = self.model.init_weights()
        self.V = self.model.unpack(self.v)
        self.R = self.model.init_weights()
        self.RW = self.model.unpack(self.R)
        self.scalars = np.array([0.0, self.C * self.data.n_sequences])  # m, C n

    state_arrays = ("v", "R", "scalars")

    def _after_load(self):
        self.V = self.model.unpack(self.v)
        self.RW = self.model.unpack(self.R)

    def _run(self, order):
        indptr, indices, values, offsets = self.arrays
        V, R = self.V, self.RW
        return kern.ssg_pass(
            indptr, indices, values, offsets, self.data.labels, self.model.loss_weights, order,
            self.model.start_end, V.unigram, V.transition, V.start, V.end, self.scalars,
            self.averaging, R.unigram, R.transition, R.start, R.end,
            self.rescaling == "slack", self.search_code)
