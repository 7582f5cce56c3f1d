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
from numba import njit
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

#: the default penalty ρ / κ on factor graphs of mean degree up to 8 (chains, trees, grids)
DEFAULT_RHO = 0.5
#: ... and the least it falls to on dense graphs
MIN_DEFAULT_RHO = 0.025


def default_rho(mean_degree):
    """The default penalty in units of κ, ``max(0.025, min(0.5, 4 / d̄))`` for factor graphs
    of mean degree d̄ (pair factors per node).

    On a dense graph a node's marginal is tied to d̄ pair factors, each adding ρ to the
    node's curvature in the augmented Lagrangian: ρ falls as 1/d̄ so that the steps keep
    their length. For d̄ ≥ 16 the rule is the multi-label GDMM's, measured on bibtex's full
    graph (BENCHMARKS.md, "Training across C"), where about 0.025 certifies soonest; on sparse
    graphs ρ / κ = 0.5, the chain's."""
    if mean_degree <= 0:
        return DEFAULT_RHO
    return max(MIN_DEFAULT_RHO, min(DEFAULT_RHO, 4.0 / mean_degree))


#: the lazy average's R follows a pass's net change of u (a copy of w and one axpy per pass,
#: the kernels' ``Weights.avg_weight`` 0) when w has at most this many entries per node factor
#: of the training data; beyond it R takes every change of u within the kernels, which
#: doubles their additions to w (:meth:`GDMM._pass_level_average`)
PASS_AVERAGE_WEIGHTS_PER_NODE = 1.0

#: node-slot arrays (one column per active state), edge-pair arrays and the other arrays
#: of the pool of active edges (one row per edge, two per edge end in lam and msum)
SLOT_ARRAYS = ("act", "q", "idle", "lam", "msum")
PAIR_ARRAYS = ("pair_a", "pair_b", "q_e")
ROW_ARRAYS = ("row_u", "row_v", "row_edge", "n_pair")


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


