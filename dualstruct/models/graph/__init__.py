"""Pairwise CRFs on per-example graphs (grids, trees, general graphs)."""

from .model import EdgeFeatureGraphCRF, GraphCRF, grid_edges, observed_support

__all__ = ["GraphCRF", "EdgeFeatureGraphCRF", "grid_edges", "observed_support"]
