"""The factor-level kernel interface: what a model registers to be trained by GDMM
(:class:`~dualstruct.solvers.FactorGDMM`).

GDMM works on the factors of every example: nodes ``j`` with ``S_j`` states each and edges
``e = (u, v)`` with a table over ``S_u × S_v`` state pairs. The score of a labelling is

    ⟨w, φ(x_i, y)⟩ = Σ_j θ_j(y_j) + Σ_e θ_e(y_u, y_v),   θ_f(y_f) = ⟨w, φ_f(y_f)⟩

and the loss is decomposable over the nodes, ``δ(ȳ, y) = Σ_j δ_j(y_j)`` with ``δ_j(ȳ_j) = 0``
(a weighted Hamming loss). A model registers, for its kernel class (the ``NamedTuple`` its
``block_data`` holds), numba implementations of the generic functions below with
:func:`implements`, exactly as the block kernels register :mod:`dualstruct.models.base`'s
(``j`` and ``e`` count from 0 within example ``i``):

    factor_counts(k, i)                  (number of nodes, number of edges) of example i
    node_info(k, i, j)                   (S_j, the gold state ȳ_j)
    edge_nodes(k, i, e)                  (u, v): the edge's nodes; its table is [y_u, y_v]
    node_score(k, i, w, j, a)            θ_j(a) = ⟨w, φ_j(a)⟩
    edge_score(k, i, w, e, a, b)         θ_e(a, b)
    node_loss(k, i, j, a)                δ_j(a) ≥ 0, zero at the gold state
    add_node(k, i, j, a, c, w)           w += c φ_j(a)
    add_edge(k, i, e, a, b, c, w)        w += c φ_e(a, b)
    node_sq_distance(k, i, j, a, b)      ‖φ_j(a) − φ_j(b)‖²
    edge_sq_distance(k, i, e, a, b, c, d)  ‖φ_e(a, b) − φ_e(c, d)‖²

A marginal q_j (q_e) adds ``−C Σ_a q_j(a) φ_j(a)`` into ``w(q) = C Σ (φ(ȳ) − E_q φ)`` through
``add_node`` (``add_edge``), and the line searches read the squared norms of differences.
A model without edges (every ``factor_counts`` has 0 edges, the multi-class model) need not
register the four edge functions; the solver refuses data with edges when they are missing.

Two more are the factorwise maximization oracles (FMOs) GDMM calls once per factor step,
given the messages ``μ`` (dense over the states, zero outside the active states):

    node_oracle(k, i, w, j, C, act, n_act, mu)
        (a, g): the state minimizing ``g(a) = −C (θ_j(a) + δ_j(a)) − mu[a]``
    edge_oracle(k, i, w, e, C, act_u, n_u, mu_u, act_v, n_v, mu_v)
        (a, b, g): the pair minimizing ``−C θ_e(a, b) + mu_u[a] + mu_v[b]``

Their defaults search every state (pair) with ``node_score`` (``edge_score``): right for
dense weights and small tables. ``act[:n_act]`` lists the states whose message may be
non-zero, so an oracle only has to settle the active states and the best inactive one —
which is where the chain's and the multi-label model's sublinear oracles plug in: the
chain's walk over a sparse support's rows answers "the best inactive state of a unigram
factor" as ``node_oracle``, its four-case search over max-trees
of the transition table (and the multi-label model's ordered map of the (1, 1) scores) is
an ``edge_oracle``, with the trees kept in the kernel and brought up to date by
``add_edge``. A model that keeps such structures over w registers

    prepare_weights(k, w)                called before a run of factor steps on w (which
                                         may have changed since): rebuild them; default none

and must count on it: GDMM changes w between its calls only through ``add_node`` and
``add_edge``, and calls ``prepare_weights`` after any other change (a code calling the
factor functions itself must do the same). With lazy edges GDMM also calls it every 64
examples, to tighten bounds such as ``edge_gain_bound``'s: it must then leave w as it is.

A model that scores all of an example's nodes faster at once than one at a time (the
multi-label model sweeps the example's features once for every label) registers

    node_scores(k, i, w, out)            out[j, a] = θ_j(a) for every node and state
                                         (default: node_score for each)

Two more save GDMM a call per state where a model answers for several states at once
(the chain reads its node oracle's scores and moves w in one sweep of the token's features):

    node_values(k, i, w, j, states, n, out)
                                         out[s] = θ_j(a) + δ_j(a), a = states[s], s < n
                                         (default: node_score and node_loss for each)
    add_nodes(k, i, j, states, coefs, n, scale, w)
                                         w += scale Σ_{s<n} coefs[s] φ_j(states[s])
                                         (default: add_node for each, in order)

A model whose node features of different states are orthogonal (label blocks, as the
chain's) registers

    node_sq_norm(k, i, j, a)             ‖φ_j(a)‖² (default −1: not orthogonal)
    node_sq_norms(k, i, j, states, n, out)
                                         out[s] = ‖φ_j(states[s])‖², s < n (default:
                                         node_sq_norm for each)

and GDMM minimizes each node factor exactly over its active states and the oracle's (the
block's Hessian is then diagonal) instead of taking pairwise steps. It asks for an active
state's norm once and keeps it while the state stays active.

**Lazy edges.** A model whose examples have many edges that carry no information (the
multi-label model's full label graph) registers

    null_state(k, i, j)                  the node's null state (−1: none): every edge
                                         feature is zero when one of its nodes is there
    edge_between(k, i, u, v)             the edge joining nodes u and v (−1: none);
                                         default a scan of the example's edges
    best_inactive_edge(k, i, w, C, gain, outside, active, floor)
                                         (e, g): the edge e of example i between two
                                         nodes u, v with ``outside`` non-zero, not active
                                         (``active[e] < 0``), that maximizes
                                         ``g = C θ_e(a, b) + gain[u, a] + gain[v, b]`` over
                                         non-null states a, b, if g > floor; else
                                         (−1, floor). Default: a scan of every edge; the
                                         multi-label model searches a max tree of its
                                         (1, 1) weights instead
    edge_gain_bound(k, i, w, j)          an upper bound (rounding aside) of
                                         ``Σ_e max(0, max θ_e(a, b))`` over node j's edges
                                         e and their pairs of non-null states a, b: GDMM
                                         skips the nodes without mass whose edges cannot
                                         gain enough. Default ∞ (no bound); the
                                         multi-label model keeps per label the sum of its
                                         positive (1, 1) weights

GDMM then keeps only the edges that carry information: an inactive edge stands at the
consistent table that sends the mass of u off its null state with v's null state and vice
versa (a distribution while the two nodes' masses off null add up to at most 1), which adds
nothing to w or to the augmented Lagrangian. Edges whose gold pair has no null state start
active; an edge becomes active when a node step would cross that bound, or when moving
mass onto its non-null pairs gains (:mod:`dualstruct.solvers._factor_gdmm_kernels`).

Exactness: GDMM keeps the factor marginals locally consistent (the local polytope). On
forests that is the marginal polytope, and GDMM trains the structural SVM itself; on loopy
graphs it trains its relaxation over the local polytope, as the ``"lp"`` oracle of the
graph models does.

Examples
--------
A model with one node per example and two states scored by one weight each (the user guide
"Your own models" registers a complete one):

>>> from typing import NamedTuple
>>> import numpy as np
>>> from dualstruct.models import factors
>>> class TwoStates(NamedTuple):
...     labels: np.ndarray
...     label_offsets: np.ndarray
>>> @factors.implements(factors.node_score, TwoStates)
... def _score(k, i, w, j, a):
...     return w[a]
>>> factors.missing_functions(TwoStates)[:3]
('factor_counts', 'node_info', 'node_loss')
"""

