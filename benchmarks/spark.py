"""Distributed training benchmark: CoCoA+ (BCFW local solver) and mini-batch SSG on Spark.

For each (K partitions, H local passes) it trains until the certified relative gap reaches
each target (default 1% and 0.1%) or ``--rounds`` run out, checking every ``--check-every``
rounds, and prints rounds, data passes and Spark time to each target, with the mean round
split into local compute (the slowest partition) and Spark overhead (the rest). The same
configurations run on the in-process engine for reference (``--engine local``). Then it fits
the scaling model

    round time(K) = H c₁ / K + overhead(K),    overhead(K) = a + b K,    rounds(K) ∝ K^p

(c₁: one pass over the data on one core; the overhead grows with the tasks a round
schedules; the rounds CoCoA+ needs grow with K since σ' = K damps each partition's steps) and
predicts the time to a 1% gap on 8, 32 and 128 one-core machines. Assumed: the data splits
evenly, one partition per machine, and the per-task overhead measured here holds on a
cluster (a real network adds to it). On this machine's 2 cores a round with K > 2 runs its
tasks in waves, which the fit removes from the measured overhead.

    DUALSTRUCT_DATA=../shared/data python benchmarks/spark.py ocr --partitions 1 2 4 \\
        --local-passes 1 5 --rounds 300 --plot spark.png
"""

from __future__ import annotations

import argparse
import math
import platform
import time

import numpy as np

from dualstruct.distributed import CoCoA, MiniBatchSSG


def load_problem(name):
    """(model, training data, description) of a benchmark problem."""
    from dualstruct.models import ChainModel
    from dualstruct.sequences import pack_sequences

    if name == "ocr":
        from dualstruct.datasets import fetch_ocr

        X, y, folds = fetch_ocr()
        train = np.flatnonzero(folds != 0)
        Xs = [np.hstack([X[i], np.ones((len(X[i]), 1))]) for i in train]
        Ys = [np.array([ord(c) - 97 for c in y[i]]) for i in train]
        return ChainModel(26, 129), pack_sequences(Xs, Ys), "OCR folds 1-9, C=1"
    if name == "conll2000":
        from dualstruct import StructuredSVM

        Dtr, y_fit, _, _ = chunking_data()
        est = StructuredSVM(C=0.1, fit_intercept=False, weights="observed")
        data = est._pack(Dtr, y_fit, fit=True)
        model = est._make_model(data.n_features, est._support(data))
        return model, data, "CoNLL-2000 chunking (IOBES, observed weights), C=0.1"
    if name in ("yeast", "bibtex"):
        from dualstruct.datasets import fetch_multilabel
        from dualstruct.models.multilabel import MultiLabelDataset, MultiLabelModel

        X, Y = fetch_multilabel(name, subset="train")[:2]
        model = MultiLabelModel(Y.shape[1], X.shape[1], edges="chain")
        return model, MultiLabelDataset(X, Y), f"{name} (train), chain of labels, C=1"
    raise ValueError(f"unknown problem {name!r}")


def chunking_data():
    """CoNLL-2000 chunking as ``benchmarks/conll2000.py`` sets it up: the default token
    features, IOBES tags for training, BIO for scoring."""
    from dualstruct.datasets.conll import fetch_conll2000, split_column
    from dualstruct.features import TokenFeatures
    from dualstruct.tags import to_iobes

    Xtr, ytr = split_column(fetch_conll2000("train"), 2)
    Xte, yte = split_column(fetch_conll2000("test"), 2)
    feats = TokenFeatures()
    Dtr = feats.fit_transform(Xtr)
    return Dtr, [to_iobes(t) for t in ytr], feats.transform(Xte), yte


