"""scikit-learn's own conformance suite on the estimators that take a feature matrix."""

import warnings

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from dualstruct import MultiClassSVM, MultiLabelSVM


@parametrize_with_checks(
    [MultiClassSVM(max_iter=50, random_state=0), MultiLabelSVM(max_iter=20, random_state=0)],
)
def test_sklearn_estimator_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)


@pytest.mark.parametrize(
    "estimator",
    [MultiClassSVM(max_iter=50, random_state=0), MultiLabelSVM(max_iter=20, random_state=0)],
    ids=["MultiClassSVM", "MultiLabelSVM"],
)
def test_check_estimator_summary(estimator):
    """The whole suite as a user runs it: every check passes."""
    results = check_estimator(estimator, on_fail=None)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == []


def _crammer_singer_primal(W, b, X, y_codes, C):
    scores = X @ W.T + b
    n = len(y_codes)
    gold = scores[np.arange(n), y_codes]
    margins = scores + 1.0
    margins[np.arange(n), y_codes] = gold
    return 0.5 * (np.sum(W * W) + np.sum(b * b)) + C * np.sum(margins.max(axis=1) - gold)


def test_multiclass_svm_matches_liblinear_and_round_trips(tmp_path):
    """Same objective as LinearSVC(multi_class="crammer_singer") with its regularized
    intercept; string classes, decision_function and model files."""
    from sklearn.datasets import load_iris
    from sklearn.svm import LinearSVC

    import dualstruct

    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])[y]
    C = 0.5
    ours = MultiClassSVM(C=C, solver="cutting_plane", tol=1e-7, max_iter=500).fit(X, names)
    ref = LinearSVC(C=C, multi_class="crammer_singer", tol=1e-8, max_iter=100000).fit(X, y)
    p_ours = _crammer_singer_primal(ours.coef_, ours.intercept_, X, y, C)
    p_ref = _crammer_singer_primal(ref.coef_, ref.intercept_, X, y, C)
    assert p_ours == pytest.approx(p_ref, rel=1e-4)
    assert ours.history_.last_checked().primal == pytest.approx(p_ours, rel=1e-9)
    assert list(ours.classes_) == ["setosa", "versicolor", "virginica"]
    assert ours.decision_function(X).shape == (150, 3)
    assert ours.score(X, names) > 0.9
    ours.save(tmp_path / "mc.npz")
    back = dualstruct.load(tmp_path / "mc.npz")
    np.testing.assert_array_equal(back.predict(X), ours.predict(X))
    np.testing.assert_array_equal(back.coef_, ours.coef_)
