"""GDMM for :class:`~dualstruct.models.MultiLabelModel` (BCFW, SSG and the cutting plane
train it through its kernel, :mod:`dualstruct.models.multilabel_kernels`)."""

from __future__ import annotations

import numpy as np

from ..models.multilabel import MultiLabelDataset, MultiLabelModel
from ..models.support import kernel_support
from . import _multilabel_gdmm_kernels as gk
from ._gdmm_common import (
    MARGINAL_ROUNDING,
    BestCertifiedDual,
    ScaleFreePenalty,
    check_distributions,
    penalty_unit,
    widen_columns,
)
from .base import PassSolver
from .block import check_agrees
from .objective import scaled_dual


class _MultiLabelPasses(PassSolver):
    """Shared set-up: the checks of the problem and the data's kernel arrays."""

    def _check_data(self, data):
        """A multi-label model and a :class:`MultiLabelDataset` with its number of labels."""
        if not isinstance(self.model, MultiLabelModel):
            raise ValueError(
                f"{type(self).__name__} trains multi-label models, got {type(self.model).__name__}"
            )
        if not isinstance(data, MultiLabelDataset):
            raise ValueError("multi-label solvers train on a MultiLabelDataset")
        if data.Y.shape[1] != self.model.n_labels:
            raise ValueError(
                f"the data has {data.Y.shape[1]} labels, the model {self.model.n_labels}"
            )

    def _check_problem(self):
        self._check_data(self.data)
        self.arrays = self.data.kernel_arrays()