from __future__ import annotations

import numpy as np

from . import interface
from .interface import _REGISTERED, _register_default


# -- the generic functions (numba dispatches on the kernel's class) ----------------------------
def factor_counts(k, i):
    """``(number of nodes, number of edges)`` of example ``i``."""
    raise NotImplementedError


def node_info(k, i, j):
    """``(number of states, gold state)`` of node ``j`` of example ``i``."""
    raise NotImplementedError


def edge_nodes(k, i, e):
    """``(u, v)``: the nodes of edge ``e`` of example ``i`` (its table is ``[y_u, y_v]``)."""
    raise NotImplementedError


def node_score(k, i, w, j, a):
    """``θ_j(a) = ⟨w, φ_j(a)⟩``."""
    raise NotImplementedError


def edge_score(k, i, w, e, a, b):
    """``θ_e(a, b) = ⟨w, φ_e(a, b)⟩``."""
    raise NotImplementedError


def node_loss(k, i, j, a):
    """``δ_j(a)``: the loss of state ``a`` at node ``j`` (0 at the gold state)."""
    raise NotImplementedError


def add_node(k, i, j, a, c, w):
    """``w += c φ_j(a)``."""
    raise NotImplementedError


def add_edge(k, i, e, a, b, c, w):
    """``w += c φ_e(a, b)``."""
    raise NotImplementedError


