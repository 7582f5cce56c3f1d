"""BCFW and SSG for :class:`~dualstruct.models.MultiLabelModel` (ALGORITHMS.md §2, §3).

Every example is one block; its oracle is the model's (loss-augmented) inference — max-product
on forests, enumeration for L ≤ 16, the LP relaxation otherwise — returning a local-polytope
point, so with the LP both solvers optimize the LP-relaxed structural SVM whose primal
:func:`~dualstruct.solvers.objective.primal_objective` reports. Kernels:
:mod:`dualstruct.solvers._multilabel_kernels`.
"""

from __future__ import annotations

import math

import numpy as np

from . import _multilabel_kernels as kern
from .base import PassSolver
from .objective import dual_objective


class _MultiLabelPasses(PassSolver):
    """Shared set-up: kernel arrays, the model's oracle code and the edge tables."""

    def _check_problem(self):
        if self.model.kind != "multilabel":
            raise ValueError(f"{type(self).__name__} trains multi-label models, got "
                             f"{self.model.kind!r}")
        if getattr(self.data, "kind", None) != "multilabel":
            raise ValueError("multi-label solvers train on a MultiLabelDataset")
        if self.data.Y.shape[1] != self.model.n_labels:
            raise ValueError(f"the data has {self.data.Y.shape[1]} labels, the model "
                             f"{self.model.n_labels}")
        self.arrays = self.data.kernel_arrays()
        self.mode = self.model.inference_code

    def _edge_tables(self, pairwise):
        tab = np.zeros((len(pairwise), 2, 2))
        tab[:, 1, 1] = pairwise
        return tab


class MultiLabelBCFW(_MultiLabelPasses):
    """BCFW (classic step, exact line search, weighted averaging) for multi-label models.
    Parameters as :class:`PassSolver`. Memory: the dual point of every example, n × (L + E)
    numbers (for bibtex's full graph, 4,880 × 12,720 doubles = 0.5 GB)."""

    name = "bcfw"

    def _init_state(self):
        self._check_problem()
        model, data = self.model, self.data
        n, L, E = data.n_sequences, model.n_labels, len(model.edges)
        need = 8 * n * (L + E)
        if need > 8 * 2**30:
            raise MemoryError(f"BCFW's dual points would need {need / 2**30:.1f} GiB")
        self.w = model.init_weights()
        self.R = model.init_weights()
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(n)
        # q_i starts as the gold labelling: w = 0, ℓ = 0
        self.mu = data.Y.astype(np.float64)
        self.mu_pair = (data.Y[:, model.edges[:, 0]] * data.Y[:, model.edges[:, 1]]).astype(
            np.float64).reshape(n, E)
        X = data.X
        self.sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        self._after_load()

    state_arrays = ("w", "R", "scalars", "block_gaps", "mu", "mu_pair")

    def _after_load(self):
        self.W = self.model.unpack(self.w)
        self.RW = self.model.unpack(self.R)
        self.V_tab = self._edge_tables(self.W.pairwise)
        self._avg_cache = None
        if not hasattr(self, "sq_norms"):
            X = self.data.X
            self.sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
            self._check_problem()

    def _run(self, order):
        indptr, indices, values = self.arrays
        return kern.bcfw_pass(
            indptr, indices, values, self.data.Y, self.model.loss_weights, self.sq_norms,
            self.model.edges, self.mode, order, self.C, self.W.unary, self.W.pairwise,
            self.V_tab, self.mu, self.mu_pair, self.scalars, self.averaging, self.RW.unary,
            self.RW.pairwise, self.block_gaps)

    def _averaged(self):
        m = self.scalars[1]
        cached = self._avg_cache
        if cached is not None and cached[0] == m:
            return cached[1], cached[2]
        if m == 0:
            w_avg, loss_avg = self.w.copy(), self.scalars[0]
        else:
            A = 0.5 * m * (m + 1.0)
            w_avg, loss_avg = self.w - self.R / A, self.scalars[0] - self.scalars[2] / A
        self._avg_cache = (m, w_avg, loss_avg)
        return w_avg, loss_avg

    def candidates(self):
        if self.averaging:
            return [self._averaged()[0], self.w]
        return [self.w]

    def current_dual(self):
        return dual_objective(self.w, self.scalars[0])

    def dual(self):
        d = self.current_dual()
        if self.averaging:
            d = max(d, dual_objective(*self._averaged()))
        return d


class MultiLabelSSG(_MultiLabelPasses):
    """Pegasos SSG for multi-label models (no dual; ``tol`` unused)."""

    name = "ssg"
    has_dual = False

    def _init_state(self):
        self._check_problem()
        self.v = self.model.init_weights()
        self.R = self.model.init_weights()
        self.scalars = np.array([0.0, self.C * self.data.n_sequences])  # m, C n
        self._after_load()

    state_arrays = ("v", "R", "scalars")

    def _after_load(self):
        if not hasattr(self, "arrays"):
            self._check_problem()
        self.Vw = self.model.unpack(self.v)
        self.RW = self.model.unpack(self.R)
        self.V_tab = self._edge_tables(self.Vw.pairwise)

    def _run(self, order):
        indptr, indices, values = self.arrays
        return kern.ssg_pass(
            indptr, indices, values, self.data.Y, self.model.loss_weights, self.model.edges,
            self.mode, order, self.Vw.unary, self.Vw.pairwise, self.V_tab, self.scalars,
            self.averaging, self.RW.unary, self.RW.pairwise)

    def candidates(self):
        m, Cn = self.scalars
        if m == 0:
            return [np.zeros_like(self.v)]
        last = (Cn / m) * self.v
        if self.averaging:
            return [Cn * (m * self.v - self.R) / (0.5 * m * (m + 1.0)), last]
        return [last]

    def dual(self):
        return math.nan