def chunking_comparison(args):
    """Single-machine BCFW against CoCoA+ on Spark on CoNLL-2000 chunking (observed
    weights, C = 0.1, stop at a 1% gap), back to back: training time and test F1."""
    from dualstruct import StructuredSVM
    from dualstruct.metrics import chunk_scores
    from dualstruct.tags import to_bio

    Dtr, y_fit, Dte, yte = chunking_data()
    common = dict(C=0.1, tol=0.01, fit_intercept=False, random_state=0, weights="observed")
    runs = [("bcfw, one machine", dict(max_iter=400, check_every=10))]
    for K in args.partitions:
        for H in args.local_passes:
            runs.append(
                (
                    f"CoCoA+ Spark K={K} H={H}",
                    dict(
                        backend="spark",
                        n_partitions=K,
                        max_iter=args.rounds,
                        check_every=max(1, 10 // H),
                        solver_options={"local_passes": H},
                        backend_options={"master": args.master},
                    ),
                )
            )
    print("| run | train s | passes (rounds) | rel. gap | test chunk F1 | mean overhead s/round |")
    print("|---|---|---|---|---|---|")
    for label, opts in runs:
        est = StructuredSVM(**common, **opts)
        t0 = time.perf_counter()
        est.fit(Dtr, y_fit)
        seconds = time.perf_counter() - t0
        last = est.history_.last_checked()
        pred = [to_bio(p) for p in est.predict(Dte)]
        f1 = chunk_scores(yte, pred)["overall"]["f1"] * 100
        over = [r.extra.get("overhead_time", 0.0) for r in est.history_]
        H = (opts.get("solver_options") or {}).get("local_passes", 1)
        passes = f"{est.n_iter_ * H}" + (f" ({est.n_iter_})" if "backend" in opts else "")
        print(
            f"| {label} | {seconds:.1f} | {passes} | {last.relative_gap:.2%} | {f1:.2f} | "
            f"{np.mean(over) if 'backend' in opts else float('nan'):.3f} |",
            flush=True,
        )


def train(
    model, data, C, solver, K, H, rounds, targets, engine_name, master, seed=0, check_every=1
):
    """Train until the smallest target gap or ``rounds``; returns a row of the table."""
    engine = None
    if engine_name == "spark":
        from dualstruct.distributed.spark import SparkEngine

        engine = SparkEngine(master=master, checkpoint_every=10)
    reached = {}

    def note(record):  # rounds and training time (checks excluded) to each target
        for t in targets:
            if t not in reached and record.relative_gap <= t:
                reached[t] = (record.passes, record.time)
        return False

    if solver == "cocoa":
        s = CoCoA(
            model,
            C,
            n_partitions=K,
            local_passes=H,
            max_iter=rounds,
            check_every=check_every,
            tol=min(targets),
            random_state=seed,
            engine=engine,
            callback=note,
        )
    else:
        s = MiniBatchSSG(
            model,
            C,
            n_partitions=K,
            batch_fraction=H,
            max_iter=rounds,
            check_every=max(1, rounds // 20),
            random_state=seed,
            engine=engine,
        )
    try:
        s.fit(data)
    finally:
        s.close()
    log = np.array(s.round_log[1:] or s.round_log)  # the first round loads the kernels
    last = s.history.last_checked()
    return {
        "solver": solver,
        "engine": engine_name,
        "K": K,
        "H": H,
        "rounds": s.passes,
        "round_s": float(log[:, 0].mean()),
        "compute_s": float(log[:, 1].mean()),
        "overhead_s": float(np.maximum(log[:, 0] - log[:, 1], 0).mean()),
        "primal": last.primal,
        "gap": last.relative_gap,
        "reached": reached,
        "history": [(r.passes, r.time, r.primal, r.relative_gap) for r in s.history],
    }


def scaling_model(rows, cores):
    """The model ``round time(K) = H c₁ / K + overhead(K)``, ``overhead(K) = a + b K``, fitted
    to the CoCoA+ rows on Spark: c₁ is the compute of one pass over all the data on one core
    (the partitions' compute summed, K × the slowest, over H); on this machine the K tasks
    share ``cores`` cores, so the overhead of a measured round is its wall time less
    K × (slowest partition) / min(K, cores). The rounds to 1% are fitted as rounds ∝ K^p over
    the K that reached it. Returns None with fewer than two K."""
    spark = [r for r in rows if r["engine"] == "spark" and r["solver"] == "cocoa"]
    if len({r["K"] for r in spark}) < 2:
        return None
    Ks = np.array([r["K"] for r in spark], dtype=float)
    over = np.array([r["round_s"] - r["K"] * r["compute_s"] / min(r["K"], cores) for r in spark])
    A = np.vstack([np.ones_like(Ks), Ks]).T
    (a, b), *_ = np.linalg.lstsq(A, over, rcond=None)
    compute1 = float(np.mean([r["compute_s"] * r["K"] / r["H"] for r in spark]))
    reached = [(r["K"], r["reached"][0.01][0]) for r in spark if 0.01 in r["reached"]]
    rounds_fit = None
    if len({k for k, _ in reached}) >= 2:
        logk = np.log([k for k, _ in reached])
        logr = np.log([n for _, n in reached])
        p, c = np.polyfit(logk, logr, 1)
        rounds_fit = (float(np.exp(c)), float(p))
    return a, b, compute1, rounds_fit


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem", choices=("ocr", "conll2000", "yeast", "bibtex"))
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--local-passes", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.01, 0.001])
    ap.add_argument(
        "--check-every",
        type=int,
        default=1,
        help="rounds between certified checks (the rounds to a target are then "
        "known to this granularity)",
    )
    ap.add_argument("--engine", choices=("spark", "local", "both"), default="spark")
    ap.add_argument("--master", default="local[2,4]")
    ap.add_argument("--ssg", action="store_true", help="also mini-batch SSG (fraction 0.1)")
    ap.add_argument("-C", type=float, default=None)
    ap.add_argument("--plot", help="write gap against time to this PNG")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="conll2000: one-machine BCFW against Spark runs, with test F1",
    )
    args = ap.parse_args(argv)
    if args.compare:
        return chunking_comparison(args)
    model, data, what = load_problem(args.problem)
    C = args.C if args.C is not None else (0.1 if args.problem == "conll2000" else 1.0)
    engines = ["spark", "local"] if args.engine == "both" else [args.engine]
    print(
        f"# {what}; {data.n_sequences} examples; {platform.processor() or platform.machine()}"
        f", {platform.python_version()}; master {args.master}"
    )
    rows = []
    for eng in engines:
        for K in args.partitions:
            for H in args.local_passes:
                rows.append(
                    train(
                        model,
                        data,
                        C,
                        "cocoa",
                        K,
                        H,
                        args.rounds,
                        args.targets,
                        eng,
                        args.master,
                        check_every=args.check_every,
                    )
                )
                show(rows[-1], args.targets)
            if args.ssg:
                rows.append(
                    train(
                        model, data, C, "ssg", K, 0.1, args.rounds, args.targets, eng, args.master
                    )
                )
                show(rows[-1], args.targets)
    fit = scaling_model(rows, cores=2)
    if fit is not None:
        a, b, compute1, rounds_fit = fit
        print(
            f"# scaling model: overhead(K) = {a:.3f} + {b:.4f} K s per round; compute "
            f"{compute1:.3f} s per pass over the data on one core"
        )
        H = max(r["H"] for r in rows if r["solver"] == "cocoa")
        if rounds_fit is not None:
            c, p = rounds_fit
            print(f"# rounds to 1% gap ≈ {c:.1f} K^{p:.2f} (fitted over the measured K, H={H})")
            for machines in (8, 32, 128):
                n_rounds = c * machines**p
                t = n_rounds * (H * compute1 / machines + a + b * machines)
                print(
                    f"#   predicted time to 1% gap on {machines} one-core machines "
                    f"(K={machines}, H={H}): {n_rounds:.0f} rounds, {t:.0f} s"
                )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for r in rows:
            h = [(t, g) for _, t, _, g in r["history"] if not math.isnan(g)]
            if h:
                ax.semilogy(*zip(*h), label=f"{r['solver']} {r['engine']} K={r['K']} H={r['H']}")
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("relative duality gap")
        ax.set_title(what)
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


def show(r, targets):
    reached = "  ".join(
        f"{t:g}: "
        + (f"{r['reached'][t][0]} rounds {r['reached'][t][1]:.1f}s" if t in r["reached"] else "—")
        for t in targets
    )
    print(
        f"{r['solver']:6s} {r['engine']:6s} K={r['K']} H={r['H']:<4g} rounds {r['rounds']:4d} "
        f"round {r['round_s']:.3f}s (compute {r['compute_s']:.3f}, overhead "
        f"{r['overhead_s']:.3f})  primal {r['primal']:.6g}  gap {r['gap']:.2e}  {reached}",
        flush=True,
    )


if __name__ == "__main__":
    main()
