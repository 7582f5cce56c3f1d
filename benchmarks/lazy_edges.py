"""GDMM on a multi-label full label graph: passes, seconds and peak memory to a certified gap.

``MultiLabelSVM(edges="full", solver="gdmm", C=1)`` (LP inference, the default weights)
trains until the certified relative gap reaches ``--tol``; the script prints the passes,
the training seconds, the seconds per pass (first 10 passes, and all), the active edges per
example at the end (GDMM's lazy edges) and the process's peak resident memory. One
problem per process, so that the peak is the run's own::

    python benchmarks/lazy_edges.py --problem bibtex
    python benchmarks/lazy_edges.py --problem yeast --check-every 5 --gdmm own

``--gdmm engine`` (the default) trains with GDMM over factors
(:class:`~dualstruct.solvers.FactorGDMM`), ``--gdmm own`` with the multi-label model's own
GDMM (:class:`~dualstruct.solvers.MultiLabelGDMM`, what ``solver="gdmm"`` chooses).
"""

import argparse
import resource
import sys
import time

import numpy as np

from dualstruct import MultiLabelSVM, solvers
from dualstruct.datasets import fetch_multilabel


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", default="bibtex", help="a dataset, or name:L (L top labels)")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--budget", type=float, default=900.0, help="seconds")
    ap.add_argument(
        "--solver-option", action="append", default=[], metavar="KEY=VALUE", help="repeatable"
    )
    ap.add_argument("--gdmm", choices=("engine", "own"), default="engine")
    args = ap.parse_args()
    if args.gdmm == "engine":
        solvers.SOLVERS["gdmm"] = lambda model: solvers.FactorGDMM
    name, _, count = args.problem.partition(":")
    X, Y = fetch_multilabel(name, "train")
    if count:
        Y = Y[:, np.argsort(-Y.sum(axis=0), kind="stable")[: int(count)]]
    options = {}
    for item in args.solver_option:
        key, _, value = item.partition("=")
        options[key] = value if value in ("auto", "True", "False") else float(value)
        options[key] = {"True": True, "False": False}.get(value, options[key])
        if value.lstrip("-").isdigit():  # steps, sweeps, shrink_after
            options[key] = int(value)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    est = MultiLabelSVM(
        edges="full",
        solver="gdmm",
        C=args.C,
        inference="lp",
        tol=args.tol,
        max_iter=args.max_iter,
        check_every=args.check_every,
        random_state=0,
        solver_options=options,
        callback=lambda est, record: record.time > args.budget,
    )
    t0, cpu = time.perf_counter(), time.process_time()
    est.fit(X, Y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu
    hist = est.history_.to_dicts()
    times, passes = np.array([r["time"] for r in hist]), np.array([r["passes"] for r in hist])
    early = times[np.searchsorted(passes, 10)] / passes[np.searchsorted(passes, 10)]
    last = est.history_.last_checked()
    solver = est.solver_
    rows = getattr(solver, "row_count", None)
    lazy = rows is not None and getattr(solver, "lazy", False)
    active = f"{rows.mean():.1f} (pool {len(solver.row_u):,} rows)" if lazy else "—"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.problem} C={args.C:g} {type(solver).__name__}: {est.n_iter_} passes, "
        f"{times[-1]:.1f} s train ({wall:.1f} s wall, {cpu:.1f} s CPU), s/pass first 10 passes "
        f"{early:.3f} all {times[-1] / passes[-1]:.3f}, "
        f"gap {last.relative_gap:.3%}, primal {last.primal:,.2f}, active edges/example "
        f"{active}, peak RSS {peak:.0f} MB (data loaded {before:.0f} MB)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
