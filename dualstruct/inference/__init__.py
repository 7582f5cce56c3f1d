"""Inference kernels: numba functions on plain arrays (no classes, no Python objects), and
checked front ends of the pairwise-graph maximizers for custom graph models."""

from .pairwise import (
    enumerate_map,
    forest_map,
    is_forest,
    labelling_score,
    lp_map,
    pairwise_map,
)

__all__ = [
    "pairwise_map",
    "forest_map",
    "enumerate_map",
    "lp_map",
    "is_forest",
    "labelling_score",
]