def node_sq_distance(k, i, j, a, b):
    """``‖φ_j(a) − φ_j(b)‖²``."""
    raise NotImplementedError


def edge_sq_distance(k, i, e, a, b, c, d):
    """``‖φ_e(a, b) − φ_e(c, d)‖²``."""
    raise NotImplementedError


def node_oracle(k, i, w, j, C, act, n_act, mu):
    """``(a, g)``: the state minimizing ``−C (θ_j(a) + δ_j(a)) − mu[a]``."""
    raise NotImplementedError


def edge_oracle(k, i, w, e, C, act_u, n_u, mu_u, act_v, n_v, mu_v):
    """``(a, b, g)``: the pair minimizing ``−C θ_e(a, b) + mu_u[a] + mu_v[b]``."""
    raise NotImplementedError


def node_scores(k, i, w, out):
    """``out[j, a] = θ_j(a)`` for every node ``j`` and state ``a < S_j`` of example ``i``:
    ``out`` is scratch of at least that shape holding earlier values, so write every such
    entry and read none."""
    raise NotImplementedError


def node_values(k, i, w, j, states, n, out):
    """``out[s] = θ_j(a) + δ_j(a)`` for ``a = states[s]``, ``s < n``: the loss-augmented
    scores of some of node ``j``'s states."""
    raise NotImplementedError


def add_nodes(k, i, j, states, coefs, n, scale, w):
    """``w += scale · Σ_{s<n} coefs[s] φ_j(states[s])``, as ``add_node`` with
    ``c = coefs[s] · scale`` for each ``s`` in order."""
    raise NotImplementedError


def node_sq_norm(k, i, j, a):
    """``‖φ_j(a)‖²`` where the node's features of different states are orthogonal (GDMM then
    minimizes a node factor exactly over its active set); −1: not orthogonal (the default)."""
    raise NotImplementedError


def node_sq_norms(k, i, j, states, n, out):
    """``out[s] = ‖φ_j(a)‖²`` for ``a = states[s]``, ``s < n``: exactly ``node_sq_norm``'s
    values (−1 included), read only where the model registers ``node_sq_norm``."""
    raise NotImplementedError


def prepare_weights(k, w):
    """Called before a run of factor steps on ``w``, which may have changed since (a model
    that keeps structures over w, as the chain's transition search, rebuilds them)."""
    raise NotImplementedError


def null_state(k, i, j):
    """The null state of node ``j`` of example ``i``: every feature of its edges is zero
    when the node is there (−1: none, the node's edges are always active)."""
    raise NotImplementedError


def edge_between(k, i, u, v):
    """The edge of example ``i`` that joins nodes ``u`` and ``v`` (either way round), −1 if
    none."""
    raise NotImplementedError


def best_inactive_edge(k, i, w, C, gain, outside, active, floor):
    """``(e, g)``: the inactive edge between two nodes marked ``outside`` whose best pair of
    non-null states maximizes ``C θ_e(a, b) + gain[u, a] + gain[v, b]`` above ``floor``
    (−1, floor: none)."""
    raise NotImplementedError


def edge_gain_bound(k, i, w, j):
    """An upper bound (rounding aside) of ``Σ_e max(0, max θ_e(a, b))`` over the edges e of
    node ``j`` of example ``i`` and their pairs of non-null states; ∞: none."""
    raise NotImplementedError


NODE_FUNCTIONS = (factor_counts, node_info, node_loss, node_score, add_node, node_sq_distance)
EDGE_FUNCTIONS = (edge_nodes, edge_score, add_edge, edge_sq_distance)
ORACLES = (node_oracle, edge_oracle)
LAZY_FUNCTIONS = (null_state, edge_between, best_inactive_edge, edge_gain_bound)
FACTOR_FUNCTIONS = (
    NODE_FUNCTIONS
    + EDGE_FUNCTIONS
    + ORACLES
    + (prepare_weights, node_sq_norm, node_sq_norms, node_scores, node_values, add_nodes)
    + LAZY_FUNCTIONS
)

interface.add_generic_functions(FACTOR_FUNCTIONS)  # one registry with the kernel interface's


