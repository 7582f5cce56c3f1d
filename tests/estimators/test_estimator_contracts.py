"""The scikit-learn contracts for the estimators that take lists of sequences or graphs,
which scikit-learn's matrix-based checks cannot exercise: parameters, no mutation, idempotent
fit, invariance of predictions, persistence and clear errors on degenerate input."""

import copy
import pickle

import numpy as np
import pytest
from sklearn.base import clone

import dualstruct
from dualstruct import SSVM, StructuredSVM
from dualstruct.models.graph import GraphCRF, grid_edges
from dualstruct.tagger import SequenceTagger


def _sequences(seed=0, n=12, d=5, K=3):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        T = int(rng.integers(2, 7))
        labels = rng.integers(0, K, T)
        x = rng.normal(size=(T, d))
        x[np.arange(T), labels] += 2.0
        X.append(x)
        y.append(np.array(["a", "b", "c"])[labels])
    return X, y


def _graphs(seed=0, n=10, d=4, K=3):
    rng = np.random.default_rng(seed)
    X, Y = [], []
    for g in range(n):
        h, w = (2, 2) if g % 2 else (1, 3)
        nodes = rng.normal(size=(h * w, d))
        labels = rng.integers(0, K, h * w)
        nodes[np.arange(h * w), labels] += 2.0
        X.append((nodes, grid_edges(h, w)))
        Y.append(labels)
    return X, Y


def _sentences(seed=0, n=12):
    rng = np.random.default_rng(seed)
    words = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran"]
    tags = {
        "the": "DET",
        "a": "DET",
        "cat": "N",
        "mat": "N",
        "dog": "N",
        "sat": "V",
        "ran": "V",
        "on": "P",
    }
    sents = [
        [(words[i],) for i in rng.integers(0, len(words), int(rng.integers(2, 6)))]
        for _ in range(n)
    ]
    return sents, [[tags[w] for (w,) in s] for s in sents]


def _estimators():
    return {
        "StructuredSVM": (StructuredSVM(max_iter=15, random_state=0), _sequences()),
        "SSVM-GraphCRF": (SSVM(GraphCRF(3, 4), max_iter=15, random_state=0), _graphs()),
        "SequenceTagger": (
            SequenceTagger(
                svm=StructuredSVM(C=0.1, fit_intercept=False, max_iter=15, random_state=0)
            ),
            _sentences(),
        ),
    }


ESTIMATORS = _estimators()
NAMES = list(ESTIMATORS)


def _same(a, b):
    """Predictions (lists of label arrays or lists) are equal."""
    assert len(a) == len(b)
    for p, q in zip(a, b):
        np.testing.assert_array_equal(np.asarray(p), np.asarray(q))


def _fresh(name):
    est, data = _estimators()[name]
    return est, data


@pytest.mark.parametrize("name", NAMES)
def test_params_round_trip(name):
    est, _ = _fresh(name)
    params = est.get_params(deep=False)
    twin = clone(est)
    assert twin is not est
    assert twin.get_params(deep=False).keys() == params.keys()
    for key, value in params.items():
        copied = twin.get_params(deep=False)[key]
        if hasattr(value, "params"):  # a model object is deep-copied
            assert type(copied) is type(value) and copied.params() == value.params()
        elif not hasattr(value, "get_params"):  # a nested estimator is cloned
            assert _equal(copied, value), key
    if "max_iter" in params:
        assert est.set_params(max_iter=3) is est and est.get_params()["max_iter"] == 3


@pytest.mark.parametrize("name", NAMES)
def test_fit_returns_self_and_mutates_nothing(name):
    est, (X, y) = _fresh(name)
    X0, y0 = copy.deepcopy(X), copy.deepcopy(y)
    params0 = copy.deepcopy(est.get_params(deep=False))
    assert est.fit(X, y) is est
    est.predict(X)
    _same_nested(X, X0)
    _same_nested(y, y0)
    after = est.get_params(deep=False)
    for key, value in params0.items():
        if not hasattr(value, "get_params") and not hasattr(value, "joint_feature"):
            assert _equal(after[key], value), key


