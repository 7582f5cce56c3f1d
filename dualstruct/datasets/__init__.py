"""Loaders for the standard benchmark files; ``fetch_*`` look in ``$DUALSTRUCT_DATA``."""

from ._base import data_dirs, default_cache_dir, find_data_file
from .conll import fetch_conll2000, fetch_ud_czech, load_conll, load_conllu
from .multilabel import fetch_multilabel, load_arff, load_libsvm_multilabel, read_mulan_labels
from .ocr import fetch_ocr, load_ocr
from .snakes import fetch_snakes, load_snakes
from .synthetic import make_chain, make_crosses

__all__ = [
    "load_ocr",
    "fetch_ocr",
    "make_chain",
    "make_crosses",
    "data_dirs",
    "default_cache_dir",
    "find_data_file",
    "load_libsvm_multilabel",
    "load_arff",
    "read_mulan_labels",
    "fetch_multilabel",
    "load_snakes",
    "fetch_snakes",
    "load_conll",
    "load_conllu",
    "fetch_conll2000",
    "fetch_ud_czech",
]
