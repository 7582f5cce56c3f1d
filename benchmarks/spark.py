"""Scaling the number of machines on one data set: CoCoA+ (and distributed mini-batch SSG)
against K, with the time on K one-core machines predicted from measurements.

For each problem and each (K partitions, H local passes):

1. **Rounds** to a certified relative gap of 1% (and the other ``--targets``), counted on the
   in-process engine (``--engine local``, the default): the rounds do not depend on the
   hardware, and the in-process engine runs the same partitions, seeds and sums as Spark.
   Checks every ``--check-every`` rounds (the rounds are known to that granularity).
2. **Compute per partition per round**: the seconds each partition's local solver takes in a
   round, measured in process on one core (mean over the rounds of the slowest partition, and
   of the mean partition); and the seconds of one certificate check (the exact primal, one
   oracle pass over the data) on one core.
3. **Spark overhead per round**: ``--spark-rounds`` rounds (no checks) on Spark ``--master``
   (local[2] by default), overhead = round wall time − waves × slowest task's compute, with
   waves = ⌈K / cores⌉ (K > cores tasks run in waves here). Two models are fitted (the table
   gives both, ``--overhead-model`` picks the plot's): ``linear``, ``overhead = a + b K``
   carried to the cluster as measured (conservative: per-task costs that run in waves here
   count K times); ``waves``, ``a + b ⌈K / cores⌉`` here and ``a + b`` on K machines
   (optimistic: every task's own cost runs on its machine, in parallel).
4. **Predicted wall time on K one-core machines** (one partition per machine):

       round(K) = compute_max(K) + overhead(K)  (+ (check(K) + overhead(K)) / check_every)
       time to target(K) = rounds to target(K) × round(K)

   Assumptions (also printed): the partitions' compute measured here on one core is what one
   core of a machine takes (same CPU, no contention); a round waits for its slowest partition;
   the per-round Spark overhead measured in local[2] (scheduling, serialization, shipping w
   and the dual state) holds on a cluster as one of the two models says, and a real network
   adds nothing beyond it; a certificate check is one oracle pass split K ways plus one overhead
   (``--predict-check-every`` rounds apart; 0 leaves checks out, as the solvers' training
   time does); driver work between rounds (w updates) is negligible.
5. The rounds to 1% fitted as ``rounds ∝ K^p`` over the K that reached it.

``--ssg``: distributed mini-batch SSG (``--ssg-fraction`` of each partition per round) on the
same partitions. SSG has no dual: its gap is certified against the best dual any CoCoA+ run of
the problem reached, ``(P_ssg − D_best) / P_ssg``. Its rounds are timed with CoCoA+'s
overhead model and its own compute. ``--baseline``: the single-machine default BCFW (and GDMM
on Czech) to 1%, its training time, for comparison with the predicted times.

CoCoA's constructor options pass through ``--solver-option KEY=VALUE`` (repeatable; values are
Python literals where they parse, e.g. ``aggregation=averaging``, ``sigma=2``).

Problems: ``ocr`` (chain, folds 1-9, C = 1), ``conll2000`` (chunking, IOBES, observed weights,
C = 0.1), ``yeast`` (multi-label, chain of labels, C = 1), ``czech_pooled`` (the pooled Czech
split of ``benchmarks/large_labels.py``, 971 XPOS tags, default features, C = 0.1).

The full grid (NUMBA_NUM_THREADS=1; one problem at a time, heavy)::

    export DUALSTRUCT_DATA=/work/shared/data NUMBA_NUM_THREADS=1
    for p in yeast ocr conll2000 czech_pooled; do
      python benchmarks/spark.py $p --partitions 1 2 4 8 16 --local-passes 1 5 \\
          --rounds 2000 --check-every 5 --spark-rounds 5 --ssg --baseline \\
          --plot spark_$p.png --json spark_$p.json
    done

The same with other CoCoA+ settings, e.g. plain CoCoA+ (no proximal loop) or another κ::

    python benchmarks/spark.py ocr --local-passes 1 --rounds 2000 --check-every 5 \\
        --solver-option proximal=0 --json spark_ocr_plain.json
    python benchmarks/spark.py ocr --local-passes 1 --rounds 2000 --check-every 5 \\
        --solver-option proximal=63 --solver-option acceleration=none

CoNLL-2000 chunking, K = 2 on Spark local[2] against one machine's default BCFW::

    python benchmarks/spark.py conll2000 --compare --partitions 2 --local-passes 1 --rounds 400

Where the certificate lags the dual, ``--candidates`` prints at every check the gap of each
primal candidate (x, ū, x̄) against the certified dual, with κ and x̄'s rounds::

    python benchmarks/spark.py conll2000 --partitions 2 --local-passes 1 --rounds 300 \\
        --check-every 5 --spark-rounds 0 --candidates

A quick run (about a minute)::

    python benchmarks/spark.py yeast --partitions 1 2 --local-passes 1 --rounds 20 \\
        --spark-rounds 3 --ssg
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import platform
import time

import numpy as np

from dualstruct.distributed import CoCoA, InProcessEngine, MiniBatchSSG

PROBLEMS = ("ocr", "conll2000", "yeast", "bibtex", "czech_pooled")
ASSUMPTIONS = (
    "one partition per one-core machine, its compute as measured here on one core",
    "a round waits for the slowest partition",
    "Spark overhead per round as measured in local[2]: linear in K (conservative) or its "
    "per-task part in parallel (waves, optimistic); no extra network cost",
    "a certificate check = one oracle pass split K ways + one overhead",
    "driver work between rounds negligible",
)


# -- problems ------------------------------------------------------------------------------------
def load_problem(name, pooled_min_count=1):
    """(model, training data, C, description) of a benchmark problem."""
    from dualstruct.models import ChainModel
    from dualstruct.sequences import pack_sequences

    if name == "ocr":
        from dualstruct.datasets import fetch_ocr

        X, y, folds = fetch_ocr()
        train = np.flatnonzero(folds != 0)
        Xs = [np.hstack([X[i], np.ones((len(X[i]), 1))]) for i in train]
        Ys = [np.array([ord(c) - 97 for c in y[i]]) for i in train]
        return ChainModel(26, 129), pack_sequences(Xs, Ys), 1.0, "OCR folds 1-9, C=1"
    if name == "conll2000":
        Dtr, y_fit, _, _ = chunking_data()
        model, data = _structured(Dtr, y_fit, weights="observed")
        return model, data, 0.1, "CoNLL-2000 chunking (IOBES, observed weights), C=0.1"
    if name == "czech_pooled":
        ds = _large_labels().czech_pooled_dataset(pooled_min_count)
        model, data = _structured(ds["Xtr"], ds["ytr"], weights="auto")
        return model, data, 0.1, f"pooled Czech XPOS (min_count={pooled_min_count}), C=0.1"
    if name in ("yeast", "bibtex"):
        from dualstruct.datasets import fetch_multilabel
        from dualstruct.models.multilabel import MultiLabelDataset, MultiLabelModel

        X, Y = fetch_multilabel(name, subset="train")[:2]
        model = MultiLabelModel(Y.shape[1], X.shape[1], edges="chain")
        return model, MultiLabelDataset(X, Y), 1.0, f"{name} (train), chain of labels, C=1"
    raise ValueError(f"unknown problem {name!r}")


def _large_labels():
    """``benchmarks/large_labels.py`` (the pooled Czech split and GDMM's tuning)."""
    import importlib
    import sys
    from pathlib import Path

    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("large_labels")


def _structured(X, y, weights):
    """The chain model and packed data :class:`StructuredSVM` trains on (no intercept)."""
    from dualstruct import StructuredSVM

    est = StructuredSVM(C=0.1, fit_intercept=False, weights=weights)
    data = est._pack(X, y, fit=True)
    return est._make_model(data.n_features, est._support(data)), data


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


def parse_options(pairs):
    """``KEY=VALUE`` strings as a dict, values as Python literals where they parse."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--solver-option wants KEY=VALUE, got {pair!r}")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


# -- measurements --------------------------------------------------------------------------------
class TimedEngine(InProcessEngine):
    """The in-process engine, keeping every partition's compute seconds of every round."""

    def __init__(self):
        super().__init__()
        self.partition_seconds = []

    def _each(self, work):
        out = super()._each(work)
        self.partition_seconds.append([float(getattr(r, "seconds", math.nan)) for r in out])
        return out


def make_solver(
    solver,
    model,
    C,
    K,
    H,
    rounds,
    engine,
    seed,
    check_every,
    tol,
    options,
    callback=None,
    ssg_fraction=0.1,
):
    if solver == "cocoa":
        return CoCoA(
            model,
            C,
            n_partitions=K,
            local_passes=H,
            max_iter=rounds,
            check_every=check_every,
            tol=tol,
            random_state=seed,
            engine=engine,
            callback=callback,
            **options,
        )
    return MiniBatchSSG(
        model,
        C,
        n_partitions=K,
        batch_fraction=ssg_fraction,
        max_iter=rounds,
        check_every=check_every,
        random_state=seed,
        engine=engine,
        callback=callback,
    )


def count_rounds(model, data, C, solver, K, H, args, options):
    """Train in process until the smallest target (or ``--rounds``); rounds to every target,
    compute per partition per round and the history."""
    engine = TimedEngine()
    reached = {}
    per_candidate = []  # (round, dual, primal of every candidate) at every check

    def note(record):
        for t in args.targets:
            if t not in reached and record.relative_gap <= t:
                reached[t] = record.passes
        if getattr(args, "candidates", False) and not math.isnan(record.relative_gap):
            primals = [float(s._primal(c)) for c in s.candidates()]
            per_candidate.append((record.passes, record.dual, primals))
            gaps = "  ".join(f"{(p - record.dual) / p:.2%}" for p in primals)
            extra = record.extra or {}
            print(
                f"#   round {record.passes}: dual {record.dual:.6g}, gap of each candidate "
                f"{gaps}; kappa {extra.get('kappa', math.nan):.4g}, x̄ over "
                f"{extra.get('mean_rounds', math.nan):.0f} rounds",
                flush=True,
            )
        return False

    s = make_solver(
        solver,
        model,
        C,
        K,
        H,
        args.rounds,
        engine,
        args.seed,
        args.check_every,
        min(args.targets),
        options,
        note,
        args.ssg_fraction,
    )
    t0 = time.perf_counter()
    try:
        s.fit(data)
    finally:
        s.close()
    secs = np.array(engine.partition_seconds[1:] or engine.partition_seconds)  # 1st: loading
    secs = secs[:, :K] if secs.ndim == 2 else np.full((1, K), math.nan)
    return {
        "solver": solver,
        "K": K,
        "H": H if solver == "cocoa" else args.ssg_fraction,
        "rounds": int(s.passes),
        "reached": reached,
        "compute_max": float(secs.max(axis=1).mean()),
        "compute_mean": float(secs.mean()),
        "wall_s": time.perf_counter() - t0,
        "history": [(r.passes, r.primal, r.dual, r.relative_gap) for r in s.history],
        "candidates": per_candidate,
        "agreement": [
            (r.passes, r.extra["agreement"])
            for r in s.history
            if r.extra and math.isfinite(r.extra.get("agreement", math.nan))
        ],
    }


def spark_overhead(model, data, C, K, H, args, options):
    """Mean (wall, slowest task's compute) of ``--spark-rounds`` CoCoA+ rounds on Spark
    (the first round, which starts the workers and loads the kernels, left out)."""
    from dualstruct.distributed.spark import SparkEngine

    engine = SparkEngine(master=args.master, checkpoint_every=10**6)
    s = make_solver(
        "cocoa", model, C, K, H, args.spark_rounds + 1, engine, args.seed, 10**6, 0.0, options
    )
    try:
        s.fit(data)
    finally:
        s.close()
    log = np.array(s.round_log[1:] or s.round_log)
    return float(log[:, 0].mean()), float(log[:, 1].mean())


def check_seconds(model, data, C):
    """Seconds of one exact primal (one oracle pass over the data) on one core."""
    from dualstruct.solvers.objective import primal_objective

    w = np.zeros(model.size_joint_feature if hasattr(model, "size_joint_feature") else model.size)
    primal_objective(model, data, w, C)  # compile
    t0 = time.perf_counter()
    primal_objective(model, data, w, C)
    return time.perf_counter() - t0


def baselines(name, model, data, C, args):
    """The single-machine default BCFW (and GDMM on Czech): training seconds and passes to
    the first check at or below 1%."""
    from dualstruct.solvers import BCFW, GDMM

    out = []
    solvers = [("BCFW (default)", BCFW, {})]
    if name == "czech_pooled":
        ll = _large_labels()
        tuning = {**ll.METHODS["gdmm"]["solver_options"], **ll.GDMM_TUNING["czech_pooled"]}
        solvers.append(("GDMM", GDMM, tuning))
    for label, cls, opts in solvers:
        s = cls(
            model,
            C,
            max_iter=args.baseline_passes,
            tol=0.01,
            check_every=5,
            random_state=args.seed,
            **opts,
        )
        s.fit(data)
        hit = [r for r in s.history if r.relative_gap <= 0.01]
        rec = hit[0] if hit else s.history.last_checked()
        out.append((label, rec.time, rec.passes, rec.relative_gap))
    return out


# -- the model -----------------------------------------------------------------------------------
def fit_overhead(points, cores, kind):
    """The overhead model fitted to the Spark rounds ``{K: (wall, compute)}``: the overhead of
    a measured round is its wall time less ⌈K / cores⌉ × the slowest task's compute.

    ``"linear"``: ``overhead = a + b K``, carried to the cluster as measured (conservative:
    the per-task costs that run in waves here count K times). ``"waves"``: ``overhead = a + b
    ⌈K / cores⌉`` here, ``a + b`` on K machines (optimistic: every per-task cost runs on its
    own machine, in parallel)."""
    Ks = sorted(points)
    over = np.array([max(points[K][0] - math.ceil(K / cores) * points[K][1], 0.0) for K in Ks])
    x = np.array([K if kind == "linear" else math.ceil(K / cores) for K in Ks], dtype=float)
    if len(set(x.tolist())) == 1:
        a, b = float(over.mean()), 0.0  # one setting: a constant
    else:
        (a, b), *_ = np.linalg.lstsq(np.vstack([np.ones_like(x), x]).T, over, rcond=None)
    return {"kind": kind, "a": float(a), "b": float(b)}


def overhead(om, K):
    """The predicted Spark overhead of a round on K machines (never below 0)."""
    return max(om["a"] + om["b"] * (K if om["kind"] == "linear" else 1), 0.0)


def round_seconds(row, om, check_s, check_every):
    """Predicted seconds of one round of ``row`` on K one-core machines."""
    K = row["K"]
    over = overhead(om, K)
    t = row["compute_max"] + over
    if check_every:
        t += (check_s / K + over) / check_every
    return t


def power_fit(pairs):
    """(c, p) of ``rounds ≈ c K^p`` over (K, rounds) pairs (None with fewer than two K)."""
    if len({k for k, _ in pairs}) < 2:
        return None
    p, logc = np.polyfit(np.log([k for k, _ in pairs]), np.log([r for _, r in pairs]), 1)
    return float(np.exp(logc)), float(p)


# -- main ----------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problem", choices=PROBLEMS)
    ap.add_argument("--partitions", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--local-passes", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--rounds", type=int, default=500, help="most rounds of a counting run")
    ap.add_argument("--targets", type=float, nargs="+", default=[0.01])
    ap.add_argument("--check-every", type=int, default=1, help="rounds between checks")
    ap.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="engine of the counting runs (rounds do not depend on it)",
    )
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cores", type=int, default=2, help="cores of --master")
    ap.add_argument(
        "--overhead-model",
        choices=("linear", "waves"),
        default="linear",
        help="the overhead model of the plot (the table gives both)",
    )
    ap.add_argument(
        "--spark-rounds",
        type=int,
        default=5,
        help="rounds on Spark per K to measure the overhead (0: none)",
    )
    ap.add_argument(
        "--predict-check-every",
        type=int,
        default=0,
        help="count a certificate check every this many rounds in the "
        "predicted time (0: training time only)",
    )
    ap.add_argument("--ssg", action="store_true", help="also distributed mini-batch SSG")
    ap.add_argument("--ssg-fraction", type=float, default=0.1)
    ap.add_argument(
        "--baseline",
        action="store_true",
        help="also the single-machine default BCFW (and GDMM on Czech) to 1%%",
    )
    ap.add_argument("--baseline-passes", type=int, default=400)
    ap.add_argument(
        "--solver-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of CoCoA's constructor (repeatable)",
    )
    ap.add_argument(
        "--candidates",
        action="store_true",
        help="at every check, print the gap of every primal candidate against the dual",
    )
    ap.add_argument("--pooled-min-count", type=int, default=1)
    ap.add_argument("-C", type=float, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plot", help="write gap against predicted time per K to this PNG")
    ap.add_argument("--json", help="write the measurements to this file")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="conll2000: one-machine BCFW against Spark runs, with test F1",
    )
    args = ap.parse_args(argv)
    options = parse_options(args.solver_option)
    if args.compare:
        return chunking_comparison(args, options)
    if args.engine == "spark":
        raise SystemExit("count rounds in process (--engine local): Spark gives the same rounds")
    model, data, C, what = load_problem(args.problem, args.pooled_min_count)
    C = args.C if args.C is not None else C
    print(
        f"# {what}; {data.n_sequences} examples; {platform.processor() or platform.machine()}"
        f", Python {platform.python_version()}; CoCoA options {options or 'default'}",
        flush=True,
    )

    rows = []
    for K in args.partitions:
        for H in args.local_passes:
            rows.append(count_rounds(model, data, C, "cocoa", K, H, args, options))
            show(rows[-1], args.targets)
        if args.ssg:
            rows.append(count_rounds(model, data, C, "ssg", K, None, args, options))
    best_dual = max(
        (
            d
            for r in rows
            if r["solver"] == "cocoa"
            for _, _, d, _ in r["history"]
            if not math.isnan(d)
        ),
        default=math.nan,
    )
    for r in rows:  # SSG's gap against the best certified dual
        if r["solver"] == "ssg":
            r["history"] = [
                (k, p, best_dual, (p - best_dual) / abs(p))
                for k, p, _, _ in r["history"]
                if not math.isnan(p)
            ]
            for t in args.targets:
                hit = [k for k, _, _, g in r["history"] if g <= t]
                if hit:
                    r["reached"][t] = hit[0]
            show(r, args.targets)

    spark = {}
    if args.spark_rounds > 0:
        H = max(args.local_passes)
        for K in args.partitions:
            spark[K] = spark_overhead(model, data, C, K, H, args, options)
            wall, comp = spark[K]
            print(
                f"spark {args.master} K={K} H={H}: round {wall:.3f} s, slowest task "
                f"{comp:.3f} s, overhead {max(wall - math.ceil(K / args.cores) * comp, 0):.3f}"
                " s",
                flush=True,
            )
    models = {
        kind: fit_overhead(spark, args.cores, kind) if spark else {"kind": kind, "a": 0, "b": 0}
        for kind in ("linear", "waves")
    }
    check_s = check_seconds(model, data, C)
    report(rows, args, models, check_s, spark)
    if args.baseline:
        for label, secs, passes, gap in baselines(args.problem, model, data, C, args):
            print(
                f"# one machine, {label}: {secs:.1f} s training, {passes} passes, gap {gap:.2%}",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "problem": what,
                    "C": C,
                    "options": options,
                    "rows": rows,
                    "spark": {str(k): v for k, v in spark.items()},
                    "overhead_models": models,
                    "check_s": check_s,
                    "assumptions": ASSUMPTIONS,
                },
                f,
                indent=1,
                default=str,
            )
    if args.plot:
        plot(rows, args, models[args.overhead_model], check_s, what)


