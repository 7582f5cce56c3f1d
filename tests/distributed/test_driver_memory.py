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
