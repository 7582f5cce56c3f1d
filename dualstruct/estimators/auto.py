"""``solver="auto"``: GDMM or BCFW for the problem at hand, by a rule measured on the benchmark
problems (BENCHMARKS.md, "Choosing the solver"; docs/user_guide/solvers.rst).

* A setting GDMM does not train (slack rescaling, 2×2 interaction tables, exact inference on
  a loopy label graph, Spark, a model without factor functions) gets BCFW, and so do graph
  CRFs, the multi-class and user models, where no benchmark shows GDMM certifying sooner.
* Solver options that only one of the two takes choose that one.
* Chains: GDMM from ``CHAIN_GDMM_MIN_LABELS`` labels on.
* Multi-label models: GDMM where BCFW's classic step (the step it takes on the LP relaxation)
  would keep more than ``CLASSIC_STEP_MAX_BYTES`` of per-example weights, and where the
  examples times the weights reach ``MULTILABEL_GDMM_MIN_WORK``.
* C does not enter: on yeast (C = 0.01–100) and on bibtex's 20 labels (C = 1 and 10) the
  faster solver stayed the faster one; on chains of 500 labels or more GDMM led on both
  Czech splits at C = 0.1 and on the K = 954 chain at C = 0.01, 10 and 100, BCFW on that
  chain at C = 0.1.
* Otherwise BCFW (its default step and proximal scheme; GDMM's penalty is its default, in
  units of the problem's scale).
"""

from __future__ import annotations

import inspect
from typing import NamedTuple

from ..solvers import solver_class, solver_names
from ..solvers.block import CLASSIC_STEP_MAX_BYTES, BlockBCFW

AUTO = "auto"

#: chains: GDMM from this many labels on (BENCHMARKS.md, "GDMM and large label sets"): GDMM
#: certifies sooner at K = 552 (Czech XPOS) and K = 954, and its pass is over ten times
#: cheaper on the pooled Czech split (K = 971); at K ≤ 300 a BCFW pass costs less and GDMM
#: needs more passes (OCR: 250 against 40)
CHAIN_GDMM_MIN_LABELS = 500
#: multi-label models: GDMM from this many examples × weights on. Measured on the full
#: graph at C = 1: yeast (2.3 M) and scene (2.2 M) BCFW certifies 1% 3.7× and 1.3× sooner;
#: bibtex's 10 to 80 most frequent labels (90 M and more) GDMM 5× to over 15× sooner
MULTILABEL_GDMM_MIN_WORK = 10**7
#: where the rule's figures are
WHERE = "BENCHMARKS.md, 'Choosing the solver'"


class SolverChoice(NamedTuple):
    """The solver an estimator trains with and why (its ``solver_choice_``)."""

    solver: str
    reason: str

    def __str__(self):
        return f"solver {self.solver}: {self.reason}"


def given(solver) -> SolverChoice:
    """The choice of an explicit ``solver`` parameter."""
    return SolverChoice(solver, "set by the solver parameter")


def resolved(est) -> str:
    """The solver name ``est`` trains with: its ``solver``, or what "auto" chose."""
    if est.solver != AUTO:
        return est.solver
    choice = getattr(est, "solver_choice_", None)
    if choice is None:
        raise ValueError("solver='auto' has not chosen a solver yet (fit first)")
    return choice.solver


def _accepted(cls) -> set:
    """The keyword arguments the constructors along ``cls``'s classes name."""
    names = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for p in inspect.signature(init).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self":
                names.add(p.name)
    return names


def _by_options(options, gdmm_class):
    """The solver that ``solver_options`` name settings of, when only one of the two takes
    them all (None: both, or neither)."""
    keys = set(options or {})
    if not keys:
        return None
    bcfw_ok = keys <= _accepted(BlockBCFW)
    gdmm_ok = gdmm_class is not None and keys <= _accepted(gdmm_class)
    if bcfw_ok and not gdmm_ok:
        return SolverChoice("bcfw", f"solver_options {sorted(keys)} are BCFW's")
    if gdmm_ok and not bcfw_ok:
        return SolverChoice("gdmm", f"solver_options {sorted(keys)} are GDMM's")
    return None


