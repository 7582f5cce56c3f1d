"""Loaders for the standard benchmark files; ``fetch_*`` look in ``$DUALSTRUCT_DATA``."""

from ._base import data_dirs, default_cache_dir, find_data_file
from .ocr import fetch_ocr, load_ocr
from .synthetic import make_chain

__all__ = ["load_ocr", "fetch_ocr", "make_chain", "data_dirs", "default_cache_dir",
           "find_data_file"]
