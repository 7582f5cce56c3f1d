"""dualstruct: fast structural SVMs trained in the dual, with duality-gap certificates."""

__version__ = "0.1.0.dev0"

from ._numba_cache import configure_numba_cache  # noqa: E402

configure_numba_cache()  # before any kernel is defined

from . import models  # noqa: E402
from ._pystruct import missing_name as _missing_name  # noqa: E402
from .estimators import (  # noqa: E402
    SSVM,
    LatentSSVM,
    MultiClassSVM,
    MultiLabelSVM,
    PathPoint,
    StructuredSVM,
    load,
    regularization_path,
)
from .plotting import plot_history  # noqa: E402
from .sequences import PackedSequences, pack_sequences  # noqa: E402
from .solvers import CertificateError  # noqa: E402

__all__ = [
    "StructuredSVM",
    "SSVM",
    "LatentSSVM",
    "MultiLabelSVM",
    "MultiClassSVM",
    "load",
    "regularization_path",
    "PathPoint",
    "PackedSequences",
    "pack_sequences",
    "plot_history",
    "CertificateError",
    "__version__",
]


def __getattr__(name):
    """PyStruct's learner and model class names: stand-ins whose construction says what to
    use instead (see the migration guide); AttributeError for anything else."""
    return _missing_name(__name__, name, models.__all__)
