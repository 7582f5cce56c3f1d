"""Models: WHAT is predicted — factor structure, parameter layout, loss and oracles."""

from .base import KernelModel, StructuredModel
from .chain import ChainModel, ChainWeights
from .graph import EdgeFeatureGraphCRF, GraphCRF, grid_edges
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
    "grid_edges",
    "ChainModel",
    "ChainWeights",
    "MultiLabelModel",
    "MultiLabelWeights",
    "chow_liu_edges",
]
