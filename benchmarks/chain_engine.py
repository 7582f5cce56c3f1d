"""GDMM on chains: the factor engine (:class:`~dualstruct.solvers.FactorGDMM` over the chain's
factor functions) against the chain's own GDMM (:class:`~dualstruct.solvers.GDMM`), in time
to certainly within 1% (a primal at most 1.01 × the lower end of the certified bracket of
``large_labels.REFERENCES``), with the data, C and tuning of ``benchmarks/large_labels.py``.

    python benchmarks/chain_engine.py --problems ocr,chain1000 --solvers engine,old --repeats 3

Prints one row per run: problem, solver, passes and training seconds to 1% (wall, and the
process's CPU seconds, steadier on a shared machine), seconds per pass, active states per
node at the end. Runs alternate between the solvers (old, new, old, …) so
that a shared machine slows both alike; ``--option name=value`` passes an option to the
engine (``steps=1``, ``shrink_after=5``…).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import large_labels  # noqa: E402

import dualstruct.solvers as solvers  # noqa: E402
from dualstruct import StructuredSVM  # noqa: E402


def dataset(name):
    ds = large_labels.ocr_dataset() if name == "ocr" else large_labels.chain_dataset(1000)
    ds["C"] = large_labels.C_DEFAULT[ds["kind"]]
    return ds


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def run(ds, solver, options, max_iter, check_every, budget):
    """Train until the 1% line (or ``max_iter`` passes, ``budget`` training seconds)."""
    line = 1.01 * large_labels.REFERENCES[ds["name"]][0]
    tuning = dict(large_labels.GDMM_TUNING[ds["name"]])
    averaging = bool(tuning.pop("averaging", True))
    extra = dict(options) if solver == "engine" else {}
    reached = {}
    # CPU seconds of the passes (the machine is shared): a pass with a check counts as the
    # mean of the passes without one since the last check
    cpu = dict(last=time.process_time(), total=0.0, window=[])

    def stop(est, record):
        now = time.process_time()
        delta, cpu["last"] = now - cpu["last"], now
        if math.isnan(record.primal):
            cpu["window"].append(delta)
            cpu["total"] += delta
        else:
            window = cpu["window"] or [delta]
            cpu["total"] += sum(window) / len(window)
            cpu["window"] = []
        if not math.isnan(record.primal) and record.primal <= line and not reached:
            reached.update(passes=record.passes, time=record.time, cpu=cpu["total"])
            return True
        return record.time > budget

    saved = solvers.SOLVERS["gdmm"]
    if solver == "engine":
        solvers.SOLVERS["gdmm"] = lambda model: solvers.FactorGDMM
    try:
        est = StructuredSVM(
            C=ds["C"],
            solver="gdmm",
            max_iter=max_iter,
            check_every=check_every,
            tol=0,
            averaging=averaging,
            fit_intercept=ds["fit_intercept"],
            random_state=0,
            callback=stop,
            solver_options={**tuning, **extra},
        )
        est.fit(ds["Xtr"], ds["ytr"])
    finally:
        solvers.SOLVERS["gdmm"] = saved
    hist = est.history_
    last = hist.last
    extra_figures = last.extra if last is not None else {}
    states = extra_figures.get("active_states", extra_figures.get("active_labels", math.nan))
    return dict(
        passes=reached.get("passes", math.nan),
        seconds=reached.get("time", math.nan),
        cpu=reached.get("cpu", math.nan),
        cpu_per_pass=cpu["total"] / max(last.passes, 1),
        s_per_pass=last.time / max(last.passes, 1),
        states=float(states),
        last_primal=hist.last_checked().primal,
        passes_run=last.passes,
    )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="ocr,chain1000")
    ap.add_argument("--solvers", default="old,engine")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--budget", type=float, default=900.0, help="training seconds per run")
    ap.add_argument("--option", action="append", default=[], help="engine option name=value")
    ap.add_argument("--plot", default=None, help="a figure of seconds to 1%% per run")
    args = ap.parse_args(argv)
    options = {}
    for item in args.option:
        name, _, value = item.partition("=")
        options[name] = parse_value(value)
    names = [s for s in args.solvers.split(",") if s]
    print(f"engine options: {options or 'defaults'}")
    print(
        "| problem | solver | passes to 1% | s to 1% | CPU s to 1% | s per pass | CPU s per pass "
        "| active states |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = []
    for problem in [p for p in args.problems.split(",") if p]:
        ds = dataset(problem)
        for solver in names:  # compile (or load) the kernels outside the timed runs
            run(ds, solver, options, 2, 1, args.budget)
        for r in range(args.repeats):
            for solver in names if r % 2 == 0 else names[::-1]:
                t0 = time.perf_counter()
                out = run(ds, solver, options, args.max_iter, args.check_every, args.budget)
                out.update(problem=problem, solver=solver, wall=time.perf_counter() - t0)
                rows.append(out)
                print(
                    f"| {problem} | {solver} | {out['passes']} | {out['seconds']:.1f} | "
                    f"{out['cpu']:.1f} | {out['s_per_pass']:.4f} | {out['cpu_per_pass']:.4f} | "
                    f"{out['states']:.1f} |",
                    flush=True,
                )
        if args.repeats > 1:
            for solver in names:
                mine = [o for o in rows if o["problem"] == problem and o["solver"] == solver]
                print(
                    f"| {problem} | {solver}, median of {len(mine)} | "
                    f"{statistics.median(o['passes'] for o in mine)} | "
                    f"{statistics.median(o['seconds'] for o in mine):.1f} | "
                    f"{statistics.median(o['cpu'] for o in mine):.1f} | "
                    f"{statistics.median(o['s_per_pass'] for o in mine):.4f} | "
                    f"{statistics.median(o['cpu_per_pass'] for o in mine):.4f} | "
                    f"{statistics.median(o['states'] for o in mine):.1f} |",
                    flush=True,
                )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3))
        labels = [f"{o['problem']}\n{o['solver']}" for o in rows]
        ax.bar(range(len(rows)), [o["seconds"] for o in rows])
        ax.set_xticks(range(len(rows)), labels, fontsize=7)
        ax.set_ylabel("seconds to 1%")
        fig.tight_layout()
        fig.savefig(args.plot)


if __name__ == "__main__":
    main()
