"""The hinge of every block on numba's threads: the same bits as the serial loop whatever
the number of threads, and the serial loop for kernels not registered with
``parallel_blocks``."""

import numba
import numpy as np
import pytest

from dualstruct import pack_sequences
from dualstruct.models import ChainModel, UserModel, loops
from dualstruct.models.interface import PARALLEL_BLOCKS
from dualstruct.models.multiclass import MultiClassModel

needs_two_threads = pytest.mark.skipif(
    numba.config.NUMBA_NUM_THREADS < 2, reason="numba runs one thread here"
)


def _chain_problem():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(1, 7), 5)) for _ in range(23)]
    Y = [rng.integers(0, 4, len(x)) for x in X]
    chain = ChainModel(4, 5)
    return chain, chain.block_data(pack_sequences(X, Y)), rng.normal(size=chain.size)


def _multiclass_problem():
    rng = np.random.default_rng(1)
    model = MultiClassModel(5, 6)
    data = model.block_data(rng.normal(size=(31, 6)), rng.integers(0, 5, 31))
    return model, data, rng.normal(size=model.size)


def _serial(k, w, slack):
    hinge = np.empty(len(k.label_offsets) - 1)
    out = np.empty_like(k.labels)
    loops.hinge_range(k, w, slack, 0, len(hinge), hinge, out)
    return hinge, out


def _with_threads(n, model, data, w, slack):
    before = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        return model.slack_hinge(w, data) if slack else model.hinge(w, data)
    finally:
        numba.set_num_threads(before)


@needs_two_threads
@pytest.mark.parametrize(
    "problem, slack",
    [(_chain_problem, False), (_chain_problem, True), (_multiclass_problem, False)],
)
def test_hinge_totals_equal_the_serial_loop_for_one_and_two_threads(problem, slack, monkeypatch):
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    model, data, w = problem()
    assert type(data.kernel) in PARALLEL_BLOCKS
    want, want_out = _serial(data.kernel, w, slack)
    for threads in (1, 2):
        hinge, out = _with_threads(threads, model, data, w, slack)
        assert hinge.sum() == want.sum()
        np.testing.assert_array_equal(hinge, want)
        np.testing.assert_array_equal(out, want_out)
    # every split of the blocks into ranges gives the same bits
    n = len(want)
    for chunks in (2, 3, n):
        hinge = np.full_like(want, np.nan)
        out = np.full_like(want_out, -1)
        for c in range(chunks):
            loops.hinge_range(
                data.kernel, w, slack, c * n // chunks, (c + 1) * n // chunks, hinge, out
            )
        np.testing.assert_array_equal(hinge, want)
        np.testing.assert_array_equal(out, want_out)


@needs_two_threads
def test_two_threads_share_the_blocks_only_of_registered_kernels(monkeypatch):
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    calls = []
    compiled = loops.hinge_range
    monkeypatch.setattr(
        loops,
        "hinge_range",
        lambda k, w, s, a, b, *rest: calls.append((a, b)) or compiled(k, w, s, a, b, *rest),
    )
    model, data, w = _chain_problem()
    _with_threads(2, model, data, w, False)
    assert sorted(calls) == [(0, 11), (11, 23)]
    calls.clear()
    _with_threads(1, model, data, w, False)
    assert calls == [(0, 23)]
    calls.clear()
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 12)  # too few blocks for two threads
    _with_threads(2, model, data, w, False)
    assert calls == [(0, 23)]

    class Scalar:  # Python callbacks: never on numba's threads
        size_joint_feature = 2

        def joint_feature(self, x, y):
            return x * (2 * y - 1)

        def loss(self, y, y_hat):
            return float(y != y_hat)

        def inference(self, x, w):
            return int(x @ w > 0)

        def loss_augmented_inference(self, x, y, w):
            return max((0, 1), key=lambda c: self.loss(y, c) + x @ w * (2 * c - 1))

    user = UserModel(Scalar())
    rng = np.random.default_rng(2)
    blocks = user.block_data(list(rng.normal(size=(5, 2))), [0, 1, 1, 0, 1])
    calls.clear()
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    _with_threads(2, user, blocks, rng.normal(size=2), False)
    assert calls == [(0, 5)]
