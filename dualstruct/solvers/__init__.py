"""Solvers: HOW a model is trained. All share :mod:`dualstruct.solvers.objective`."""

from .bcfw import BCFW
from .cutting_plane import CuttingPlane
from .gdmm import GDMM
from .history import History, Record
from .objective import dual_objective, duality_gap, primal_objective
from .ssg import SSG

SOLVERS = {"bcfw": BCFW, "ssg": SSG, "cutting_plane": CuttingPlane, "gdmm": GDMM}

__all__ = ["BCFW", "SSG", "CuttingPlane", "GDMM", "SOLVERS", "History", "Record",
           "primal_objective", "dual_objective", "duality_gap"]
