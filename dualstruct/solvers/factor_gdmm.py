"""GDMM over factors: greedy direction method of multipliers with factorwise maximization
oracles (Yen et al. 2016, Algorithm 1) for every model that registers the factor functions
of :mod:`dualstruct.models.factors` — the multi-class model, the graph CRFs, the
multi-label model and users' kernel models. The kernels and the derivation are in
:mod:`dualstruct.solvers._factor_gdmm_kernels`.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ..data import BlockData
from ..models import factors
from . import _factor_gdmm_kernels as kern
from ._gdmm_common import (
    BestCertifiedDual,
    ScaleFreePenalty,
    check_distributions,
    penalty_unit,
    widen_columns,
)
from ._gdmm_proximal import ProximalGDMM, check_proximal
from .base import PassSolver
from .block import KernelBlocks, check_agrees, kernel_model
from .objective import scaled_dual

#: node-slot arrays (one column per active state) and edge-pair arrays
SLOT_ARRAYS = ("act", "q", "idle", "lam", "msum")
PAIR_ARRAYS = ("pair_a", "pair_b", "q_e")


def check_factor_model(model, edges=None):
    """The kernel class of ``model`` (:func:`dualstruct.models.factors.kernel_class_of`),
    after checking that it registered the factor functions GDMM needs; a ValueError names
    the missing ones. ``edges``: whether the data has edges (None: not known yet, the edge
    functions are checked once the data is seen)."""
    kclass = factors.kernel_class_of(model)
    if kclass is None:
        raise ValueError(
            f"GDMM trains models that register the factor functions of "
            f"dualstruct.models.factors; {_name(model)} names no kernel class (give "
            "it a class attribute kernel_class, its kernel's NamedTuple class, or call "
            "dualstruct.models.factors.register_model)"
        )
    missing = factors.missing_functions(kclass, edges=bool(edges))
    if missing:
        raise ValueError(
            f"GDMM needs the factor functions {', '.join(missing)} of "
            f"dualstruct.models.factors registered for {kclass.__name__} "
            f"({_name(model)}'s kernel) with factors.implements"
        )
    return kclass


_UNCACHED = []


def kernels_for(kernel_class):
    """The compiled engine for kernels of ``kernel_class``: the cached one for the library's
    kernels, an uncached copy for kernels defined elsewhere. numba's on-disk index of a
    cached function names the classes of every signature compiled, so a kernel class of a
    script's ``__main__`` or a test module in it would break loading the engine in every
    process that cannot import that module."""
    if kernel_class.__module__.startswith("dualstruct."):
        return kern
    if not _UNCACHED:
        name = kern.__name__ + "_uncached"
        spec = importlib.util.spec_from_file_location(name, kern.__file__)
        module = importlib.util.module_from_spec(spec)
        module.__package__ = kern.__package__
        module.CACHE = False
        spec.loader.exec_module(module)
        _UNCACHED.append(module)
    return _UNCACHED[0]


def _name(model):
    """A model's class name (``model`` may be the class)."""
    return getattr(model, "__name__", type(model).__name__)


