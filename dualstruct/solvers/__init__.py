"""Solvers: HOW a model is trained. All share :mod:`dualstruct.solvers.objective`.

BCFW, SSG and the cutting plane are written once over the model-kernel interface of
:mod:`dualstruct.models.base` and train every model; GDMM works on the factors of the chain
and multi-label models.
"""

from .block import BlockBCFW, BlockSSG
from .cutting_plane import CuttingPlane
from .gdmm import GDMM
from .history import History, Record
from .multilabel import MultiLabelGDMM
from .objective import CertificateError, dual_objective, duality_gap, primal_objective

#: the public names of the block solvers
BCFW, SSG = BlockBCFW, BlockSSG

#: every solver by the name estimators and the command line use; a name maps to one class,
#: or to one class per model kind where the algorithm is model-specific (GDMM)
SOLVERS = {
    "bcfw": BlockBCFW,
    "ssg": BlockSSG,
    "cutting_plane": CuttingPlane,
    "gdmm": {"chain": GDMM, "multilabel": MultiLabelGDMM},
}


def solver_class(name, model):
    """The class of solver ``name`` for ``model``."""
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {tuple(SOLVERS)}, got {name!r}")
    entry = SOLVERS[name]
    if isinstance(entry, dict):
        kind = getattr(model, "kind", None)
        if kind not in entry:
            raise ValueError(
                f"solver {name!r} trains {' and '.join(entry)} models, not {type(model).__name__}"
            )
        return entry[kind]
    return entry


def solver_names(model=None):
    """The solver names available for ``model`` (all names when None)."""
    names = []
    for name, entry in SOLVERS.items():
        if model is None or not isinstance(entry, dict) or getattr(model, "kind", None) in entry:
            names.append(name)
    return tuple(names)


__all__ = [
    "BCFW",
    "SSG",
    "BlockBCFW",
    "BlockSSG",
    "CuttingPlane",
    "GDMM",
    "MultiLabelGDMM",
    "SOLVERS",
    "solver_class",
    "solver_names",
    "CertificateError",
    "History",
    "Record",
    "primal_objective",
    "dual_objective",
    "duality_gap",
]
