"""Solvers: HOW a model is trained. All share :mod:`dualstruct.solvers.objective`.

BCFW, SSG and the cutting plane are written once over the model-kernel interface of
:mod:`dualstruct.models.base` and train every model. GDMM trains every model that registers
the factor functions of :mod:`dualstruct.models.factors` (:class:`GDMM`, also named
``FactorGDMM``: the chain and multi-class models, the graph CRFs, users' kernel models,
and the multi-label model when asked for by class); the multi-label model's
``solver="gdmm"`` is still its own :class:`MultiLabelGDMM`.
"""

from ..models.multilabel import MultiLabelModel
from .block import BlockBCFW, BlockSSG
from .cutting_plane import CuttingPlane
from .factor_gdmm import GDMM, FactorGDMM, check_factor_model
from .history import History, Record
from .multilabel import MultiLabelGDMM
from .objective import CertificateError, dual_objective, duality_gap, primal_objective

#: the public names of the block solvers
BCFW, SSG = BlockBCFW, BlockSSG


def gdmm_class(model):
    """The GDMM for ``model`` (a model or a model class): the multi-label model's own, else
    :class:`GDMM` when the model's kernel registered the factor functions; a
    ValueError names what is missing otherwise."""
    cls = model if isinstance(model, type) else type(model)
    if issubclass(cls, MultiLabelModel):
        return MultiLabelGDMM
    check_factor_model(model)
    return GDMM


#: every solver by the name estimators and the command line use; a name maps to a class, or
#: to a function of the model that returns one where the algorithm depends on it (GDMM)
SOLVERS = {
    "bcfw": BlockBCFW,
    "ssg": BlockSSG,
    "cutting_plane": CuttingPlane,
    "gdmm": gdmm_class,
}


def solver_class(name, model):
    """The class of solver ``name`` for ``model`` (a model or a model class)."""
    if name not in SOLVERS:
        raise ValueError(f"solver must be one of {tuple(SOLVERS)}, got {name!r}")
    entry = SOLVERS[name]
    if isinstance(entry, type):
        return entry
    try:
        return entry(model)
    except ValueError as exc:
        what = getattr(model, "__name__", type(model).__name__)
        raise ValueError(f"solver {name!r} cannot train {what}: {exc}") from None


def solver_names(model=None):
    """The solver names available for ``model`` (a model or a model class; all names when
    None)."""
    names = []
    for name, entry in SOLVERS.items():
        if model is not None and not isinstance(entry, type):
            try:
                entry(model)
            except ValueError:
                continue
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
    "FactorGDMM",
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
