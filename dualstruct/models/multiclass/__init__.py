"""Multi-class classification as a structured model (Crammer–Singer)."""

from .model import MultiClassModel

__all__ = ["MultiClassModel"]
