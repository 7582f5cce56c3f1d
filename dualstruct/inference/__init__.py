"""Inference kernels: numba functions on plain arrays (no classes, no Python objects)."""
