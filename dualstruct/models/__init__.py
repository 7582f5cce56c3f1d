"""Models: WHAT is predicted — factor structure, parameter layout, loss and oracles."""

from .base import KernelModel, StructuredModel
from .chain import ChainModel, ChainWeights
from .multiclass import MultiClassModel
from .multilabel import MultiLabelModel, MultiLabelWeights, chow_liu_edges
from .user import UserModel

__all__ = ["StructuredModel", "KernelModel", "UserModel", "MultiClassModel", "ChainModel",
           "ChainWeights", "MultiLabelModel", "MultiLabelWeights", "chow_liu_edges"]