def report(rows, args, models, check_s, spark):
    lin, wav = models["linear"], models["waves"]
    print(
        f"# overhead per round (Spark {args.master}{'' if spark else ', not measured: 0'}): "
        f"linear {lin['a']:.3f} + {lin['b']:.4f} K s; waves {wav['a']:.3f} + {wav['b']:.4f} "
        f"⌈K/{args.cores}⌉ s here, {overhead(wav, 2):.3f} s on K machines; a check = "
        f"{check_s:.3f} s on one core"
    )
    print("# assumptions: " + "; ".join(ASSUMPTIONS))
    tgt = args.targets[0]
    print(
        f"| solver | H | K | rounds to {tgt:g} | compute/round slowest (mean) s | "
        f"overhead/round s (linear / waves) | predicted s/round | "
        f"predicted s to {tgt:g} (linear / waves) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        per = [round_seconds(r, m, check_s, args.predict_check_every) for m in (lin, wav)]
        n = r["reached"].get(tgt)
        last_gap = r["history"][-1][3] if r["history"] else math.nan
        cell = str(n) if n else f"— ({last_gap:.1e})"
        times = f"{n * per[0]:.1f} / {n * per[1]:.1f}" if n else "—"
        print(
            f"| {r['solver']} | {r['H']:g} | {r['K']} | {cell} | "
            f"{r['compute_max']:.3f} ({r['compute_mean']:.3f}) | "
            f"{overhead(lin, r['K']):.3f} / {overhead(wav, r['K']):.3f} | "
            f"{per[0]:.3f} / {per[1]:.3f} | {times} |"
        )
    for H in args.local_passes:
        fit = power_fit(
            [
                (r["K"], r["reached"][tgt])
                for r in rows
                if r["solver"] == "cocoa" and r["H"] == H and tgt in r["reached"]
            ]
        )
        if fit:
            print(f"# CoCoA+ H={H}: rounds to {tgt:g} ≈ {fit[0]:.1f} K^{fit[1]:.2f}")
    for r in rows:  # ‖Σ_k Δw_k‖² / Σ_k ‖Δw_k‖²: K alike, 1 orthogonal, < 1 pulling apart
        if r.get("agreement"):
            points = r["agreement"][:: max(1, len(r["agreement"]) // 8)]
            trail = ", ".join(f"{a:.2f} ({k})" for k, a in points)
            print(f"# {r['solver']} K={r['K']} H={r['H']:g} agreement (round): {trail}")


def plot(rows, args, om, check_s, what):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Hs = args.local_passes
    fig, axes = plt.subplots(1, len(Hs), figsize=(6.5 * len(Hs), 4.5), squeeze=False)
    colors = {
        K: plt.cm.viridis(i / max(1, len(args.partitions) - 1))
        for i, K in enumerate(args.partitions)
    }
    for ax, H in zip(axes[0], Hs):
        for r in rows:
            if r["solver"] == "cocoa" and r["H"] != H:
                continue
            per = round_seconds(r, om, check_s, args.predict_check_every)
            pts = [(k * per, g) for k, _, _, g in r["history"] if g > 0 and not math.isnan(g)]
            if pts:
                ax.loglog(
                    *zip(*pts),
                    "-" if r["solver"] == "cocoa" else "--",
                    color=colors[r["K"]],
                    label=f"{r['solver']} K={r['K']}",
                )
        ax.axhline(0.01, color="grey", lw=0.5)
        ax.set_xlabel(f"predicted time on K one-core machines (s; {om['kind']} overhead)")
        ax.set_ylabel("certified relative gap")
        ax.set_title(f"{what}, H={H}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)


def show(r, targets):
    reached = "  ".join(
        f"{t:g}: " + (f"{r['reached'][t]} rounds" if t in r["reached"] else "—") for t in targets
    )
    last = r["history"][-1] if r["history"] else (0, math.nan, math.nan, math.nan)
    print(
        f"{r['solver']:5s} K={r['K']:<3d} H={r['H']:<4g} rounds {r['rounds']:5d}  compute/round "
        f"{r['compute_max']:.4f} s (mean partition {r['compute_mean']:.4f})  primal "
        f"{last[1]:.6g}  gap {last[3]:.2e}  {reached}  ({r['wall_s']:.0f} s)",
        flush=True,
    )


def chunking_comparison(args, options):
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
                        solver_options={"local_passes": H, **options},
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


if __name__ == "__main__":
    main()
