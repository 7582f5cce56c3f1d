"""The chain and multi-label models are kernel models: the solvers take them as they are,
and their hinge and prediction on their own data formats are the kernel's."""

import numpy as np
import pytest
import scipy.sparse as sp

from dualstruct import pack_sequences
from dualstruct.models import ChainModel, KernelModel, MultiLabelModel
from dualstruct.models.multilabel import MultiLabelDataset
from dualstruct.solvers.base import kernel_model


@pytest.mark.parametrize("model", [ChainModel(3, 4), MultiLabelModel(4, 3, edges="chain")])
def test_builtin_models_are_their_own_kernel_models(model):
    assert isinstance(model, KernelModel)
    assert kernel_model(model) is model
    assert not hasattr(model, "kernel_model")


def test_chain_hinge_and_prediction_on_packed_sequences_are_the_kernels():
    rng = np.random.default_rng(0)
    X = [rng.normal(size=(rng.integers(1, 5), 4)) for _ in range(6)]
    Y = [rng.integers(0, 3, len(x)) for x in X]
    data = pack_sequences(X, Y)
    chain = ChainModel(3, 4)
    w = rng.normal(size=chain.size)
    blocks = chain.block_data(data)
    for got, want in zip(chain.hinge(w, data), chain.hinge(w, blocks)):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(chain.predict(w, data), chain.decode(w, blocks))


@pytest.mark.parametrize("inference", ["exact", "lp"])
def test_multilabel_hinge_on_the_scoring_edges_equals_the_full_graphs(inference):
    """Edges with an all-zero table are left out of the hinge's kernel: the same values."""
    rng = np.random.default_rng(1)
    X = sp.random(8, 5, density=0.6, random_state=2, format="csr")
    Y = (rng.random((8, 6)) < 0.4).astype(int)
    data = MultiLabelDataset(X, Y)
    model = MultiLabelModel(6, 5, edges="full", inference=inference)
    w = rng.normal(size=model.size)
    w[model.n_unary :: 2] = 0.0  # every other edge scores nothing
    hinge, y = model.hinge(w, data)
    full, y_full = model.hinge(w, model.block_data(data))
    np.testing.assert_allclose(hinge, full, rtol=1e-12, atol=1e-12)
    assert y.shape == Y.shape
    if inference == "exact":
        np.testing.assert_array_equal(y.ravel(), y_full)
