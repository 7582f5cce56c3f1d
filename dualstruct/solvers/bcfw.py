"""Block-coordinate Frank-Wolfe on the structural SVM dual (Lacoste-Julien, Jaggi, Schmidt,
Pletscher 2013; ALGORITHMS.md §3), with exact line search and weighted averaging.

The per-block dual state is kept in factor form; see :mod:`dualstruct.solvers._chain_kernels`
for the derivation of the block gap and line search from the marginals.
"""

from __future__ import annotations

import numpy as np

from ..inference.chain import sequence_gram_matrices
from . import _chain_kernels as kern
from .base import AtomPool, PassSolver, WeightedAverageDual


class BCFW(AtomPool, WeightedAverageDual, PassSolver):
    """BCFW for :class:`~dualstruct.models.ChainModel`.

    Parameters are those of :class:`PassSolver` plus

    step : {"pairwise", "fw"}, default "pairwise"
        ``"pairwise"``: block-coordinate pairwise Frank-Wolfe (Osokin et al. 2016), which keeps
        each block's dual point as a few weighted labellings and moves mass from the worst of
        them to the Viterbi corner; it converges linearly and its memory is O(tokens × atoms),
        independent of K². ``"fw"``: the classic BCFW step of Lacoste-Julien et al. (2013) on
        factor marginals (tokens × K plus sequences × K²).

    The returned weights are the weighted average when ``averaging=True``; the dual bound is
    the better of the current and the averaged dual point.
    """

    name = "bcfw"

    def __init__(self, model, C=1.0, *, step="pairwise", **kwargs):
        super().__init__(model, C, **kwargs)
        if step not in ("pairwise", "fw"):
            raise ValueError(f"step must be 'pairwise' or 'fw', got {step!r}")
        if step == "fw" and self.rescaling == "slack":
            raise ValueError("slack rescaling needs step='pairwise' (the marginal state of the "
                             "classic step cannot hold loss-weighted corners)")
        self.step = step

    def _init_state(self):
        model, data = self.model, self.data
        if model.kind != "chain":
            raise ValueError(f"BCFW supports chain models here, got {model.kind!r}")
        self.arrays = data.kernel_arrays()
        self.gram_offsets, self.gram = sequence_gram_matrices(data)
        self.w = model.init_weights()
        self.W = model.unpack(self.w)
        self.R = model.init_weights()
        self.RW = model.unpack(self.R)
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(data.n_sequences)
        self.capacity = 0
        if self.step == "pairwise":
            self._init_atoms(data.offsets, data.labels)
        else:
            self._init_marginals()

    @property
    def state_arrays(self):
        common = ("w", "R", "scalars", "block_gaps")
        if self.step == "pairwise":
            return common + ("atom_labels", "atom_weights", "atom_count")
        return common + ("mu", "bigram")


    def _after_load(self):
        self._avg_cache = None
        self.W = self.model.unpack(self.w)
        self.RW = self.model.unpack(self.R)
        if self.step == "pairwise":
            self._check_atoms(self.data.offsets)

    def _init_marginals(self):
        model, data = self.model, self.data
        K = model.n_labels
        n = data.n_sequences
        dense_bigram_bytes = 8 * n * K * K
        if dense_bigram_bytes > 8 * 2**30:
            raise MemoryError(
                f"BCFW's bigram marginals would need {dense_bigram_bytes / 2**30:.1f} GiB "
                f"({n} sequences × {K}² labels); use solver='ssg' for this many labels"
            )
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

    def _run(self, order):
        indptr, indices, values, offsets = self.arrays
        W, R = self.W, self.RW
        if self.step == "pairwise":
            done = 0
            calls = np.zeros(1, dtype=np.int64)
            while done < len(order):
                done += kern.bcpfw_pass(
                    indptr, indices, values, offsets, self.data.labels, self.model.loss_weights,
                    self.gram, self.gram_offsets, order[done:], self.C, self.model.start_end,
                    W.unigram, W.transition, W.start, W.end, self.atom_labels,
                    self.atom_weights, self.atom_count, self.capacity, self.scalars,
                    self.averaging, R.unigram, R.transition, R.start, R.end, self.block_gaps,
                    self.rescaling == "slack", self.search_code, calls)
                if done < len(order):
                    self._grow_atoms(self.data.offsets)
            return int(calls[0])
        return kern.bcfw_pass(
            indptr, indices, values, offsets, self.data.labels, self.model.loss_weights,
            self.gram, self.gram_offsets, order, self.C, self.model.start_end,
            W.unigram, W.transition, W.start, W.end, self.mu, self.bigram, self.scalars,
            self.averaging, R.unigram, R.transition, R.start, R.end, self.block_gaps)