def implements(generic, kernel_class):
    """Register the decorated function as ``generic``'s numba implementation for kernels of
    ``kernel_class`` (a ``NamedTuple``), as :func:`dualstruct.models.base.implements` does
    for the block kernels.

    GDMM calls the factor functions millions of times a pass, so they (and GDMM's steps)
    are compiled without numba's reference counting, which would count every array of the
    kernel up and down on each call: they read and write the kernel's arrays and ``w`` but
    create no arrays, not even temporaries such as ``x ** 2`` (numba stops with "NRT
    required but not enabled" at the line that does). Keep scratch arrays in the kernel.

    Parameters
    ----------
    generic : function
        One of this module's generic functions (``node_score``, ``add_edge``, …).
    kernel_class : type
        The kernel's ``NamedTuple`` class.

    Returns
    -------
    callable
        A decorator; it returns the plain Python function it registers.

    Examples
    --------
    >>> from typing import NamedTuple
    >>> import numpy as np
    >>> from dualstruct.models import factors
    >>> class OneNode(NamedTuple):
    ...     labels: np.ndarray
    >>> @factors.implements(factors.factor_counts, OneNode)
    ... def _counts(k, i):
    ...     return 1, 0
    >>> "factor_counts" in factors.missing_functions(OneNode)
    False
    """
    if generic not in FACTOR_FUNCTIONS:
        raise ValueError(f"{generic!r} is not a function of the factor interface")
    return interface.implements(generic, kernel_class, interface.NO_REFCOUNT)


#: model class -> its kernel class (the built-in models; users may set ``kernel_class``)
_MODELS: dict = {}


def register_model(model_class, kernel_class):
    """Record that ``model_class``'s block data holds kernels of ``kernel_class`` (for
    models that do not say so with a class attribute ``kernel_class``).

    Parameters
    ----------
    model_class, kernel_class : type

    Returns
    -------
    type
        ``model_class``.

    Examples
    --------
    >>> from typing import NamedTuple
    >>> from dualstruct.models import KernelModel, factors
    >>> class K(NamedTuple):
    ...     pass
    >>> class M(KernelModel):
    ...     pass
    >>> factors.kernel_class_of(factors.register_model(M, K)()) is K
    True
    """
    _MODELS[model_class] = kernel_class
    return model_class


def kernel_class_of(model):
    """The kernel class of ``model``: its attribute ``kernel_class``, else the one
    registered for its class or a base class (:func:`register_model`); None if neither.

    Parameters
    ----------
    model : object
        A model, or a model class.

    Returns
    -------
    type or None

    Examples
    --------
    >>> from dualstruct.models import GraphCRF, factors
    >>> factors.kernel_class_of(GraphCRF(2, 3)).__name__
    'GraphKernel'
    """
    kclass = getattr(model, "kernel_class", None)
    if isinstance(kclass, type):
        return kclass
    for cls in (model if isinstance(model, type) else type(model)).__mro__:
        if cls in _MODELS:
            return _MODELS[cls]
    return None


def missing_functions(kernel_class, edges=True) -> tuple:
    """The names of the factor functions ``kernel_class`` has not registered and has no
    default for (the edge functions only when ``edges``).

    Parameters
    ----------
    kernel_class : type
        A kernel ``NamedTuple`` class.
    edges : bool, default True
        Whether the model's examples have edges.

    Returns
    -------
    tuple of str

    Examples
    --------
    >>> from dualstruct.models import factors
    >>> from dualstruct.models.multiclass.kernels import MultiClassKernel
    >>> import dualstruct.models.multiclass_factors  # registers the multi-class model's
    >>> factors.missing_functions(MultiClassKernel, edges=False)
    ()
    """
    needed = NODE_FUNCTIONS + (EDGE_FUNCTIONS if edges else ())
    return tuple(f.__name__ for f in needed if kernel_class not in _REGISTERED[f])


def _default_node_oracle(k, i, w, j, C, act, n_act, mu):
    S = node_info(k, i, j)[0]
    best, arg = np.inf, 0
    for a in range(S):
        g = -C * (node_score(k, i, w, j, a) + node_loss(k, i, j, a)) - mu[a]
        if g < best:
            best, arg = g, a
    return arg, best


