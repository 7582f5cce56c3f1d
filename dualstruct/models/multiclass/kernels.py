"""The multi-class model's kernel: one block per example, a labelling is one class.

φ(x, y) = x ⊗ e_y   (W = w.reshape(d, K), feature-major),   δ(ȳ, y) = loss_weights[ȳ]·[y ≠ ȳ]
‖φ(x, a) − φ(x, b)‖² = 2 ‖x‖² for a ≠ b
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import base


class MultiClassKernel(NamedTuple):
    indptr: np.ndarray  # CSR rows of X, one per example
    indices: np.ndarray
    values: np.ndarray
    sq_norms: np.ndarray  # ‖x_i‖²
    labels: np.ndarray  # int32 (n,): the gold class of each example
    label_offsets: np.ndarray  # int64 (n + 1,): 0, 1, …, n
    loss_weights: np.ndarray  # (K,)
    n_classes: int


@base.implements(base.workspace, MultiClassKernel)
def _workspace(k):
    return np.empty(k.n_classes + 1)  # the scores, then the last oracle's loss scale


@base.implements(base.prepare, MultiClassKernel)
def _prepare(k, i, w, ws):
    K = k.n_classes
    ws[:K] = 0.0
    for p in range(k.indptr[i], k.indptr[i + 1]):
        x = k.values[p]
        row = k.indices[p] * K
        for c in range(K):
            ws[c] += x * w[row + c]


@base.implements(base.score, MultiClassKernel)
def _score(k, i, w, ws, y):
    return ws[y[0]]


@base.implements(base.loss, MultiClassKernel)
def _loss(k, i, y):
    gold = k.labels[i]
    if y[0] == gold:
        return 0.0
    return k.loss_weights[gold]


@base.implements(base.oracle, MultiClassKernel)
def _oracle(k, i, w, ws, loss_scale, y):
    gold = k.labels[i]
    ws[k.n_classes] = loss_scale
    penalty = loss_scale * k.loss_weights[gold]
    best = -np.inf
    arg = 0
    for c in range(k.n_classes):
        v = ws[c] + penalty
        if c == gold:
            v = ws[c]
        if v > best:
            best, arg = v, c
    y[0] = arg
    return best


@base.implements(base.oracle_value, MultiClassKernel)
def _oracle_value(k, i, w, ws, y):
    c = y[0]
    gold = k.labels[i]
    if c == gold:
        return ws[c]
    return ws[c] + ws[k.n_classes] * k.loss_weights[gold]


@base.implements(base.decode, MultiClassKernel)
def _decode(k, i, w, ws, y):
    arg = 0
    for c in range(1, k.n_classes):
        if ws[c] > ws[arg]:
            arg = c
    y[0] = arg
    return ws[arg]


@base.implements(base.add_difference, MultiClassKernel)
def _add_difference(k, i, ya, yb, c, w):
    a, b = ya[0], yb[0]
    if a == b:
        return
    K = k.n_classes
    for p in range(k.indptr[i], k.indptr[i + 1]):
        row = k.indices[p] * K
        x = c * k.values[p]
        w[row + a] += x
        w[row + b] -= x


@base.implements(base.difference_sq_norm, MultiClassKernel)
def _difference_sq_norm(k, i, ws, ya, yb):
    if ya[0] == yb[0]:
        return 0.0
    return 2.0 * k.sq_norms[i]


@base.implements(base.status, MultiClassKernel)
def _status(k):
    return 0
