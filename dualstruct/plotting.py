"""Training curves: the primal, the certified dual and the held-out score of a training
history, against time or passes (matplotlib, the optional ``bench``/``docs`` extra)."""

from __future__ import annotations

import numpy as np

X_AXES = ("time", "passes")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plotting needs matplotlib: pip install matplotlib") from None
    return plt


def plot_history(history, x="time", ax=None, label=None, log_gap=True):
    """Draw a training history: primal ``P(w)`` and dual ``D(α)`` at every check (top), the
    relative duality gap ``(P − D) / |P|`` on a log scale (middle) and the held-out score
    when the history has one (bottom).

    Parameters
    ----------
    history : History or estimator
        A :class:`~dualstruct.solvers.History` (``estimator.history_``) or a fitted
        estimator, whose ``history_`` is drawn.
    x : {"time", "passes"}, default "time"
        The horizontal axis: training seconds (monitoring excluded) or passes over the data.
    ax : array of matplotlib Axes, optional
        Axes to draw into (one per panel, as returned here); new ones by default, so that
        several histories can share one figure.
    label : str, optional
        The legend entry of this history's curves.
    log_gap : bool, default True
        Draw the gap on a log scale.

    Returns
    -------
    axes : array of matplotlib Axes
        The panels drawn into.

    Examples
    --------
    >>> import numpy as np
    >>> import dualstruct
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(20, 5, 3, 6, random_state=0)
    >>> svm = dualstruct.StructuredSVM(max_iter=20, random_state=0).fit(X, y)
    >>> axes = dualstruct.plot_history(svm, x="passes")  # doctest: +SKIP
    """
    plt = _pyplot()
    if x not in X_AXES:
        raise ValueError(f"x must be one of {X_AXES}, got {x!r}")
    history = getattr(history, "history_", history)
    cols = history.as_arrays()
    checked = ~np.isnan(cols["primal"])
    has_score = bool(np.any(~np.isnan(cols["validation_score"])))
    n_panels = 3 if has_score else 2
    if ax is None:
        _, ax = plt.subplots(
            n_panels, 1, sharex=True, figsize=(6, 2.2 * n_panels), constrained_layout=True
        )
    ax = np.atleast_1d(ax)
    if len(ax) < n_panels:
        raise ValueError(f"this history needs {n_panels} axes, got {len(ax)}")
    t = cols[x][checked]
    name = label or ""
    (line,) = ax[0].plot(t, cols["primal"][checked], "-", label=f"{name} primal".strip())
    dual = cols["dual"][checked]
    if np.any(~np.isnan(dual)):
        ax[0].plot(t, dual, "--", color=line.get_color(), label=f"{name} dual".strip())
    ax[0].set_ylabel("objective")
    ax[0].legend(fontsize="small")
    gap = cols["relative_gap"][checked]
    if np.any(~np.isnan(gap)):
        ax[1].plot(t, np.maximum(gap, 1e-12), color=line.get_color(), label=label)
        if log_gap:
            ax[1].set_yscale("log")
    ax[1].set_ylabel("relative gap")
    if has_score:
        scored = ~np.isnan(cols["validation_score"])
        ax[2].plot(
            cols[x][scored], cols["validation_score"][scored], color=line.get_color(), label=label
        )
        ax[2].set_ylabel("held-out score")
    ax[n_panels - 1].set_xlabel("training seconds" if x == "time" else "passes")
    return ax