def choose_chain(model, *, rescaling="margin", backend="local", solver_options=None):
    """The choice for a chain ``model`` (:class:`~dualstruct.models.ChainModel`)."""
    K = model.n_labels
    cannot = _cannot(model, rescaling, backend)
    if cannot:
        return SolverChoice("bcfw", cannot)
    by_options = _by_options(solver_options, solver_class("gdmm", model))
    if by_options is not None:
        return by_options
    if K >= CHAIN_GDMM_MIN_LABELS:
        return SolverChoice(
            "gdmm",
            f"{K} labels, at least {CHAIN_GDMM_MIN_LABELS}: GDMM's pass avoids Viterbi's "
            f"K^2 work ({WHERE})",
        )
    return SolverChoice(
        "bcfw",
        f"{K} labels, under {CHAIN_GDMM_MIN_LABELS}: BCFW needs fewer passes, none dearer "
        f"({WHERE})",
    )


def choose_multilabel(
    model_kind,
    n_examples,
    n_labels,
    n_pairs,
    n_weights,
    forest,
    *,
    inference="auto",
    rescaling="margin",
    interactions="11",
    backend="local",
    solver_options=None,
):
    """The choice for a multi-label model of ``n_labels`` labels, ``n_pairs`` interacting
    pairs (a ``forest`` or not) and ``n_weights`` weights, trained on ``n_examples``;
    ``model_kind`` is a :class:`~dualstruct.models.MultiLabelModel` (its class is enough)."""
    cannot = _cannot(model_kind, rescaling, backend)
    if not cannot and interactions != "11":
        cannot = "GDMM scores the (1, 1) outcome of a pair only, not 2×2 tables"
    if not cannot and inference == "exact" and not forest:
        cannot = "GDMM trains the LP relaxation, and inference='exact' on a loopy graph"
    if cannot:
        return SolverChoice("bcfw", cannot)
    by_options = _by_options(solver_options, solver_class("gdmm", model_kind))
    if by_options is not None:
        return by_options
    relaxed = not forest and (inference == "lp" or n_labels > 10)
    shares = 8 * n_examples * n_weights
    if relaxed and shares > CLASSIC_STEP_MAX_BYTES:
        return SolverChoice(
            "gdmm",
            f"BCFW's classic step on the LP would keep {shares / 2**30:.1f} GiB of "
            f"per-example weights (at most {CLASSIC_STEP_MAX_BYTES / 2**30:.0f} GiB)",
        )
    work = n_examples * n_weights
    size = f"{n_examples:,} examples × {n_weights:,} weights ({n_labels} labels, {n_pairs:,} pairs)"
    if work >= MULTILABEL_GDMM_MIN_WORK:
        return SolverChoice(
            "gdmm",
            f"{size}, at least {MULTILABEL_GDMM_MIN_WORK:,}: GDMM certifies sooner ({WHERE})",
        )
    return SolverChoice(
        "bcfw",
        f"{size}, under {MULTILABEL_GDMM_MIN_WORK:,}: BCFW certifies sooner ({WHERE})",
    )


def choose_other(model, backend="local"):
    """The choice for any other model: BCFW, the solver every model trains with."""
    if backend != "local":
        return SolverChoice("bcfw", f"backend={backend!r} trains BCFW (CoCoA+)")
    if "gdmm" not in solver_names(model):
        return SolverChoice("bcfw", f"GDMM does not train {type(model).__name__}")
    return SolverChoice(
        "bcfw", f"no benchmark shows GDMM certifying sooner on {type(model).__name__}"
    )


def _cannot(model, rescaling, backend):
    """Why GDMM cannot train this setting ('' when it can)."""
    if backend != "local":
        return f"backend={backend!r} trains BCFW (CoCoA+)"
    if "gdmm" not in solver_names(model):
        return f"GDMM does not train {getattr(model, '__name__', type(model).__name__)}"
    if rescaling != "margin":
        return "GDMM trains margin rescaling only"
    return ""
