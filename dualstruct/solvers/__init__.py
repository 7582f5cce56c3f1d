"""Solvers: HOW a model is trained. All share :mod:`dualstruct.solvers.objective`."""

from .bcfw import BCFW
from .cutting_plane import CuttingPlane
from .gdmm import GDMM
from .history import History, Record
from .multilabel import MultiLabelBCFW, MultiLabelGDMM, MultiLabelSSG
from .objective import dual_objective, duality_gap, primal_objective
from .ssg import SSG

SOLVERS = {"bcfw": BCFW, "ssg": SSG, "cutting_plane": CuttingPlane, "gdmm": GDMM}
#: the solvers of multi-label models (the cutting plane serves both model kinds)
MULTILABEL_SOLVERS = {"bcfw": MultiLabelBCFW, "ssg": MultiLabelSSG,
                      "cutting_plane": CuttingPlane, "gdmm": MultiLabelGDMM}


def solver_class(name, model):
    """The class of solver ``name`` for ``model`` (chain or multi-label)."""
    table = MULTILABEL_SOLVERS if model.kind == "multilabel" else SOLVERS
    if name not in table:
        raise ValueError(f"solver must be one of {tuple(table)} for {model.kind} models, got "
                         f"{name!r}")
    return table[name]

__all__ = ["BCFW", "SSG", "CuttingPlane", "GDMM", "MultiLabelBCFW", "MultiLabelSSG",
           "MultiLabelGDMM",
           "SOLVERS", "MULTILABEL_SOLVERS", "solver_class", "History", "Record",
           "primal_objective", "dual_objective", "duality_gap"]
