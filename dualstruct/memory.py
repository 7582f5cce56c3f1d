"""Memory before training: what a solver will hold, and a refusal when it cannot fit.

A solver states its large arrays (:meth:`~dualstruct.solvers.base.PassSolver.memory_parts`);
:func:`check_memory` compares their sum with the memory the machine has available
(``MemAvailable`` of ``/proc/meminfo``), or with the limit in ``DUALSTRUCT_MEMORY_LIMIT``
(bytes, or a number with K, M, G or T), and raises :class:`MemoryError` with the estimate
and what to change, before anything is allocated.
"""

from __future__ import annotations

import os

ENV_LIMIT = "DUALSTRUCT_MEMORY_LIMIT"
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(text: str) -> int:
    """``"1500000"``, ``"512M"``, ``"2.5G"`` → bytes."""
    text = str(text).strip().upper().removesuffix("B").removesuffix("I")
    scale = 1
    if text and text[-1] in _UNITS:
        scale, text = _UNITS[text[-1]], text[:-1]
    try:
        value = float(text) * scale
    except ValueError:
        raise ValueError(f"{ENV_LIMIT} must be a number of bytes (e.g. 2G), got {text!r}") from None
    if not value > 0:
        raise ValueError(f"{ENV_LIMIT} must be positive")
    return int(value)


def available_bytes():
    """The memory training may use: ``DUALSTRUCT_MEMORY_LIMIT`` if set, else the kernel's
    ``MemAvailable``; None when neither is known (then nothing is refused)."""
    if os.environ.get(ENV_LIMIT):
        return parse_bytes(os.environ[ENV_LIMIT])
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def format_bytes(n: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def check_memory(name: str, parts: dict, advice: str = "") -> int:
    """Raise MemoryError when the arrays ``parts`` (name -> bytes) exceed what is available;
    returns their total."""
    total = int(sum(parts.values()))
    limit = available_bytes()
    if limit is not None and total > limit:
        listed = ", ".join(f"{k} {format_bytes(v)}" for k, v in parts.items() if v)
        source = ENV_LIMIT if os.environ.get(ENV_LIMIT) else "available memory"
        raise MemoryError(
            f"{name} would need about {format_bytes(total)} ({listed}); the {source} is "
            f"{format_bytes(limit)}. {advice}".rstrip()
        )
    return total


#: the options of an estimator that lower its memory, by the parameter that sets them
ESTIMATOR_LEVERS = (
    ("edges", "a sparser label graph (edges='tree', 'chain' or 'independent')"),
    ("weights", "sparse feature-label weights (weights='observed')"),
    ("weights_min_count", "a larger weights_min_count"),
)


def memory_advice(estimator, solver=None) -> str:
    """What to change when an estimator's memory estimate is refused, naming only the
    options ``estimator`` has (``get_params``): its own levers (:data:`ESTIMATOR_LEVERS`,
    those that would change something), those of its ``solver``
    (``solver.memory_levers``: ``(parameter, text)`` pairs), then fewer features (or a
    smaller model) and fewer examples."""
    params = estimator.get_params(deep=False)
    levers = []
    for name, text in ESTIMATOR_LEVERS + tuple(getattr(solver, "memory_levers", ())):
        value = params.get(name, None)
        if name not in params or any(text == t for t in levers):
            continue
        if name == "edges" and isinstance(value, str) and value == "independent":
            continue
        if name == "weights" and value == "observed":
            continue
        if name == "weights_min_count" and params.get("weights") != "observed":
            continue
        levers.append(text)
    model = params.get("model")
    if model is not None and not isinstance(model, str):  # a model object (SSVM)
        if getattr(model, "support", False) is None:
            levers.append("a model with sparse feature-label weights (its support=)")
        levers.append("a smaller model (fewer features or labels)")
    else:
        levers.append("fewer features")
    levers.append("a subset of the examples")
    return "Lower it with " + ", ".join(levers[:-1]) + " or " + levers[-1] + "."
