"""Multi-label structural SVMs with pairwise label interactions.

Part 1, **quality** (``--datasets``): for every data set (MULAN yeast, scene, bibtex from the
data folder, their train/test split), edge set (``--edges``: independent, Chow–Liu tree, full
graph) and method (``--methods``: bcfw, gdmm, ssg, cutting_plane), train with C = ``--C``
until the relative gap reaches ``--tol`` (BCFW, GDMM, the cutting plane), ``--max-iter`` passes,
or ``--budget`` seconds of training time, and report passes, training seconds, seconds per
pass, the final exact primal (LP-relaxed where the model uses the LP; ``--inference``), the
best certified dual, and the test metrics: Hamming loss, subset accuracy, Jaccard accuracy,
micro and macro F1, and the fraction of test examples whose LP optimum was integral.

Time to 1%: the training time of the first check whose primal is <= 1.01 P*, where P* is the
lowest primal any run of that data set and edge set found (an upper estimate of the optimum;
the highest certified dual of those runs is printed beside it).

Part 2, **scaling** (``--scaling bibtex``): seconds per pass of GDMM and BCFW on the full
graph over the ``--label-counts`` most frequent labels (``--timing-passes`` passes, no
checks; the median over the first 10, when GDMM's active sets still grow, and over the rest,
which the slope and the plot use), with the least-squares slope of log(s/pass) against
log(L) per method; ``--plot`` draws it.

PyStruct's ``MultiLabelClf`` is the peer when installed (it is not installable on Python 3.11
with current numpy; the table says so).

    DUALSTRUCT_DATA=../shared/data python benchmarks/multilabel.py --datasets yeast,scene \\
        --methods bcfw,gdmm --json multilabel.json
    DUALSTRUCT_DATA=../shared/data python benchmarks/multilabel.py --datasets bibtex \\
        --edges full --methods gdmm,bcfw --budget 900 --check-every 10
    DUALSTRUCT_DATA=../shared/data python benchmarks/multilabel.py --datasets "" \\
        --scaling bibtex --plot multilabel_scaling.png
    DUALSTRUCT_DATA=../shared/data python benchmarks/multilabel.py --datasets yeast \\
        --edges full --methods bcfw,cutting_plane --rescaling margin,slack

``--rescaling margin,slack`` repeats every (data set, edges) group under slack rescaling
(its own P*: the two objectives differ).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time

import numpy as np

from dualstruct import MultiLabelSVM
from dualstruct.datasets import fetch_multilabel

METHODS = ("bcfw", "gdmm", "ssg", "cutting_plane")
#: the scaling part's seconds per pass are medians over the passes after these
WARMUP_PASSES = 10
METRICS = ("hamming_loss", "subset_accuracy", "jaccard", "example_f1", "micro_f1", "macro_f1")


def load(name, n_labels=None):
    X, Y = fetch_multilabel(name, "train")
    Xt, Yt = fetch_multilabel(name, "test")
    if n_labels is not None:  # the n_labels most frequent training labels
        top = np.argsort(-Y.sum(axis=0), kind="stable")[:n_labels]
        Y, Yt = Y[:, top], Yt[:, top]
    return dict(name=name, X=X, Y=Y, Xt=Xt, Yt=Yt)


def dash(value, fmt):
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else (format(value, fmt))
    )


def solver_options(args):
    """``--primal-sample`` and the ``--solver-option key=value`` settings (numbers where they
    parse as numbers)."""
    options = {}
    if args.primal_sample is not None:
        options["primal_sample"] = args.primal_sample
    for item in args.solver_option:
        key, _, value = item.partition("=")
        try:
            options[key] = float(value) if "." in value or "e" in value else int(value)
        except ValueError:
            options[key] = value
    return options or None


def train(ds, edges, method, args, timing=False, rescaling="margin"):
    """One run; a dict of measurements and the history (never raises)."""
    passes = args.timing_passes
    max_iter = passes + 1 if timing else args.max_iter
    check_every = passes + 1 if timing else args.check_every
    per_check = 1 if check_every == "auto" else check_every

    def stop(est, record):
        if timing:
            return record.passes >= passes
        if record.time >= args.budget:
            return True
        if math.isnan(record.primal):
            return False
        per_pass = record.time / max(record.passes, 1)  # the next check must fit
        return record.time + per_check * per_pass > args.budget

    out = dict(
        dataset=ds["name"],
        n_labels=int(ds["Y"].shape[1]),
        edges=edges,
        method=method,
        rescaling=rescaling,
        status="ok",
        error="",
        passes=0,
        train_seconds=math.nan,
        s_per_pass=math.nan,
        final_primal=math.nan,
        best_dual=math.nan,
        stop_reason="",
        history=[],
    )
    # slack rescaling trains against exact maximizers; its rows predict exactly as well
    inference = "exact" if rescaling == "slack" else args.inference
    est = MultiLabelSVM(
        edges=edges,
        solver=method,
        C=args.C,
        inference=inference,
        max_iter=max_iter,
        tol=0 if timing else args.tol,
        check_every=check_every,
        random_state=0,
        callback=stop,
        rescaling=rescaling,
        weights=args.weights,
        averaging=not args.no_averaging,
        solver_options=solver_options(args),
    )
    t0 = time.perf_counter()
    try:
        est.fit(ds["X"], ds["Y"])
    except Exception as exc:  # a benchmark row, not a crash
        out.update(status="failed", error=f"{type(exc).__name__}: {exc}")
        return out
    out["wall_seconds"] = time.perf_counter() - t0
    out["unary_weights"] = est.model_.n_unary
    hist = est.history_.to_dicts()
    times = [r["time"] for r in hist]
    steps = np.diff([0.0] + times)
    out.update(
        history=hist,
        passes=int(est.n_iter_),
        stop_reason=est.history_.stop_reason,
        train_seconds=times[-1] if times else math.nan,
        s_per_pass=float(np.median(steps)) if times else math.nan,
    )
    if timing:  # GDMM's first passes, while active sets grow, cost more than later ones
        early = steps[:WARMUP_PASSES]
        out["s_per_pass_early"] = float(np.median(early)) if len(early) else math.nan
        if len(steps) > WARMUP_PASSES:
            out["s_per_pass"] = float(np.median(steps[WARMUP_PASSES:]))
    last = est.history_.last_checked()
    if last is not None:
        out["final_primal"] = last.primal
    duals = [r["dual"] for r in hist if not math.isnan(r["dual"])]
    if duals:
        out["best_dual"] = max(duals)
    if not timing:
        out.update(est.evaluate(ds["Xt"], ds["Yt"]))
        out["lp_integral"] = out.pop("lp_integral_fraction")
        extra = est.history_.records[-1].extra if est.history_.records else {}
        out["active_labels"] = extra.get("active_labels", math.nan)
        out["active_pairs"] = extra.get("active_pairs", math.nan)
        if "sampled_primal" in extra:
            out["sampled_primal"] = extra["sampled_primal"]
            out["sampled_primal_se"] = extra["sampled_primal_se"]
    solver = est.solver_
    if method == "gdmm":  # the pair state's pool (BENCHMARKS.md: memory)
        out["state_mb"] = (
            sum(getattr(solver, k).nbytes for k in ("pair_slots", "pair_edge", "q", "lam")) / 1e6
        )
    return out


def state_note(run):
    note = f"; pair state {run['state_mb']:.0f} MB" if "state_mb" in run else ""
    if "sampled_primal" in run:
        note += f"; sampled primal {run['sampled_primal']:.6g} ± {run['sampled_primal_se']:.2g}"
    if not math.isnan(run.get("active_labels", math.nan)):
        note += f"; active labels {run['active_labels']:.1f}, pairs {run['active_pairs']:.0f}"
    return note


def time_to(run, target):
    for r in run["history"]:
        if not math.isnan(r["primal"]) and r["primal"] <= target:
            return r["passes"], r["time"]
    return math.nan, math.nan


def quality(args, datasets, edges_list, methods):
    runs = []
    for name in datasets:
        ds = load(name)
        if args.max_train is not None:
            ds["X"], ds["Y"] = ds["X"][: args.max_train], ds["Y"][: args.max_train]
        L = ds["Y"].shape[1]
        print(
            f"\n## {name}: {ds['X'].shape[0]} train / {ds['Xt'].shape[0]} test examples, "
            f"{ds['X'].shape[1]} features, {L} labels",
            flush=True,
        )
        for edges, rescaling in [(e, r) for e in edges_list for r in args.rescaling.split(",")]:
            group = [
                train(ds, edges, m, args, rescaling=rescaling)
                for m in methods
                if not (m == "gdmm" and rescaling == "slack")
            ]
            runs += group
            primals = [
                r["primal"] for run in group for r in run["history"] if not math.isnan(r["primal"])
            ]
            best = min(primals) if primals else math.nan
            duals = [run["best_dual"] for run in group if not math.isnan(run["best_dual"])]
            bound = max(duals) if duals else math.nan
            how = " (exact oracle and prediction)" if rescaling == "slack" else ""
            print(
                f"\n### {name}, edges={edges}, {rescaling} rescaling{how}: P* = "
                f"{dash(best, '.6g')}, best certified dual = {dash(bound, '.6g')}"
            )
            print(
                "| method | passes | train s | s/pass | primal | to 1% (s) | Hamming | subset "
                "| Jaccard | example F1 | micro F1 | macro F1 | LP integral | note |"
            )
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
            for run in group:
                if run["status"] != "ok":
                    print(f"| {run['method']} | | | | | | | | | | | | | FAILED {run['error']} |")
                    continue
                _, t1 = time_to(run, 1.01 * best)
                run["time_to_1pct"] = t1
                print(
                    f"| {run['method']} | {run['passes']} | {run['train_seconds']:.2f} | "
                    f"{run['s_per_pass']:.4f} | {dash(run['final_primal'], '.6g')} | "
                    f"{dash(t1, '.2f')} | "
                    + " | ".join(f"{run[k]:.4f}" for k in METRICS)
                    + f" | {run['lp_integral']:.3f} | "
                    f"stop: {run['stop_reason']}{state_note(run)}; "
                    f"{run['unary_weights']:,} unary weights |",
                    flush=True,
                )
        if args.sklearn:
            runs.append(one_vs_rest(ds))
    peer = "PyStruct MultiLabelClf: "
    try:
        import pystruct  # noqa: F401

        peer += "installed, but not run by this script yet"
    except ImportError:
        peer += "not installed (no build for Python 3.11 / numpy 2), not compared"
    print("\n" + peer)
    return runs


def one_vs_rest(ds, Cs=(0.01, 0.1, 1.0)):
    """One scikit-learn ``LinearSVC`` per label (the model of
    ``OneVsRestClassifier(LinearSVC)``), fitted one label at a time, C chosen by 3-fold
    cross-validation on the training split (example-based F1) and refitted on all of it:
    the accuracy baseline of an independent linear model per label."""
    from sklearn.model_selection import KFold
    from sklearn.svm import LinearSVC

    from dualstruct.metrics import multilabel_scores

    def fit_predict(C, X, Y, Xt):
        out = np.zeros((Xt.shape[0], Y.shape[1]), dtype=np.int64)
        for label in range(Y.shape[1]):
            y = Y[:, label].astype(np.int64)
            if y.min() == y.max():  # a constant column: predict its value
                out[:, label] = y[0]
                continue
            out[:, label] = LinearSVC(C=C).fit(X, y).predict(Xt)
        return out

    t0 = time.perf_counter()
    cv = []
    for C in Cs:
        f1 = [
            multilabel_scores(ds["Y"][va], fit_predict(C, ds["X"][tr], ds["Y"][tr], ds["X"][va]))[
                "example_f1"
            ]
            for tr, va in KFold(3, shuffle=True, random_state=0).split(ds["X"])
        ]
        cv.append(float(np.mean(f1)))
    C = Cs[int(np.argmax(cv))]
    scores = multilabel_scores(ds["Yt"], fit_predict(C, ds["X"], ds["Y"], ds["Xt"]))
    seconds = time.perf_counter() - t0
    print(
        f"\none LinearSVC per label, C = {C:g} by 3-fold CV on train (example F1 "
        + ", ".join(f"{c:g}: {f:.4f}" for c, f in zip(Cs, cv))
        + f"; {seconds:.1f} s): "
        + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()),
        flush=True,
    )
    return dict(dataset=ds["name"], method="linearsvc_per_label", C=C, seconds=seconds, **scores)


def scaling(args, name, counts):
    rows = []
    print(
        f"\n## seconds per pass on {name}, full graph, the L most frequent labels "
        f"({args.timing_passes} passes each, no checks; medians over passes 1–"
        f"{WARMUP_PASSES} and over the rest)"
    )
    print(
        f"| L | pairs | method | s/pass 1–{WARMUP_PASSES} | s/pass later | mean active labels "
        "| mean active pairs |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|")
    for L in counts:
        ds = load(name, L)
        for method in args.scaling_methods.split(","):
            run = train(ds, "full", method, args, timing=True)
            rows.append(run)
            extra = run["history"][-1]["extra"] if run["history"] else {}
            print(
                f"| {L} | {L * (L - 1) // 2} | {method} | "
                f"{dash(run.get('s_per_pass_early', math.nan), '.4f')} | "
                f"{dash(run['s_per_pass'], '.4f')} | "
                f"{dash(extra.get('active_labels', math.nan), '.1f')} | "
                f"{dash(extra.get('active_pairs', math.nan), '.1f')} |",
                flush=True,
            )
            if run["status"] != "ok":
                print(f"  ({method} at L = {L}: {run['error']})", flush=True)
    for method in args.scaling_methods.split(","):
        pts = [
            (r["n_labels"], r["s_per_pass"])
            for r in rows
            if r["method"] == method and r["s_per_pass"] > 0
        ]
        if len(pts) >= 2:
            x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
            print(f"slope of log(s/pass) on log(L), {method}: {np.polyfit(x, y, 1)[0]:.2f}")
    return rows


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 4))
    for method in sorted({r["method"] for r in rows}):
        pts = sorted((r["n_labels"], r["s_per_pass"]) for r in rows if r["method"] == method)
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", label=method)
    Ls = np.array(sorted({r["n_labels"] for r in rows}), dtype=float)
    if len(Ls):
        ref = min(r["s_per_pass"] for r in rows if r["n_labels"] == Ls[0])
        ax.loglog(Ls, ref * (Ls / Ls[0]) ** 2, "k:", label="∝ L²")
    ax.set_xticks(Ls)
    ax.set_xticklabels([str(int(v)) for v in Ls])
    ax.minorticks_off()
    ax.set_xlabel("labels L (full graph: L(L−1)/2 pairs)")
    ax.set_ylabel("seconds per pass")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="yeast,scene,bibtex")
    ap.add_argument("--edges", default="independent,tree,full")
    ap.add_argument("--methods", default="bcfw,gdmm")
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument(
        "--inference",
        choices=("auto", "exact", "lp"),
        default="lp",
        help="lp (default): every method solves the same LP-relaxed problem",
    )
    ap.add_argument(
        "--rescaling",
        default="margin",
        help="comma list of margin, slack (slack: exact oracle and exact prediction, "
        "L <= 16, not gdmm)",
    )
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument(
        "--weights",
        choices=("auto", "dense", "observed"),
        default="auto",
        help="the unary weights (MultiLabelSVM's weights)",
    )
    ap.add_argument("--max-iter", type=int, default=1000)
    ap.add_argument(
        "--check-every",
        type=lambda v: v if v == "auto" else int(v),
        default=5,
        help="passes between exact checks, or 'auto' (checks take a tenth of the time)",
    )
    ap.add_argument(
        "--solver-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a solver setting (solver_options), e.g. rho=0.25; repeatable",
    )
    ap.add_argument(
        "--max-train",
        type=int,
        default=None,
        help="train on the first this many training examples only",
    )
    ap.add_argument(
        "--no-averaging",
        action="store_true",
        help="train without the averaged iterate (one candidate per check instead of two)",
    )
    ap.add_argument(
        "--primal-sample",
        type=int,
        default=None,
        help="estimate the primal after every pass on this many training examples",
    )
    ap.add_argument(
        "--budget", type=float, default=300.0, help="training seconds per run (monitoring excluded)"
    )
    ap.add_argument("--scaling", default="", help="data set of the seconds-per-pass part")
    ap.add_argument("--label-counts", default="20,40,80,159")
    ap.add_argument("--scaling-methods", default="gdmm,bcfw")
    ap.add_argument("--timing-passes", type=int, default=30)
    ap.add_argument("--plot", help="PNG of the scaling part")
    ap.add_argument("--json", help="write every run (with histories) here")
    ap.add_argument(
        "--sklearn",
        action="store_true",
        help="also one scikit-learn LinearSVC per label, C by 3-fold CV on train",
    )
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            ap.error(f"unknown method {m!r}; choose from {METHODS}")
    print(
        f"# multi-label benchmark — {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; C = {args.C:g}, "
        f"inference = {args.inference}, tol = {args.tol:g}, budget {args.budget:g} s"
    )
    MultiLabelSVM(max_iter=1).fit(np.eye(3), np.eye(3, dtype=int))  # numba warm-up
    result = {"quality": [], "scaling": []}
    datasets = [d for d in args.datasets.split(",") if d]
    if datasets:
        result["quality"] = quality(args, datasets, args.edges.split(","), methods)
    if args.scaling:
        result["scaling"] = scaling(
            args, args.scaling, [int(k) for k in args.label_counts.split(",")]
        )
        if args.plot:
            plot(result["scaling"], args.plot)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, default=float)
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main()
