"""Models: WHAT is predicted — factor structure, parameter layout, loss and oracles."""

from .chain import ChainModel, ChainWeights
from .multilabel import MultiLabelModel, MultiLabelWeights, chow_liu_edges

__all__ = ["ChainModel", "ChainWeights", "MultiLabelModel", "MultiLabelWeights",
           "chow_liu_edges"]