class FactorGDMM(ProximalGDMM, KernelBlocks, ScaleFreePenalty, BestCertifiedDual, PassSolver):
    """GDMM over the factors of any model that registers the factor functions of
    :mod:`dualstruct.models.factors` (margin rescaling): the multi-class model, GraphCRF,
    EdgeFeatureGraphCRF, the multi-label model and users' kernel models.

    On the multi-label model every edge of the label graph is a factor of every example;
    :class:`~dualstruct.solvers.MultiLabelGDMM`, which activates pairs greedily, stays the
    model's GDMM (``solver="gdmm"``): on large full graphs it is far faster and smaller.

    Parameters
    ----------
    model : KernelModel
        A model whose kernel class registered the factor functions.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    rho : float or list of (pass, value), default 0.5
        Penalty ρ of the augmented Lagrangian in units of the problem's penalty scale κ
        (:class:`~dualstruct.solvers.gdmm.ScaleFreePenalty`), or a schedule.
    eta : float, list of (pass, value) or None
        Multiplier step η in units of κ (default ``rho``).
    steps : int, default 3
        Pairwise Frank-Wolfe steps per factor visit (each calls the factor's oracle).
    sweeps : int, default 1
        Visits of every factor of an example before the example's multiplier step (the
        augmented Lagrangian minimized more exactly per multiplier step).
    shrink_after : int, default 0
        Drop a state from a node's active set once it has had no mass and been in no pair
        for this many visits (with its multipliers); 0: states never leave.
    proximal : "auto" or float >= 0, default 0
        κ of the proximal-point outer loop, as :class:`~dualstruct.solvers.BCFW`'s: each
        pass trains on ``P(w) + κ/2 ‖w − z‖²`` (an SSVM with the smaller effective C
        ``C / (1 + κ)``) with the centre z at the last iterate; ``"auto"`` adapts κ at the
        checks, a number fixes it, 0 runs plain GDMM. The reported gap is always the
        original problem's (:mod:`dualstruct.solvers._gdmm_proximal`).
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`.

    Attributes
    ----------
    relaxation : str
        ``"exact"`` when every example's graph is a forest (or has no edges): the local
        polytope is the marginal polytope and GDMM trains the structural SVM itself;
        ``"local polytope"`` when some graph has a cycle: GDMM then trains the relaxed
        structural SVM over the local polytope, and the model must use its LP oracle
        (``inference_method="lp"``) so that the primal is the relaxed one. Also in every
        record's ``extra`` (``exact``: 1.0 or 0.0).

    Notes
    -----
    The dual at a check is certified: every edge marginal is rounded into the transport
    polytope of its two node marginals, a locally consistent point whose dual value is a
    lower bound (:meth:`certified_dual`). Records hold the consistency residual
    ``Σ‖M q_e − q_j‖₁``, G(q), the augmented Lagrangian and the mean active-set sizes.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from dualstruct.models import MultiClassModel
    >>> from dualstruct.solvers import FactorGDMM
    >>> X, y = load_digits(return_X_y=True)
    >>> model = MultiClassModel(10, 64)
    >>> data = model.block_data(X[:100] / 16, y[:100])
    >>> solver = FactorGDMM(model, C=1.0, max_iter=200, tol=0.01, random_state=0).fit(data)
    >>> solver.history.last_checked().relative_gap <= 0.01
    True
    """

    name = "factor_gdmm"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        rho=0.5,
        eta=None,
        steps=3,
        sweeps=1,
        shrink_after=0,
        proximal=0,
        **kwargs,
    ):
        if kwargs.get("rescaling", "margin") != "margin":
            raise ValueError("GDMM supports margin rescaling only")
        super().__init__(model, C, **kwargs)
        self.proximal = check_proximal(proximal)
        self._init_schedules(rho, eta)
        for name, value, low in (
            ("steps", steps, 1),
            ("sweeps", sweeps, 1),
            ("shrink_after", shrink_after, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.steps = int(steps)
        self.sweeps = int(sweeps)
        self.shrink_after = int(shrink_after)
        self.kernel_class = check_factor_model(kernel_model(model))

    @property
    def _kern(self):
        """The compiled engine for the model's kernel class (:func:`kernels_for`)."""
        return kernels_for(self.kernel_class)

    state_arrays = (
        "w",
        "R",
        "act",
        "n_act",
        "q",
        "idle",
        "lam",
        "msum",
        "pair_a",
        "pair_b",
        "q_e",
        "n_pair",
        "counters",
        "prox_w",
        "prox_center",
    )
    growable_arrays = SLOT_ARRAYS + PAIR_ARRAYS
    state_scalars = ("best_dual",) + ProximalGDMM.proximal_scalars

    def memory_parts(self, data):
        """Besides the weights: 4 state slots per node and per edge end, 4 pairs per edge,
        and the layout of the factor graphs (their sizes read with ``factor_counts``, and
        checked). Block data built here from other input is kept for :meth:`start`."""
        parts = super().memory_parts(data)
        blocks = data if isinstance(data, BlockData) else kernel_model(self.model).block_data(data)
        if blocks is not data:
            self._estimated = (data, blocks)
        nodes, edges = (int(v) for v in self._graph_sizes(blocks.kernel).sum(axis=0))
        parts["active sets (4 slots per node and edge end, 4 pairs per edge)"] = (
            4 * 24 * nodes + 4 * 16 * 2 * edges + 4 * 16 * edges
        )
        parts["factor graph layout (edge nodes, adjacency, the forest test)"] = (
            24 * nodes + 96 * edges
        )
        if self._proximal_on:
            parts["proximal iterate and centre"] = 16 * kernel_model(self.model).size
        return parts

    def _graph_sizes(self, k):
        """``(nodes, edges)`` of every example from the model's ``factor_counts``, checked."""
        n = len(k.label_offsets) - 1
        sizes = np.zeros((n, 2), dtype=np.int64)
        self._kern.graph_sizes(k, n, sizes)
        bad = (sizes < 0).any(axis=1) | (sizes[:, 0] < 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"factor_counts of {type(k).__name__} returned {tuple(int(v) for v in sizes[i])} "
                f"for example {i}: need (nodes >= 1, edges >= 0)"
            )
        return sizes

    def start(self, data):
        try:
            return super().start(data)
        finally:
            self._estimated = None

    def _make_blocks(self, kmodel):
        estimated = self._estimated
        self._estimated = None
        if estimated is not None and estimated[0] is self.data:
            self.blocks, self.kernel_model_ = estimated[1], kmodel
        else:
            super()._make_blocks(kmodel)

    _estimated = None
    _transient = PassSolver._transient + ("_estimated",)

    # -- set-up ---------------------------------------------------------------------------------
    def _init_state(self):
        self._make_blocks(kernel_model(self.model))
        k = self.blocks.kernel
        if type(k) is not self.kernel_class:
            raise TypeError(
                f"the block data's kernel is a {type(k).__name__}, the model's kernel class "
                f"{self.kernel_class.__name__}"
            )
        self.layout, gold, loopy = self._build_layout(k)
        if loopy.any():
            check_factor_model(self.kernel_model_, edges=True)
            if not getattr(self.kernel_model_, "fractional_oracle", False):
                i = int(np.flatnonzero(loopy)[0])
                raise ValueError(
                    f"example {i} is a graph with a cycle: GDMM trains the relaxation over the "
                    f"local polytope there, so {type(self.model).__name__} must use its LP "
                    "oracle (inference_method='lp') for the primal to be the relaxed one"
                )
        elif len(self.layout.edge_u):
            check_factor_model(self.kernel_model_, edges=True)
        self.relaxation = "local polytope" if loopy.any() else "exact"
        N, E = len(gold), len(self.layout.edge_u)
        cap = int(min(self.layout.max_states, 4))
        self.w = np.zeros(self.kernel_model_.size)
        self.R = np.zeros_like(self.w)
        self.act = np.zeros((N, cap), dtype=np.int32)
        self.act[:, 0] = gold
        self.n_act = np.ones(N, dtype=np.int32)
        self.q = np.zeros((N, cap))
        self.q[:, 0] = 1.0
        self.idle = np.zeros((N, cap), dtype=np.int32)
        self.lam = np.zeros((2 * E, cap))
        self.msum = np.zeros((2 * E, cap))
        self.msum[:, 0] = 1.0
        self.pair_a = np.zeros((E, 4), dtype=np.int32)
        self.pair_b = np.zeros((E, 4), dtype=np.int32)
        self.q_e = np.zeros((E, 4))
        self.q_e[:, 0] = 1.0
        self.n_pair = np.ones(E, dtype=np.int32)
        self.counters = np.zeros(4, dtype=np.int64)
        self.best_dual = 0.0
        self.gold = gold
        self._last_pass = {}
        self._start_proximal()
        self._prepare()

    def _build_layout(self, k):
        """The factor graphs of all examples, checked: (layout, gold states, loopy per
        example)."""
        sizes = self._graph_sizes(k)
        n = len(sizes)
        node_offsets = np.concatenate([[0], np.cumsum(sizes[:, 0])]).astype(np.int64)
        edge_offsets = np.concatenate([[0], np.cumsum(sizes[:, 1])]).astype(np.int64)
        N, E = int(node_offsets[-1]), int(edge_offsets[-1])
        n_states, gold = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64)
        edge_u, edge_v = np.zeros(E, dtype=np.int64), np.zeros(E, dtype=np.int64)
        self._kern.graph_fill(k, node_offsets, edge_offsets, n_states, gold, edge_u, edge_v)
        node_example = np.repeat(np.arange(n), sizes[:, 0])
        edge_example = np.repeat(np.arange(n), sizes[:, 1])
        bad = (n_states < 1) | (gold < 0) | (gold >= n_states)
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            i = int(node_example[g])
            raise ValueError(
                f"node_info of example {i}, node {g - node_offsets[i]}: {n_states[g]} states "
                f"and the gold state {gold[g]} (need states >= 1, gold in 0 … states − 1)"
            )
        width = sizes[edge_example, 0]
        bad = (edge_u < 0) | (edge_v < 0) | (edge_u >= width) | (edge_v >= width)
        bad |= edge_u == edge_v
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            i = int(edge_example[r])
            raise ValueError(
                f"edge_nodes of example {i}, edge {r - edge_offsets[i]}: ({edge_u[r]}, "
                f"{edge_v[r]}) must be two different nodes in 0 … {width[r] - 1}"
            )
        gu = node_offsets[edge_example] + edge_u
        gv = node_offsets[edge_example] + edge_v
        ends_node = np.empty(2 * E, dtype=np.int64)
        ends_node[0::2], ends_node[1::2] = gu, gv
        adj_end = np.argsort(ends_node, kind="stable").astype(np.int64)
        adj_ptr = np.zeros(N + 1, dtype=np.int64)
        np.cumsum(np.bincount(ends_node, minlength=N), out=adj_ptr[1:])
        # a graph is a forest when edges = nodes − components
        graph = sp.coo_matrix((np.ones(E), (gu, gv)), shape=(N, N))
        _, comp = connected_components(graph, directed=False)
        first = np.unique(comp, return_index=True)[1]
        comps = np.bincount(node_example[first], minlength=n)
        loopy = sizes[:, 1] > sizes[:, 0] - comps
        layout = kern.Layout(
            node_offsets,
            edge_offsets,
            n_states,
            edge_u,
            edge_v,
            adj_ptr,
            adj_end,
            int(n_states.max()),
        )
        return layout, gold.astype(np.int32), loopy

    def _prepare(self):
        """The penalty scale κ from the mean loss and feature norm of the node factors."""
        loss, sq = self._kern.penalty_figures(self.blocks.kernel, self.layout)
        self.penalty_scale = penalty_unit(self.C, loss, sq)
        self._set_penalties()
        self._avg_cache = None

    def _after_load(self):
        """Check a restored state (the kernels index with it unchecked)."""
        N, E = len(self.gold), len(self.layout.edge_u)
        for group, rows in ((("act", "q", "idle"), N), (("lam", "msum"), 2 * E)):
            for name in group:
                a = getattr(self, name)
                if a.ndim != 2 or a.shape[0] != rows or a.shape[1] != self.act.shape[1]:
                    raise ValueError(
                        f"inconsistent GDMM state: the array {name!r} has shape {a.shape}"
                    )
        for name in PAIR_ARRAYS:
            a = getattr(self, name)
            if a.ndim != 2 or a.shape[0] != E or a.shape[1] != self.q_e.shape[1]:
                raise ValueError(f"inconsistent GDMM state: the array {name!r} has shape {a.shape}")
        cap, pcap = self.act.shape[1], self.q_e.shape[1]
        used = np.arange(cap) < self.n_act[:, None]
        live = np.arange(pcap) < self.n_pair[:, None]
        states = np.broadcast_to(self.layout.n_states[:, None], used.shape)
        if (
            self.n_act.min(initial=1) < 1
            or self.n_act.max(initial=1) > cap
            or self.n_pair.min(initial=1) < 1
            or self.n_pair.max(initial=1) > pcap
            or (used & ((self.act < 0) | (self.act >= states))).any()
            or not np.array_equal(self.act[:, 0], self.gold)
        ):
            raise ValueError("inconsistent GDMM state: active-set counts or states out of range")
        lay = self.layout
        n0 = lay.node_offsets[
            np.repeat(np.arange(len(lay.edge_offsets) - 1), np.diff(lay.edge_offsets))
        ]
        for side, name in ((self.layout.edge_u, "pair_a"), (self.layout.edge_v, "pair_b")):
            slots = getattr(self, name)
            bound = self.n_act[n0 + side][:, None]
            if (live & ((slots < 0) | (slots >= bound))).any():
                raise ValueError(f"inconsistent GDMM state: {name!r} names an inactive slot")
        check_distributions("q", self.q, used)
        check_distributions("q_e", self.q_e, live)
        expected = np.zeros_like(self.w)
        self._kern.rebuild_weights(
            self.blocks.kernel, self.layout, self._sets(), self._pairs(), self.C, expected
        )
        check_agrees("'w', 'q' and 'q_e'", self.w, expected, 1.0 + self.C * len(self.gold))
        self._check_proximal_state()
        self._prepare()

    # -- the pass -----------------------------------------------------------------------------
    def _sets(self):
        return kern.ActiveSets(self.act, self.n_act, self.q, self.idle, self.lam, self.msum)

    def _pairs(self):
        return kern.PairSupport(self.pair_a, self.pair_b, self.q_e, self.n_pair)

    def _grow(self, need):
        grown = {}
        if need & self._kern.NEED_SLOTS:
            cap = int(min(self.layout.max_states, 2 * self.act.shape[1]))
            grown.update({name: widen_columns(getattr(self, name), cap) for name in SLOT_ARRAYS})
        if need & self._kern.NEED_PAIRS:
            cap = int(min(self.layout.max_states**2, 2 * self.q_e.shape[1]))
            grown.update({name: widen_columns(getattr(self, name), cap) for name in PAIR_ARRAYS})
        self.__dict__.update(grown)  # one update: an interrupt leaves old or new widths

    def _one_pass(self, order, chunks):
        calls_before = int(self.counters[:2].sum())
        self._centre()  # the proximal scheme's centre moves to the last iterate
        self._set_penalties()
        avg_weight = 0.5 * self.passes * (self.passes + 1.0) if self.averaging else 0.0
        settings = kern.Settings(
            float(self.C),
            float(self.rho),
            float(self.eta),
            self.steps,
            self.sweeps,
            self.shrink_after,
            self._proximal_scale(),
        )
        k = self.blocks.kernel
        for part in self._pass_parts(order, chunks):
            pos = 0
            while pos < len(part):
                weights = kern.Weights(self._scoring_point(), self.R, float(avg_weight))
                pos, need = self._kern.factor_pass(
                    k,
                    self.layout,
                    weights,
                    self._sets(),
                    self._pairs(),
                    settings,
                    part,
                    pos,
                    self.counters,
                )
                if need:
                    self._grow(need)
        self.blocks.raise_status()
        l1, lagrange, penalty = self._kern.consistency(self.layout, self._sets())
        self._avg_cache = None
        G = self.dual_objective_G()
        self._last_pass = {
            "residual": l1,
            "G": G,
            "augmented": G + lagrange + 0.5 * self.rho * penalty,
            "exact": 1.0 if self.relaxation == "exact" else 0.0,
            **self._penalty_figures(),
        }
        return int(self.counters[:2].sum()) - calls_before

    # -- a new C --------------------------------------------------------------------------------
    carries_dual = True

    def _dual_terms(self):
        return self._loss_term(), float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """w scales by s; every node and edge marginal mixes with the gold labelling,
        ``t q + (1 − t) e_gold`` (slot 0, and the edge's pair of slots 0, which joins the
        support where missing), so the point stays consistent where it was; the multipliers
        scale by C / C_old, as the factors' linear terms do. The average starts afresh from
        the new point, and the best certified dual from the gold labelling's."""
        self.w *= s
        self.R[:] = 0.0
        if t < 1.0:
            live = np.arange(self.q_e.shape[1]) < self.n_pair[:, None]
            gold = live & (self.pair_a == 0) & (self.pair_b == 0)
            missing = np.flatnonzero(~gold.any(axis=1))
            if len(missing) and (self.n_pair[missing] >= self.q_e.shape[1]).any():
                self._grow(self._kern.NEED_PAIRS)
            at = self.n_pair[missing]
            self.pair_a[missing, at] = 0
            self.pair_b[missing, at] = 0
            self.q_e[missing, at] = 0.0
            self.n_pair[missing] += 1
            live = np.arange(self.q_e.shape[1]) < self.n_pair[:, None]
            position = np.argmax(live & (self.pair_a == 0) & (self.pair_b == 0), axis=1)
            for marginal in (self.q, self.msum):
                marginal *= t
                marginal[:, 0] += 1.0 - t
            self.q_e *= t
            self.q_e[np.arange(len(position)), position] += 1.0 - t
        self.lam *= ratio
        self._scale_proximal(s)
        self.best_dual = 0.0
        self._prepare()

    # -- objectives ---------------------------------------------------------------------------
    def _loss_term(self):
        return self._kern.loss_term(self.blocks.kernel, self.layout, self._sets(), self.C)

    def dual_objective_G(self):
        """G(q) = ½‖w(q)‖² − C Σ_j <δ_j, q_j> (−G is a dual value once q is consistent)."""
        return 0.5 * float(self.w @ self.w) - self._loss_term()

    def current_dual(self):
        return self.certified_dual()

    def certified_dual(self):
        """A certified lower bound on the optimum (of the relaxed problem on loopy graphs):
        every edge marginal rounded into the transport polytope of its node marginals
        (:func:`~._factor_gdmm_kernels.transport_rounding`), then the best point between it
        and the gold labelling (:func:`~.objective.scaled_dual`)."""
        w = self._rounded_weights()
        return scaled_dual(self._loss_term(), float(w @ w))

    def _rounded_weights(self):
        """u at the transport-rounded marginals (:meth:`certified_dual`)."""
        w = self.w.copy()
        self._kern.transport_rounding(
            self.blocks.kernel, self.layout, self._sets(), self._pairs(), self.C, w
        )
        return w

    def diagnostics(self, check):
        extra = dict(self._last_pass)
        extra["active_states"] = float(self.n_act.mean())
        extra["active_pairs"] = float(self.n_pair.mean()) if len(self.n_pair) else 0.0
        extra.update(self._proximal_figures())
        extra["states_added"], extra["states_dropped"] = (float(c) for c in self.counters[2:])
        if check:
            t0 = time.perf_counter()
            self._kern.oracle_calls_pass(self.blocks.kernel, self.layout, self.w, float(self.C))
            extra["oracle_time"] = time.perf_counter() - t0
        return extra

    def averaged_weights(self):
        """``w̄_m = w − R / A_m`` (memoized per pass)."""
        if self._avg_cache is None or self._avg_cache[0] != self.passes:
            m = self.passes
            w_avg = self.w.copy() if m == 0 else self.w - self.R / (0.5 * m * (m + 1.0))
            self._avg_cache = (m, w_avg)
        return self._avg_cache[1]

    def candidates(self):
        if self._proximal_on:  # x, and the average of the iterates u
            return [self.prox_w, self.averaged_weights()] if self.averaging else [self.prox_w]
        return [self.averaged_weights(), self.w] if self.averaging else [self.w]

    _avg_cache = None


__all__ = ["FactorGDMM", "check_factor_model"]
