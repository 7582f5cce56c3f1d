"""Training across C: time and passes to a 1% certified gap for BCFW and GDMM at every C of
a grid, as a grid search over C trains them.

Problems (``--problems``):

* ``yeast``, ``bibtex``: ``MultiLabelSVM(edges="full")`` (LP inference on the full label
  graph) on MaxAbs-scaled features, the MULAN training split;
* ``ocr600``: the first 600 training words of OCR (folds 1-9), the chain model;
* ``chain1000``: the synthetic chain of ``benchmarks/large_labels.py`` with 1,000 labels
  asked (K = 954), GDMM with that benchmark's setting for it (``GDMM_TUNING``, in units of
  the penalty scale κ, the same at every C).

Every run stops at a certified relative gap of ``--tol`` (default 1%), after ``--max-iter``
passes (default 300) or once its training time passes ``--budget`` seconds (default 600),
whichever comes first; the gap at the stop is reported. Methods (``--methods``): ``bcfw``
(the default BCFW), ``bcfw-plain`` (``proximal=0``, no atom steps) and ``gdmm``. ``--path``
also trains each method along the whole grid with :func:`dualstruct.regularization_path`
(each C warm-started from the last, in the grid's order) and compares its total with the
cold runs'.
``--gdmm-option KEY=VALUE`` passes a GDMM option (``rho`` and ``eta`` in units of the
penalty scale κ). ``--rho-grid`` instead trains GDMM alone at each C for each *absolute*
penalty of the list (η = ρ; relative value ρ / κ with κ read from a one-pass fit) and
prints the certified gap after ``--max-iter`` passes, the best ρ / κ per C.

    DUALSTRUCT_DATA=../shared/data python benchmarks/c_sweep.py --problems yeast,ocr600 \\
        --path --plot c_sweep.png --json c_sweep.json
    DUALSTRUCT_DATA=../shared/data python benchmarks/c_sweep.py --problems chain1000
    DUALSTRUCT_DATA=../shared/data python benchmarks/c_sweep.py --problems ocr600,yeast \
        --Cs 0.01,0.1,1,10 --rho-grid 0.001,0.01,0.1,1,10,100,1000 --tol 0
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dualstruct import MultiLabelSVM, StructuredSVM, regularization_path  # noqa: E402

PROBLEMS = ("yeast", "bibtex", "ocr600", "chain1000")
#: ``--methods bcfw-plain``: BCFW without the proximal scheme or atom steps
PLAIN_BCFW = {"proximal": 0, "atom_steps": 0}


def solver_name(method):
    return "bcfw" if method == "bcfw-plain" else method


def load(name, gdmm_options=None):
    """(X, y, estimator factory) of a problem; ``gdmm_options`` go to GDMM on top of the
    problem's own."""
    extra = dict(gdmm_options or {})

    def options(method, own=None):
        if method == "bcfw-plain":
            return dict(PLAIN_BCFW)
        return {**(own or {}), **extra} if method == "gdmm" else None

    if name in ("yeast", "bibtex"):
        from sklearn.preprocessing import MaxAbsScaler

        from dualstruct.datasets import fetch_multilabel

        X, Y = fetch_multilabel(name, "train")
        X = MaxAbsScaler().fit_transform(X)

        def make(method, **kw):
            return MultiLabelSVM(
                edges="full", solver=solver_name(method), solver_options=options(method), **kw
            )

        return X, Y, make
    if name == "ocr600":
        from dualstruct.datasets import fetch_ocr

        X, y, folds = fetch_ocr()
        train = np.flatnonzero(folds != 0)[:600]

        def make(method, **kw):
            return StructuredSVM(solver=solver_name(method), solver_options=options(method), **kw)

        return [X[i] for i in train], [y[i] for i in train], make
    if name == "chain1000":
        from large_labels import GDMM_TUNING, chain_dataset

        ds = chain_dataset(1000)
        tuning = dict(GDMM_TUNING["chain1000"])
        averaging = tuning.pop("averaging", True)

        def make(method, **kw):
            return StructuredSVM(
                solver=solver_name(method),
                averaging=averaging,
                solver_options=options(method, tuning),
                **kw,
            )

        return ds["Xtr"], ds["ytr"], make
    raise ValueError(f"unknown problem {name!r}; choose from {PROBLEMS}")


