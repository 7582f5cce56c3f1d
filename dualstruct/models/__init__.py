"""Models: WHAT is predicted — factor structure, parameter layout, loss and oracles."""

from .._pystruct import models_getattr

# the factor functions GDMM trains the chain, multi-class, graph and multi-label models with
from . import (  # noqa: E402, F401
    chain_factors,
    factors,
    graph_factors,
    multiclass_factors,
    multilabel_factors,
)
from .base import KernelModel, StructuredModel
from .chain import ChainModel, ChainWeights
from .graph import EdgeFeatureGraphCRF, GraphCRF, grid_edges
from .grid import DirectionalGridCRF, EdgeFeatureGridCRF, GridCRF
from .latent import LatentGraphCRF
from .multiclass import MultiClassModel
from .multilabel import MultiLabelModel, MultiLabelWeights, chow_liu_edges
from .user import UserModel

__all__ = [
    "StructuredModel",
    "KernelModel",
    "UserModel",
    "MultiClassModel",
    "GraphCRF",
    "EdgeFeatureGraphCRF",
    "LatentGraphCRF",
    "GridCRF",
    "DirectionalGridCRF",
    "EdgeFeatureGridCRF",
    "grid_edges",
    "ChainModel",
    "ChainWeights",
    "MultiLabelModel",
    "MultiLabelWeights",
    "chow_liu_edges",
]


def __getattr__(name):
    """PyStruct's model names (``ChainCRF``, …): an ImportError saying what to use instead."""
    return models_getattr(name, globals())