def _equal(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    return a == b


def _same_nested(a, b):
    if isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            _same_nested(p, q)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("name", NAMES)
def test_fit_is_idempotent(name):
    est, (X, y) = _fresh(name)
    first = est.fit(X, y).predict(X)
    coef = np.array(est.svm_.coef_ if name == "SequenceTagger" else est.coef_, copy=True)
    second = est.fit(X, y).predict(X)
    _same(first, second)
    again = est.svm_.coef_ if name == "SequenceTagger" else est.coef_
    np.testing.assert_array_equal(coef, again)


@pytest.mark.parametrize("name", NAMES)
def test_predictions_invariant_to_order_and_subsets(name):
    est, (X, y) = _fresh(name)
    est.fit(X, y)
    full = est.predict(X)
    order = np.random.default_rng(1).permutation(len(X))
    shuffled = est.predict([X[i] for i in order])
    _same(shuffled, [full[i] for i in order])
    _same(est.predict(X[3:7]), full[3:7])
    _same(est.predict(X[:1]), full[:1])


@pytest.mark.parametrize("name", NAMES)
def test_pickle_and_model_file_round_trips(name, tmp_path):
    est, (X, y) = _fresh(name)
    est.fit(X, y)
    pred = est.predict(X)
    _same(pickle.loads(pickle.dumps(est)).predict(X), pred)
    path = tmp_path / "model.npz"
    est.save(path)
    loaded = dualstruct.load(path)
    assert type(loaded) is type(est)
    _same(loaded.predict(X), pred)


@pytest.mark.parametrize("name", NAMES)
def test_one_example_trains(name):
    est, (X, y) = _fresh(name)
    est.fit(X[:1], y[:1])
    assert len(est.predict(X[:1])[0]) == len(y[0])


def test_sequence_errors_are_clear():
    X, y = _sequences()
    est = StructuredSVM(max_iter=3)
    with pytest.raises(ValueError, match="no sequences"):
        est.fit([], [])
    with pytest.raises(ValueError, match="12 sequences but y has 11"):
        est.fit(X, y[:-1])
    for bad in (np.nan, np.inf):
        Xb = [x.copy() for x in X]
        Xb[4][1, 2] = bad
        with pytest.raises(ValueError, match=r"X\[4\] contains NaN or infinite"):
            est.fit(Xb, y)
    one_token = StructuredSVM(max_iter=3).fit([X[0][:1]], [y[0][:1]])
    assert len(one_token.predict([X[1][:1]])[0]) == 1
    est.fit(X, y)
    with pytest.raises(ValueError, match=r"X\[0\] is an empty sequence"):
        est.predict([np.zeros((0, 5))])
    with pytest.raises(ValueError, match=r"X\[0\] has 4 feature columns, expected 5"):
        est.predict([np.zeros((2, 4))])


def test_graph_errors_are_clear():
    X, Y = _graphs()
    est = SSVM(GraphCRF(3, 4), max_iter=3)
    with pytest.raises(ValueError, match="no graphs"):
        est.fit([], [])
    for bad in (np.nan, np.inf):
        Xb = [(nodes.copy(), edges) for nodes, edges in X]
        Xb[2][0][0, 1] = bad
        with pytest.raises(ValueError, match=r"X\[2\] contains NaN or infinite"):
            est.fit(Xb, Y)
    with pytest.raises(ValueError, match="X has 10 graphs, Y 9"):
        est.fit(X, Y[:-1])


def test_tagger_errors_are_clear():
    sents, tags = _sentences()
    tagger = SequenceTagger(svm=StructuredSVM(max_iter=3))
    with pytest.raises(ValueError, match="12 sentences but 11 label sequences"):
        tagger.fit(sents, tags[:-1])
    with pytest.raises(ValueError, match="no sentences"):
        tagger.fit([], [])


def test_convergence_warning_when_max_iter_stops_above_tol():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    X, y = _sequences()
    with pytest.warns(ConvergenceWarning, match=r"max_iter=2 passes .* above tol=1e-06"):
        StructuredSVM(max_iter=2, tol=1e-6, check_every=1).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        StructuredSVM(max_iter=2, tol=0.0).fit(X, y)  # tol=0 asks for exactly max_iter passes
        StructuredSVM(max_iter=500, tol=0.5).fit(X, y)  # stops on tol
        StructuredSVM(solver="ssg", max_iter=2, tol=1e-6).fit(X, y)  # no certificate
    Xg, Yg = _graphs()
    with pytest.warns(ConvergenceWarning):
        SSVM(GraphCRF(3, 4), max_iter=1, tol=1e-9).fit(Xg, Yg)


def test_label_and_token_errors_are_clear():
    from dualstruct.features import TokenFeatures

    X = [np.ones((2, 3)), np.ones((2, 3))]
    with pytest.raises(TypeError, match=r"y\[0\] mixes label types \['int', 'str'\]"):
        StructuredSVM(max_iter=2).fit(X, [["a", 1], ["b", "c"]])
    with pytest.raises(TypeError, match=r"y\[0\] holds strings, y\[1\] numbers"):
        StructuredSVM(max_iter=2).fit(X, [["a", "b"], [1, 2]])
    with pytest.raises(ValueError, match=r"y\[1\] holds a NaN label"):
        StructuredSVM(max_iter=2).fit(X, [[1.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(ValueError, match="max_iter must be an integer >= 1"):
        StructuredSVM(max_iter=0).fit(X, [["a", "b"], ["b", "a"]])
    with pytest.raises(TypeError, match=r"sentence 0, token 1, column 0: .* got NoneType"):
        TokenFeatures().fit_transform([[("a",), (None,)]])


def test_verbose_prints_the_last_line_once(capsys):
    X, y = _sequences()
    StructuredSVM(max_iter=500, tol=0.05, verbose=1, check_every=5, random_state=0).fit(X, y)
    lines = [ln.split() for ln in capsys.readouterr().out.splitlines()]
    passes = [ln[0] for ln in lines if ln and ln[0].isdigit()]
    assert passes and len(passes) == len(set(passes)), passes
