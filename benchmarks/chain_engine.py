"""GDMM on chains: this checkout's GDMM (the factor engine over the chain's factor functions)
against the chain's former GDMM from another checkout (``--old-checkout``), in time to
certainly within 1% (a primal at most 1.01 × the lower end of the certified bracket of
``large_labels.REFERENCES``; a certified relative gap of 1% on problems without one), or in
seconds per pass (``--per-pass N``: N passes, no check), with the data, C and tuning of this
checkout's ``benchmarks/large_labels.py``.

    python benchmarks/chain_engine.py --problems ocr,chain1000 --solvers old,engine \\
        --old-checkout ../old --repeats 3
    python benchmarks/chain_engine.py --problems ocr --per-pass 20 --old-checkout ../old

Every run is its own process (``PYTHONPATH`` the checkout: this one for ``engine``,
``--old-checkout`` for ``old``, with its own numba cache; ``old`` needs a checkout that has
the chain's former GDMM, ``dualstruct/solvers/gdmm.py``, where ``engine`` means its
``FactorGDMM``). Prints one row per run: problem, solver, passes and training seconds to
1% (wall, and the process's CPU seconds, steadier on a shared machine), seconds per pass
(the training time over the passes; CPU: the median of the passes without a check), active
states per node at the end, test accuracy. Runs alternate between the solvers (old, new,
new, old, …) so that a shared machine slows both alike; ``--option name=value`` passes an
option to the engine (``steps=1``, ``shrink_after=5``…), ``--old-option`` one to the former
GDMM (its own ρ schedule on chain1000:
``--old-option 'rho=[[0,0.25],[100,0.25],[250,2.5],[350,7.5]]'
--old-option 'eta=[[0,0.025],[100,0.025],[250,0.075]]'``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import large_labels  # noqa: E402

PROBLEMS = ("ocr", "chain1000", "czech_pooled")


def dataset(name):
    if name == "ocr":
        ds = large_labels.ocr_dataset()
    elif name == "czech_pooled":
        ds = large_labels.czech_pooled_dataset(2)
    else:
        ds = large_labels.chain_dataset(int(name[len("chain") :]))
    ds["C"] = large_labels.C_DEFAULT[ds["kind"]]
    return ds


def parse_value(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def run(ds, solver, options, max_iter, check_every, budget):
    """Train until the 1% line (or ``max_iter`` passes, ``budget`` training seconds) in this
    process, with ``solver`` ``"old"`` (the former chain GDMM) or ``"engine"``."""
    import dualstruct.solvers as solvers
    from dualstruct import StructuredSVM

    line = (
        1.01 * large_labels.REFERENCES[ds["name"]][0]
        if ds["name"] in large_labels.REFERENCES
        else -math.inf
    )
    tuning = dict(large_labels.GDMM_TUNING[ds["name"]])
    averaging = bool(tuning.pop("averaging", True))
    extra = dict(options[solver])
    # a checkout with the chain's former GDMM (solvers/gdmm.py) beside the engine
    both = importlib.util.find_spec("dualstruct.solvers.gdmm") is not None
    if solver == "old" and not both:
        raise ValueError("this checkout has no former chain GDMM: pass --old-checkout")
    reached = {}
    # CPU seconds of the passes (the machine is shared): a pass with a check counts as the
    # mean of the passes without one since the last check
    cpu = dict(last=time.process_time(), total=0.0, window=[], plain=[])

    def stop(est, record):
        now = time.process_time()
        delta, cpu["last"] = now - cpu["last"], now
        if math.isnan(record.primal):
            cpu["window"].append(delta)
            cpu["total"] += delta
            if record.passes > 1:  # the first pass's delta holds the setup
                cpu["plain"].append(delta)
        else:
            window = cpu["window"] or [delta]
            cpu["total"] += sum(window) / len(window)
            cpu["window"] = []
        reached_line = record.primal <= line if math.isfinite(line) else record.relative_gap <= 0.01
        if not math.isnan(record.primal) and reached_line and not reached:
            reached.update(passes=record.passes, time=record.time, cpu=cpu["total"])
            return True
        return record.time > budget

    saved = solvers.SOLVERS["gdmm"]
    if solver == "engine" and both:
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
    checked = hist.last_checked()
    plain = cpu["plain"] or cpu["window"] or [math.nan]
    return dict(
        passes=reached.get("passes", math.nan),
        seconds=reached.get("time", math.nan),
        cpu=reached.get("cpu", math.nan),
        cpu_per_pass=statistics.median(plain),
        s_per_pass=last.time / max(last.passes, 1),
        states=float(states),
        last_primal=checked.primal if checked is not None else math.nan,
        passes_run=last.passes,
        accuracy=float(est.score(ds["Xte"], ds["yte"])) if check_every <= max_iter else math.nan,
    )


def run_in_process(checkout, cache, problem, solver, options, max_iter, check_every, budget):
    """:func:`run` in a process of its own with ``PYTHONPATH`` the checkout."""
    env = dict(os.environ, PYTHONPATH=os.path.abspath(checkout))
    if cache:
        env["NUMBA_CACHE_DIR"] = cache
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        job = dict(
            problem=problem,
            solver=solver,
            options=options,
            max_iter=max_iter,
            check_every=check_every,
            budget=budget,
            out=out.name,
            warm=True,  # compile (or load) the kernels outside the timed run
        )
        subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--job", json.dumps(job)],
            env=env,
            check=True,
        )
        return json.load(out)


def job(spec):
    """The ``--job`` entry point of :func:`run_in_process`."""
    spec = json.loads(spec)
    ds = dataset(spec["problem"])
    if spec.get("warm"):
        run(ds, spec["solver"], spec["options"], 2, 1, spec["budget"])
    out = run(
        ds, spec["solver"], spec["options"], spec["max_iter"], spec["check_every"], spec["budget"]
    )
    with open(spec["out"], "w") as f:
        json.dump(out, f)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="ocr,chain1000", help=f"of {', '.join(PROBLEMS)}")
    ap.add_argument("--solvers", default="old,engine")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--budget", type=float, default=900.0, help="training seconds per run")
    ap.add_argument(
        "--per-pass",
        type=int,
        default=0,
        metavar="N",
        help="N passes without a check: seconds per pass",
    )
    ap.add_argument("--old-checkout", default=None, help="the checkout whose GDMM is 'old'")
    ap.add_argument(
        "--old-cache",
        default=None,
        help="NUMBA_CACHE_DIR of the old checkout's runs (default: its own)",
    )
    ap.add_argument("--option", action="append", default=[], help="engine option name=value")
    ap.add_argument("--old-option", action="append", default=[], help="old GDMM's option")
    ap.add_argument("--plot", default=None, help="a figure of seconds to 1%% per run")
    ap.add_argument("--job", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.job:
        return job(args.job)
    options = {"engine": {}, "old": {}}
    for key, items in (("engine", args.option), ("old", args.old_option)):
        for item in items:
            name, _, value = item.partition("=")
            options[key][name] = parse_value(value)
    names = [s for s in args.solvers.split(",") if s]
    here = os.path.dirname(HERE)
    old = args.old_checkout or here
    old_cache = args.old_cache
    if args.old_checkout and old_cache is None:
        old_cache = os.path.join(
            tempfile.gettempdir(), "numba_cache_" + os.path.basename(os.path.abspath(old))
        )
    if args.per_pass:
        max_iter, check_every = args.per_pass, args.per_pass + 1
    else:
        max_iter, check_every = args.max_iter, args.check_every
    print(f"options: {options}; old: {os.path.abspath(old)}")
    print(
        "| problem | solver | passes to 1% | s to 1% | CPU s to 1% | s per pass | CPU s per pass "
        "| active states | test acc. |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for problem in [p for p in args.problems.split(",") if p]:
        for r in range(args.repeats):
            for solver in names if r % 2 == 0 else names[::-1]:
                checkout, cache = (old, old_cache) if solver == "old" else (here, None)
                t0 = time.perf_counter()
                spec = (problem, solver, options, max_iter, check_every, args.budget)
                out = run_in_process(checkout, cache, *spec)
                out.update(problem=problem, solver=solver, wall=time.perf_counter() - t0)
                rows.append(out)
                print(
                    f"| {problem} | {solver} | {out['passes']} | {out['seconds']:.1f} | "
                    f"{out['cpu']:.1f} | {out['s_per_pass']:.4f} | {out['cpu_per_pass']:.4f} | "
                    f"{out['states']:.1f} | {out['accuracy']:.4f} |",
                    flush=True,
                )
        if args.repeats > 1:
            for solver in names:
                mine = [o for o in rows if o["problem"] == problem and o["solver"] == solver]
                med = {
                    key: statistics.median(o[key] for o in mine)
                    for key in mine[0]
                    if key not in ("problem", "solver")
                }
                print(
                    f"| {problem} | {solver}, median of {len(mine)} | {med['passes']} | "
                    f"{med['seconds']:.1f} | {med['cpu']:.1f} | {med['s_per_pass']:.4f} | "
                    f"{med['cpu_per_pass']:.4f} | {med['states']:.1f} | {med['accuracy']:.4f} |",
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
