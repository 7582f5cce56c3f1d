"""dualstruct: fast structural SVMs trained in the dual, with duality-gap certificates."""

__version__ = "0.1.0.dev0"

from ._numba_cache import configure_numba_cache  # noqa: E402

configure_numba_cache()  # before any kernel is defined

from .estimators import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM, load  # noqa: E402
from .plotting import plot_history  # noqa: E402
from .sequences import PackedSequences, pack_sequences  # noqa: E402

__all__ = [
    "StructuredSVM",
    "SSVM",
    "MultiLabelSVM",
    "MultiClassSVM",
    "load",
    "PackedSequences",
    "pack_sequences",
    "plot_history",
    "__version__",
]
