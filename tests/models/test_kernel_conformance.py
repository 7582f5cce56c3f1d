"""Every built-in kernel model passes ``dualstruct.testing.check_kernel_model`` on tiny
inputs: its compiled functions agree with its ``joint_feature``, ``loss`` and brute force."""

import numpy as np
import pytest

from dualstruct import models
from dualstruct.models import (
    ChainModel,
    DirectionalGridCRF,
    EdgeFeatureGraphCRF,
    EdgeFeatureGridCRF,
    GraphCRF,
    GridCRF,
    LatentGraphCRF,
    MultiClassModel,
    MultiLabelModel,
    grid_edges,
)
from dualstruct.models.multilabel import MultiLabelRowsModel
from dualstruct.sequences import pack_sequences
from dualstruct.testing import check_kernel_model

K, D = 3, 4  # labels, features


def _sequences(rng, n=4):
    X = [rng.normal(size=(int(rng.integers(1, 4)), D)) for _ in range(n)]
    return X, [rng.integers(0, K, len(x)) for x in X]


def _chain(support=None, **options):
    def case(rng):
        X, Y = _sequences(rng)
        model = ChainModel(K, D, support=support, **options)
        return model, X, Y, {"data": model.block_data(pack_sequences(X, Y))}

    return case


# feature f scores only labels[indptr[f]:indptr[f + 1]]: a row of one, two and all labels
SPARSE_SUPPORT = (np.array([0, 2, 3, 6, 7]), np.array([0, 2, 1, 0, 1, 2, 2]))


def _multilabel(edges):
    def case(rng):
        X, Y = rng.normal(size=(4, D)), rng.integers(0, 2, (4, 4))
        model = MultiLabelModel(4, D, edges=edges, loss_weights=rng.uniform(0.5, 2, 4))
        if edges == "tree":
            model.fit_edges(Y)
        return model, X, Y, {"data": MultiLabelRowsModel(model).block_data(X, Y), "n_states": 2}

    return case


def _multiclass(rng):
    model = MultiClassModel(K, D, loss_weights=[1.0, 2.0, 0.5])
    return model, rng.normal(size=(5, D)), rng.integers(0, K, 5), {}


def _graphs(rng, n_states, edge_features=False):
    """A 1 × 3 chain and a 2 × 2 cycle, with one-hot directions as edge features."""
    X, Y = [], []
    for shape in ((1, 3), (2, 2), (1, 1)):
        edges, directions = grid_edges(*shape, directions=True)
        nodes = rng.normal(size=(shape[0] * shape[1], D))
        X.append((nodes, edges, directions) if edge_features else (nodes, edges))
        Y.append(rng.integers(0, n_states, len(nodes)))
    return X, Y


def _graph_crf(rng):
    X, Y = _graphs(rng, K)
    return GraphCRF(K, D, inference_method="exact"), X, Y, {}


def _edge_feature_graph_crf(rng):
    X, Y = _graphs(rng, K, edge_features=True)
    return EdgeFeatureGraphCRF(K, D, 2, inference_method="exact"), X, Y, {}


def _images(rng, n_states):
    X = [rng.normal(size=(*shape, D)) for shape in ((2, 2), (1, 3), (3, 1))]
    return X, [rng.integers(0, n_states, x.shape[:2]) for x in X]


def _grid(cls, **options):
    def case(rng):
        X, Y = _images(rng, K)
        return cls(K, D, **options), X, Y, {}

    return case


def _edge_feature_grid(rng):
    images, Y = _images(rng, K)
    X = [(x, rng.normal(size=(len(grid_edges(*x.shape[:2])), 2))) for x in images]
    return EdgeFeatureGridCRF(K, D, 2), X, Y, {}


def _latent_graph_crf(rng):
    model = LatentGraphCRF(2, D, n_states_per_label=[1, 2], loss_weights=[1.0, 1.5])
    X, H = _graphs(rng, model.n_states)
    return model, X, H, {}


CASES = {
    "chain": _chain(),
    "chain-no-start-end": _chain(start_end=False),
    "chain-weighted-loss": _chain(loss_weights=[1.0, 2.0, 0.5]),
    "chain-sparse-weights": _chain(SPARSE_SUPPORT),
    "multilabel-independent": _multilabel("independent"),
    "multilabel-tree": _multilabel("tree"),
    "multilabel-full": _multilabel("full"),
    "multiclass": _multiclass,
    "graph-crf": _graph_crf,
    "edge-feature-graph-crf": _edge_feature_graph_crf,
    "grid-crf": _grid(GridCRF),
    "grid-crf-8-directed": _grid(GridCRF, neighborhood=8, directed=True),
    "directional-grid-crf": _grid(DirectionalGridCRF),
    "directional-grid-crf-8": _grid(DirectionalGridCRF, neighborhood=8),
    "edge-feature-grid-crf": _edge_feature_grid,
    "latent-graph-crf": _latent_graph_crf,
}


# compiling the checks for the latent model's kernel (the graph CRF's inside) takes ~30 s
SLOW = {"latent-graph-crf"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CASES]
)
def test_builtin_model_passes_check_kernel_model(name):
    model, X, Y, options = CASES[name](np.random.default_rng(sorted(CASES).index(name)))
    check_kernel_model(model, X, Y, **options)


def test_every_builtin_kernel_model_is_checked():
    kernel_models = {
        name
        for name in models.__all__
        if isinstance(getattr(models, name), type)
        and issubclass(getattr(models, name), models.KernelModel)
        and name not in ("KernelModel", "UserModel")
    }
    checked = {type(CASES[name](np.random.default_rng(0))[0]).__name__ for name in CASES}
    assert kernel_models <= checked, kernel_models - checked
