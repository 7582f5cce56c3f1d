"""Block-coordinate Frank-Wolfe on the structural SVM dual (Lacoste-Julien, Jaggi, Schmidt,
Pletscher 2013; ALGORITHMS.md §3), with exact line search and weighted averaging.

The per-block dual state is kept in factor form; see :mod:`dualstruct.solvers._chain_kernels`
for the derivation of the block gap and line search from the marginals.
"""

from __future__ import annotations

import numpy as np

from . import _chain_kernels as kern
from .base import PassSolver
from .objective import dual_objective


def sequence_gram_matrices(data):
    """Token Gram matrices ``<x_t, x_u>`` of every sequence, packed: (offsets, flat values)."""
    lengths = data.lengths
    gram_offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths * lengths, out=gram_offsets[1:])
    gram = np.empty(gram_offsets[-1])
    indptr, indices, values, offsets = data.kernel_arrays()
    kern.sequence_grams(indptr, indices, values, offsets, gram_offsets, gram)
    return gram_offsets, gram


class BCFW(PassSolver):
    """BCFW for :class:`~dualstruct.models.ChainModel` (see :class:`PassSolver` for the
    parameters). The returned weights are the weighted average when ``averaging=True``; the
    dual bound is the better of the current and the averaged dual point."""

    name = "bcfw"

    def _init_state(self):
        model, data = self.model, self.data
        if model.kind != "chain":
            raise ValueError(f"BCFW supports chain models here, got {model.kind!r}")
        K = model.n_labels
        n = data.n_sequences
        dense_bigram_bytes = 8 * n * K * K
        if dense_bigram_bytes > 8 * 2**30:
            raise MemoryError(
                f"BCFW's bigram marginals would need {dense_bigram_bytes / 2**30:.1f} GiB "
                f"({n} sequences × {K}² labels); use solver='ssg' for this many labels"
            )
        self.arrays = data.kernel_arrays()
        self.gram_offsets, self.gram = sequence_gram_matrices(data)
        self.w = model.init_weights()
        self.W = model.unpack(self.w)
        self.R = model.init_weights()
        self.RW = model.unpack(self.R)
        # q_i starts as the point mass on ȳ_i: w = 0, ℓ = 0
        labels = data.labels
        self.mu = np.zeros((data.n_tokens, K))
        self.mu[np.arange(data.n_tokens), labels] = 1.0
        self.bigram = np.zeros((n, K, K))
        offsets = data.offsets
        seq_of_token = np.repeat(np.arange(n), data.lengths)
        not_last = np.ones(data.n_tokens, dtype=bool)
        not_last[offsets[1:] - 1] = False
        rows = np.flatnonzero(not_last)
        np.add.at(self.bigram, (seq_of_token[rows], labels[rows], labels[rows + 1]), 1.0)
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(n)

    def _run(self, order):
        indptr, indices, values, offsets = self.arrays
        W, R = self.W, self.RW
        return kern.bcfw_pass(
            indptr, indices, values, offsets, self.data.labels, self.model.loss_weights,
            self.gram, self.gram_offsets, order, self.C, self.model.start_end,
            W.unigram, W.transition, W.start, W.end, self.mu, self.bigram, self.scalars,
            self.averaging, R.unigram, R.transition, R.start, R.end, self.block_gaps)

    def _averaged(self):
        m = self.scalars[1]
        if m == 0:
            return self.w.copy(), self.scalars[0]
        A = 0.5 * m * (m + 1.0)
        return self.w - self.R / A, self.scalars[0] - self.scalars[2] / A

    def weights(self):
        if self.averaging:
            return self._averaged()[0]
        return self.w.copy()

    def dual(self):
        d = dual_objective(self.w, self.scalars[0])
        if self.averaging:
            w_avg, loss_avg = self._averaged()
            d = max(d, dual_objective(w_avg, loss_avg))
        return d