class GDMM(ProximalGDMM, KernelBlocks, ScaleFreePenalty, BestCertifiedDual, PassSolver):
    """GDMM over the factors of any model that registers the factor functions of
    :mod:`dualstruct.models.factors` (margin rescaling): the chain and multi-class models,
    GraphCRF, EdgeFeatureGraphCRF, the multi-label model and users' kernel models. Also
    named ``FactorGDMM``.

    A model that registers null states (:mod:`dualstruct.models.factors`, "Lazy edges"; the
    multi-label model with ``interactions="11"``) has only the edges that carry information
    stored: each example keeps a pool of active edges, which grows when a node step or the
    greedy choice needs an edge. :class:`~dualstruct.solvers.MultiLabelGDMM` stays the
    multi-label model's ``solver="gdmm"``.

    Parameters
    ----------
    model : KernelModel
        A model whose kernel class registered the factor functions.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    rho : float, list of (pass, value) or None, default None
        Penalty ρ of the augmented Lagrangian in units of the problem's penalty scale κ
        (:class:`~dualstruct.solvers._gdmm_common.ScaleFreePenalty`), or a schedule. None: from the
        mean degree d̄ of the training data's factor graphs, ``max(0.025, min(0.5, 4 / d̄))``
        (:func:`default_rho`).
    eta : float, list of (pass, value) or None
        Multiplier step η in units of κ (default ``rho``).
    steps : int, default 3
        Pairwise Frank-Wolfe steps per factor visit (the first calls the factor's oracle;
        a node whose states' features are orthogonal, ``node_sq_norm``, is minimized
        exactly over its active set instead).
    sweeps : int, default 1
        Visits of every factor of an example before the example's multiplier step (the
        augmented Lagrangian minimized more exactly per multiplier step).
    shrink_after : int, default 0
        Drop a state from a node's active set once it has had no mass and been in no pair
        for this many visits (with its multipliers); 0: states never leave.
    lazy_edges : "auto" or bool, default "auto"
        Keep only the active edges (the model must register ``null_state``); ``"auto"``:
        when every node of the data has a null state, False: every edge is a factor of
        every example.
    proximal : "auto" or float >= 0, default 0
        κ of the proximal-point outer loop, as :class:`~dualstruct.solvers.BCFW`'s: each
        pass trains on ``P(w) + κ/2 ‖w − z‖²`` (an SSVM with the smaller effective C
        ``C / (1 + κ)``) with the centre z at the last iterate; ``"auto"`` starts κ from
        the problem's scale (node and pair factors, larger at a larger C) and adapts it at
        the checks, a number fixes it, 0 runs plain GDMM. Try ``"auto"`` at a large C,
        where plain GDMM needs many passes. The reported gap is always the original problem's
        (:mod:`dualstruct.solvers._gdmm_proximal`).
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`.

    Attributes
    ----------
    lazy : bool
        Whether the run keeps only the active edges (``lazy_edges``).
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
    >>> from dualstruct.solvers import GDMM
    >>> X, y = load_digits(return_X_y=True)
    >>> model = MultiClassModel(10, 64)
    >>> data = model.block_data(X[:100] / 16, y[:100])
    >>> solver = GDMM(model, C=1.0, max_iter=200, tol=0.01, random_state=0).fit(data)
    >>> solver.history.last_checked().relative_gap <= 0.01
    True
    """

    name = "factor_gdmm"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        rho=None,
        eta=None,
        steps=3,
        sweeps=1,
        shrink_after=0,
        lazy_edges="auto",
        proximal=0,
        **kwargs,
    ):
        if kwargs.get("rescaling", "margin") != "margin":
            raise ValueError("GDMM supports margin rescaling only")
        super().__init__(model, C, **kwargs)
        self.proximal = check_proximal(proximal)
        self._init_schedules(DEFAULT_RHO if rho is None else rho, eta)
        self._rho_given, self._eta_given = rho, eta
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
        if not (lazy_edges == "auto" or isinstance(lazy_edges, (bool, np.bool_))):
            raise ValueError(f"lazy_edges must be 'auto', True or False, got {lazy_edges!r}")
        if lazy_edges is True and not factors._has_null_states(self.kernel_class):
            raise ValueError(
                f"lazy_edges=True needs null_state of dualstruct.models.factors registered "
                f"for {self.kernel_class.__name__}"
            )
        self.lazy_edges = lazy_edges if lazy_edges == "auto" else bool(lazy_edges)

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
        "blocked",
        "row_start",
        "row_count",
        "row_room",
        "row_u",
        "row_v",
        "row_edge",
        "counters",
        "prox_w",
        "prox_center",
    )
    growable_arrays = SLOT_ARRAYS + PAIR_ARRAYS + ROW_ARRAYS
    state_scalars = ("best_dual", "pool_used") + ProximalGDMM.proximal_scalars

    def memory_parts(self, data):
        """Besides the weights: 4 state slots per node and per edge end, 4 pairs per edge,
        and the layout of the factor graphs (their sizes read with ``factor_counts``, and
        checked). Block data built here from other input is kept for :meth:`start`."""
        parts = super().memory_parts(data)
        blocks = data if isinstance(data, BlockData) else kernel_model(self.model).block_data(data)
        if blocks is not data:
            self._estimated = (data, blocks)
        sizes = self._graph_sizes(blocks.kernel)
        nodes, edges = (int(v) for v in sizes.sum(axis=0))
        rows = self._expected_rows(blocks.kernel, sizes)
        slot = 32 if factors._has_node_norms(self.kernel_class) else 24  # the kept norms
        if rows is not None:
            parts["active sets (4 slots per node)"] = 4 * slot * nodes
            parts[
                "active edges (a pool of rows per example: its edges between gold non-null "
                "nodes and one per node and such node, rooms doubled, and the pool's copy "
                "while it grows)"
            ] = 2 * 2 * rows * (4 * 16 * 2 + 4 * 16 + 28)
            parts["nodes' layout"] = 28 * nodes
        else:
            parts["active sets (4 slots per node and edge end, 4 pairs per edge)"] = (
                4 * slot * nodes + 4 * 16 * 2 * edges + 4 * 16 * edges
            )
            parts["factor graph layout (edge nodes, adjacency, the forest test)"] = (
                24 * nodes + 96 * edges
            )
        if self._proximal_on:
            parts["proximal iterate and centre"] = 16 * kernel_model(self.model).size
        return parts

    def _expected_rows(self, k, sizes):
        """The pool's rows the memory estimate assumes: per example its gold rows and, per
        node, one edge to each node whose gold state is not null (the first steps move
        every node toward its loss-augmented state and stop at those edges); None without
        lazy edges."""
        if self.lazy_edges is False or not factors._has_null_states(self.kernel_class):
            return None
        node_offsets = np.concatenate([[0], np.cumsum(sizes[:, 0])]).astype(np.int64)
        N = int(node_offsets[-1])
        n_states, gold = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64)
        null = np.zeros(N, dtype=np.int64)
        self._kern.node_fill(k, node_offsets, n_states, gold, null)
        if (null < 0).any():
            return None
        counts = np.zeros(len(sizes), dtype=np.int64)
        self._kern.gold_rows(k, node_offsets, gold, null, counts, None)
        heavy = np.add.reduceat((gold != null).astype(np.int64), node_offsets[:-1])
        heavy = np.where(sizes[:, 0] > 0, heavy, 0)
        want = np.minimum(counts + sizes[:, 0] * np.maximum(heavy, 1), sizes[:, 1])
        return int(_rooms_for(want).sum())

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
    _transient = PassSolver._transient + ("_estimated", "_fresh_rows")
    #: the factor graphs' mean degree 2E/N, all examples pooled (:meth:`_build_layout`, before
    #: every use: the default ρ and the proximal penalty's power); 0.0 before a fit
    mean_degree = 0.0

    # -- set-up ---------------------------------------------------------------------------------
    def _init_state(self):
        self._make_blocks(kernel_model(self.model))
        k = self.blocks.kernel
        if type(k) is not self.kernel_class:
            raise TypeError(
                f"the block data's kernel is a {type(k).__name__}, the model's kernel class "
                f"{self.kernel_class.__name__}"
            )
        self.layout, gold, loopy, rows = self._build_layout(k)
        if self._rho_given is None:
            self._init_schedules(default_rho(self.mean_degree), self._eta_given)
        if loopy.any():
            check_factor_model(self.kernel_model_, edges=True)
            if not getattr(self.kernel_model_, "fractional_oracle", False):
                i = int(np.flatnonzero(loopy)[0])
                raise ValueError(
                    f"example {i} is a graph with a cycle: GDMM trains the relaxation over the "
                    f"local polytope there, so {type(self.model).__name__} must use its LP "
                    "oracle (inference_method='lp') for the primal to be the relaxed one"
                )
        elif self.layout.max_edges:
            check_factor_model(self.kernel_model_, edges=True)
        self.relaxation = "local polytope" if loopy.any() else "exact"
        N, E = len(gold), len(rows.u)
        cap = int(min(self.layout.max_states, 4))
        self.row_start, self.row_count, self.row_room = rows.start, rows.count, rows.room
        self.row_u, self.row_v, self.row_edge = rows.u, rows.v, rows.edge
        self._fresh_rows = None if self.lazy else rows
        self.blocked = np.zeros(N, dtype=np.int32)
        self.w = np.zeros(self.kernel_model_.size)
        self.R = np.zeros_like(self.w)
        self.act = np.zeros((N, cap), dtype=np.int32)
        self.act[:, 0] = gold
        self._sq_norm = None
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
        self.n_pair[self._unused_rows()] = 0
        self.q_e[self._unused_rows()] = 0.0
        self.msum[np.repeat(self._unused_rows(), 2)] = 0.0
        self.counters = np.zeros(5, dtype=np.int64)
        self.best_dual = 0.0
        self.gold = gold
        self._last_pass = {}
        self._start_proximal()
        self._prepare()

    def _build_layout(self, k):
        """The factor graphs of all examples, checked: (layout, gold states, loopy per
        example, the pool's rows: every edge, or with lazy edges those active at the
        start)."""
        sizes = self._graph_sizes(k)
        n = len(sizes)
        self.mean_degree = 2.0 * float(sizes[:, 1].sum()) / max(float(sizes[:, 0].sum()), 1.0)
        node_offsets = np.concatenate([[0], np.cumsum(sizes[:, 0])]).astype(np.int64)
        edge_offsets = np.concatenate([[0], np.cumsum(sizes[:, 1])]).astype(np.int64)
        N = int(node_offsets[-1])
        n_states, gold = np.zeros(N, dtype=np.int64), np.zeros(N, dtype=np.int64)
        lazy = self.lazy_edges is True or (
            self.lazy_edges == "auto" and factors._has_null_states(self.kernel_class)
        )
        null = np.zeros(N if lazy else 0, dtype=np.int64)
        self._kern.node_fill(k, node_offsets, n_states, gold, null)
        if lazy and self.lazy_edges == "auto" and (null < 0).any():
            lazy, null = False, null[:0]  # some node has no null state: every edge
        self.lazy = lazy
        node_example = np.repeat(np.arange(n), sizes[:, 0])
        bad = (n_states < 1) | (gold < 0) | (gold >= n_states)
        if lazy:
            bad |= (null < 0) | (null >= n_states)
        if bad.any():
            g = int(np.flatnonzero(bad)[0])
            i = int(node_example[g])
            where = f"example {i}, node {g - node_offsets[i]}"
            if lazy and not 0 <= null[g] < n_states[g]:
                raise ValueError(
                    f"null_state of {where}: {null[g]} (lazy edges need a null state in "
                    f"0 … {n_states[g] - 1} at every node; pass lazy_edges=False)"
                )
            raise ValueError(
                f"node_info of {where}: {n_states[g]} states "
                f"and the gold state {gold[g]} (need states >= 1, gold in 0 … states − 1)"
            )
        layout = kern.Layout(
            node_offsets,
            n_states,
            null,
            int(n_states.max()),
            int(sizes[:, 0].max(initial=0)),
            int(sizes[:, 1].max(initial=0)),
            lazy,
        )
        if lazy:
            loopy = np.zeros(n, dtype=np.bool_)
            parent = np.zeros(max(layout.max_nodes, 1), dtype=np.int64)
            i, e, u, v = self._kern.edge_scan(k, node_offsets, sizes[:, 1].copy(), loopy, parent)
            if i >= 0:
                raise ValueError(
                    f"edge_nodes of example {i}, edge {e}: ({u}, {v}) must be two different "
                    f"nodes in 0 … {sizes[i, 0] - 1}, and edge_between must find the edge"
                )
            counts = np.zeros(n, dtype=np.int64)
            self._kern.gold_rows(k, node_offsets, gold, null, counts, None)
            room = _rooms_for(counts)
            start = (np.cumsum(room) - room).astype(np.int64)
            R = int(room.sum())
            rows = kern.Rows(start, counts, room, *(np.zeros(R, dtype=np.int64) for _ in "uve"))
            self._kern.gold_rows(k, node_offsets, gold, null, counts, rows)
            return layout, gold.astype(np.int32), loopy, rows
        E = int(edge_offsets[-1])
        edge_u, edge_v = np.zeros(E, dtype=np.int64), np.zeros(E, dtype=np.int64)
        self._kern.edge_fill(k, edge_offsets, edge_u, edge_v)
        edge_example = np.repeat(np.arange(n), sizes[:, 1])
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
        # a graph is a forest when edges = nodes − components
        graph = sp.coo_matrix((np.ones(E), (gu, gv)), shape=(N, N))
        _, comp = connected_components(graph, directed=False)
        first = np.unique(comp, return_index=True)[1]
        comps = np.bincount(node_example[first], minlength=n)
        loopy = sizes[:, 1] > sizes[:, 0] - comps
        local = np.arange(E, dtype=np.int64) - edge_offsets[edge_example]
        count = sizes[:, 1].astype(np.int64)
        rows = kern.Rows(edge_offsets[:-1].copy(), count, count.copy(), edge_u, edge_v, local)
        return layout, gold.astype(np.int32), loopy, rows

    def _prepare(self):
        """The penalty scale κ from the mean loss and feature norm of the node factors."""
        loss, sq = self._kern.penalty_figures(self.blocks.kernel, self.layout)
        self.penalty_scale = penalty_unit(self.C, loss, sq)
        self._set_penalties()
        self._avg_cache = None

    def _after_load(self):
        """Check a restored state (the kernels index with it unchecked)."""
        N, R, n = len(self.gold), len(self.row_u), len(self.layout.node_offsets) - 1
        fresh, self._fresh_rows = self._fresh_rows, None
        self._sq_norm = None
        shapes = [(("act", "q", "idle"), N), (("lam", "msum"), 2 * R)]
        shapes += [(PAIR_ARRAYS, R)]
        for group, rows in shapes:
            for name in group:
                a = getattr(self, name)
                width = (self.q_e if name in PAIR_ARRAYS else self.act).shape[1]
                if a.ndim != 2 or a.shape[0] != rows or a.shape[1] != width:
                    raise ValueError(
                        f"inconsistent GDMM state: the array {name!r} has shape {a.shape}"
                    )
        for name, size in (*((r, R) for r in ROW_ARRAYS), ("blocked", N)):
            if getattr(self, name).shape != (size,):
                raise ValueError(
                    f"inconsistent GDMM state: the array {name!r} has shape "
                    f"{getattr(self, name).shape}"
                )
        start, count, room = self.row_start, self.row_count, self.row_room
        order = np.argsort(start, kind="stable")
        ends = start[order] + room[order]
        if (
            int(self.pool_used) > R
            or (start < 0).any()
            or (count < 0).any()
            or (count > room).any()
            or (start[order][1:] < ends[:-1]).any()
            or ((self.blocked != 0) & (self.blocked != 1)).any()
        ):
            raise ValueError("inconsistent GDMM state: the pool of active edges is out of range")
        if fresh is not None and not all(np.array_equal(x, y) for x, y in zip(self._rows(), fresh)):
            raise ValueError(
                "inconsistent GDMM state: the edges differ from the data's (saved with "
                "another lazy_edges setting?)"
            )
        used_rows = self._used_rows()
        example = np.repeat(np.arange(n), count)
        width = np.diff(self.layout.node_offsets)[example]
        u, v = self.row_u[used_rows], self.row_v[used_rows]
        if ((u < 0) | (v < 0) | (u >= width) | (v >= width)).any():
            raise ValueError("inconsistent GDMM state: an active edge's nodes are out of range")
        if self.lazy:
            sizes = self._graph_sizes(self.blocks.kernel)[:, 1].copy()
            bad = self._kern.check_rows(self.blocks.kernel, self.layout, self._rows(), sizes)
            if bad >= 0:
                raise ValueError(f"inconsistent GDMM state: row {bad} names a wrong edge")
        cap, pcap = self.act.shape[1], self.q_e.shape[1]
        used = np.arange(cap) < self.n_act[:, None]
        n_pair = self.n_pair[used_rows]
        live = np.arange(pcap) < n_pair[:, None]
        states = np.broadcast_to(self.layout.n_states[:, None], used.shape)
        if (
            self.n_act.min(initial=1) < 1
            or self.n_act.max(initial=1) > cap
            or n_pair.min(initial=1) < 1
            or n_pair.max(initial=1) > pcap
            or (used & ((self.act < 0) | (self.act >= states))).any()
            or not np.array_equal(self.act[:, 0], self.gold)
        ):
            raise ValueError("inconsistent GDMM state: active-set counts or states out of range")
        # a node's active states are distinct (the kernels index per-state buffers by slot)
        held = np.sort(np.where(used, self.act, -1 - np.arange(cap)), axis=1)
        if (held[:, 1:] == held[:, :-1]).any():
            raise ValueError("inconsistent GDMM state: a node lists an active state twice")
        n0 = self.layout.node_offsets[example]
        for side, name in ((u, "pair_a"), (v, "pair_b")):
            slots = getattr(self, name)[used_rows]
            bound = self.n_act[n0 + side][:, None]
            if (live & ((slots < 0) | (slots >= bound))).any():
                raise ValueError(f"inconsistent GDMM state: {name!r} names an inactive slot")
        check_distributions("q", self.q, used)
        check_distributions("q_e", self.q_e[used_rows], live)
        if self.lazy:
            bad = self._kern.check_inactive_edges(
                self.blocks.kernel, self.layout, self._rows(), self._sets()
            )
            if bad >= 0:
                raise ValueError(
                    f"inconsistent GDMM state: example {bad} has an inactive edge that cannot "
                    "stand at the fixed table (its gold pair has no null state, or its nodes' "
                    "masses add up to more than 1)"
                )
        expected = np.zeros_like(self.w)
        self._kern.rebuild_weights(
            self.blocks.kernel,
            self.layout,
            self._rows(),
            self._sets(),
            self._pairs(),
            self.C,
            expected,
        )
        check_agrees("'w', 'q' and 'q_e'", self.w, expected, 1.0 + self.C * len(self.gold))
        self._check_proximal_state()
        self._prepare()

    _fresh_rows = None

    @property
    def pool_used(self):
        """The pool's rows up to the end of its last room (a room that grows moves to the
        end of the pool, in the kernels or in :meth:`_grow_rows`)."""
        ends = self.row_start + self.row_room
        return int(ends.max()) if len(ends) else 0

    @pool_used.setter
    def pool_used(self, value):
        """Nothing to set: a restored state's rooms imply its count."""

    # -- the pass -----------------------------------------------------------------------------
    #: the kept node norms of the slots' states (``ActiveSets.sq_norm``), made again, all
    #: unknown, when the slot arrays are made (start, a restored state) or widened
    _sq_norm = None

    def _sets(self):
        rows = len(self.q) if factors._has_node_norms(self.kernel_class) else 0
        if self._sq_norm is None or self._sq_norm.shape != (rows, self.q.shape[1]):
            self._sq_norm = np.full((rows, self.q.shape[1]), -1.0)
        return kern.ActiveSets(
            self.act,
            self.n_act,
            self.q,
            self.idle,
            self.lam,
            self.msum,
            self.blocked,
            self._sq_norm,
        )

    def _pairs(self):
        return kern.PairSupport(self.pair_a, self.pair_b, self.q_e, self.n_pair)

    def _rows(self):
        return kern.Rows(
            self.row_start, self.row_count, self.row_room, self.row_u, self.row_v, self.row_edge
        )

    def _used_rows(self):
        """The pool's rows that hold an active edge, in example order."""
        count = self.row_count
        offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
        return np.repeat(self.row_start, count) + offset

    def _unused_rows(self):
        """A mask of the pool's rows that hold no active edge."""
        mask = np.ones(len(self.row_u), dtype=np.bool_)
        mask[self._used_rows()] = False
        return mask

    def _grow(self, need):
        grown = {}
        if need & self._kern.NEED_SLOTS:
            cap = int(min(self.layout.max_states, 2 * self.act.shape[1]))
            grown.update({name: widen_columns(getattr(self, name), cap) for name in SLOT_ARRAYS})
        if need & self._kern.NEED_PAIRS:
            cap = int(min(self.layout.max_states**2, 2 * self.q_e.shape[1]))
            grown.update({name: widen_columns(getattr(self, name), cap) for name in PAIR_ARRAYS})
        self.__dict__.update(grown)  # one update: an interrupt leaves old or new widths

    def _pool_arrays(self):
        """The pool's arrays with their rows per pool row (lam and msum: two)."""
        return {name: getattr(self, name) for name in ROW_ARRAYS + PAIR_ARRAYS + ("lam", "msum")}

    def _grow_rows(self, i, rows):
        """Room for ``rows`` active edges of example i: the pool doubles (or more) when it
        lacks the rows, then the room moves to its end (the kernels' ``_move_room``)."""
        new = max(2 * int(self.row_room[i]), int(rows))
        arrays = self._pool_arrays()
        if self.pool_used + new > len(self.row_u):
            size = max(self.pool_used + new, 2 * len(self.row_u))
            arrays = {name: _resized(a, size, name) for name, a in arrays.items()}
        start, room = self.row_start.copy(), self.row_room.copy()
        moved = self._kern._move_room(
            kern.Rows(start, self.row_count, room, *(arrays[n] for n in ROW_ARRAYS[:3])),
            self._sets()._replace(lam=arrays["lam"], msum=arrays["msum"]),
            kern.PairSupport(*(arrays[n] for n in PAIR_ARRAYS), arrays["n_pair"]),
            i,
            new,
        )
        if not moved:
            raise RuntimeError("GDMM: _move_room refused a pool sized for it")
        # one update: an interrupt leaves the old pool or the new one
        self.__dict__.update(arrays, row_start=start, row_room=room)

    def _compact_pool(self):
        """Every example's room one after the other in a fresh pool, without the rows grown
        examples left behind (the trajectory does not depend on where the rooms are)."""
        room, count = self.row_room, self.row_count
        start = (np.cumsum(room) - room).astype(np.int64)
        if int(self.pool_used) == int(room.sum()) and np.array_equal(start, self.row_start):
            return
        src = self._used_rows()
        offset = np.arange(len(src)) - np.repeat(np.cumsum(count) - count, count)
        dst = np.repeat(start, count) + offset
        size = int(room.sum())
        arrays = {}
        for name, a in self._pool_arrays().items():
            new = _resized(a[:0], size, name)
            if name in ("lam", "msum"):
                new[np.repeat(2 * dst, 2) + np.tile([0, 1], len(dst))] = a[
                    np.repeat(2 * src, 2) + np.tile([0, 1], len(src))
                ]
            else:
                new[dst] = a[src]
            arrays[name] = new
        self.__dict__.update(arrays, row_start=start)

    def _one_pass(self, order, chunks):
        calls_before = int(self.counters[:2].sum())
        seed = int(self.rng.integers(2**62))  # the key of the pass's factor orders
        self._centre()  # the proximal scheme's centre moves to the last iterate
        self._set_penalties()
        avg_weight = 0.5 * self.passes * (self.passes + 1.0) if self.averaging else 0.0
        per_pass = avg_weight != 0.0 and self._pass_level_average()
        start = self.w.copy() if per_pass else None  # u at the start (w is small here)
        try:
            self._pass_calls(order, chunks, seed, 0.0 if per_pass else avg_weight)
        finally:  # also after a Ctrl-C part-way: R + A Δu, one compiled call (u = self.w)
            if per_pass:
                _add_change(self.R, avg_weight, self.w, start)
        if int(self.pool_used) > 2 * int(self.row_room.sum()):
            self._compact_pool()
        self.blocks.raise_status()
        l1, lagrange, penalty = self._kern.consistency(self.layout, self._rows(), self._sets())
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

    #: the lazy average once per pass: None by the size of w
    #: (``PASS_AVERAGE_WEIGHTS_PER_NODE``), True or False always
    pass_level_average = None

    def _pass_level_average(self):
        """Whether R follows the pass's net change of u, ``R += A_{m−1} (u_end − u_start)``
        (A_{m−1} is the same for the whole pass: the kernels' ``R += A_{m−1} Δu`` at every
        step sums to it, up to rounding), rather than every change within the kernels: when
        ``w.size ≤ PASS_AVERAGE_WEIGHTS_PER_NODE · N`` for the N node factors of the data."""
        if self.pass_level_average is not None:
            return bool(self.pass_level_average)
        nodes = int(self.layout.node_offsets[-1])
        return self.w.size <= PASS_AVERAGE_WEIGHTS_PER_NODE * nodes

    def _pass_calls(self, order, chunks, seed, avg_weight):
        """The kernel calls of a pass (``avg_weight``: the kernels' ``Weights.avg_weight``);
        u = self.w again once they are done or stopped (the proximal scheme recovers it)."""
        settings = kern.Settings(
            float(self.C),
            float(self.rho),
            float(self.eta),
            self.steps,
            self.sweeps,
            self.shrink_after,
            self._proximal_scale(),
            seed,
        )
        k = self.blocks.kernel
        parts = self._pass_parts(order, chunks)
        try:
            for part in parts:
                pos = 0
                while pos < len(part):
                    weights = kern.Weights(self._scoring_point(), self.R, float(avg_weight))
                    pos, need, rows = self._kern.factor_pass(
                        k,
                        self.layout,
                        self._rows(),
                        weights,
                        self._sets(),
                        self._pairs(),
                        settings,
                        part,
                        pos,
                        self.counters,
                    )
                    if need & self._kern.NEED_ROWS:
                        self._grow_rows(int(part[pos]), rows)
                    elif need:
                        self._grow(need)
        finally:
            parts.close()  # the proximal scheme's u follows x here (_pass_parts)

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
            rows = self._used_rows()
            live = np.arange(self.q_e.shape[1]) < self.n_pair[rows, None]
            gold = live & (self.pair_a[rows] == 0) & (self.pair_b[rows] == 0)
            missing = rows[~gold.any(axis=1)]
            if len(missing) and (self.n_pair[missing] >= self.q_e.shape[1]).any():
                self._grow(self._kern.NEED_PAIRS)
            at = self.n_pair[missing]
            self.pair_a[missing, at] = 0
            self.pair_b[missing, at] = 0
            self.q_e[missing, at] = 0.0
            self.n_pair[missing] += 1
            live = np.arange(self.q_e.shape[1]) < self.n_pair[rows, None]
            position = np.argmax(live & (self.pair_a[rows] == 0) & (self.pair_b[rows] == 0), axis=1)
            ends = np.repeat(2 * rows, 2) + np.tile([0, 1], len(rows))
            self.q *= t
            self.q[:, 0] += 1.0 - t
            self.msum[ends] *= t
            self.msum[ends, 0] += 1.0 - t
            self.q_e[rows] *= t
            self.q_e[rows, position] += 1.0 - t
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
            self.blocks.kernel, self.layout, self._rows(), self._sets(), self._pairs(), self.C, w
        )
        return w

    def diagnostics(self, check):
        extra = dict(self._last_pass)
        extra["active_states"] = float(self.n_act.mean())
        if check:  # states with mass per node
            with_mass = (self.q > 0.0) & (np.arange(self.q.shape[1]) < self.n_act[:, None])
            extra["states_with_mass"] = float(with_mass.sum() / max(len(self.n_act), 1))
        used = self._used_rows()
        extra["active_pairs"] = float(self.n_pair[used].mean()) if len(used) else 0.0
        extra["active_edges"] = float(len(used))
        extra["edges_activated"] = float(self.counters[4])
        extra.update(self._proximal_figures())
        extra["states_added"], extra["states_dropped"] = (float(c) for c in self.counters[2:4])
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


@njit(cache=True)
def _add_change(y, a, x, x0):
    """``y ← y + a (x − x0)`` in place (one call: a signal lands before or after it)."""
    for t in range(y.size):
        y[t] += a * (x[t] - x0[t])


def _rooms_for(counts):
    """An example's room in pool rows: its active edges and half as many again, at least
    8 more."""
    counts = np.asarray(counts, dtype=np.int64)
    return counts + np.maximum(8, counts // 2)


def _resized(a, rows, name):
    """``a`` with room for ``rows`` pool rows (zero beyond its own; lam and msum have two
    per row)."""
    size = 2 * rows if name in ("lam", "msum") else rows
    out = np.zeros((size,) + a.shape[1:], dtype=a.dtype)
    out[: min(len(a), size)] = a[:size]
    return out


#: GDMM over factors, by its descriptive name
FactorGDMM = GDMM

__all__ = ["GDMM", "FactorGDMM", "check_factor_model"]
