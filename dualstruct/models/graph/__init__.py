"""Pairwise CRFs on per-example graphs (grids, trees, general graphs)."""

from .model import EdgeFeatureGraphCRF, GraphCRF, grid_edges

__all__ = ["GraphCRF", "EdgeFeatureGraphCRF", "grid_edges"]
