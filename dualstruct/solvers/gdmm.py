"""GDMM — greedy direction method of multipliers with factorwise oracles (Yen et al. 2016,
Algorithm 1; ALGORITHMS.md §5) for chains. See :mod:`dualstruct.solvers._gdmm_kernels` for
the derivation. This first version uses brute-force factor oracles and dense factor
marginals (memory O(edges × K²)); its primal is exact (Viterbi), and since the LP relaxation
is tight on chains it converges to the same optimum as BCFW.
"""

from __future__ import annotations

import math

import numpy as np

from . import _gdmm_kernels as kern
from .base import PassSolver


class GDMM(PassSolver):
    """GDMM for :class:`~dualstruct.models.ChainModel`; one pass = one outer iteration
    (a block step on every factor, then the multiplier step).

    Extra parameters: ``rho`` (augmented-Lagrangian penalty, default 1), ``eta`` (multiplier
    step, default ``rho``) and ``bigram_step`` (``"pairwise"``: move mass from the worst pair
    in a bigram factor's support to its FMO pair; ``"fw"``: a Frank-Wolfe step). The dual
    column holds NaN (the factor marginals are consistent only in the limit, so −G(q) is not
    a certified bound); :attr:`residuals` holds the consistency residual Σ ‖M q_e − q_j‖
    after every pass.
    """


    name = "gdmm"

    def __init__(self, model, C=1.0, *, rho=1.0, eta=None, bigram_step="pairwise", **kwargs):
        if kwargs.get("rescaling", "margin") != "margin":
            raise ValueError("GDMM supports margin rescaling only")
        super().__init__(model, C, **kwargs)
        if not rho > 0:
            raise ValueError(f"rho must be positive, got {rho}")
        self.rho = float(rho)
        self.eta = float(rho if eta is None else eta)
        if not self.eta > 0:
            raise ValueError(f"eta must be positive, got {eta}")
        if bigram_step not in ("pairwise", "fw"):
            raise ValueError(f"bigram_step must be 'pairwise' or 'fw', got {bigram_step!r}")
        self.bigram_step = bigram_step

    has_dual = False

    def _init_state(self):
        model, data = self.model, self.data
        if model.kind != "chain":
            raise ValueError(f"GDMM supports chain models here, got {model.kind!r}")
        K = model.n_labels
        n_edges = data.n_tokens - data.n_sequences
        if 8 * n_edges * K * K > 8 * 2**30:
            raise MemoryError(f"dense GDMM needs {8 * n_edges * K * K / 2**30:.1f} GiB of "
                              "bigram marginals; use solver='bcfw'")
        self.arrays = data.kernel_arrays()
        X = data.X
        self.sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        self.w = model.init_weights()
        self.W = model.unpack(self.w)
        labels = data.labels
        self.q_u = np.zeros((data.n_tokens, K))
        self.q_u[np.arange(data.n_tokens), labels] = 1.0
        not_last = np.ones(data.n_tokens, dtype=bool)
        not_last[data.offsets[1:] - 1] = False
        rows = np.flatnonzero(not_last)
        self.q_b = np.zeros((n_edges, K, K))
        self.q_b[np.arange(n_edges), labels[rows], labels[rows + 1]] = 1.0
        self.lam_L = np.zeros((n_edges, K))
        self.lam_R = np.zeros((n_edges, K))
        self.residuals = []

    state_arrays = ("w", "q_u", "q_b", "lam_L", "lam_R")

    def _after_load(self):
        self.W = self.model.unpack(self.w)

    def _one_pass(self, order, chunks):
        indptr, indices, values, offsets = self.arrays
        W = self.W
        start = W.start if self.model.start_end else np.zeros(self.model.n_labels)
        end = W.end if self.model.start_end else np.zeros(self.model.n_labels)
        calls = kern.gdmm_pass(indptr, indices, values, offsets, self.data.labels,
                               self.model.loss_weights, self.sq_norms, order, self.C, self.rho,
                               self.model.start_end, W.unigram, W.transition, start, end,
                               self.q_u, self.q_b, self.lam_L, self.lam_R,
                               self.bigram_step == "pairwise")
        self.residuals.append(kern.multiplier_step(offsets, self.q_u, self.q_b, self.lam_L,
                                                   self.lam_R, self.eta))
        return calls

    def candidates(self):
        return [self.w]

    def dual(self):
        return math.nan