class MultiLabelGDMM(ScaleFreePenalty, BestCertifiedDual, _MultiLabelPasses):
    """GDMM with block-greedy coordinate descent (Yen et al. 2016, Algorithms 1 and 3) for
    multi-label models; the derivation is in :mod:`dualstruct.solvers._multilabel_gdmm_kernels`.

    It optimizes the LP-relaxed structural SVM (exact on forests) without ever calling the
    LP: each example keeps a small active set S of labels, grown one greedy factor per pass
    and shrunk by the labels that stay without mass, and among them only the pairwise
    factors that carry (1, 1) mass or that a step needs (the others sit at a consistent
    state with none), so a pass costs ``O(n ((nnz(x) + |S|) L + |S|²))`` instead of BCFW's
    LP over all L(L−1)/2 pairs, and memory follows the active pairs.

    Parameters
    ----------
    model : MultiLabelModel
        With ``inference="lp"`` on a loopy label graph and ``interactions="11"``.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    rho : float, list of (pass, value) or None
        Penalty ρ of the augmented Lagrangian in units of the problem's penalty scale
        ``κ = C^{3/2} (δ̄ ψ̄²)^{1/2}`` (δ̄ the mean label loss weight, ψ̄² the mean squared
        norm of an example's features;
        :class:`~dualstruct.solvers._gdmm_common.ScaleFreePenalty`), so that one value
        serves every C, or a schedule as for :class:`~dualstruct.solvers.GDMM`. The
        default, None, is ``max(0.025, 0.25 min(1, 16 / d̄))`` with d̄ the mean degree of
        the label graph: a label's marginal is tied to each of its active pairs, so its
        step feels ρ once per neighbour, and the best ρ / κ falls as the graph grows, but
        the active pairs of a label stay in the tens on larger graphs, hence a floor
        (:func:`default_rho`; BENCHMARKS.md, "Training across C").
    eta : float, list of (pass, value) or None
        Multiplier step η in units of κ, a number or a schedule (default ``rho``).
    inner_sweeps : int
        At most this many sweeps of block steps over an example's active factors per visit
        (default 4).
    inner_tol : float
        Stop an example's sweeps once one moves its marginals (``Σ |Δμ| + Σ |Δq|``, in
        probability units, so the rule does not depend on C or the feature scale) by at
        most ``inner_tol`` times what the first sweep moved (default 0.3; 0 makes every
        sweep). At large C the factors of an example are tightly coupled and further sweeps
        pay off (docs/algorithms.rst, "Design choices and what was measured"); at small C
        the first sweeps settle the example and the rule stops early.
    pair_search : {"tree", "brute"}
        How the best inactive pair with both labels outside the active set is found:
        branch-and-bound over a max segment tree of the interaction weights (default), or a
        scan of all edges (the test twin).
    shrink_after : int
        A label outside an example's gold labelling leaves its active set, with its pairs,
        after this many visits without mass (μ = 0 and no (1, 1) mass on its pairs), unless
        the selection would take it back (its label term plus its positive interaction
        weights to labels with mass is positive); w and the dual do not move, its
        multipliers are forgotten. 0 keeps every label (default 5). On large label sets
        the greedy selection adds labels that never gain mass, and they would hold memory
        and time.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`: ``max_iter``, ``tol``,
        ``check_every``, ``averaging``, ``random_state``, ``verbose``, ``callback``,
        ``validation``, ``rescaling``, ``primal_sample``.

    Notes
    -----
    The ``dual`` at a check is certified: −G(q) is a dual value only at a consistent point,
    so every active pair's (1, 1) mass is clipped into the range its two unigram marginals
    allow, which gives a point of the local polytope (:meth:`dual`). ``tol`` stops training
    on that gap. Records' ``extra`` hold the consistency residual, the augmented Lagrangian,
    G, mean active labels and pairs per example, and the labels and pairs added and the
    labels removed.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import MultiLabelModel
    >>> from dualstruct.models.multilabel import MultiLabelDataset
    >>> from dualstruct.solvers import MultiLabelGDMM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 4))
    >>> Y = (X[:, :3] > 0).astype(int)
    >>> model = MultiLabelModel(3, 4, edges="full", inference="lp")
    >>> solver = MultiLabelGDMM(model, C=1.0, max_iter=300, tol=0.01, random_state=0).fit(
    ...     MultiLabelDataset(X, Y))
    >>> solver.history.stop_reason
    'tol'
    """

    name = "gdmm"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        rho=None,
        eta=None,
        inner_sweeps=4,
        inner_tol=0.3,
        pair_search="tree",
        shrink_after=5,
        **kwargs,
    ):
        if kwargs.get("rescaling", "margin") != "margin":
            raise ValueError("GDMM supports margin rescaling only")
        if getattr(model, "interactions", "11") != "11":
            raise ValueError(
                "GDMM's greedy pair search ranks the (1, 1) interaction weights: "
                "it supports interactions='11' only"
            )
        super().__init__(model, C, **kwargs)
        if (
            isinstance(model, MultiLabelModel)
            and not model._is_forest()
            and model.inference_method != "lp"
        ):
            raise ValueError(
                "GDMM optimizes the LP relaxation: on a loopy graph build the "
                "model with inference='lp' so that the primal it reports is the "
                "one it minimizes"
            )
        if rho is None:
            rho = default_rho(model)
        self._init_schedules(rho, eta)
        if int(inner_sweeps) < 1:
            raise ValueError(f"inner_sweeps must be >= 1, got {inner_sweeps}")
        self.inner_sweeps = int(inner_sweeps)
        if not 0.0 <= float(inner_tol) < 1.0:
            raise ValueError(f"inner_tol must be in [0, 1), got {inner_tol}")
        self.inner_tol = float(inner_tol)
        if pair_search not in ("tree", "brute"):
            raise ValueError(f"pair_search must be 'tree' or 'brute', got {pair_search!r}")
        self.pair_search = pair_search
        if shrink_after is None or int(shrink_after) < 0:
            raise ValueError(f"shrink_after must be an int >= 0, got {shrink_after!r}")
        self.shrink_after = int(shrink_after)

    memory_advice = (
        "Lower it with a sparser label graph (the model's edges), BCFW "
        "(which keeps no pair factors), or a subset of the examples."
    )
    memory_levers = (("solver", "solver='bcfw' (which keeps no pair factors)"),)

    def memory_parts(self, data):
        """Besides the weights: μ, the label slots (three int arrays) and the pool of active
        pairs (72 bytes a row). The pool follows the active pairs, which training decides;
        the estimate assumes about 2k + 8 active labels per example (k its gold labels)
        with four active pairs each, or its gold pairs if more, rooms doubled once and the
        pool's copy while it grows. That fits bibtex's full graph; on large label sets the
        active sets can grow far beyond it (BENCHMARKS.md, "delicious: 983 labels"), so
        there it is a lower bound."""
        self._check_data(data)  # before the estimate reads the data
        parts = super().memory_parts(data)
        Y = np.asarray(data.Y)
        n, L = Y.shape
        k = Y.sum(axis=1).astype(np.int64)
        rows = _rows_for(np.maximum(k * (k - 1) // 2, 4 * (2 * k + 8)))
        parts[
            "active pair factors (a pool of rows per example, rooms doubled once, and its "
            "copy while it grows)"
        ] = int(2 * 72 * 2 * rows.sum())
        parts["label marginals and slots"] = 8 * n * L + 3 * 8 * n * int(
            _slots_for(int(2 * k.max(initial=0) + 8))
        )
        return parts

    def _init_state(self):
        self._check_problem()
        model, data = self.model, self.data
        n = data.n_sequences
        Y = data.Y
        self.w = model.init_weights()
        self.w_avg = model.init_weights()
        self.mu = Y.astype(np.float64)
        self.n_slots = Y.sum(axis=1).astype(np.int64)
        self.capacity = _slots_for(int(self.n_slots.max(initial=0)))
        self.slot_label = np.zeros((n, self.capacity), dtype=np.int64)
        self.blocked = np.zeros((n, self.capacity), dtype=np.int64)
        self.idle = np.zeros((n, self.capacity), dtype=np.int64)
        edge_id = self._edge_ids()
        gold_pairs = gk.gold_pair_counts(Y, edge_id)
        self.pair_room = _rows_for(gold_pairs)
        self.pair_base = (np.cumsum(self.pair_room) - self.pair_room).astype(np.int64)
        self.pool_used = int(self.pair_room.sum())
        self.n_pairs = np.zeros(n, dtype=np.int64)
        self.pair_slots, self.pair_edge, self.q, self.lam = _empty_pool(self.pool_used)
        # gold labels active at μ = 1, their pairs at (1, 1): the gold labelling, w = 0
        gk.init_gold_pairs(
            Y,
            edge_id,
            self.pair_base,
            self.n_pairs,
            self.slot_label,
            self.pair_slots,
            self.pair_edge,
            self.q,
        )
        self.labels_added = 0
        self.labels_removed = 0
        self.pairs_added = 0
        self.sweeps_per_visit = 0.0  # of the last pass
        self.best_dual = 0.0  # the gold labelling's
        self._rebuild()

    state_arrays = (
        "w",
        "w_avg",
        "mu",
        "slot_label",
        "n_slots",
        "pair_base",
        "pair_room",
        "n_pairs",
        "pair_slots",
        "pair_edge",
        "q",
        "lam",
        "blocked",
        "idle",
    )
    state_scalars = (
        "capacity",
        "labels_added",
        "labels_removed",
        "pairs_added",
        "pool_used",
        "best_dual",
    )
    growable_arrays = (
        "slot_label",
        "blocked",
        "idle",
        "pair_base",
        "pair_room",
        "pair_slots",
        "pair_edge",
        "q",
        "lam",
    )
    #: files written before pairs were activated one by one hold every pair of two active
    #: labels in a (room × room) block per example (or, older still, an (n, cap, cap, ·)
    #: block for all), and no pair lists
    optional_state_arrays = (
        "pair_base",
        "pair_room",
        "n_pairs",
        "pair_slots",
        "blocked",
        "idle",
    )

    def load_state(self, data, meta, arrays):
        if "n_pairs" not in arrays:
            self._saved_layout = "room" if "pair_base" in arrays else "blocks"
        try:
            super().load_state(data, meta, arrays)
        finally:
            self.__dict__.pop("_saved_layout", None)

    def state_dict(self):
        self._compact_pool()
        meta, arrays = super().state_dict()
        for k in ("pair_slots", "pair_edge", "q", "lam"):  # the unused tail is not saved
            arrays[k] = arrays[k][: self.pool_used]
        return meta, arrays

    def _compact_pool(self):
        """Move every example's room to a fresh pool, one after the other, leaving out the
        rows grown examples left behind (the trajectory does not depend on where the rooms
        are)."""
        room, count = self.pair_room, self.n_pairs
        base = (np.cumsum(room) - room).astype(np.int64)
        if self.pool_used == int(room.sum()) and np.array_equal(base, self.pair_base):
            return
        owner = np.repeat(np.arange(len(count)), count)
        offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        src = self.pair_base[owner] + offset
        dst = base[owner] + offset
        pool = _empty_pool(int(room.sum()))
        for new, old in zip(pool, (self.pair_slots, self.pair_edge, self.q, self.lam)):
            new[dst] = old[src]
        # one C-level update, so that a Ctrl-C cannot leave the pool half moved
        self.__dict__.update(
            pair_slots=pool[0],
            pair_edge=pool[1],
            q=pool[2],
            lam=pool[3],
            pair_base=base,
            pool_used=int(room.sum()),
        )

    def pair_rows(self, i):
        """The pool rows of example i's active pairs (module docstring of
        :mod:`._multilabel_gdmm_kernels`, "Storage")."""
        return np.arange(self.pair_base[i], self.pair_base[i] + self.n_pairs[i])

    def _edge_ids(self):
        L, edges = self.model.n_labels, self.model.edges
        edge_id = np.full((L, L), -1, dtype=np.int64)
        edge_id[edges[:, 0], edges[:, 1]] = np.arange(len(edges))
        edge_id[edges[:, 1], edges[:, 0]] = np.arange(len(edges))
        return edge_id

    def _after_load(self):
        if not hasattr(self, "arrays"):
            self._check_problem()
        layout = self.__dict__.pop("_saved_layout", None)
        if layout == "blocks":  # one (cap × cap) block per example
            self._lists_from_blocks()
        elif layout == "room":  # one (room × room) block per example, in a pool
            self._lists_from_rooms()
        for k in ("blocked", "idle"):  # a file without them
            if getattr(self, k).shape != self.slot_label.shape:
                setattr(self, k, np.zeros(self.slot_label.shape, dtype=np.int64))
        self._rebuild()
        self._check_marginals()

    def _check_marginals(self):
        """A restored μ lies in [0, 1] and is 0 outside each example's active labels; the
        active pairs' q are distributions (the certified dual is a dual point only then)."""
        n = self.data.n_sequences
        mu = self.mu
        low, high = mu.min(initial=0.0), mu.max(initial=0.0)
        if low < -MARGINAL_ROUNDING or high > 1.0 + MARGINAL_ROUNDING:
            raise ValueError(
                f"inconsistent GDMM state: the array 'mu' holds marginals outside [0, 1] "
                f"(from {low:.6g} to {high:.6g})"
            )
        active = np.zeros(mu.shape, dtype=bool)
        slots = np.arange(self.slot_label.shape[1]) < self.n_slots[:, None]
        rows = np.broadcast_to(np.arange(n)[:, None], slots.shape)
        active[rows[slots], self.slot_label[slots]] = True
        if np.any(mu[~active] != 0.0):
            i, l = np.argwhere((mu != 0.0) & ~active)[0]
            raise ValueError(
                f"inconsistent GDMM state: 'mu' of example {i} is {mu[i, l]:g} on label {l}, "
                "which is not in its active set (inactive labels have mu = 0)"
            )
        count = self.n_pairs
        live = np.zeros(len(self.q), dtype=bool)
        owner = np.repeat(np.arange(n), count)
        offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        rows = self.pair_base[owner] + offset
        live[rows] = True
        check_distributions("q", self.q[live], np.ones((int(live.sum()), 4), dtype=bool))
        self._check_weights(owner, rows)

    def _check_weights(self, owner, rows):
        """A restored w is w(μ, q): ``w_U[:, l] = C Σ_i x_i (ȳ_il − μ_il)`` and
        ``w_V[e] = C Σ_i (ȳ_il ȳ_ik − q_ie(11))`` (up to rounding), else the certified dual
        would not be the dual value of any point."""
        model, data, C = self.model, self.data, self.C
        Y = data.Y.astype(np.float64)
        U = C * np.asarray(data.X.T @ (Y - self.mu))
        if model.support is not None:
            indptr, labels = model.support
            U = U[np.repeat(np.arange(model.n_features), np.diff(indptr)), labels]
        edges = model.edges
        V = C * (Y[:, edges[:, 0]] * Y[:, edges[:, 1]]).sum(axis=0)
        np.subtract.at(V, self.pair_edge[rows], C * self.q[rows, 3])
        expected = np.concatenate([np.ravel(U), V])
        check_agrees("'w', 'mu' and 'q'", self.w, expected, 1.0 + C * data.n_sequences)

    def _rebuild(self):
        """Check the restored state and rebuild what is derived from it: the views into w,
        the penalties, and the max tree over the interaction weights."""
        if not hasattr(self, "arrays"):
            self._check_problem()
        self.capacity = int(self.capacity)
        self.pool_used = int(self.pool_used)
        self.edge_id = self._edge_ids()
        self._check_pool()
        self.W = self.model.unpack(self.w)
        self._support = kernel_support(self.model.support, self.arrays[1])
        X = self.data.X
        self.sq_norms = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        self.penalty_scale = penalty_unit(
            self.C, float(np.mean(self.model.loss_weights)), float(np.mean(self.sq_norms))
        )
        self._set_penalties()
        E = len(self.model.edges)
        P = 1
        while P < max(1, E):
            P *= 2
        self.tree = np.empty(2 * P)
        gk.build_max_tree(self.W.pairwise, self.tree)
        self.tree_ranges = np.empty((2 * P, 4), dtype=np.int64)
        gk.tree_label_ranges(self.model.edges, P, self.tree_ranges)
        L = self.model.n_labels
        self.range_table = np.empty((max(1, int(L).bit_length()), L))

    carries_dual = True

    def _dual_terms(self):
        return self.C * self._consistency()[4], float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """μ and the pair marginals (α / C) mix with the gold labelling,
        ``t q + (1 − t) e_gold``; w and its average scale by s, the multipliers by
        C / C_old (as :class:`~dualstruct.solvers.GDMM`)."""
        self.best_dual = 0.0  # a bound of the old problem
        self.w *= s
        self.w_avg *= s
        if t < 1.0:
            gk.mix_label_and_pair_marginals_with_gold(
                self.data.Y, self._label_sets(), self._pair_pool(), t
            )
        self._rebuild()  # the new κ, and the tree over the scaled interaction weights
        self.lam *= ratio

    def _label_sets(self):
        return gk.LabelSets(self.mu, self.slot_label, self.n_slots, self.blocked, self.idle)

    def _pair_pool(self):
        return gk.PairPool(
            self.pair_base,
            self.pair_room,
            self.n_pairs,
            self.pair_slots,
            self.pair_edge,
            self.q,
            self.lam,
        )

    def _check_pool(self):
        """The kernels do not check bounds: refuse a state whose pool rows could overflow or
        whose pairs name slots or edges that do not exist."""
        n = self.data.n_sequences
        room, base, count = self.pair_room, self.pair_base, self.n_pairs
        rows = len(self.q)
        ok = (
            self.slot_label.shape == (n, self.capacity)
            and self.blocked.shape == (n, self.capacity)
            and self.idle.shape == (n, self.capacity)
            and room.shape == (n,)
            and base.shape == (n,)
            and count.shape == (n,)
            and self.pair_slots.shape == (rows, 2)
            and self.pair_edge.shape == (rows,)
            and self.q.shape[1:] == (4,)
            and self.lam.shape == (rows, 2)
            and self.pool_used <= rows
            and np.all(self.n_slots <= self.capacity)
            and np.all(count >= 0)
            and np.all(count <= room)
            and np.all(base >= 0)
            and np.all(base + room <= self.pool_used)
        )
        if ok:  # rooms apart; slots name distinct labels, the gold ones among them
            order = np.argsort(base, kind="stable")
            ok = bool(
                np.all(base[order][1:] >= (base + room)[order][:-1])
                and np.all(self.n_slots >= 0)
                and np.all((self.blocked >= 0) & (self.blocked <= self.capacity))
            )
            L = self.model.n_labels
            Y = self.data.Y
            for i in range(n if ok else 0):
                active = self.slot_label[i, : self.n_slots[i]]
                if (
                    np.any((active < 0) | (active >= L))
                    or len(np.unique(active)) != len(active)
                    or not np.all(np.isin(np.flatnonzero(Y[i]), active))
                ):
                    ok = False
                    break
        if ok and count.sum():
            owner = np.repeat(np.arange(n), count)
            live = np.concatenate([np.arange(b, b + c) for b, c in zip(base, count) if c])
            slots = self.pair_slots[live]
            edges = self.pair_edge[live]
            ok = bool(
                np.all(slots[:, 0] >= 0)
                and np.all(slots[:, 0] < slots[:, 1])
                and np.all(slots[:, 1] < self.n_slots[owner])
                and np.all(edges >= 0)
                and np.all(edges < len(self.model.edges))
            )
            if ok:
                labels = self.slot_label[owner[:, None], slots]
                ok = bool(np.all(self.edge_id[labels[:, 0], labels[:, 1]] == edges))
        if not ok:
            raise ValueError("saved GDMM active sets are inconsistent with their capacity")

    def _lists_from_rooms(self):
        """Move the pairs of an older file's (room × room) blocks into pair lists: the stored
        pairs of two active slots a < b, with the same state and multipliers."""
        pair_edge, q, lam = self.pair_edge, self.q, self.lam
        base, room = self.pair_base, self.pair_room
        n = self.data.n_sequences
        if (
            base.shape != (n,)
            or room.shape != (n,)
            or self.n_slots.shape != (n,)
            or len(q) != len(pair_edge)
            or len(lam) != len(pair_edge)
            or np.any(base < 0)
            or np.any(self.n_slots < 0)
            or np.any(self.n_slots > room)
            or np.any(base + room * room > len(pair_edge))
        ):
            raise ValueError("saved GDMM active sets are inconsistent with their capacity")
        lists = []
        for i, ns in enumerate(self.n_slots):
            a, b = np.triu_indices(int(ns), 1)
            rows = base[i] + a * room[i] + b
            keep = pair_edge[rows] >= 0
            lists.append((a[keep], b[keep], rows[keep]))
        counts = np.array([len(r) for _, _, r in lists], dtype=np.int64)
        self.n_pairs = counts
        self.pair_room = _rows_for(counts)
        self.pair_base = (np.cumsum(self.pair_room) - self.pair_room).astype(np.int64)
        self.pool_used = int(self.pair_room.sum())
        self.pair_slots, self.pair_edge, self.q, self.lam = _empty_pool(self.pool_used)
        for i, (a, b, rows) in enumerate(lists):
            dst = np.arange(self.pair_base[i], self.pair_base[i] + len(rows))
            self.pair_slots[dst, 0], self.pair_slots[dst, 1] = a, b
            self.pair_edge[dst], self.q[dst], self.lam[dst] = pair_edge[rows], q[rows], lam[rows]
        self.capacity = max(int(self.capacity), self.slot_label.shape[1])

    def _lists_from_blocks(self):
        """The (n, cap, cap, ·) arrays of the oldest files: one room of ``cap`` per example."""
        n, cap = self.slot_label.shape
        self.pair_edge = self.pair_edge.reshape(-1)
        self.q = self.q.reshape(-1, 4)
        self.lam = self.lam.reshape(-1, 2)
        self.pair_base = np.arange(n, dtype=np.int64) * cap * cap
        self.pair_room = np.full(n, cap, dtype=np.int64)
        self._lists_from_rooms()

    def _grow_example(self, i, rows):
        """Room for ``rows`` pairs of example i: its rows move, doubled (or more), into a new
        block at the end of the pool (the old block is left unused; the pool itself doubles
        when full), and the slots of every example double when example i's are full."""
        grown = {}
        if rows > self.pair_room[i]:
            old = int(self.pair_room[i])
            new = max(2 * old, int(rows))
            need = self.pool_used + new
            pool = (self.pair_slots, self.pair_edge, self.q, self.lam)
            if need > len(self.q):
                pool = _empty_pool(max(need, 2 * len(self.q)))
                for dst, src in zip(pool, (self.pair_slots, self.pair_edge, self.q, self.lam)):
                    dst[: self.pool_used] = src[: self.pool_used]
            src = np.arange(self.pair_base[i], self.pair_base[i] + old)
            dst = np.arange(self.pool_used, self.pool_used + old)  # beyond the used pool
            for a in pool:
                a[dst] = a[src]
            pair_base, pair_room = self.pair_base.copy(), self.pair_room.copy()
            pair_base[i], pair_room[i] = self.pool_used, new
            grown.update(
                pair_slots=pool[0],
                pair_edge=pool[1],
                q=pool[2],
                lam=pool[3],
                pair_base=pair_base,
                pair_room=pair_room,
                pool_used=need,
            )
        if self.n_slots[i] + 2 > self.capacity:
            new = _slots_for(int(self.n_slots[i]) + 2)
            grown.update(
                slot_label=widen_columns(self.slot_label, new),
                blocked=widen_columns(self.blocked, new),
                idle=widen_columns(self.idle, new),
                capacity=new,
            )
        # one C-level update, so that a Ctrl-C cannot leave the pool half moved
        self.__dict__.update(grown)

    def _run(self, order):
        indptr, indices, values = self.arrays
        model = self.model
        status = np.zeros(3, dtype=np.int64)
        stats = np.zeros(4)
        data = gk.ExampleData(
            indptr,
            indices,
            values,
            self.data.Y,
            model.loss_weights,
            self.sq_norms,
            model.edges,
            self.edge_id,
        )
        weights = gk.LabelWeights(self.w[: model.n_unary], *self._support, self.W.pairwise)
        search = gk.EdgeSearch(
            self.tree, self.tree_ranges, self.range_table, self.pair_search == "brute"
        )
        settings = gk.SweepSettings(
            float(self.C),
            float(self.rho),
            float(self.eta),
            self.shrink_after,
            self.inner_sweeps,
            self.inner_tol,
        )
        done = 0
        while done < len(order):
            done += gk.gdmm_pass(
                data,
                weights,
                search,
                self._label_sets(),  # (growth replaces their arrays)
                self._pair_pool(),
                settings,
                order[done:],
                status,
                stats,
            )
            if status[0] == gk.NEED_CAPACITY:
                self._grow_example(int(status[1]), int(status[2]))
        self.labels_added += int(stats[0])
        self.pairs_added += int(stats[2])
        self.labels_removed += int(stats[3])
        self._sweeps += stats[1]
        return len(order)

    def _one_pass(self, order, chunks):
        self._set_penalties()
        self._sweeps = 0.0
        calls = super()._one_pass(order, chunks)
        if self.pool_used > 1.5 * int(self.pair_room.sum()):  # rooms left behind
            self._compact_pool()
        self.sweeps_per_visit = self._sweeps / max(len(order), 1)
        beta = 2.0 / (self.passes + 2.0)  # weighted averaging of the pass iterates
        self.w_avg *= 1.0 - beta
        self.w_avg += beta * self.w
        return calls

    def _consistency(self):
        return gk.state_summary(
            self._label_sets(), self._pair_pool(), self.rho, self.model.loss_weights, self.data.Y
        )

    def diagnostics(self, check):
        c = self._consistency()
        n = self.data.n_sequences
        G = 0.5 * float(self.w @ self.w) - self.C * c[4]
        return {
            "residual": c[0],
            "G": G,
            "augmented": G + c[1],
            "active_labels": c[2] / n,
            "active_pairs": c[3] / n,
            "labels_added": self.labels_added,
            "pairs_added": self.pairs_added,
            "labels_removed": self.labels_removed,
            "sweeps_per_visit": self.sweeps_per_visit,
            **self._penalty_figures(),
        }

    def candidates(self):
        return [self.w_avg, self.w] if self.averaging else [self.w]

    def certified_dual(self):
        """A certified lower bound on the (LP-relaxed) optimum:
        ``D = C Σ_i Σ_l c_l |μ_il − ȳ_il| − ½‖w'‖²`` with every active pair's q_e(11)
        clipped into ``[max(0, μ_l + μ_k − 1), min(μ_l, μ_k)]`` (kernel
        :func:`~._multilabel_gdmm_kernels.pair_rounding`). Only w_V changes, so
        ``‖w'‖² = ‖w‖² − ‖w_V‖² + ‖w_V + Δw_V‖²``. The point is then moved toward the gold
        labelling where that raises D (:func:`~.objective.scaled_dual`). Equals −G(q) once q
        is consistent and optimal."""
        c = self._consistency()
        V = self.W.pairwise
        change = np.zeros_like(V)
        gk.pair_rounding(
            self.mu,
            self.slot_label,
            self.pair_base,
            self.n_pairs,
            self.pair_slots,
            self.pair_edge,
            self.q,
            self.C,
            change,
        )
        rounded = V + change
        sq_norm = float(self.w @ self.w) - float(V @ V) + float(rounded @ rounded)
        return scaled_dual(self.C * c[4], sq_norm)


#: the default penalty ρ / κ never falls below this
MIN_DEFAULT_RHO = 0.025


def default_rho(model):
    """The default penalty in units of κ: ``0.25 min(1, 16 / d̄)``, d̄ the mean degree of the
    model's label graph (:class:`MultiLabelGDMM`), but at least ``MIN_DEFAULT_RHO``.

    The fall with the degree is measured on bibtex's full graph (BENCHMARKS.md, "Training
    across C"). On much larger graphs the rule goes too far, since an example's active
    labels, not the whole graph, tie a label's marginal to its pairs, and they stay in the
    tens. Hence the floor, the best value on bibtex."""
    L = model.n_labels
    degree = 2.0 * len(getattr(model, "edges", ())) / max(L, 1)
    rule = 0.25 * min(1.0, 16.0 / degree) if degree > 0 else 0.25
    return max(MIN_DEFAULT_RHO, rule)


def _rows_for(n_pairs):
    """An example's room in pair rows: its pairs and half as many again, at least 8 more
    (a visit may activate pairs)."""
    n_pairs = np.asarray(n_pairs, dtype=np.int64)
    return n_pairs + np.maximum(8, n_pairs // 2)


def _slots_for(n_active):
    """Label slots per example: the smallest power of two, at least 8, that holds
    ``n_active + 4`` slots (a visit may add two labels)."""
    room = 8
    while room < n_active + 4:
        room *= 2
    return room


def _empty_pool(size):
    """``(pair_slots, pair_edge, q, lam)`` for ``size`` pool rows: no pair, no mass, no
    multipliers."""
    return (
        np.zeros((size, 2), dtype=np.int64),
        np.full(size, -1, dtype=np.int64),
        np.zeros((size, 4)),
        np.zeros((size, 2)),
    )
