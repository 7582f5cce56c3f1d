"""Checks for model authors: :func:`check_kernel_model` tests a kernel model's compiled
functions against its Python ``joint_feature``, ``loss`` and brute-force inference."""

from __future__ import annotations

import itertools

import numpy as np
from numba import njit

from .inference.slack_search import SEARCHES
from .models import base

__all__ = ["check_kernel_model"]


@njit
def _score(k, i, w, y):
    ws = base.workspace(k)
    base.prepare(k, i, w, ws)
    return base.score(k, i, w, ws, y)


@njit
def _loss(k, i, y):
    return base.loss(k, i, y)


@njit
def _oracle(k, i, w, loss_scale, y, probe):
    ws = base.workspace(k)
    base.prepare(k, i, w, ws)
    bound = base.oracle(k, i, w, ws, loss_scale, y)
    return bound, base.oracle_value(k, i, w, ws, probe)


@njit
def _decode(k, i, w, y):
    ws = base.workspace(k)
    base.prepare(k, i, w, ws)
    return base.decode(k, i, w, ws, y)


@njit
def _difference(k, i, ya, yb, w):
    base.add_difference(k, i, ya, yb, 1.0, w)
    return base.difference_sq_norm(k, i, base.workspace(k), ya, yb)


@njit
def _slack(k, i, w, scale, search, seed, y):
    ws = base.workspace(k)
    base.prepare(k, i, w, ws)
    return base.slack_oracle(k, i, w, ws, scale, search, seed, y)


def _n_states(model, n_states):
    if n_states is not None:
        return int(n_states)
    for name in ("n_states", "n_labels", "n_classes"):
        value = getattr(model, name, None)
        if isinstance(value, (int, np.integer)):
            return int(value)
    raise ValueError(
        f"{type(model).__name__} has no n_states, n_labels or n_classes: pass n_states"
    )


def _fail(function, i, message):
    raise AssertionError(f"kernel function {function!r}, example {i}: {message}")


