"""The measurements behind ``solver="auto"``: BCFW (the default step) against GDMM, time to a
certified gap of ``--tol`` on the multi-label label graphs, run back to back.

For every problem and C, each solver trains from scratch until its certified relative gap is
at most ``--tol``, ``--max-iter`` passes or ``--budget`` seconds of training, checking every
``--check-every`` passes; the table gives the passes, the training seconds, the seconds per
pass and the gap where it stopped. Problems: ``yeast`` and ``scene`` (MULAN, all labels) and
``bibtex:L`` (bibtex's L most frequent labels), each on the full label graph
(``--edges``), with the inference each solver gets by default (``--inference auto``: the LP
for GDMM; for BCFW exact up to 10 labels, the LP above).

    DUALSTRUCT_DATA=../shared/data python benchmarks/solver_choice.py \\
        --problems yeast,bibtex:20,bibtex:40,bibtex:80 --Cs 1
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from dualstruct import MultiLabelSVM
from dualstruct.datasets import fetch_multilabel


def load(problem):
    name, _, count = problem.partition(":")
    X, Y = fetch_multilabel(name, "train")
    if count:
        top = np.argsort(-Y.sum(axis=0), kind="stable")[: int(count)]
        Y = Y[:, top]
    return X, Y


def run(X, Y, solver, C, edges, args):
    def stop(est, record):
        return record.time > args.budget

    est = MultiLabelSVM(
        edges=edges,
        solver=solver,
        C=C,
        inference=args.inference,
        max_iter=args.max_iter,
        tol=args.tol,
        check_every=args.check_every,
        random_state=0,
        callback=stop,
    )
    try:
        est.fit(X, Y)
    except (MemoryError, ValueError) as exc:
        return f"refused ({type(exc).__name__})", math.nan, math.nan, math.nan
    last = est.history_.last_checked()
    seconds = est.history_.last.time
    return est.n_iter_, seconds, last.relative_gap, seconds / max(est.n_iter_, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="yeast,bibtex:20,bibtex:40,bibtex:80")
    ap.add_argument("--Cs", default="1")
    ap.add_argument("--edges", default="full")
    ap.add_argument("--solvers", default="bcfw,gdmm")
    ap.add_argument("--inference", default="auto")
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--check-every", type=int, default=5)
    ap.add_argument("--max-iter", type=int, default=400)
    ap.add_argument("--budget", type=float, default=240.0)
    args = ap.parse_args()
    print("| problem | labels | pairs | C | solver | passes | train s | s / pass | rel. gap |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    for problem in args.problems.split(","):
        X, Y = load(problem)
        L = Y.shape[1]
        for C in (float(c) for c in args.Cs.split(",")):
            for solver in args.solvers.split(","):
                passes, seconds, gap, per_pass = run(X, Y, solver, C, args.edges, args)
                gap_text = "—" if math.isnan(gap) else f"{gap:.2%}"
                print(
                    f"| {problem} | {L} | {L * (L - 1) // 2} | {C:g} | {solver} | {passes} | "
                    f"{seconds:.2f} | {per_pass:.3f} | {gap_text} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
