"""MAP inference on one pairwise graph, for custom graph models: checked front ends of the
kernels of :mod:`dualstruct.inference.graph` (which write into a preallocated labelling and
trust their inputs).

A labelling ``y`` of the ``n`` nodes scores ``s(y) = Σ_u theta[u, y_u] + Σ_e pot[e, y_u, y_v]``
for node potentials ``theta`` (n × K), edges ``edges`` (E × 2, node pairs (u, v)) and edge
potentials ``pot`` (E × K × K, indexed by the labels of u and of v).
"""

from __future__ import annotations

import numbers

import numpy as np

from . import graph as _kernels

#: the most labellings :func:`enumerate_map` enumerates
MAX_ENUMERATED = 2**22
METHODS = ("auto", "forest", "enumerate", "lp")


def _potentials(theta, edges, pot):
    """``(theta, edges, pot)`` as contiguous float64 / int64 arrays, checked."""
    theta = np.asarray(theta)
    if theta.dtype.kind not in "biuf" or theta.ndim != 2 or 0 in theta.shape:
        raise ValueError(f"theta must be a non-empty (n, K) array of numbers, got {theta.shape}")
    theta = np.ascontiguousarray(theta, dtype=np.float64)
    n, K = theta.shape
    edges = np.asarray(edges)
    if edges.size == 0:
        edges = np.zeros((0, 2), dtype=np.int64)
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.dtype.kind not in "iu":
        raise ValueError(f"edges must be an (E, 2) integer array, got shape {edges.shape}")
    if len(edges) and (edges.min() < 0 or edges.max() >= n):
        raise ValueError(f"edges must name nodes 0 … {n - 1}")
    if np.any(edges[:, 0] == edges[:, 1]):
        raise ValueError("an edge joins a node to itself")
    edges = np.ascontiguousarray(edges, dtype=np.int64)
    pot = np.asarray(pot)
    if pot.dtype.kind not in "biuf" or pot.shape != (len(edges), K, K):
        raise ValueError(f"pot must be an ({len(edges)}, {K}, {K}) array, got {pot.shape}")
    pot = np.ascontiguousarray(pot, dtype=np.float64)
    if not (np.all(np.isfinite(theta)) and np.all(np.isfinite(pot))):
        raise ValueError("theta and pot must be finite")
    return theta, edges, pot


def is_forest(n_nodes, edges):
    """Whether the graph has no cycle.

    Parameters
    ----------
    n_nodes : int
        The number of nodes.
    edges : (E, 2) int array
        Node pairs, in ``0 … n_nodes − 1``.

    Returns
    -------
    bool

    Examples
    --------
    >>> from dualstruct.inference import is_forest
    >>> is_forest(3, [[0, 1], [1, 2]]), is_forest(3, [[0, 1], [1, 2], [2, 0]])
    (True, False)
    """
    if isinstance(n_nodes, bool) or not isinstance(n_nodes, numbers.Integral) or n_nodes < 1:
        raise ValueError(f"n_nodes must be an integer >= 1, got {n_nodes!r}")
    _, edges, _ = _potentials(np.zeros((int(n_nodes), 1)), edges, np.zeros((len(edges), 1, 1)))
    return bool(_kernels.is_forest(int(n_nodes), edges))


def labelling_score(theta, edges, pot, y):
    """The score ``s(y)`` of labelling ``y``.

    Parameters
    ----------
    theta : (n, K) array
        Node potentials.
    edges : (E, 2) int array
        Node pairs.
    pot : (E, K, K) array
        Edge potentials, ``pot[e, label of u, label of v]``.
    y : (n,) int array
        Labels in ``0 … K − 1``.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.inference import labelling_score
    >>> theta = np.array([[0.0, 1.0], [2.0, 0.0]])
    >>> pot = np.array([[[0.0, 0.5], [0.0, 0.0]]])
    >>> labelling_score(theta, [[0, 1]], pot, [0, 1])     # 0 + 0 + pot[0, 0, 1]
    0.5
    """
    theta, edges, pot = _potentials(theta, edges, pot)
    y = _labelling(y, theta.shape)
    return float(_kernels.labelling_score(theta, edges, pot, y))


def _labelling(y, shape):
    n, K = shape
    y = np.asarray(y)
    if y.shape != (n,) or y.dtype.kind not in "iu" or (n and (y.min() < 0 or y.max() >= K)):
        raise ValueError(f"y must hold {n} labels in 0 … {K - 1}")
    return np.ascontiguousarray(y, dtype=np.int64)


def forest_map(theta, edges, pot):
    """Exact MAP on a forest by max-product, O(E K²).

    Parameters
    ----------
    theta : (n, K) array
        Node potentials.
    edges : (E, 2) int array
        Node pairs; the graph must have no cycle.
    pot : (E, K, K) array
        Edge potentials, ``pot[e, label of u, label of v]``.

    Returns
    -------
    y : (n,) int64 array
        A highest-scoring labelling.
    score : float
        Its score.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.inference import forest_map
    >>> theta = np.array([[1.0, 0.0], [0.0, 0.2]])
    >>> pot = np.array([[[2.0, 0.0], [0.0, 0.0]]])       # both nodes at 0: +2
    >>> y, score = forest_map(theta, [[0, 1]], pot)
    >>> y.tolist(), score
    ([0, 0], 3.0)
    """
    theta, edges, pot = _potentials(theta, edges, pot)
    if not _kernels.is_forest(theta.shape[0], edges):
        raise ValueError("forest_map needs a graph without cycles (use lp_map or enumerate_map)")
    y = np.zeros(theta.shape[0], dtype=np.int64)
    score = _kernels.forest_map(theta, edges, pot, y)
    return y, float(score)