def budget_stop(budget):
    def stop(estimator, record):
        return record.time >= budget

    return stop


def summary(est, C, method, problem, tol):
    hist = est.history_
    checked = [r for r in hist if not math.isnan(r.primal)]
    last = checked[-1] if checked else None
    first = next((r for r in checked if r.relative_gap <= tol), None)
    return dict(
        problem=problem,
        method=method,
        C=C,
        passes=int(hist.records[-1].passes) if len(hist) else 0,
        seconds=float(hist.records[-1].time) if len(hist) else 0.0,
        gap=float(last.relative_gap) if last else math.nan,
        primal=float(last.primal) if last else math.nan,
        dual=float(last.dual) if last else math.nan,
        to_tol_passes=int(first.passes) if first else None,
        to_tol_seconds=float(first.time) if first else None,
        curve=[(float(r.time), float(r.relative_gap)) for r in checked],
    )


def warm_up(X, y, make, methods):
    """Compile (or load) each method's kernels on a few examples, outside the timings."""
    for method in methods:
        make(method, C=1.0, max_iter=2, check_every=1, random_state=0).fit(X[:20], y[:20])


def rho_grid(problem, Cs, values, args):
    """GDMM at each C for each absolute ρ (η = ρ): the certified gap after the passes."""
    X, y, make = load(problem, args.gdmm_options)
    warm_up(X, y, make, ["gdmm"])
    rows = []
    for C in Cs:
        probe = make("gdmm", C=C, max_iter=1, check_every=1000, random_state=0).fit(X, y)
        kappa = probe.solver_.penalty_scale
        gaps = []
        for rho in values:
            est = make(
                "gdmm", C=C, tol=args.tol, max_iter=args.max_iter,
                check_every=args.check_every, random_state=0,
            )  # fmt: skip
            est.solver_options = {**(est.solver_options or {}), "rho": rho / kappa}
            est.fit(X, y)
            last = est.history_.last_checked()
            gaps.append(last.relative_gap if last else math.nan)
        best = int(np.nanargmin(gaps))
        rows.append(dict(problem=problem, C=C, kappa=kappa, rhos=values, gaps=gaps))
        print(
            f"{problem:>9} C={C:<6g} kappa={kappa:.4g} "
            + " ".join(f"{fmt_gap(g):>8}" for g in gaps)
            + f"  best rho/kappa {values[best] / kappa:.2g}",
            flush=True,
        )
    return rows


def run(problem, methods, Cs, args):
    X, y, make = load(problem, args.gdmm_options)
    warm_up(X, y, make, methods)
    rows = []
    for C in Cs:
        for method in methods:
            est = make(
                method,
                C=C,
                tol=args.tol,
                max_iter=args.max_iter,
                check_every=args.check_every,
                random_state=0,
                callback=budget_stop(args.budget),
            )
            est.fit(X, y)
            row = summary(est, C, method, problem, args.tol)
            rows.append(row)
            print(line(row), flush=True)
    paths = []
    if args.path:
        for method in methods:
            est = make(
                method,
                tol=args.tol,
                max_iter=args.max_iter,
                check_every=args.check_every,
                random_state=0,
                callback=budget_stop(args.budget),
            )
            t0 = time.perf_counter()
            points = regularization_path(est, X, y, Cs)
            wall = time.perf_counter() - t0
            entry = dict(
                problem=problem,
                method=method,
                wall=wall,
                points=[
                    dict(C=p.C, passes=p.passes, seconds=p.seconds, gap=p.relative_gap)
                    for p in points
                ],
            )
            paths.append(entry)
            print(path_line(entry, rows), flush=True)
    return rows, paths


def fmt_gap(g):
    return "—" if g is None or math.isnan(g) else f"{100 * g:.2f}%"


def line(r):
    reached = (
        f"{r['to_tol_passes']} passes, {r['to_tol_seconds']:.1f} s"
        if r["to_tol_passes"] is not None
        else "not reached"
    )
    return (
        f"{r['problem']:>9} {r['method']:>5} C={r['C']:<6g} {reached:>24}; stop after "
        f"{r['passes']} passes, {r['seconds']:.1f} s, gap {fmt_gap(r['gap'])}"
    )


