"""Training history shared by all solvers: one record per monitored pass."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from ..plotting import plot_history

FIELDS = (
    "passes",
    "time",
    "eval_time",
    "oracle_calls",
    "primal",
    "dual",
    "gap",
    "relative_gap",
    "validation_score",
)


@dataclass
class Record:
    """One row of a training history.

    Quantities a solver does not have (the dual of SSG, the primal on passes without a check)
    are NaN.

    Parameters
    ----------
    passes : float
        Passes (or rounds) made.
    time : float
        Cumulative training time in seconds, excluding monitoring.
    eval_time : float
        Cumulative time spent computing primal objectives and validation scores.
    oracle_calls : int
    primal, dual, gap, relative_gap : float
        The exact primal ``P(w)``, the certified dual, ``P − D`` and ``(P − D) / |P|``.
    validation_score : float
        The held-out score at a check.
    extra : dict
        Solver-specific diagnostics (GDMM: residual, augmented objective, active-set sizes…).

    Examples
    --------
    >>> from dualstruct.solvers import Record
    >>> Record(passes=5, time=1.2, primal=10.0, dual=9.9).primal
    10.0
    """

    passes: float
    time: float
    eval_time: float = 0.0
    oracle_calls: int = 0
    primal: float = math.nan
    dual: float = math.nan
    gap: float = math.nan
    relative_gap: float = math.nan
    validation_score: float = math.nan
    #: solver-specific diagnostics (GDMM: residual, augmented objective, active-set sizes…)
    extra: dict = field(default_factory=dict)


@dataclass
class History:
    """A training history: one :class:`Record` per pass and the reason training stopped.

    Parameters
    ----------
    records : list of Record
    stop_reason : str
        ``"tol"`` (the certified gap reached it), ``"max_iter"``, ``"resolution"`` (the
        cutting plane found no constraint violated by more than its ``epsilon``: more
        iterations would not lower the gap), ``"callback"``,
        ``"interrupted"`` (Ctrl-C or SIGTERM, or a KeyboardInterrupt a method raised),
        ``"error"`` (training raised an exception, e.g. a
        :class:`~dualstruct.solvers.CertificateError`), or ``"running"`` while training goes
        on (a checkpoint's record).

    Examples
    --------
    >>> from dualstruct import StructuredSVM
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(20, 5, 3, 10, random_state=0)
    >>> history = StructuredSVM(max_iter=10, check_every=5, random_state=0).fit(X, y).history_
    >>> [record.passes for record in history if record.primal == record.primal]  # checked
    [5, 10]
    >>> history.as_arrays()["relative_gap"].shape
    (10,)
    """

    records: list = field(default_factory=list)
    stop_reason: str = ""

    def append(self, record: Record) -> None:
        self.records.append(record)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i):
        return self.records[i]

    def __iter__(self):
        return iter(self.records)

    @property
    def last(self) -> Record | None:
        return self.records[-1] if self.records else None

    def last_checked(self) -> Record | None:
        """The latest record whose primal objective was computed."""
        for r in reversed(self.records):
            if not math.isnan(r.primal):
                return r
        return None

    def as_arrays(self) -> dict:
        """Column arrays, one per field (for plotting and for model files)."""
        return {
            f: np.array([getattr(r, f) for r in self.records], dtype=np.float64) for f in FIELDS
        }

    @classmethod
    def from_arrays(cls, arrays: dict, stop_reason: str = "") -> History:
        n = len(arrays["passes"]) if "passes" in arrays else 0
        records = []
        for k in range(n):
            row = {f: float(arrays[f][k]) for f in FIELDS if f in arrays}
            row["oracle_calls"] = int(row.get("oracle_calls", 0))
            records.append(Record(**row))
        return cls(records, stop_reason)

    def to_dicts(self) -> list:
        return [asdict(r) for r in self.records]

    def plot(self, x="time", ax=None, label=None):
        """Draw primal, dual, gap and held-out score against ``x`` ("time" or "passes"):
        :func:`dualstruct.plot_history`."""
        return plot_history(self, x=x, ax=ax, label=label)


def format_header(with_validation: bool, step: str = "pass") -> str:
    cols = f"{step:>6} {'time(s)':>9} {'primal':>14} {'dual':>14} {'gap':>11} {'rel.gap':>9}"
    if with_validation:
        cols += f" {'val.score':>9}"
    return cols


def format_record(r: Record, with_validation: bool) -> str:
    def num(v, width, fmt):
        return f"{'—':>{width}}" if math.isnan(v) else f"{v:>{width}{fmt}}"

    line = (
        f"{r.passes:>6g} {r.time:>9.2f} {num(r.primal, 14, '.6g')} {num(r.dual, 14, '.6g')} "
        f"{num(r.gap, 11, '.4g')} {num(r.relative_gap, 9, '.2e')}"
    )
    if with_validation:
        line += f" {num(r.validation_score, 9, '.4f')}"
    for key, value in r.extra.items():
        line += f" {key}={value:.4g}"
    return line