def enumerate_map(theta, edges, pot):
    """Exact MAP by enumerating all K^n labellings (tiny graphs, at most ``MAX_ENUMERATED``).

    Parameters
    ----------
    theta : (n, K) array
        Node potentials.
    edges : (E, 2) int array
        Node pairs (any graph).
    pot : (E, K, K) array
        Edge potentials, ``pot[e, label of u, label of v]``.

    Returns
    -------
    y : (n,) int64 array
        A highest-scoring labelling.
    score : float
        Its score.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.inference import enumerate_map
    >>> theta = np.zeros((3, 2))
    >>> pot = np.tile(np.eye(2), (3, 1, 1))              # a triangle that likes agreement
    >>> y, score = enumerate_map(theta, [[0, 1], [1, 2], [2, 0]], pot)
    >>> y.tolist(), score
    ([0, 0, 0], 3.0)
    """
    theta, edges, pot = _potentials(theta, edges, pot)
    n, K = theta.shape
    if float(K) ** n > MAX_ENUMERATED:
        raise ValueError(
            f"enumerate_map: {K}^{n} labellings exceed {MAX_ENUMERATED}; use lp_map (or "
            "forest_map on a forest)"
        )
    y = np.zeros(n, dtype=np.int64)
    score = _kernels.enumerate_map(theta, edges, pot, y)
    return y, float(score)


def lp_map(theta, edges, pot, max_sweeps=200, tol=1e-9):
    """MAP by the LP relaxation over the local polytope (MPLP), with its upper bound.

    The labelling decoded from the LP's beliefs scores at most the maximum, which is at most
    the bound: when the two meet the labelling is a certified maximizer.

    Parameters
    ----------
    theta : (n, K) array
        Node potentials.
    edges : (E, 2) int array
        Node pairs (any graph).
    pot : (E, K, K) array
        Edge potentials, ``pot[e, label of u, label of v]``.
    max_sweeps : int, default 200
        Sweeps over the edges at most.
    tol : float, default 1e-9
        Stop when ``bound − score ≤ tol · max(1, |bound|)``.

    Returns
    -------
    y : (n,) int64 array
        The best labelling decoded.
    score : float
        Its score.
    bound : float
        The LP's upper bound on the maximum score.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.inference import lp_map
    >>> theta = np.array([[0.0, 0.1], [0.0, 0.0], [0.0, 0.0]])
    >>> pot = np.tile(np.eye(2), (3, 1, 1))
    >>> y, score, bound = lp_map(theta, [[0, 1], [1, 2], [2, 0]], pot)
    >>> y.tolist(), round(score, 6), bound - score < 1e-6           # certified
    ([1, 1, 1], 3.1, True)
    """
    theta, edges, pot = _potentials(theta, edges, pot)
    if isinstance(max_sweeps, bool) or not isinstance(max_sweeps, numbers.Integral):
        raise ValueError(f"max_sweeps must be an integer >= 1, got {max_sweeps!r}")
    if max_sweeps < 1:
        raise ValueError(f"max_sweeps must be an integer >= 1, got {max_sweeps!r}")
    if not isinstance(tol, numbers.Real) or not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite number >= 0, got {tol!r}")
    y = np.zeros(theta.shape[0], dtype=np.int64)
    score, bound = _kernels.lp_map(theta, edges, pot, y, int(max_sweeps), float(tol))
    return y, float(score), float(bound)


def pairwise_map(theta, edges, pot, method="auto", max_sweeps=200, tol=1e-9):
    """MAP on one pairwise graph as the graph CRFs run it: max-product on a forest,
    enumeration of small graphs, the LP relaxation otherwise.

    Parameters
    ----------
    theta : (n, K) array
        Node potentials.
    edges : (E, 2) int array
        Node pairs.
    pot : (E, K, K) array
        Edge potentials, ``pot[e, label of u, label of v]``.
    method : {"auto", "forest", "enumerate", "lp"}, default "auto"
        ``"auto"``: :func:`forest_map` on forests, :func:`enumerate_map` up to 4096
        labellings, :func:`lp_map` otherwise.
    max_sweeps, tol
        Of :func:`lp_map`.

    Returns
    -------
    y : (n,) int64 array
        The labelling.
    score : float
        Its score.
    bound : float
        An upper bound on the maximum score (``score`` itself when exact).

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.inference import pairwise_map
    >>> y, score, bound = pairwise_map(np.eye(2), [[0, 1]], np.zeros((1, 2, 2)))
    >>> y.tolist(), score == bound
    ([0, 1], True)
    """
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    theta, edges, pot = _potentials(theta, edges, pot)
    n, K = theta.shape
    if method == "auto":
        if _kernels.is_forest(n, edges):
            method = "forest"
        else:
            method = "enumerate" if float(K) ** n <= 4096 else "lp"
    if method == "lp":
        return lp_map(theta, edges, pot, max_sweeps, tol)
    y, score = (forest_map if method == "forest" else enumerate_map)(theta, edges, pot)
    return y, score, score
