"""Slack vs margin rescaling, the slack searches, and cutting plane vs BCFW.

Three parts, each optional:

* ``searches`` — a table in the style of Table 1 of Choi, Meshi, Srebro (2016): during
  slack-rescaled BCFW training on OCR, every training word is searched with the binary,
  bisecting and angular searches at the current weights (after a few passes) and compared with
  the exact dynamic program: success rate (found the true maximizer of Φ, among words where
  Φ > 0), oracle calls per search, milliseconds per search.
* ``ocr`` / ``chunk`` — margin vs slack rescaling: training time, passes, objective, gap,
  test letter error (OCR) or chunk F1 (CoNLL-2000, BIO tags).
* ``cp`` — time for the 1-slack cutting plane and for BCFW to certify a 1% gap on OCR.
* ``subset`` — the first 300 OCR training words (``--words``; 0 for all): passes to a
  certified 1% for margin and slack rescaling, BCFW (proximal, the default; plain, with
  weighted averaging; plain with atom steps) and the cutting plane (with its maximizer cache
  and stabilized oracle point, the default, and plain).

    DUALSTRUCT_DATA=../shared/data python benchmarks/rescaling.py --parts searches,ocr,cp
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dualstruct import StructuredSVM
from dualstruct.datasets import fetch_ocr


def ocr_split():
    X, y, folds = fetch_ocr()
    tr, te = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    return [X[i] for i in tr], [y[i] for i in tr], [X[i] for i in te], [y[i] for i in te]


def part_searches(args):
    """Each search at the weights after k passes, cold (λ₀ = 1, no cached label) and warm
    (seeded by the exact maximizer at the weights one pass earlier, as a block's best cached
    labelling seeds it in training: λ₀ = h/g of the seed, and the angular search starts
    from it)."""
    Xtr, ytr, _, _ = ocr_split()
    est = StructuredSVM(
        C=args.C,
        rescaling="slack",
        max_iter=1,
        warm_start=True,
        random_state=0,
        solver_options={"proximal": 0, "atom_steps": 0},
    )
    print(
        "Slack searches on the OCR training words at the weights after k passes of "
        f"slack-rescaled BCFW (C={args.C}); success = returned the exact maximizer of Φ "
        "(among words with Φ > 0); warm = seeded by the maximizer one pass earlier"
    )
    print(
        f"{'passes':>6} {'search':<10} {'start':<5} {'success':>8} {'calls/search':>13} "
        f"{'ms/search':>10}"
    )
    done = 0
    for passes in args.search_passes:
        if passes < 2:
            raise SystemExit("--search-passes: at least 2 (the seeds come from a pass earlier)")
        est.set_params(max_iter=passes - 1 - done)
        if passes - 1 > done:
            est.fit(Xtr, ytr)
        data = est._pack(Xtr, ytr)
        model = est.model_
        _, _, seeds = model.slack_search(est.solver_.w, data, "exact")
        est.set_params(max_iter=1)
        est.fit(Xtr, ytr)
        done = passes
        w = est.solver_.w
        exact, _, _ = model.slack_search(w, data, "exact")
        t0 = time.perf_counter()
        model.slack_search(w, data, "exact")
        exact_ms = 1000 * (time.perf_counter() - t0) / data.n_sequences
        hard = exact > 1e-12
        print(f"{passes:>6} {'exact DP':<10} {'':<5} {1.0:>8.1%} {1:>13.1f} {exact_ms:>10.3f}")
        for search in ("binary", "bisecting", "angular"):
            for start, seed in (("cold", None), ("warm", seeds)):
                model.slack_search(w, data, search, seed)  # compile outside the timing
                t0 = time.perf_counter()
                phi, calls, _ = model.slack_search(w, data, search, seed)
                ms = 1000 * (time.perf_counter() - t0) / data.n_sequences
                success = np.mean(phi[hard] >= exact[hard] * (1 - 1e-9))
                print(
                    f"{passes:>6} {search:<10} {start:<5} {success:>8.1%} "
                    f"{calls.mean():>13.1f} {ms:>10.3f}"
                )
    print()


def _train(name, data, Xte, yte, score, args, **params):
    Xtr, ytr = data
    est = StructuredSVM(random_state=0, **params)
    t0 = time.perf_counter()
    est.fit(Xtr, ytr)
    seconds = time.perf_counter() - t0
    last = est.history_.last_checked()
    print(
        f"{name:<28} {seconds:>8.1f} {est.n_iter_:>6} {last.primal:>12.2f} "
        f"{last.relative_gap:>8.2%} {score(est, Xte, yte):>9.4f}",
        flush=True,
    )


def _runs(args):
    """(rescaling, BCFW variant) pairs of the ocr and chunk parts (``--bcfw``)."""
    return [(r, v) for v in args.bcfw.split(",") for r in ("margin", "slack")]


def part_ocr(args):
    Xtr, ytr, Xte, yte = ocr_split()
    print(f"OCR, C={args.C}: margin vs slack rescaling (BCFW to a {args.tol:.0%} gap)")
    print(f"{'run':<28} {'train s':>8} {'passes':>6} {'primal':>12} {'rel.gap':>8} {'test err':>9}")
    for resc, variant in _runs(args):
        _train(
            f"bcfw {variant} {resc}",
            (Xtr, ytr),
            Xte,
            yte,
            lambda e, X, y: 1 - e.score(X, y),
            args,
            C=args.C,
            rescaling=resc,
            tol=args.tol,
            max_iter=args.max_iter,
            check_every=10,
            solver_options=BCFW_VARIANTS[variant],
        )
    print()


def part_chunk(args):
    from dualstruct.datasets.conll import fetch_conll2000, split_column
    from dualstruct.features import TokenFeatures
    from dualstruct.metrics import chunk_scores

    Xtr, ytr = split_column(fetch_conll2000("train"), 2)
    Xte, yte = split_column(fetch_conll2000("test"), 2)
    feats = TokenFeatures()
    Dtr, Dte = feats.fit_transform(Xtr), None
    Dte = feats.transform(Xte)

    def f1(est, X, y):
        return chunk_scores(y, est.predict(X))["overall"]["f1"]

    print(
        f"CoNLL-2000 chunking (BIO tags), C=0.1: margin vs slack (BCFW, stop at "
        f"{args.chunk_tol:.0%} gap or {args.chunk_passes} passes)"
    )
    print(f"{'run':<28} {'train s':>8} {'passes':>6} {'primal':>12} {'rel.gap':>8} {'test F1':>9}")
    for resc, variant in _runs(args):
        _train(
            f"bcfw {variant} {resc}",
            (Dtr, ytr),
            Dte,
            yte,
            f1,
            args,
            C=0.1,
            rescaling=resc,
            tol=args.chunk_tol,
            max_iter=args.chunk_passes,
            check_every=10,
            fit_intercept=False,
            solver_options=BCFW_VARIANTS[variant],
        )
    print()


def part_cp(args):
    Xtr, ytr, Xte, yte = ocr_split()
    print(f"OCR, C={args.C}, margin rescaling: time to a 1% gap (budget {args.budget:.0f} s)")
    print(f"{'solver':<16} {'reached':>8} {'seconds':>8} {'iterations':>10} {'rel.gap':>8}")
    for solver in ("bcfw", "cutting_plane"):
        state = {"t0": time.perf_counter()}

        def stop(est, record, state=state):
            return time.perf_counter() - state["t0"] > args.budget

        est = StructuredSVM(
            solver=solver,
            C=args.C,
            tol=0.01,
            max_iter=100_000,
            check_every=25 if solver == "bcfw" else 1,
            callback=stop,
            random_state=0,
        )
        est.fit(Xtr, ytr)
        seconds = time.perf_counter() - state["t0"]
        last = est.history_.last_checked()
        reached = est.history_.stop_reason == "tol"
        print(
            f"{solver:<16} {str(reached):>8} {seconds:>8.1f} {est.n_iter_:>10} "
            f"{last.relative_gap:>8.2%}",
            flush=True,
        )
    print()


#: the BCFW variants of the subset part: name -> solver_options
BCFW_VARIANTS = {
    "proximal": None,  # the default: proximal centre, three atom steps
    "plain": {"proximal": 0, "atom_steps": 0},  # weighted averaging, one step per visit
    "plain+atoms": {"proximal": 0, "atom_steps": 10},
}


#: the 1-slack cutting plane without its maximizer cache, called at the QP's solution
PLAIN_CUTTING_PLANE = {"inner_cuts": 0, "query_step": 1.0}


def part_subset(args):
    """The first ``--words`` training words (0: all of them): passes (iterations) to a
    certified 1% for each rescaling of ``--subset-rescalings``, BCFW in every variant of
    ``--subset-bcfw`` and, unless ``--no-subset-cp``, the cutting plane."""
    Xtr, ytr, _, _ = ocr_split()
    words = args.words or len(Xtr)
    X, y = Xtr[:words], ytr[:words]
    print(
        f"\n### The first {len(X)} OCR training words, C = {args.C:g}, stop at 1% or "
        f"{args.subset_passes} passes\n"
    )
    print("| rescaling | solver | passes to 1% | rel. gap at the end | primal | train s |")
    print("|---|---|---|---|---|---|")
    for rescaling in args.subset_rescalings.split(","):
        runs = [(f"BCFW, {v}", "bcfw", BCFW_VARIANTS[v]) for v in args.subset_bcfw.split(",")]
        if args.subset_cp:
            runs.append(("cutting plane", "cutting_plane", None))
            runs.append(("cutting plane, plain", "cutting_plane", PLAIN_CUTTING_PLANE))
        for label, solver, options in runs:
            est = StructuredSVM(
                C=args.C,
                solver=solver,
                rescaling=rescaling,
                tol=0.01,
                max_iter=args.subset_passes,
                check_every=args.check_every,
                random_state=0,
                solver_options=options,
            )
            est.fit(X, y)
            last = est.history_.last_checked()
            reached = est.n_iter_ if est.history_.stop_reason == "tol" else "—"
            print(
                f"| {rescaling} | {label} | {reached} | {last.relative_gap:.2%} | "
                f"{last.primal:.3f} | {last.time:.1f} |",
                flush=True,
            )


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="searches,ocr,cp")
    ap.add_argument("-C", type=float, default=1.0)
    ap.add_argument("--tol", type=float, default=0.01)
    ap.add_argument("--max-iter", type=int, default=2000)
    ap.add_argument("--search-passes", type=int, nargs="+", default=[2, 10, 50])
    ap.add_argument("--chunk-tol", type=float, default=0.02)
    ap.add_argument("--chunk-passes", type=int, default=60)
    ap.add_argument(
        "--bcfw",
        default="proximal",
        help=f"ocr and chunk parts: BCFW variants, of {tuple(BCFW_VARIANTS)}",
    )
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--words", type=int, default=300, help="subset: training words (0: all)")
    ap.add_argument("--subset-passes", type=int, default=400, help="subset: the cap")
    ap.add_argument("--subset-rescalings", default="margin,slack")
    ap.add_argument(
        "--subset-bcfw",
        default=",".join(BCFW_VARIANTS),
        help=f"subset: BCFW variants, of {tuple(BCFW_VARIANTS)}",
    )
    ap.add_argument("--no-subset-cp", dest="subset_cp", action="store_false")
    ap.add_argument("--check-every", type=int, default=5, help="subset: passes between checks")
    args = ap.parse_args(argv)
    parts = {
        "searches": part_searches,
        "ocr": part_ocr,
        "chunk": part_chunk,
        "cp": part_cp,
        "subset": part_subset,
    }
    for name in args.parts.split(","):
        parts[name](args)


if __name__ == "__main__":
    main()
