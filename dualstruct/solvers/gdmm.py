"""GDMM — greedy direction method of multipliers with factorwise maximization oracles (Yen et
al. 2016, Algorithm 1) for chains.

One pass = one outer iteration: a block step on every factor of every example (examples and
each example's factors in random order), then the multiplier step. Factor marginals live on
sparse active sets, and the factorwise oracles are sublinear in the number of labels K:
a four-case search over max-trees of the transition table for bigram factors, and an exact
search over per-feature label lists for unigram factors. The derivation and the oracles are
documented in :mod:`dualstruct.solvers._gdmm_kernels`.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from . import _gdmm_kernels as kern
from ._gdmm_common import (
    MARGINAL_ROUNDING as MARGINAL_ROUNDING,
)
from ._gdmm_common import (
    SUM_ROUNDING as SUM_ROUNDING,
)
from ._gdmm_common import (
    BestCertifiedDual,
    ScaleFreePenalty,
    check_distributions,
    penalty_unit,
    widen_columns,
)
from ._gdmm_common import (
    _schedule as _schedule,
)
from ._gdmm_common import (
    value_at as value_at,
)
from .base import PassSolver
from .block import check_agrees
from .objective import scaled_dual

UNIGRAM_ORACLES = {
    "brute": kern.UNIGRAM_BRUTE,
    "sampled": kern.UNIGRAM_SAMPLED,
    "sparse": kern.UNIGRAM_SPARSE,
}
BIGRAM_ORACLES = ("sorted", "brute")
#: with oracle "auto", label sets up to this size use the brute-force oracles: scanning K
#: labels (K² pairs) is then cheaper than the lists and trees (BENCHMARKS.md, "GDMM and
#: large label sets"), and both give the same argmax
AUTO_BRUTE_MAX_LABELS = 64
#: with unigram oracle "auto", the sparse oracle gives way to brute force once it streams
#: this share of the token features' rows of W_U: the sweep then reads what brute force
#: reads, and the label lists only cost their upkeep (docs/algorithms.rst, "Design choices
#: and what was measured")
AUTO_BRUTE_STREAMED = 0.95
#: per-token arrays aligned with the active-label slots, and per-edge arrays of support pairs
LABEL_SLOT_ARRAYS = ("act", "q_u", "lam_in", "sum_in", "lam_out", "sum_out", "idle")
PAIR_SLOT_ARRAYS = ("pair_a", "pair_b", "q_b")


class GDMM(ScaleFreePenalty, BestCertifiedDual, PassSolver):
    """GDMM for :class:`~dualstruct.models.ChainModel` (margin rescaling).

    Parameters
    ----------
    model : ChainModel
        The chain model (dense or sparse unary weights).
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    rho : float or list of (pass, value)
        Penalty ρ of the augmented Lagrangian in units of the problem's penalty scale
        ``κ = C^{3/2} (δ̄ ψ̄²)^{1/2}`` (δ̄ the mean loss weight of the gold labels, ψ̄² the mean
        squared norm of a token's features; :class:`ScaleFreePenalty`), so that one value
        serves every C and every scaling of the features (default 0.5; ``penalty_scale``
        holds κ once training starts). A list of points ``[(0, 0.5), (100, 0.5), (300,
        5.0)]`` is a schedule: ρ follows it geometrically between the points (by passes
        done) and stays at the last value after the last one. A growing penalty enforces
        consistency harder once the marginals are near their optimum, which is where a
        fixed small ρ is slowest (docs/algorithms.rst, "Design choices and what was
        measured").
    eta : float, list of (pass, value) or None
        Multiplier step η in units of κ, a number or a schedule like ``rho`` (default
        ``rho``).
    unigram_oracle : {"auto", "sparse", "sampled", "brute"}
        Unigram FMO: exact over per-feature label lists, one of ``n_groups`` random label
        groups per call (the paper's approximate oracle), or all K labels. "auto" (default)
        is "brute" up to 64 labels and "sparse" above; on dense weights it switches to
        "brute" for good after the first pass in which the sparse oracle streamed at least
        95% of the token features' rows (``streamed_rows``; the lists only grow, and both
        oracles return the same argmax, so the trajectory does not change). With observed
        weights the lists are the weights' rows and stay.
    bigram_oracle : {"auto", "sorted", "brute"}
        Bigram FMO: the four-case search over max-trees of W_B or all K² pairs. "auto"
        (default) is "brute" up to 64 labels and "sorted" above.
    n_groups : int or None
        Label groups ν of the sampled unigram oracle (default ⌈K / 64⌉).
    shrink_after : int
        Drop a label from a token's active set once it has been idle (no mass in the token's
        marginal, in no pair of its edges) for this many consecutive passes, multipliers
        included. Default 0: every label that ever entered stays, as in the paper. Shrinking
        keeps the active sets (and the cost of a pass) small on large label sets, but a
        label that keeps leaving and re-entering loses its multiplier each time, so the
        consistency residual may stall at a small value instead of vanishing.
    support_steps : int
        After its oracle step, a bigram factor takes up to this many more pairwise steps
        inside its support (mass from the worst to the best support pair, exact line search;
        no oracle call, so they cost O(support) each). Default 3, which lowers the primal
        reached per pass (docs/algorithms.rst, "Design choices and what was measured");
        0 is the paper's single step.
    inner_passes : int
        Passes of block steps per multiplier step (default 1, Algorithm 1).
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`: ``max_iter``, ``tol``,
        ``check_every``, ``averaging``, ``random_state``, ``verbose``, ``callback``,
        ``validation``, ``rescaling``, ``primal_sample``.

    Notes
    -----
    The ``dual`` at a check is certified: the factor marginals are consistent only in the
    limit, so −G(q) is not a bound, but rounding every bigram factor into the transport
    polytope of its two unigram factors gives a feasible point whose dual value is one
    (:meth:`dual`). Its gap closes as the marginals become consistent, more slowly than the
    primal converges, so ``tol`` stops training only once the certified gap is that small.
    Every record's ``extra`` holds the consistency residual ``Σ‖M q_e − q_j‖``, the
    augmented Lagrangian, G(q), the mean active-set sizes (at checks also the mean number
    of labels with mass in q_t, ``labels_with_mass``), with the sparse unigram oracle
    the share of token features whose row of W_U it streamed in the pass
    (``streamed_rows``, :meth:`streamed_rows`; once "auto" has switched, the first pass of
    brute force, ``brute_unigram_since``) and, at checks, the seconds the oracles alone
    take on the current state (``oracle_time``; the rest of a pass is the update work).

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import GDMM
    >>> X, y = make_chain(30, 5, 20, 60, random_state=0)
    >>> solver = GDMM(ChainModel(20, 60), C=0.1, max_iter=300, tol=0.01, random_state=0).fit(
    ...     pack_sequences(X, y))
    >>> solver.history.last_checked().relative_gap <= 0.01   # its certified gap
    True
    """

    name = "gdmm"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        rho=0.5,
        eta=None,
        unigram_oracle="auto",
        bigram_oracle="auto",
        n_groups=None,
        shrink_after=0,
        inner_passes=1,
        support_steps=3,
        **kwargs,
    ):
        if kwargs.get("rescaling", "margin") != "margin":
            raise ValueError("GDMM supports margin rescaling only")
        super().__init__(model, C, **kwargs)
        self._init_schedules(rho, eta)
        if unigram_oracle not in ("auto", *UNIGRAM_ORACLES):
            raise ValueError(
                f"unigram_oracle must be one of {('auto', *UNIGRAM_ORACLES)}, "
                f"got {unigram_oracle!r}"
            )
        if bigram_oracle not in ("auto", *BIGRAM_ORACLES):
            raise ValueError(
                f"bigram_oracle must be one of {('auto', *BIGRAM_ORACLES)}, got {bigram_oracle!r}"
            )
        K = model.n_labels
        small = K <= AUTO_BRUTE_MAX_LABELS
        #: "auto" on dense weights above 64 labels: the sparse oracle until it streams
        #: nearly every row (AUTO_BRUTE_STREAMED), then brute force; with observed weights
        #: the lists are the weights' rows and stay
        self.auto_unigram = unigram_oracle == "auto" and not small and model.support is None
        if unigram_oracle == "auto":
            unigram_oracle = "brute" if small else "sparse"
        if bigram_oracle == "auto":
            bigram_oracle = "brute" if small else "sorted"
        self.unigram_oracle = unigram_oracle
        self.bigram_oracle = bigram_oracle
        self.n_groups = int(math.ceil(K / 64) if n_groups is None else n_groups)
        if not 1 <= self.n_groups <= K:
            raise ValueError(f"n_groups must be in [1, n_labels={K}], got {n_groups}")
        if int(shrink_after) < 0:
            raise ValueError(f"shrink_after must be >= 0, got {shrink_after}")
        self.shrink_after = int(shrink_after)
        if int(inner_passes) < 1:
            raise ValueError(f"inner_passes must be >= 1, got {inner_passes}")
        self.inner_passes = int(inner_passes)
        if int(support_steps) < 0:
            raise ValueError(f"support_steps must be >= 0, got {support_steps}")
        self.support_steps = int(support_steps)

    state_arrays = (
        "w",
        "R",
        "act",
        "n_act",
        "q_u",
        "lam_in",
        "sum_in",
        "lam_out",
        "sum_out",
        "idle",
        "pair_a",
        "pair_b",
        "q_b",
        "n_pair",
        "perm",
        "counters",
    )
    growable_arrays = LABEL_SLOT_ARRAYS + PAIR_SLOT_ARRAYS
    state_scalars = ("best_dual", "brute_unigram_since")

    #: files written before the lazy average hold ``w_avg`` instead (see ``load_state``)
    optional_state_arrays = ("R",)

    def load_state(self, data, meta, arrays):
        super().load_state(data, meta, arrays)
        if "R" not in arrays and "w_avg" in arrays:  # older file: R = A_m (w − w̄)
            m = self.passes
            self.R[:] = 0.5 * m * (m + 1.0) * (self.w - np.asarray(arrays["w_avg"]))
            self._avg_cache = None

    def memory_parts(self, data):
        """Besides the weights: the active-set state (4 label slots per token and 4 pairs per
        edge at the start; the slots double where a token needs more), the K × K transition
        bookkeeping and, for the sparse unigram oracle on dense weights, the label lists
        (a (d + 2) × K membership table and their pool)."""
        parts = super().memory_parts(data)
        model = self.model
        K, d = model.n_labels, model.n_features
        n_tok, nnz = data.n_tokens, data.X.nnz
        slots = min(K, 4)
        parts["active sets (4 slots per token, 4 pairs per edge)"] = 48 * slots * n_tok + 16 * 4 * (
            n_tok - data.n_sequences
        )
        parts["transition bookkeeping (K x K)"] = K * K
        if model.support is not None:
            parts["label lists (the support's rows)"] = 4 * (len(model.support[1]) + 2 * K)
        elif self.unigram_oracle == "sparse":
            parts["label lists ((d + 2) x K membership, pool)"] = (d + 2) * K + 4 * (
                3 * (nnz + 2 * n_tok) + 4 * (d + 2) + 16 * nnz
            )
        return parts

    def _init_state(self):
        model, data = self.model, self.data
        if model.kind != "chain":
            raise ValueError(f"GDMM supports chain models here, got {model.kind!r}")
        model._check_data(data)  # widths and label codes, before any kernel indexes them
        K = model.n_labels
        n_tok, n_seq = data.n_tokens, data.n_sequences
        cap = min(K, 4)
        self.arrays = data.kernel_arrays()
        X = data.X
        self.sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        self.w = model.init_weights()  # w(q) = 0 when every factor sits on its gold label
        self.R = model.init_weights()  # lazy weighted average: w̄ = w − R / A_m (kernels)
        self.act = np.zeros((n_tok, cap), dtype=np.int32)
        self.act[:, 0] = data.labels
        self.n_act = np.ones(n_tok, dtype=np.int32)
        self.q_u = np.zeros((n_tok, cap))
        self.q_u[:, 0] = 1.0
        firsts, lasts = data.offsets[:-1], data.offsets[1:] - 1
        self.lam_in = np.zeros((n_tok, cap))
        self.lam_out = np.zeros((n_tok, cap))
        self.sum_in = np.zeros((n_tok, cap))
        self.sum_in[:, 0] = 1.0
        self.sum_in[firsts, 0] = 0.0
        self.sum_out = np.zeros((n_tok, cap))
        self.sum_out[:, 0] = 1.0
        self.sum_out[lasts, 0] = 0.0
        self.idle = np.zeros((n_tok, cap), dtype=np.int32)
        n_edges = n_tok - n_seq
        self.pair_a = np.zeros((n_edges, 4), dtype=np.int32)
        self.pair_b = np.zeros((n_edges, 4), dtype=np.int32)
        self.q_b = np.zeros((n_edges, 4))
        self.q_b[:, 0] = 1.0
        self.n_pair = np.ones(n_edges, dtype=np.int32)
        self.perm = self.rng.permutation(K).astype(np.int64)
        self.counters = np.zeros(4, dtype=np.int64)
        self.best_dual = 0.0  # the gold labelling's
        self.residuals = []
        if self.auto_unigram:  # a fresh start (or a state being loaded) uses the lists
            self.unigram_oracle, self.brute_unigram_since = "sparse", None
        self._last_pass = {}
        self._prepare()

    carries_dual = True

    def _dual_terms(self):
        return self._loss_term(), float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """The marginals q (α / C) mix with the gold labelling, ``t q + (1 − t) e_gold``;
        w(q) and its averaging accumulator scale by s, the multipliers by C / C_old (at
        the optimum they match the gradients ``C (θ + δ)``, whose size follows C)."""
        self.best_dual = 0.0  # a bound of the old problem
        self.w *= s
        self.R *= s
        if t < 1.0:
            while not kern.mix_token_and_edge_marginals_with_gold(
                self.data.offsets, self._active_sets(), self._pair_support(), t
            ):
                self._grow(kern.NEED_PAIR_SLOTS)
        self._prepare()  # the new κ, and the trees over the scaled W_B
        for lam in (self.lam_in, self.lam_out):
            lam *= ratio

    def _after_load(self):
        n_tok = self.data.n_tokens
        rows = {LABEL_SLOT_ARRAYS: n_tok, PAIR_SLOT_ARRAYS: n_tok - self.data.n_sequences}
        for group, n_rows in rows.items():
            shapes = {name: getattr(self, name).shape for name in group}
            if any(len(shape) != 2 or shape[0] != n_rows for shape in shapes.values()):
                raise ValueError(
                    f"inconsistent GDMM state: the arrays {group} must have {n_rows} rows, "
                    f"got shapes {shapes}"
                )
            widths = {name: shape[1] for name, shape in shapes.items()}
            if len(set(widths.values())) != 1 or min(widths.values()) < 1:
                raise ValueError(
                    f"inconsistent GDMM state: the arrays {group} must have one width, got {widths}"
                )
        # the kernels index without bounds checks, so a state read from a file is checked
        K, slots, pairs = self.model.n_labels, self.act.shape[1], self.q_b.shape[1]
        used = np.arange(slots) < self.n_act[:, None]
        if (
            self.n_act.min(initial=1) < 1
            or self.n_act.max(initial=1) > slots
            or self.n_pair.min(initial=1) < 1
            or self.n_pair.max(initial=1) > pairs
            or self.act[used].min(initial=0) < 0
            or self.act[used].max(initial=0) >= K
            or min(self.pair_a.min(initial=0), self.pair_b.min(initial=0)) < 0
            or max(self.pair_a.max(initial=0), self.pair_b.max(initial=0)) >= slots
        ):
            raise ValueError("inconsistent GDMM state: active-set counts or labels out of range")
        self._check_active_sets(used)
        live = np.arange(pairs) < self.n_pair[:, None]
        check_distributions("q_u", self.q_u, used)
        check_distributions("q_b", self.q_b, live)
        self._check_weights(used, live)
        if not np.array_equal(np.sort(self.perm), np.arange(K)):
            raise ValueError(f"inconsistent GDMM state: 'perm' is not a permutation of 0 … {K - 1}")
        if self.idle.min(initial=0) < 0 or self.counters.min(initial=0) < 0:
            raise ValueError("inconsistent GDMM state: 'idle' or 'counters' holds a negative count")
        since = self.brute_unigram_since
        if since is not None and (
            isinstance(since, bool) or not isinstance(since, int) or since < 0
        ):
            raise ValueError(
                f"the saved solver field 'brute_unigram_since' must be None or an integer "
                f">= 0, got {since!r}"
            )
        if self.auto_unigram and self.brute_unigram_since is not None:
            self.unigram_oracle = "brute"  # the state was saved after the switch
        self._prepare()  # (the residuals and the last pass's figures are not state)

    def _check_weights(self, used, live):
        """A restored w is w(q) = C Σ_i (φ(x_i, ȳ_i) − E_q φ(x_i, ·)) up to rounding (the
        kernels keep it so), else the certified dual would not be the dual value of any
        point."""
        model, data, C = self.model, self.data, self.C
        K, n_tok = model.n_labels, data.n_tokens
        rows = np.broadcast_to(np.arange(n_tok)[:, None], used.shape)[used]
        gold = sp.csr_matrix((np.ones(n_tok), (np.arange(n_tok), data.labels)), shape=(n_tok, K))
        Q = sp.csr_matrix((self.q_u[used], (rows, self.act[used])), shape=(n_tok, K))
        expected = model.init_weights()
        W = model.unpack(expected)
        U = (data.X.T @ (gold - Q)).tocsr()
        if model.support is None:
            W.unigram[:] = C * U.toarray()
        else:
            indptr, labels = model.support
            feats = np.repeat(np.arange(model.n_features), np.diff(indptr))
            W.unigram[:] = C * np.asarray(U[feats, labels]).ravel()
        left = np.delete(np.arange(n_tok), data.offsets[1:] - 1)
        np.add.at(W.transition, (data.labels[left], data.labels[left + 1]), C)
        edge = np.broadcast_to(np.arange(len(left))[:, None], live.shape)[live]
        a = self.act[left[edge], self.pair_a[live]]
        b = self.act[left[edge] + 1, self.pair_b[live]]
        np.add.at(W.transition, (a, b), -C * self.q_b[live])
        if model.start_end:
            for where, part in ((data.offsets[:-1], W.start), (data.offsets[1:] - 1, W.end)):
                part[:] = C * np.asarray((gold[where] - Q[where]).sum(axis=0)).ravel()
        check_agrees("'w', 'q_u' and 'q_b'", self.w, expected, 1.0 + C * n_tok)

    def _check_active_sets(self, used):
        """What the kernels assume of a restored state: slot 0 of a token holds its gold
        label, a token's active labels are distinct, an edge's pairs are distinct and name
        active slots of its two tokens."""
        data, slots = self.data, self.act.shape[1]
        if not np.array_equal(self.act[:, 0], data.labels):
            raise ValueError("inconsistent GDMM state: slot 0 of a token is not its gold label")
        masked = np.sort(np.where(used, self.act, -1 - np.arange(slots)), axis=1)
        if np.any(masked[:, 1:] == masked[:, :-1]):
            raise ValueError("inconsistent GDMM state: a token lists an active label twice")
        pairs = self.q_b.shape[1]
        live = np.arange(pairs) < self.n_pair[:, None]
        left = np.delete(np.arange(data.n_tokens), data.offsets[1:] - 1)
        if np.any(live & (self.pair_a >= self.n_act[left][:, None])) or np.any(
            live & (self.pair_b >= self.n_act[left + 1][:, None])
        ):
            raise ValueError("inconsistent GDMM state: a pair names an inactive label slot")
        keys = self.pair_a.astype(np.int64) * slots + self.pair_b
        keys = np.sort(np.where(live, keys, -1 - np.arange(pairs)), axis=1)
        if np.any(keys[:, 1:] == keys[:, :-1]):
            raise ValueError("inconsistent GDMM state: an edge lists a pair twice")

    def _prepare(self):
        """Views and derived structures: the max-trees of W_B, the label lists, the fixed
        sample of the sampled primal."""
        model, data = self.model, self.data
        K, d = model.n_labels, model.n_features
        self.W = model.unpack(self.w)
        self.RW = model.unpack(self.R)
        self._avg_cache = None
        self.max_length = int(data.lengths.max())
        ends = 2 * data.n_sequences if model.start_end else 0  # the start and end features
        self.penalty_scale = penalty_unit(
            self.C,
            float(np.mean(model.loss_weights[data.labels])),
            (float(self.sq_norms.sum()) + ends) / data.n_tokens,
        )
        self._set_penalties()
        self._start = self.W.start if model.start_end else np.zeros(K)
        self._end = self.W.end if model.start_end else np.zeros(K)
        self._R_start = self.RW.start if model.start_end else np.zeros(K)
        self._R_end = self.RW.end if model.start_end else np.zeros(K)
        # the training transitions, the only pairs whose W_B can be positive: by rows
        # (pos_ptr, pos_col), their rows (pos_row), by columns (cpos_ptr, cpos_idx), and a
        # max-tree over them for the bigram search
        self.pos_ptr, self.pos_col = training_transitions(data, K)
        self.pos_row = np.repeat(np.arange(K, dtype=np.int32), np.diff(self.pos_ptr))
        self.cpos_idx = np.argsort(self.pos_col, kind="stable").astype(np.int64)
        self.cpos_ptr = np.zeros(K + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.pos_col, minlength=K), out=self.cpos_ptr[1:])
        listed = np.zeros((K, K), dtype=bool)
        listed[self.pos_row, self.pos_col] = True
        # an unlisted pair has W_B = −C·(its mass) <= 0: drop rounding residue (checkpoints
        # written before the bigram search relied on it)
        self.W.transition[(self.W.transition > 0) & ~listed] = 0.0
        n_listed = len(self.pos_col) if self.bigram_oracle == "sorted" else 0
        # a compact copy of the listed pairs' W_B (the search reads it, not the table)
        self.listed_vals = self.W.transition[self.pos_row, self.pos_col]
        self.tree = np.zeros(2 * n_listed, dtype=np.int64)
        kern.build_transition_tree(self.tree, self.listed_vals)
        # every row's and column's largest listed W_B, which lets the search skip lines
        self.top = np.full((2, K), -np.inf)
        self.top_at = np.full((2, K), -1, dtype=np.int64)
        kern.tops_build(
            self.listed_vals, self.pos_ptr, self.cpos_ptr, self.cpos_idx, self.top, self.top_at
        )
        self.sparse_weights = model.support is not None
        if self.sparse_weights:  # the lists are the support's rows, then start and end
            indptr_s, labels_s = model.support
            K_all = np.arange(K, dtype=np.int32)
            self.fl_label = np.concatenate([labels_s.astype(np.int32), K_all, K_all])
            self.fl_start = np.concatenate(
                [indptr_s[:-1], [indptr_s[-1], indptr_s[-1] + K]]
            ).astype(np.int64)
            self.fl_len = np.concatenate([np.diff(indptr_s), [K, K]]).astype(np.int64)
            self.fl_cap = self.fl_len.copy()
            self.fl_member = np.zeros((1, 1), dtype=np.uint8)
            self.fl_used = np.array([len(self.fl_label)], dtype=np.int64)
            self._W_U = self._R_U = np.zeros((0, K))  # unused: the weights are W.unigram
            return
        self._W_U, self._R_U = self.W.unigram, self.RW.unigram
        lists = self.unigram_oracle == "sparse"
        # the label lists: per feature (start, end = features d, d + 1) a segment
        # fl_label[fl_start[j] : fl_start[j] + fl_len[j]] of room fl_cap[j] in one pool
        self.__dict__.update(_no_label_lists(d, K, lists))
        if lists:  # the weights' non-zeros, the active labels on their tokens' features
            per_row = np.diff(data.X.indptr) + 2
            listed = int(np.count_nonzero(self.w)) + int(
                self.n_act.astype(np.int64) @ per_row.astype(np.int64)
            )
            pool = 3 * min(listed, (d + 2) * K) + 4 * (d + 2) + 16 * data.X.nnz + 1024
            while True:
                self.fl_label = np.empty(pool, dtype=np.int32)
                lists = self._label_lists()
                kern.build_label_lists(self.W.unigram, self._start, self._end, lists)
                kern.list_active_labels(self._chain_data(), self._active_sets(), d, lists)
                if self.fl_used[0] <= pool:
                    break
                pool *= 2  # a push found no room (it wrote nothing): build again, larger

    def _maybe_stream_all(self, streamed):
        """With ``unigram_oracle="auto"``: after a pass in which the sparse unigram oracle
        streamed ``AUTO_BRUTE_STREAMED`` of the rows (``streamed``), brute force from the
        next pass on; the label lists are freed."""
        if not (self.auto_unigram and self.unigram_oracle == "sparse"):
            return
        if streamed >= AUTO_BRUTE_STREAMED:
            # one C-level update, as in _grow: an interrupt leaves the old or the new state
            self.__dict__.update(
                unigram_oracle="brute",
                brute_unigram_since=self.passes + 2,  # the pass after this one (passes + 1)
                **_no_label_lists(self.model.n_features, self.model.n_labels, False),
            )

    #: with unigram_oracle="auto": the first pass of the brute-force unigram oracle (state)
    brute_unigram_since = None

    def _grow(self, need):
        K = self.model.n_labels
        grown = {}
        if need & kern.NEED_LABEL_SLOTS:
            cap = min(K, 2 * self.act.shape[1])
            for name in LABEL_SLOT_ARRAYS:
                grown[name] = widen_columns(getattr(self, name), cap)
        if need & kern.NEED_PAIR_SLOTS:
            cap = 2 * self.q_b.shape[1]
            for name in PAIR_SLOT_ARRAYS:
                grown[name] = widen_columns(getattr(self, name), cap)
        if need & kern.NEED_LIST_ROOM:
            n = 2 * self.fl_label.shape[0] + 16 * self.data.X.nnz
            grown["fl_label"] = np.resize(self.fl_label, n)
        # one C-level update: a Ctrl-C between two assignments would leave arrays of
        # different widths, which the kernels index without bounds checks
        self.__dict__.update(grown)

    _no_weights = np.zeros(0)

    def _chain_data(self):
        indptr, indices, values, offsets = self.arrays
        return kern.ChainData(
            indptr,
            indices,
            values,
            offsets,
            self.data.labels,
            self.model.loss_weights,
            self.sq_norms,
            bool(self.model.start_end),
            self.max_length,
        )

    def _weights(self):
        sparse = self.sparse_weights
        return kern.FactorWeights(
            self._W_U,
            self.W.transition,
            self._start,
            self._end,
            sparse,
            self.W.unigram if sparse else self._no_weights,
        )

    def _averaging(self, weight):
        return kern.Averaging(
            weight,
            self._R_U,
            self.RW.transition,
            self._R_start,
            self._R_end,
            self.RW.unigram if self.sparse_weights else self._no_weights,
        )

    def _active_sets(self):
        return kern.ActiveSets(*(getattr(self, name) for name in kern.ActiveSets._fields))

    def _pair_support(self):
        return kern.PairSupport(self.pair_a, self.pair_b, self.q_b, self.n_pair)

    def _transitions(self):
        return kern.Transitions(
            self.bigram_oracle == "sorted",
            self.tree,
            self.listed_vals,
            self.pos_ptr,
            self.pos_col,
            self.pos_row,
            self.cpos_ptr,
            self.cpos_idx,
            self.top,
            self.top_at,
        )

    def _label_lists(self):
        return kern.LabelLists(
            self.fl_start, self.fl_cap, self.fl_label, self.fl_member, self.fl_len, self.fl_used
        )

    def _settings(self, eta, seed):
        return kern.PassSettings(
            float(self.C),
            float(self.rho),
            float(eta),
            UNIGRAM_ORACLES[self.unigram_oracle],
            self.n_groups,
            self.perm,
            seed,
            self.shrink_after,
            self.support_steps,
        )

    def _one_pass(self, order, chunks):
        calls_before = self.counters[:2].sum()
        seed = int(self.rng.integers(2**62))  # one key for the pass's random choices
        self._set_penalties()
        eta = self.eta if (self.passes + 1) % self.inner_passes == 0 else 0.0
        # A_{m-1} for pass m = passes + 1: the weight of this pass's changes in R
        avg_weight = 0.5 * self.passes * (self.passes + 1.0) if self.averaging else 0.0
        data, settings = self._chain_data(), self._settings(eta, seed)
        weights, averaging = self._weights(), self._averaging(float(avg_weight))
        trans = self._transitions()
        grown = True
        for part in self._pass_parts(order, chunks):  # polls a pending Ctrl-C between calls
            pos = 0
            while pos < len(part):
                if grown:  # the arrays the growth replaced
                    sets, pairs = self._active_sets(), self._pair_support()
                    lists = self._label_lists()
                pos, need = kern.gdmm_pass(
                    data,
                    weights,
                    averaging,
                    sets,
                    pairs,
                    trans,
                    lists,
                    settings,
                    part,
                    pos,
                    self.counters,
                )
                grown = bool(need)
                if need:
                    self._grow(need)
        if self.fl_used[0] > self.fl_label.shape[0]:  # gdmm_pass checks the room first
            raise RuntimeError("the label lists ran out of room; please report this")
        streamed = self.streamed_rows() if self.unigram_oracle == "sparse" else None
        self._maybe_stream_all(streamed)
        residual, lagrange, penalty = kern.consistency_residuals(
            self.arrays[3], self._active_sets(), self._pair_support()
        )
        self.residuals.append(residual)
        self._avg_cache = None
        G = self.dual_objective_G()
        self._last_pass = {
            "residual": residual,
            "G": G,
            "augmented": G + lagrange + 0.5 * self.rho * penalty,
            **self._penalty_figures(),
        }
        if streamed is not None:  # the share of this pass (the lists may be gone now)
            self._last_pass["streamed_rows"] = streamed
        return int(self.counters[:2].sum() - calls_before)

    def _loss_term(self):
        """C Σ_t <δ_t, q_t>: the expected loss under the unigram marginals (slot 0 is the
        gold label)."""
        lw = self.model.loss_weights[self.data.labels]
        return self.C * float(lw @ (1.0 - self.q_u[:, 0]))

    def dual_objective_G(self):
        """G(q) = ½‖w(q)‖² − C Σ_t δ_t·q_t; −G is the dual value only
        once the marginals are consistent."""
        return 0.5 * float(self.w @ self.w) - self._loss_term()

    def certified_dual(self):
        """A certified lower bound on the optimum: ``D = C Σ_t <δ_t, q_t> − ½‖w(q_u, π)‖²``
        with every q_e rounded to π_e in the transport polytope of (q_t, q_{t+1}), a
        consistent point of the local polytope, which on a chain is the marginal polytope
        (kernel :func:`~._gdmm_kernels.transport_rounding`). Only W_B changes, so
        ``‖w'‖² = ‖w‖² − ‖W_B‖² + ‖W_B + ΔW_B‖²``. The point is then moved toward the gold
        labelling where that raises D (:func:`~.objective.scaled_dual`). Equals −G(q) once q
        is consistent and optimal."""
        K = self.model.n_labels
        change = np.zeros((K, K))
        kern.transport_rounding(
            self.arrays[3],
            self.C,
            self.act,
            self.n_act,
            self.q_u,
            self.pair_a,
            self.pair_b,
            self.q_b,
            self.n_pair,
            change,
        )
        W_B = self.W.transition
        rounded = W_B + change
        sq_norm = (
            float(self.w @ self.w) - float(np.vdot(W_B, W_B)) + float(np.vdot(rounded, rounded))
        )
        return scaled_dual(self._loss_term(), sq_norm)

    def diagnostics(self, check):
        extra = dict(self._last_pass)
        extra["active_labels"] = float(self.n_act.mean())
        extra["active_pairs"] = float(self.n_pair.mean()) if len(self.n_pair) else 0.0
        if self.brute_unigram_since is not None:  # "auto" switched to brute force
            extra["brute_unigram_since"] = float(self.brute_unigram_since)
        if check:  # the unigram supports: labels with mass (the others sit in pairs or idle)
            used = np.arange(self.q_u.shape[1]) < self.n_act[:, None]
            extra["labels_with_mass"] = float(np.count_nonzero(used & (self.q_u > 0.0))) / len(
                self.n_act
            )
            t0 = time.perf_counter()
            kern.oracle_pass(
                self._chain_data(),
                self._weights(),
                self._active_sets(),
                self._transitions(),
                self._label_lists(),
                self._settings(0.0, 0),
            )
            extra["oracle_time"] = time.perf_counter() - t0
        # cumulative: labels that entered an active set, pairs that entered a bigram support
        extra["labels_added"], extra["pairs_added"] = (float(c) for c in self.counters[2:])
        return extra

    def streamed_rows(self):
        """The share of the training tokens' feature entries whose row of W_U the sparse
        unigram oracle streams whole, because the feature's label list holds more than K/16
        labels. Near 1 the oracle costs what brute force costs: the features are shared
        by so many tokens that their rows are dense. 1 for the brute-force oracle (it
        streams every row), 0 for the sampled one."""
        if self.unigram_oracle != "sparse":
            return 1.0 if self.unigram_oracle == "brute" else 0.0
        indices = self.arrays[1]
        if len(indices) == 0:
            return 0.0
        return float(np.mean(16 * self.fl_len[indices] > self.model.n_labels))

    def averaged_weights(self):
        """The weighted average w̄_m = Σ_{j≤m} j w_j / A_m of the iterates after each pass
        (``A_m = m(m+1)/2``), as ``w − R / A_m`` (memoized per pass)."""
        if self._avg_cache is None or self._avg_cache[0] != self.passes:
            m = self.passes
            w_avg = self.w.copy() if m == 0 else self.w - self.R / (0.5 * m * (m + 1.0))
            self._avg_cache = (m, w_avg)
        return self._avg_cache[1]

    def candidates(self):
        return [self.averaged_weights(), self.w] if self.averaging else [self.w]


def training_transitions(data, K):
    """The gold transitions (a, b) of the training sequences as sorted rows of a CSR pattern
    ``(pos_ptr, pos_col)``. Only these pairs can have ``W_B[a, b] > 0``: W_B is C times the
    gold transition counts minus the summed bigram marginals."""
    last = np.zeros(data.n_tokens, dtype=bool)
    last[data.offsets[1:] - 1] = True
    rows = np.flatnonzero(~last)
    pairs = np.unique(data.labels[rows].astype(np.int64) * K + data.labels[rows + 1])
    pos_ptr = np.zeros(K + 1, dtype=np.int64)
    np.add.at(pos_ptr, pairs // K + 1, 1)
    return np.cumsum(pos_ptr), (pairs % K).astype(np.int32)


def _no_label_lists(d, K, lists):
    """Empty label lists of the sparse unigram oracle (``lists``: room for d + 2 of them
    and their (d + 2) × K membership table; else one-element placeholders)."""
    n_lists = d + 2 if lists else 1
    return {
        "fl_start": np.zeros(n_lists, dtype=np.int64),
        "fl_cap": np.zeros(n_lists, dtype=np.int64),
        "fl_len": np.zeros(n_lists, dtype=np.int64),
        "fl_member": np.zeros((d + 2, K) if lists else (1, 1), dtype=np.uint8),
        "fl_used": np.zeros(1, dtype=np.int64),
        "fl_label": np.empty(1, dtype=np.int32),
    }
