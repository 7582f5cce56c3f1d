"""Training data as the block solvers see it: a model's kernel (arrays) split into blocks."""

from .blocks import BlockData

__all__ = ["BlockData"]
