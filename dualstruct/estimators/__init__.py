"""Estimators: HOW a model is used (scikit-learn API)."""

from .ssvm import SSVM

__all__ = ["SSVM"]