def check_kernel_model(
    model,
    X,
    Y,
    *,
    data=None,
    n_states=None,
    rng=0,
    n_draws=3,
    max_labellings=4096,
    rtol=1e-9,
    atol=1e-9,
):
    """Check a kernel model's compiled functions against its Python definitions.

    For every example of the small problem ``(X, Y)`` and ``n_draws`` random weight vectors,
    every labelling is enumerated and the registered kernel functions are compared with
    ``model.joint_feature`` and ``model.loss``: ``score`` (⟨w, φ(x, y)⟩), ``loss``,
    ``oracle`` and ``oracle_value`` (the margin-rescaled maximum of loss + score, and the
    maximizer's value), ``decode`` (the maximum score), ``add_difference`` and
    ``difference_sq_norm`` (φ(x, ya) − φ(x, yb) and its squared norm) and, for every search
    exact search of ``model.slack_searches``, ``slack_oracle`` (the slack-rescaled maximum).

    Parameters
    ----------
    model : KernelModel
        The model: a :class:`~dualstruct.models.KernelModel` with ``joint_feature(x, y)``,
        ``loss(y, y_hat)`` and ``block_data(X, Y)`` (else pass ``data``).
    X, Y : sequence
        A few small examples and their gold labellings.
    data : BlockData, optional
        The block data of ``(X, Y)`` when ``model.block_data(X, Y)`` does not build it.
    n_states : int, optional
        The values a labelling entry takes (default: the model's ``n_states``, ``n_labels``
        or ``n_classes``).
    rng : int or numpy.random.Generator, default 0
        Source of the random weights and labellings.
    n_draws : int, default 3
        Random weight vectors tried.
    max_labellings : int, default 4096
        Largest labelling space of one example that is enumerated; a larger one raises
        ``ValueError``.
    rtol, atol : float, default 1e-9
        Tolerances of the comparisons.

    Returns
    -------
    None
        Raises ``AssertionError`` naming the kernel function, the example and the numbers at
        the first disagreement.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import MultiClassModel
    >>> from dualstruct.testing import check_kernel_model
    >>> X = np.random.default_rng(0).normal(size=(4, 3))
    >>> check_kernel_model(MultiClassModel(3, 3), X, np.array([0, 1, 2, 1]))
    """
    rng = np.random.default_rng(rng)
    ref = model
    K = _n_states(ref, n_states)
    if data is None:
        data = model.block_data(X, Y)
    k = data.kernel
    offsets = np.asarray(k.label_offsets)
    n = len(offsets) - 1
    if n != len(Y):
        raise ValueError(f"the block data has {n} blocks, Y {len(Y)} labellings")
    sizes = np.diff(offsets)
    too_big = np.flatnonzero(float(K) ** sizes > max_labellings)
    if too_big.size:
        i = int(too_big[0])
        raise ValueError(
            f"example {i} has {K}**{sizes[i]} labellings, more than max_labellings="
            f"{max_labellings}: check on smaller examples"
        )
    size = int(model.size_joint_feature)
    searches = ()
    if "exact" in getattr(model, "slack_searches", ()):
        try:
            model.check_slack()
            searches = ("exact",)
        except ValueError:  # e.g. a chain with a weighted loss: margin rescaling only
            pass

    def close(a, b):
        return abs(a - b) <= atol + rtol * max(abs(a), abs(b))

    for _ in range(n_draws):
        w = rng.normal(size=size)
        for i in range(n):
            x, gold = X[i], Y[i]
            shape = np.shape(gold)
            gold_flat = np.asarray(k.labels[offsets[i] : offsets[i + 1]], dtype=np.int32)

            def as_label(y, shape=shape):
                return int(y[0]) if shape == () else np.reshape(y, shape)

            ys = [np.array(t, dtype=np.int32) for t in itertools.product(range(K), repeat=sizes[i])]
            phis = [np.asarray(ref.joint_feature(x, as_label(y)), dtype=float) for y in ys]
            scores = np.array([w @ p for p in phis])
            losses = np.array([float(ref.loss(gold, as_label(y))) for y in ys])
            for y, s, delta in zip(ys, scores, losses):
                got = _score(k, i, w, y)
                if not close(got, s):
                    _fail("score", i, f"labelling {y.tolist()}: kernel {got:.17g}, ⟨w, φ⟩ {s:.17g}")
                got = _loss(k, i, y)
                if not close(got, delta):
                    _fail("loss", i, f"labelling {y.tolist()}: kernel {got:.17g}, δ {delta:.17g}")
            # the margin-rescaled oracle, at loss scales 1 and a random one
            for loss_scale in (1.0, float(rng.uniform(0.1, 3.0))):
                values = loss_scale * losses + scores
                best = float(values.max())
                y = np.empty(sizes[i], dtype=np.int32)
                probe = ys[int(rng.integers(len(ys)))]
                bound, probe_value = _oracle(k, i, w, loss_scale, y, probe)
                j = next(j for j, t in enumerate(ys) if np.array_equal(t, y))
                if not close(values[j], best):
                    _fail(
                        "oracle",
                        i,
                        f"loss scale {loss_scale}: labelling {y.tolist()} has loss + score "
                        f"{float(values[j])!r}, the maximum is {best!r}",
                    )
                if not (bound >= best - atol - rtol * abs(best)):
                    _fail("oracle", i, f"returned {float(bound)!r} below the maximum {best!r}")
                jp = next(j for j, t in enumerate(ys) if np.array_equal(t, probe))
                if not close(probe_value, values[jp]):
                    _fail(
                        "oracle_value",
                        i,
                        f"labelling {probe.tolist()}: kernel {probe_value!r}, loss + score "
                        f"{float(values[jp])!r}",
                    )
            y = np.empty(sizes[i], dtype=np.int32)
            got = _decode(k, i, w, y)
            best = float(scores.max())
            j = next(j for j, t in enumerate(ys) if np.array_equal(t, y))
            if not close(scores[j], best) or not close(got, best):
                _fail(
                    "decode",
                    i,
                    f"labelling {y.tolist()} scores {scores[j]:.17g} (returned {got:.17g}), the "
                    f"maximum is {best!r}",
                )
            a, b = rng.integers(len(ys), size=2)
            g = next(j for j, t in enumerate(ys) if np.array_equal(t, gold_flat))
            for ya_i, yb_i in ((a, b), (g, b)):
                acc = np.zeros(size)
                sq = _difference(k, i, ys[ya_i], ys[yb_i], acc)
                diff = phis[ya_i] - phis[yb_i]
                if not np.allclose(acc, diff, rtol=rtol, atol=atol):
                    worst = int(np.argmax(np.abs(acc - diff)))
                    _fail(
                        "add_difference",
                        i,
                        f"labellings {ys[ya_i].tolist()}, {ys[yb_i].tolist()}: entry {worst} is "
                        f"{acc[worst]!r}, φ(x, ya) − φ(x, yb) has {diff[worst]!r}",
                    )
                if not close(sq, float(diff @ diff)):
                    _fail(
                        "difference_sq_norm",
                        i,
                        f"labellings {ys[ya_i].tolist()}, {ys[yb_i].tolist()}: kernel {sq:.17g}, "
                        f"‖φ(x, ya) − φ(x, yb)‖² {float(diff @ diff)!r}",
                    )
            gold_score = float(w @ np.asarray(ref.joint_feature(x, gold), dtype=float))
            for search in searches:
                scale = float(rng.uniform(0.1, 2.0))
                values = losses * (1.0 + scale * (scores - gold_score))
                best = float(values.max())
                y = np.empty(sizes[i], dtype=np.int32)
                bound, _ = _slack(k, i, w, scale, SEARCHES[search], gold_flat.copy(), y)
                j = next(j for j, t in enumerate(ys) if np.array_equal(t, y))
                if not close(values[j], best) or not bound >= best - atol - rtol * abs(best):
                    _fail(
                        "slack_oracle",
                        i,
                        f"search {search!r}: labelling {y.tolist()} has value {float(values[j])!r} "
                        f"(returned {float(bound)!r}), the maximum is {best!r}",
                    )