def path_line(entry, rows):
    cold = [r for r in rows if r["problem"] == entry["problem"] and r["method"] == entry["method"]]
    pts = entry["points"]
    return (
        f"{entry['problem']:>9} {entry['method']:>5} path: {sum(p['passes'] for p in pts)} "
        f"passes, {sum(p['seconds'] for p in pts):.1f} s (cold: "
        f"{sum(r['passes'] for r in cold)} passes, {sum(r['seconds'] for r in cold):.1f} s); "
        "gaps " + " ".join(fmt_gap(p["gap"]) for p in pts)
    )


def table(rows, methods, Cs):
    """Markdown: one row per (problem, C); per method passes and seconds to the tolerance,
    or the gap at the stop."""
    head = "| problem | C | " + " | ".join(f"{m}: to 1% (gap at stop)" for m in methods) + " |"
    out = [head, "|---|---:|" + "---|" * len(methods)]
    for problem in dict.fromkeys(r["problem"] for r in rows):
        for C in Cs:
            cells = []
            for m in methods:
                key = (problem, C, m)
                r = next((x for x in rows if (x["problem"], x["C"], x["method"]) == key), None)
                if r is None:
                    cells.append("")
                elif r["to_tol_passes"] is not None:
                    cells.append(f"{r['to_tol_passes']} passes, {r['to_tol_seconds']:.1f} s")
                else:
                    cells.append(
                        f"not in {r['passes']} passes, {r['seconds']:.0f} s ({fmt_gap(r['gap'])})"
                    )
            out.append(f"| {problem} | {C:g} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys(r["problem"] for r in rows))
    Cs = sorted({r["C"] for r in rows})
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(Cs)))
    styles = {"bcfw": "--", "gdmm": "-"}
    fig, axes = plt.subplots(1, len(problems), figsize=(4.5 * len(problems), 4), squeeze=False)
    for ax, problem in zip(axes[0], problems):
        for r in rows:
            if r["problem"] != problem or not r["curve"]:
                continue
            t, g = zip(*r["curve"])
            color = colors[Cs.index(r["C"])]
            ax.semilogy(
                t, np.maximum(g, 1e-6), styles.get(r["method"], ":"), color=color,
                label=f"{r['method']}, C={r['C']:g}",
            )  # fmt: skip
        ax.axhline(0.01, color="k", lw=0.5)
        ax.set_title(problem)
        ax.set_xlabel("training seconds")
        ax.set_ylabel("certified relative gap")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def parse_option(text):
    key, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"--gdmm-option takes KEY=VALUE, got {text!r}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="yeast,ocr600")
    ap.add_argument("--methods", default="bcfw,gdmm")
    ap.add_argument("--Cs", default="0.01,0.1,1,10,100")
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--budget", type=float, default=600.0, help="training seconds per run")
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--path", action="store_true", help="also train along the grid, warm")
    ap.add_argument(
        "--gdmm-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a GDMM option, e.g. rho=0.1 or inner_sweeps=2 (repeatable)",
    )
    ap.add_argument("--rho-grid", default="", help="absolute penalties: GDMM's penalty grid")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.gdmm_options = dict(parse_option(o) for o in args.gdmm_option)
    if not os.environ.get("DUALSTRUCT_DATA"):
        print("set DUALSTRUCT_DATA to the data folder (../shared/data)", file=sys.stderr)
    problems = [p for p in args.problems.split(",") if p]
    methods = [m for m in args.methods.split(",") if m]
    Cs = [float(c) for c in args.Cs.split(",") if c]
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}; tol {args.tol:g}, cap {args.max_iter} passes or "
          f"{args.budget:g} s")  # fmt: skip
    if args.rho_grid:
        values = [float(v) for v in args.rho_grid.split(",")]
        print("rho: " + " ".join(f"{v:>8g}" for v in values))
        grid = [row for problem in problems for row in rho_grid(problem, Cs, values, args)]
        if args.json:
            Path(args.json).write_text(json.dumps(dict(rho_grid=grid), indent=1))
        return
    rows, paths = [], []
    for problem in problems:
        r, p = run(problem, methods, Cs, args)
        rows += r
        paths += p
    print()
    print(table(rows, methods, Cs))
    if args.json:
        Path(args.json).write_text(json.dumps(dict(rows=rows, paths=paths), indent=1))
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
