"""The cutting plane's check of the oracle against its cached maximizers: it evaluates the
cached labellings without building a weight vector, and an oracle that returns less than a
labelling it returned before for an example (an approximate one) is named with that example."""

import itertools

import numpy as np
import pytest
from conftest import tiny_chain_problem

from dualstruct import pack_sequences
from dualstruct.models import ChainModel, UserModel
from dualstruct.solvers import CertificateError, CuttingPlane


class ExactThenGold:
    """A Python chain whose loss-augmented oracle enumerates at w = 0 and returns the gold
    labelling (a local search that never leaves it) anywhere else."""

    def __init__(self, K=3, d=4):
        self.chain, self.K = ChainModel(K, d), K
        self.size_joint_feature = self.chain.size

    def joint_feature(self, x, y):
        return self.chain.joint_feature(x, np.asarray(y))

    def loss(self, y, y_hat):
        return self.chain.loss(y, y_hat)

    def _best(self, x, value):
        labellings = itertools.product(range(self.K), repeat=x.shape[0])
        return max((np.array(c) for c in labellings), key=value)

    def inference(self, x, w):
        return self._best(x, lambda c: w @ self.joint_feature(x, c))

    def loss_augmented_inference(self, x, y, w):
        if np.any(w):
            return np.array(y)
        return self._best(x, lambda c: self.loss(y, c) + w @ self.joint_feature(x, c))


def test_an_oracle_below_its_cached_labelling_is_named_with_the_example():
    X, Y = tiny_chain_problem()
    user = UserModel(ExactThenGold(), check=False)
    solver = CuttingPlane(user, 1.0, max_iter=5, tol=0)
    with pytest.raises(
        CertificateError,
        match=r"ExactThenGold\.loss_augmented_inference on example \d+ at cutting_plane "
        r"iteration 2: its maximum is 0 above the gold labelling's value, below the "
        r"[\d.]+ of a labelling it returned earlier for that example .*approximate oracle",
    ):
        solver.fit(user.block_data(X, Y))


def test_the_cache_check_builds_no_weight_vector_and_names_the_example(monkeypatch):
    X, Y = tiny_chain_problem()
    model = ChainModel(3, 4)
    solver = CuttingPlane(model, 1.0, max_iter=3, tol=0).fit(pack_sequences(X, Y))
    hinge, out = model.hinge(solver.w, pack_sequences(X, Y))
    solver.cache[0] = out  # the maximizers at w among the cached labellings

    def allocated():
        raise AssertionError("a weight vector allocated")

    monkeypatch.setattr(solver.kernel_model_, "init_weights", allocated)
    solver._check_cache(solver.w, hinge)  # the exact oracle's hinge: accepted
    lowered = hinge.copy()
    i = int(np.argmax(hinge))
    assert hinge[i] > 0.1
    lowered[i] = 0.0
    with pytest.raises(CertificateError, match=rf"ChainModel on example {i} at cutting_plane"):
        solver._check_cache(solver.w, lowered)


def test_at_its_resolution_the_cutting_plane_stops_and_says_so():
    """No constraint violated by more than epsilon at w: the next iterations would repeat the
    last one, so training stops ("resolution") instead of running to max_iter, and the
    estimator's warning says what limits the gap."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from dualstruct import StructuredSVM

    X, y = tiny_chain_problem()
    model, data = ChainModel(3, 4), pack_sequences(X, y)
    coarse = CuttingPlane(model, 1.0, max_iter=500, tol=1e-12, epsilon=1e-2).fit(data)
    assert coarse.history.stop_reason == "resolution" and coarse.passes < 500
    fine = CuttingPlane(model, 1.0, max_iter=500, tol=1e-12, epsilon=1e-9).fit(data)
    assert fine.history.last.relative_gap < coarse.history.last.relative_gap
    svm = StructuredSVM(
        solver="cutting_plane", tol=1e-12, max_iter=500, solver_options={"epsilon": 1e-2}
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        svm.fit(X, y)
    assert svm.history_.stop_reason == "resolution"
    (warning,) = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert "epsilon" in str(warning.message)
