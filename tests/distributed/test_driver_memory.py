"""What a Spark driver holds: a CoCoA+ check scores the weighted average without a copy of
``w`` on the driver."""

import math
import tracemalloc

import numpy as np
import pytest

from dualstruct.distributed import CoCoA
from dualstruct.distributed.cocoa import AveragedPoint
from dualstruct.models import ChainModel
from dualstruct.solvers.block import segment_dual


class _NoEngine:
    """An engine whose hinge sums are zero, that checks it is never handed ū as an array."""

    name = "none"

    def __init__(self):
        self.points = []

    def hinge_sum(self, w):
        self.points.append(type(w).__name__)
        return 0.0


def _state(n, engine):
    solver = CoCoA(ChainModel(2, 4), 1.0, n_partitions=2, engine=engine)
    rng = np.random.default_rng(0)
    solver.w, solver.R, solver.prox_w = rng.normal(size=(3, n))
    solver.scalars = np.array([3.0, 50.0, 2.0])
    solver.best_dual = -np.inf
    return solver


def test_a_check_scores_the_average_without_its_copy_on_the_driver():
    """At a check the driver's dual and the candidates' primal allocate well under one copy
    of ``w`` (the average ū = u − R / A is made where it is scored)."""
    n = 4_000_000
    engine = _NoEngine()
    solver = _state(n, engine)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        dual = solver.dual()
        primals = [solver._primal(w) for w in solver.candidates()]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.5 * 8 * n
    assert engine.points == ["ndarray", "AveragedPoint"]
    A = 0.5 * 50.0 * 51.0
    average = solver.w - solver.R / A
    loss = 3.0 - 2.0 / A
    expected = max(segment_dual(3.0, solver.w @ solver.w), segment_dual(loss, average @ average))
    assert dual == pytest.approx(expected, rel=1e-12)
    assert primals[1] == pytest.approx(0.5 * average @ average, rel=1e-12)
    solver._final_choice = 1
    assert np.array_equal(solver.weights(), average)


def test_averaged_point_norm_in_slices_matches_the_whole():
    rng = np.random.default_rng(1)
    u, R = rng.normal(size=(2, 2_500_000))
    point = AveragedPoint(u, R, 7.0)
    made = point.materialize()
    assert np.array_equal(made, u - R / 7.0)
    assert math.isclose(point.sq_norm(), float(made @ made), rel_tol=1e-12)


class _Lines:
    """A callback that, as the command line's progress lines, does not read ``coef_``."""

    reads_weights = False

    def __init__(self):
        self.seen = []

    def __call__(self, est, record):
        self.seen.append((hasattr(est, "coef_"), est.n_iter_, len(est.history_.records)))
        return False


def test_a_callback_that_reads_no_weights_gets_no_copy_of_them():
    """Every pass the estimator copies ``w`` into ``coef_`` for its callback (a Spark
    driver's largest array, once more); a callback saying it reads no weights is spared it,
    and the fitted model is the same."""
    from dualstruct import StructuredSVM
    from dualstruct.datasets import make_chain

    X, y = make_chain(12, 4, 3, 8, random_state=0)
    lines = _Lines()
    est = StructuredSVM(max_iter=3, check_every=1, random_state=0, callback=lines).fit(X, y)
    assert [seen[:2] for seen in lines.seen] == [(False, 1), (False, 2), (False, 3)]
    assert all(n_records >= 1 for *_, n_records in lines.seen)
    reference = StructuredSVM(max_iter=3, check_every=1, random_state=0).fit(X, y)
    assert np.array_equal(est.coef_, reference.coef_)
    seen = []
    StructuredSVM(
        max_iter=2, random_state=0, callback=lambda e, r: seen.append(hasattr(e, "coef_"))
    ).fit(X, y)
    assert seen == [True, True]  # a callback by default reads them


def test_the_progress_lines_read_the_weights_only_to_checkpoint(tmp_path):
    from dualstruct.cli import Progress

    assert not Progress(10, 0.01, None).reads_weights
    assert Progress(10, 0.01, None, checkpoint_every=5, checkpoint=tmp_path / "m").reads_weights


def _names(n):
    return (f"w[{k % 7 - 3}]=word{k:07d}" for k in range(n))


def test_a_vocabulary_streamed_in_takes_about_its_own_size():
    """The names' buffer becomes the vocabulary's bytes and the offsets' array its offsets:
    no copy of either at the end."""
    from dualstruct.features import Vocabulary

    n = 200_000
    tracemalloc.start()
    try:
        vocab = Vocabulary.from_names(_names(n))
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    own = len(vocab._blob) + vocab._offsets.nbytes
    assert peak < 1.35 * own
    assert list(vocab) == list(_names(n))
    assert Vocabulary.from_bytes(vocab.to_bytes(), n) == vocab


def test_the_driver_reads_its_vocabulary_back_only_when_its_names_are_needed(tmp_path):
    """The file written for the executors has the digest of ``to_bytes``; the driver's
    vocabulary holds no names until asked, then reads them from that file (a damaged file
    is refused), and pickles as a plain vocabulary."""
    import gzip
    import hashlib
    import os
    import pickle

    from dualstruct.distributed import reading
    from dualstruct.features import Vocabulary

    vocab = Vocabulary.from_names(_names(5000))
    ref = reading.write_vocabulary(vocab, tmp_path)
    reading._VOCABULARIES.clear()
    assert ref.digest == hashlib.sha256(vocab.to_bytes()).hexdigest()
    lazy = reading.DriverVocabulary(ref)
    assert len(lazy) == 5000 and not hasattr(lazy, "__dict__")
    with pytest.raises(AttributeError):
        object.__getattribute__(lazy, "_blob")  # nothing read yet
    assert lazy == vocab and lazy["w[-3]=word0000007"] == 7
    again = pickle.loads(pickle.dumps(reading.DriverVocabulary(ref)))
    assert type(again) is Vocabulary and again == vocab
    held = reading.DriverVocabulary(ref)
    os.replace(ref.local_path, ref.local_path + ".moved")  # a cleaner took the file
    os.remove(ref.local_path + ".moved")
    assert held == vocab and isinstance(held._blob, bytes)  # read through the open handle
    reading.write_vocabulary(vocab, tmp_path)
    with gzip.open(ref.local_path, "rb") as fh:
        raw = fh.read()
    for damaged in (raw[:-1], raw + b"x", raw[:9]):
        with gzip.open(ref.local_path, "wb") as fh:
            fh.write(damaged)
        with pytest.raises(ValueError, match="not the driver's"):
            list(reading.DriverVocabulary(ref))


def test_a_closed_run_lets_go_of_the_drivers_copies_of_w():
    from dualstruct import pack_sequences
    from dualstruct.datasets import make_chain

    X, y = make_chain(30, 5, 3, 12, random_state=0)
    solver = CoCoA(ChainModel(3, 12), C=0.1, n_partitions=2, max_iter=3, random_state=0)
    solver.fit(pack_sequences(X, y))
    solver.close()
    w = solver.weights()
    solver.release_weights()
    assert all(getattr(solver, name) is None for name in solver.state_arrays if name != "scalars")
    for use in (solver.weights, solver.state_dict, solver.candidates):
        with pytest.raises(RuntimeError, match="release_weights"):
            use()
    assert w.shape == (solver.model.size_joint_feature,)