def _default_edge_oracle(k, i, w, e, C, act_u, n_u, mu_u, act_v, n_v, mu_v):
    u, v = edge_nodes(k, i, e)
    Su = node_info(k, i, u)[0]
    Sv = node_info(k, i, v)[0]
    best, arg_a, arg_b = np.inf, 0, 0
    for a in range(Su):
        for b in range(Sv):
            g = -C * edge_score(k, i, w, e, a, b) + mu_u[a] + mu_v[b]
            if g < best:
                best, arg_a, arg_b = g, a, b
    return arg_a, arg_b, best


def _no_edges(k, i, e):
    return 0, 0


def _no_edge_score(k, i, w, e, a, b):
    return 0.0


def _no_add_edge(k, i, e, a, b, c, w):
    return None


def _no_edge_distance(k, i, e, a, b, c, d):
    return 0.0


def _each_node_score(k, i, w, out):
    for j in range(factor_counts(k, i)[0]):
        for a in range(node_info(k, i, j)[0]):
            out[j, a] = node_score(k, i, w, j, a)


def _each_node_value(k, i, w, j, states, n, out):
    for s in range(n):
        a = states[s]
        out[s] = node_score(k, i, w, j, a) + node_loss(k, i, j, a)


def _each_add_node(k, i, j, states, coefs, n, scale, w):
    for s in range(n):
        add_node(k, i, j, states[s], coefs[s] * scale, w)


def _each_node_sq_norm(k, i, j, states, n, out):
    for s in range(n):
        out[s] = node_sq_norm(k, i, j, states[s])


def _no_preparation(k, w):
    return None


def _not_orthogonal(k, i, j, a):
    return -1.0


def _no_null_state(k, i, j):
    return -1


def _scan_edges(k, i, u, v):
    for e in range(factor_counts(k, i)[1]):
        a, b = edge_nodes(k, i, e)
        if (a == u and b == v) or (a == v and b == u):
            return e
    return -1


def _scan_inactive_edges(k, i, w, C, gain, outside, active, floor):
    best, arg = floor, -1
    for e in range(factor_counts(k, i)[1]):
        u, v = edge_nodes(k, i, e)
        if active[e] >= 0 or not (outside[u] and outside[v]):
            continue
        zu, zv = null_state(k, i, u), null_state(k, i, v)
        for a in range(node_info(k, i, u)[0]):
            for b in range(node_info(k, i, v)[0]):
                if a != zu and b != zv:
                    g = C * edge_score(k, i, w, e, a, b) + gain[u, a] + gain[v, b]
                    if g > best:
                        best, arg = g, e
    return arg, best


def _no_edge_gain_bound(k, i, w, j):
    return np.inf


def _has_node_norms(kernel_class) -> bool:
    """Whether ``kernel_class`` registered :func:`node_sq_norm` (GDMM's exact node blocks,
    which keep each active state's norm)."""
    return kernel_class in _REGISTERED[node_sq_norm]


def _has_null_states(kernel_class) -> bool:
    """Whether ``kernel_class`` registered :func:`null_state` (GDMM's lazy edges)."""
    return kernel_class in _REGISTERED[null_state]


_register_default(prepare_weights, _no_preparation, interface.NO_REFCOUNT)
_register_default(node_sq_norm, _not_orthogonal, interface.NO_REFCOUNT)
_register_default(node_sq_norms, _each_node_sq_norm, interface.NO_REFCOUNT)
_register_default(node_scores, _each_node_score, interface.NO_REFCOUNT)
_register_default(node_values, _each_node_value, interface.NO_REFCOUNT)
_register_default(add_nodes, _each_add_node, interface.NO_REFCOUNT)
_register_default(null_state, _no_null_state, interface.NO_REFCOUNT)
_register_default(edge_between, _scan_edges, interface.NO_REFCOUNT)
_register_default(best_inactive_edge, _scan_inactive_edges, interface.NO_REFCOUNT)
_register_default(edge_gain_bound, _no_edge_gain_bound, interface.NO_REFCOUNT)
_register_default(node_oracle, _default_node_oracle, interface.NO_REFCOUNT)
_register_default(edge_oracle, _default_edge_oracle, interface.NO_REFCOUNT)
# a model without edges: never called (the solver refuses edges without the functions)
_register_default(edge_nodes, _no_edges, interface.NO_REFCOUNT)
_register_default(edge_score, _no_edge_score, interface.NO_REFCOUNT)
_register_default(add_edge, _no_add_edge, interface.NO_REFCOUNT)
_register_default(edge_sq_distance, _no_edge_distance, interface.NO_REFCOUNT)
