"""CoNLL-2000 benchmark: chunking and POS tagging with dualstruct (BCFW, SSG) and CRFsuite.

Chunking: label = column 3, features from the words and the POS column; POS tagging: label =
column 2, features from the words only. Every run trains in its own process (so its peak
memory is its own) on the same token features (:class:`dualstruct.features.TokenFeatures`);
CRFsuite (sklearn-crfsuite, L-BFGS with L2) is trained on exactly those features when it is
installed (``pip install -e ".[bench]"``). Stopping is decided on the training data only (the
duality gap for BCFW, fixed passes for SSG and CRFsuite); the test set is scored once at the end.

    DUALSTRUCT_DATA=../shared/data python benchmarks/conll2000.py
    DUALSTRUCT_DATA=../shared/data python benchmarks/conll2000.py --tasks chunk --runs bcfw
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

RUNS = ("bcfw", "ssg", "crfsuite")


def single(task, run, args):
    """Train and test one configuration; returns a dict of measurements."""
    import numpy as np

    from dualstruct import StructuredSVM
    from dualstruct.datasets.conll import fetch_conll2000, split_column
    from dualstruct.features import TokenFeatures
    from dualstruct.metrics import chunk_scores, token_accuracy
    from dualstruct.tags import to_bio, to_iobes

    train, test = fetch_conll2000("train"), fetch_conll2000("test")
    if task == "chunk":
        Xtr, ytr = split_column(train, 2)
        Xte, yte = split_column(test, 2)
    else:
        Xtr, ytr = split_column(train, 1, drop=(2,))
        Xte, yte = split_column(test, 1, drop=(2,))
    iobes = task == "chunk" and args.iobes
    y_fit = [to_iobes(t) for t in ytr] if iobes else ytr

    t0 = time.perf_counter()
    feats = TokenFeatures(min_count=args.min_count)
    Dtr = feats.fit_transform(Xtr)
    Dte = feats.transform(Xte)
    feature_seconds = time.perf_counter() - t0
    out = {
        "task": task,
        "run": run,
        "features": feats.n_features_,
        "feature_seconds": feature_seconds,
        "labels": len({t for s in y_fit for t in s}),
    }

    t0 = time.perf_counter()
    if run in ("bcfw", "ssg"):
        est = StructuredSVM(
            solver=run,
            C=args.C,
            tol=args.tol,
            fit_intercept=False,
            max_iter=args.max_iter if run == "bcfw" else args.ssg_passes,
            check_every=args.check_every,
            random_state=0,
            weights=args.weights,
        )
        est.fit(Dtr, y_fit)
        out["unary_weights"] = est.model_.n_unary
        out["train_seconds"] = time.perf_counter() - t0
        last = est.history_.last_checked()
        out.update(
            passes=est.n_iter_,
            primal=last.primal,
            relative_gap=last.relative_gap,
            solver_seconds=last.time,
            monitoring_seconds=last.eval_time,
            stop=est.history_.stop_reason,
        )
        pred = est.predict(Dte)
    else:
        import sklearn_crfsuite

        t1 = time.perf_counter()
        crf_train, crf_test = feats.feature_dicts(Xtr), feats.feature_dicts(Xte)
        out["feature_seconds"] += time.perf_counter() - t1
        t0 = time.perf_counter()
        crf = sklearn_crfsuite.CRF(
            algorithm="lbfgs", c1=0.0, c2=args.crf_c2, max_iterations=args.crf_iter
        )
        crf.fit(crf_train, [list(t) for t in y_fit])
        out["train_seconds"] = time.perf_counter() - t0
        out.update(passes=args.crf_iter, stop="max_iterations")
        pred = [np.array(p) for p in crf.predict(crf_test)]
    if iobes:
        pred = [to_bio(p) for p in pred]
    out["token_accuracy"] = token_accuracy(yte, pred)
    if task == "chunk":
        out["chunk_f1"] = chunk_scores(yte, pred)["overall"]["f1"]
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", default="chunk,pos")
    ap.add_argument("--runs", default=",".join(RUNS))
    ap.add_argument("-C", type=float, default=0.1)
    ap.add_argument("--tol", type=float, default=0.02, help="BCFW relative-gap stop")
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--ssg-passes", type=int, default=30)
    ap.add_argument("--min-count", type=int, default=1)
    ap.add_argument(
        "--weights",
        default="auto",
        choices=("auto", "dense", "observed"),
        help="unary weights: all feature-label pairs, or those met in training",
    )
    ap.add_argument(
        "--no-iobes",
        dest="iobes",
        action="store_false",
        help="train the chunker on the BIO tags as given",
    )
    ap.add_argument("--crf-c2", type=float, default=0.1)
    ap.add_argument("--crf-iter", type=int, default=100)
    ap.add_argument("--json", help="append the results to this JSON-lines file")
    ap.add_argument("--single", nargs=2, metavar=("TASK", "RUN"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.single:
        print(json.dumps(single(*args.single, args)))
        return

    rows = []
    passthrough = [
        "-C",
        str(args.C),
        "--tol",
        str(args.tol),
        "--max-iter",
        str(args.max_iter),
        "--check-every",
        str(args.check_every),
        "--ssg-passes",
        str(args.ssg_passes),
        "--min-count",
        str(args.min_count),
        "--crf-c2",
        str(args.crf_c2),
        "--crf-iter",
        str(args.crf_iter),
        "--weights",
        args.weights,
    ] + ([] if args.iobes else ["--no-iobes"])
    for task in args.tasks.split(","):
        for run in args.runs.split(","):
            if run == "crfsuite":
                try:
                    import sklearn_crfsuite  # noqa: F401
                except ImportError:
                    print("(sklearn-crfsuite not installed: skipping CRFsuite)")
                    continue
            cmd = [sys.executable, os.path.abspath(__file__), *passthrough, "--single", task, run]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stderr)
                raise SystemExit(f"{task}/{run} failed")
            row = json.loads(res.stdout.strip().splitlines()[-1])
            rows.append(row)
            _print_row(row)
            if args.json:
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
    print()
    print(
        f"{'task':<6} {'run':<9} {'feat s':>7} {'train s':>8} {'passes':>6} {'rel.gap':>8} "
        f"{'F1':>6} {'acc':>7} {'peak GB':>7}"
    )
    for r in rows:
        _print_row(r, table=True)


def _print_row(r, table=False):
    gap = r.get("relative_gap")
    gap = f"{gap:.2%}" if gap is not None and gap == gap else "—"
    f1 = f"{100 * r['chunk_f1']:.2f}" if "chunk_f1" in r else "—"
    line = (
        f"{r['task']:<6} {r['run']:<9} {r['feature_seconds']:>7.1f} "
        f"{r['train_seconds']:>8.1f} {r['passes']:>6} {gap:>8} {f1:>6} "
        f"{100 * r['token_accuracy']:>6.2f}% {r['peak_rss_gb']:>7.2f}"
    )
    print(
        line
        if table
        else line + f"   ({r['features']} features, {r['labels']} labels, stop: {r['stop']})",
        flush=True,
    )


if __name__ == "__main__":
    main()
