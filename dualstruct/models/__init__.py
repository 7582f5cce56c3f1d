"""Models: WHAT is predicted — factor structure, parameter layout, loss and oracles."""

from .chain import ChainModel, ChainWeights

__all__ = ["ChainModel", "ChainWeights"]
