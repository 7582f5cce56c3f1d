"""check_kernel_model passes on a user's model and catches broken kernels (the built-in
models pass it in ``test_kernel_conformance.py``)."""

from typing import NamedTuple

import numpy as np
import pytest

from dualstruct.data import BlockData
from dualstruct.models import (
    ChainModel,
    KernelModel,
    UserModel,
    base,
)
from dualstruct.sequences import pack_sequences
from dualstruct.testing import check_kernel_model


class _Binary:
    """y in {0, 1} per entry, φ = Σ_t x_t (2 y_t − 1)."""

    size_joint_feature = 2

    def joint_feature(self, x, y):
        return (np.asarray(x) * (2 * np.asarray(y)[:, None] - 1)).sum(0)

    def loss(self, y, y_hat):
        return float(np.sum(np.asarray(y) != np.asarray(y_hat)))

    def _best(self, x, w, bonus):
        return (np.asarray(x) @ w + bonus > -np.asarray(x) @ w).astype(int)

    def inference(self, x, w):
        return self._best(x, w, 0.0)

    def loss_augmented_inference(self, x, y, w):
        s1 = np.asarray(x) @ w + (np.asarray(y) != 1)
        s0 = -np.asarray(x) @ w + (np.asarray(y) != 0)
        return (s1 > s0).astype(int)


def test_user_model():
    rng = np.random.default_rng(5)
    X = [rng.normal(size=(int(rng.integers(1, 4)), 2)) for _ in range(4)]
    Y = [rng.integers(0, 2, len(x)) for x in X]
    check_kernel_model(UserModel(_Binary()), X, Y, n_states=2)


# -- deliberately broken kernels: one defect each ----------------------------------------------
class _Broken(NamedTuple):
    x: np.ndarray  # n × d
    labels: np.ndarray
    label_offsets: np.ndarray
    n_classes: int
    defect: int  # 0 none, 1 oracle ignores the loss, 2 wrong difference, 3 wrong loss


@base.implements(base.workspace, _Broken)
def _workspace(k):
    return np.zeros(k.n_classes + 1)  # the scores, then the oracle's loss scale


@base.implements(base.prepare, _Broken)
def _prepare(k, i, w, ws):
    d = k.x.shape[1]
    for c in range(k.n_classes):
        ws[c] = k.x[i] @ w[c * d : (c + 1) * d]


@base.implements(base.score, _Broken)
def _score(k, i, w, ws, y):
    return ws[y[0]]


@base.implements(base.loss, _Broken)
def _loss(k, i, y):
    if k.defect == 3:
        return 2.0 * (y[0] != k.labels[i])
    return 1.0 * (y[0] != k.labels[i])


@base.implements(base.oracle, _Broken)
def _oracle(k, i, w, ws, loss_scale, y):
    best, arg = -np.inf, 0
    for c in range(k.n_classes):
        v = ws[c] + (0.0 if k.defect == 1 else loss_scale * (c != k.labels[i]))
        if v > best:
            best, arg = v, c
    y[0] = arg
    ws[k.n_classes] = loss_scale
    return ws[arg] + loss_scale * (arg != k.labels[i])


@base.implements(base.oracle_value, _Broken)
def _oracle_value(k, i, w, ws, y):
    return ws[y[0]] + ws[k.n_classes] * (y[0] != k.labels[i])


@base.implements(base.decode, _Broken)
def _decode(k, i, w, ws, y):
    y[0] = np.argmax(ws[: k.n_classes])
    return ws[y[0]]


@base.implements(base.add_difference, _Broken)
def _add_difference(k, i, ya, yb, c, w):
    d = k.x.shape[1]
    sign = -1.0 if k.defect == 2 else 1.0
    w[ya[0] * d : (ya[0] + 1) * d] += sign * c * k.x[i]
    w[yb[0] * d : (yb[0] + 1) * d] -= sign * c * k.x[i]


@base.implements(base.difference_sq_norm, _Broken)
def _difference_sq_norm(k, i, ws, ya, yb):
    return 0.0 if ya[0] == yb[0] else 2.0 * (k.x[i] @ k.x[i])


@base.implements(base.status, _Broken)
def _status(k):
    return 0


class BrokenModel(KernelModel):
    def __init__(self, defect):
        self.defect, self.n_classes, self.size = defect, 3, 6

    def block_data(self, X, Y):
        n = len(Y)
        k = _Broken(
            np.asarray(X, dtype=float),
            np.asarray(Y, dtype=np.int32),
            np.arange(n + 1, dtype=np.int64),
            3,
            self.defect,
        )
        return BlockData(k, (k.x,))

    def joint_feature(self, x, y):
        phi = np.zeros((3, 2))
        phi[int(y)] = x
        return phi.ravel()

    def loss(self, y, y_hat):
        return float(int(y) != int(y_hat))


def _broken_problem():
    rng = np.random.default_rng(6)
    return rng.normal(size=(4, 2)), np.array([0, 1, 2, 1])


def test_the_broken_model_without_defect_passes():
    check_kernel_model(BrokenModel(0), *_broken_problem())


@pytest.mark.parametrize(
    "defect, function", [(1, "'oracle'"), (2, "'add_difference'"), (3, "'loss'")]
)
def test_a_broken_kernel_is_caught(defect, function):
    with pytest.raises(AssertionError, match=f"kernel function {function}, example \\d"):
        check_kernel_model(BrokenModel(defect), *_broken_problem())


def test_a_large_labelling_space_is_refused():
    rng = np.random.default_rng(7)
    X, Y = [rng.normal(size=(9, 4))], [rng.integers(0, 3, 9)]
    with pytest.raises(ValueError, match="example 0 has 3\\*\\*9 labellings"):
        chain = ChainModel(3, 4)
        data = chain.block_data(pack_sequences(X, Y))
        check_kernel_model(chain, X, Y, data=data)
