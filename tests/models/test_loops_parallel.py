"""The shared loops on threads (``loops.run_ranges``): the hinge, decoding and the multi-label
MAP give the same bits as the serial loop whatever the number of threads; the threads come
from ``n_jobs`` (the estimator's during training), only for models with ``thread_safe``, and
one thread runs small problems."""

import numba
import numpy as np
import pytest

from dualstruct import StructuredSVM, pack_sequences
from dualstruct.models import ChainModel, MultiLabelModel, UserModel, loops
from dualstruct.models.multiclass import MultiClassModel


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


class _Scalar:  # Python callbacks: never on threads
    size_joint_feature = 2

    def joint_feature(self, x, y):
        return x * (2 * y - 1)

    def loss(self, y, y_hat):
        return float(y != y_hat)

    def inference(self, x, w):
        return int(x @ w > 0)

    def loss_augmented_inference(self, x, y, w):
        return max((0, 1), key=lambda c: self.loss(y, c) + x @ w * (2 * c - 1))


def _serial(k, w, slack):
    hinge = np.empty(len(k.label_offsets) - 1)
    out = np.empty_like(k.labels)
    loops.hinge_range(k, w, slack, 0, len(hinge), hinge, out)
    return hinge, out


def _hinge(n_jobs, model, data, w, slack):
    with loops.thread_setting(n_jobs):
        return model.slack_hinge(w, data) if slack else model.hinge(w, data)


@pytest.fixture
def ranges(monkeypatch):
    """The ranges the hinge loop is called on; every block range may go to a thread."""
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    calls = []
    compiled = loops.hinge_range
    monkeypatch.setattr(
        loops,
        "hinge_range",
        lambda k, w, s, a, b, *rest: calls.append((a, b)) or compiled(k, w, s, a, b, *rest),
    )
    return calls


@pytest.mark.parametrize(
    "problem, slack",
    [(_chain_problem, False), (_chain_problem, True), (_multiclass_problem, False)],
)
def test_hinge_totals_equal_the_serial_loop_for_one_and_two_threads(problem, slack, monkeypatch):
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    model, data, w = problem()
    assert model.thread_safe
    want, want_out = _serial(data.kernel, w, slack)
    for threads in (1, 2):
        hinge, out = _hinge(threads, model, data, w, slack)
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


def test_hinge_threads_come_from_n_jobs_not_from_numba(ranges, monkeypatch):
    def launched(*args):
        raise AssertionError("numba's thread pool consulted")

    monkeypatch.setattr(numba, "get_num_threads", launched)
    model, data, w = _chain_problem()
    model.hinge(w, data)  # no setting: one thread, whatever numba has
    assert ranges == [(0, 23)]
    ranges.clear()
    _hinge(2, model, data, w, False)
    assert sorted(ranges) == [(0, 11), (11, 23)]
    ranges.clear()
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 12)  # too few blocks for two threads
    _hinge(2, model, data, w, False)
    assert ranges == [(0, 23)]


def test_models_not_thread_safe_run_in_order(ranges):
    user = UserModel(_Scalar())
    assert not user.thread_safe
    rng = np.random.default_rng(2)
    blocks = user.block_data(list(rng.normal(size=(5, 2))), [0, 1, 1, 0, 1])
    _hinge(2, user, blocks, rng.normal(size=2), False)
    assert ranges == [(0, 5)]


def test_the_estimator_checks_on_its_n_jobs_threads(ranges):
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(3, 4)) for _ in range(8)]
    y = [rng.integers(0, 3, 3) for _ in range(8)]
    StructuredSVM(max_iter=1, check_every=1, n_jobs=2).fit(X, y)
    assert (0, 4) in ranges and (4, 8) in ranges
    ranges.clear()
    StructuredSVM(max_iter=1, check_every=1).fit(X, y)
    assert ranges and set(ranges) == {(0, 8)}
    with pytest.raises(ValueError, match="n_jobs must be None or a nonzero integer"):
        loops.thread_setting(0).__enter__()


def test_decoding_and_multilabel_map_share_the_helper_and_its_threshold(monkeypatch):
    started = []
    pool = loops.ThreadPoolExecutor
    monkeypatch.setattr(loops, "ThreadPoolExecutor", lambda n: started.append(n) or pool(n))
    chain, data, w = _chain_problem()
    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(40, 3)), rng.integers(0, 2, (40, 5))
    multilabel = MultiLabelModel(5, 3, edges="full").fit_edges(Y)
    v = rng.normal(size=multilabel.size)
    want = chain.decode(w, data, return_scores=True), multilabel.predict(v, X)
    assert started == []
    chain.decode(w, data, n_jobs=2)  # 23 blocks: below the threshold, no threads
    multilabel.predict(v, X, n_jobs=2)
    assert started == []
    monkeypatch.setattr(loops, "MIN_BLOCKS_PER_THREAD", 1)
    got = chain.decode(w, data, n_jobs=2, return_scores=True), multilabel.predict(v, X, n_jobs=2)
    assert started == [2, 2]
    for a, b in zip(want[0], got[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(want[1], got[1])
