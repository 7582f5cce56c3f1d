"""GDMM over factors with and without the proximal outer loop: passes (and seconds) to a
certified relative gap on the multi-class model (digits), yeast's full label graph and
OCR-600 (the chain model on the first 600 OCR training words, as ``c_sweep.py``'s).

    DUALSTRUCT_DATA=../shared/data python benchmarks/gdmm_proximal.py \\
        --problems digits,yeast,ocr600 --Cs 0.01,0.1,1,10,100 --proximal 0,auto

Each line also gives κ at the end, the first κ of ``proximal="auto"`` (from the problem's
scale, :mod:`dualstruct.solvers._gdmm_proximal`) and the power p of the subproblem's penalty
``σ^p`` (None without the scheme). ``--penalty-power`` forces p (a comma list: one run each)
on the solver instance instead of the rule by mean degree:

    python benchmarks/gdmm_proximal.py --problems ocr600 --Cs 1,10,100 --proximal auto \
        --penalty-power 0.5,0,-0.5,-1

``--gdmm-option KEY=VALUE`` passes another GDMM option (repeatable; values parsed as JSON),
e.g. more inner sweeps and a larger penalty at a large C:

    python benchmarks/gdmm_proximal.py --problems ocr600 --Cs 10 --proximal auto \
        --gdmm-option sweeps=3 --gdmm-option rho=1 --gdmm-option eta=1
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from c_sweep import parse_option  # the script of this folder

from dualstruct.solvers import FactorGDMM


def load(name):
    """(model, training data) of a problem."""
    if name == "digits":
        from sklearn.datasets import load_digits

        from dualstruct.models import MultiClassModel

        X, y = load_digits(return_X_y=True)
        model = MultiClassModel(10, 64)
        return model, model.block_data(X / 16, y)
    if name == "yeast":
        from sklearn.preprocessing import MaxAbsScaler

        from dualstruct.datasets import fetch_multilabel
        from dualstruct.models import MultiLabelModel
        from dualstruct.models.multilabel import MultiLabelDataset

        X, Y = fetch_multilabel("yeast", "train")
        X = MaxAbsScaler().fit_transform(X)
        data = MultiLabelDataset(X, Y)
        model = MultiLabelModel(Y.shape[1], X.shape[1], edges="full", inference="lp")
        return model.fit_edges(Y), data
    if name == "ocr600":  # BENCHMARKS.md's OCR-600: StructuredSVM's chain on 600 words
        from dualstruct.datasets import fetch_ocr
        from dualstruct.models import ChainModel
        from dualstruct.sequences import pack_sequences

        X, y, folds = fetch_ocr()
        train = np.flatnonzero(folds != 0)[:600]
        Xs = [np.hstack([X[i], np.ones((len(X[i]), 1))]) for i in train]
        Ys = [np.array([ord(c) - 97 for c in y[i]]) for i in train]
        model = ChainModel(26, Xs[0].shape[1], start_end=True)
        return model, model.block_data(pack_sequences(Xs, Ys))
    raise ValueError(f"unknown problem {name!r}")


def run(model, data, C, proximal, args, power=None):
    solver = FactorGDMM(
        model,
        C=C,
        proximal=proximal,
        shrink_after=args.shrink_after,
        max_iter=args.max_iter,
        tol=args.tol,
        check_every=args.check_every,
        random_state=0,
        **dict(parse_option(o) for o in args.gdmm_option),
    )
    if power is not None:
        solver.penalty_power = power  # the instance's p over the class's rule
    t0 = time.perf_counter()
    solver.fit(data)
    wall = time.perf_counter() - t0
    r = solver.history.last_checked()
    done = r.relative_gap <= args.tol
    return {
        "passes": solver.passes if done else None,
        "gap": r.relative_gap,
        "primal": r.primal,
        "dual": r.dual,
        "train_time": solver.train_time,
        "wall": wall,
        "kappa": solver.kappa,
        "kappa_start": solver._kappa_start() if proximal == "auto" else float(proximal),
        "penalty_power": solver._penalty_power() if solver._proximal_on else None,
        "active_states": solver.history.last.extra["active_states"],
        "active_pairs": solver.history.last.extra["active_pairs"],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", default="digits,yeast,ocr600")
    ap.add_argument("--Cs", default="0.01,0.1,1,10,100")
    ap.add_argument("--proximal", default="0,auto")
    ap.add_argument("--shrink-after", type=int, default=0)
    ap.add_argument("--max-iter", type=int, default=300)
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--check-every", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--penalty-power",
        default=None,
        help="p of the proximal penalty's σ^p, a comma list (default: the solver's rule)",
    )
    ap.add_argument(
        "--gdmm-option", action="append", default=[], metavar="KEY=VALUE", help="a GDMM option"
    )
    args = ap.parse_args(argv)
    proximals = [p if p == "auto" else float(p) for p in args.proximal.split(",")]
    powers = (
        [None] if args.penalty_power is None else [float(p) for p in args.penalty_power.split(",")]
    )
    # without the scheme σ^p = 1: one run whatever the powers
    settings = [(p, q) for p in proximals for q in (powers if p != 0 else [None])]
    for name in args.problems.split(","):
        model, data = load(name)
        FactorGDMM(model, max_iter=1).fit(data)  # compile
        for C in (float(c) for c in args.Cs.split(",")):
            runs = {s: [] for s in settings}
            for _ in range(args.repeats):  # alternating runs
                for p, q in settings:
                    runs[p, q].append(run(model, data, C, p, args, q))
            for p, q in settings:
                last = runs[p, q][-1]
                last["train_time"] = float(np.median([r["train_time"] for r in runs[p, q]]))
                print(json.dumps({"problem": name, "C": C, "proximal": p, **last}), flush=True)


if __name__ == "__main__":
    main()
