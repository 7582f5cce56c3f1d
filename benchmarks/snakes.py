"""Snakes benchmark: grid CRFs on 4-connected pixel grids (200 train / 100 test images,
11 labels), trained by BCFW with the exact oracle (branch and bound over MPLP's LP bounds;
``--inference lp``: the LP relaxation at its optimum, the relaxed SSVM), with three kinds of edge
features: the colours of the edge's pixels and its direction (``colours``,
:class:`EdgeFeatureGridCRF`), the direction only (``direction``, :class:`DirectionalGridCRF`),
and none (one directed K × K table for every edge, ``none``, :class:`GridCRF`). Prints, per
check, training time (monitoring excluded), the primal upper bound, the dual, the relative gap
and the test pixel accuracy, then the share of oracle calls certified exact (or, with ``lp``,
at the LP's optimum), the search's nodes beyond the roots and the mean training time of a
pass over the last ten passes, and the primal of each of BCFW's candidate models at the end
(the proximal iterate x, the average ū of the dual iterates, the weighted mean x̄ of x).

    DUALSTRUCT_DATA=../shared/data python benchmarks/snakes.py --passes 50 --plot snakes.png
"""

from __future__ import annotations

import argparse
import platform
import time

import dualstruct
from dualstruct.datasets import fetch_snakes
from dualstruct.datasets.snakes import snakes_graphs
from dualstruct.models import DirectionalGridCRF, EdgeFeatureGridCRF, GridCRF

SETTINGS = ("colours", "direction", "none")


def load():
    images_tr, maps_tr = fetch_snakes("train")
    images_te, maps_te = fetch_snakes("test")
    return images_tr, maps_tr, images_te, maps_te


def grid_inputs(images):
    """Per image the (h, w, d) node-feature image and, for the colour edge features, the
    (E, F) edge features in ``grid_edges(h, w)`` order."""
    graphs = snakes_graphs(images, edge_features="colours")
    return [(nodes.reshape(*im.shape[:2], -1), z) for (nodes, _, z), im in zip(graphs, images)]


def run(
    setting,
    data,
    C,
    passes,
    check_every,
    inference="auto",
    bb_budget=64,
    tol=1e-3,
    solver_options=None,
):
    images_tr, Ytr, images_te, Yte = data
    X = grid_inputs(images_tr + images_te)
    if setting != "colours":
        X = [image for image, _ in X]
    Xtr, Xte = X[: len(images_tr)], X[len(images_tr) :]
    n_features = Xtr[0][0].shape[-1] if setting == "colours" else Xtr[0].shape[-1]
    kw = dict(inference_method=inference, bb_budget=bb_budget)
    if setting == "colours":
        model = EdgeFeatureGridCRF(11, n_features, Xtr[0][1].shape[1], **kw)
    elif setting == "direction":
        model = DirectionalGridCRF(11, n_features, **kw)
    else:
        model = GridCRF(11, n_features, directed=True, **kw)
    est = dualstruct.SSVM(
        model,
        C=C,
        max_iter=passes,
        tol=tol,
        check_every=check_every,
        random_state=0,
        solver_options=solver_options,
    )
    t0 = time.perf_counter()
    est.fit(Xtr, Ytr, validation_data=(Xte, Yte))
    return est, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="colours,direction,none")
    ap.add_argument("--C", type=float, default=10.0)
    ap.add_argument("--passes", type=int, default=50)
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--inference", default="auto", choices=("auto", "lp"))
    ap.add_argument("--bb-budget", type=int, default=64)
    ap.add_argument("--tol", type=float, default=1e-3, help="stop at this certified gap")
    ap.add_argument(
        "--solver-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a BCFW option (proximal=0, atom_steps=10, …); repeatable",
    )
    ap.add_argument("--plot", help="write test accuracy against training time to this file")
    args = ap.parse_args(argv)
    data = load()
    options = {}
    for item in args.solver_option:
        name, _, value = item.partition("=")
        try:
            options[name] = int(value)
        except ValueError:
            options[name] = float(value) if value.replace(".", "", 1).isdigit() else value
    print(
        f"snakes: {len(data[0])} train / {len(data[2])} test images; C = {args.C:g}; "
        f"machine: {platform.machine()}, Python {platform.python_version()}\n"
    )
    print(
        f"{'edges':<10} {'pass':>5} {'train s':>8} {'primal≤':>10} {'dual':>10} "
        f"{'rel.gap':>8} {'test acc':>8}"
    )
    curves = {}
    for setting in args.settings.split(","):
        est, wall = run(
            setting,
            data,
            args.C,
            args.passes,
            args.check_every,
            args.inference,
            args.bb_budget,
            args.tol,
            options or None,
        )
        rows = [r for r in est.history_ if r.validation_score == r.validation_score]
        for r in rows:
            print(
                f"{setting:<10} {r.passes:>5g} {r.time:>8.2f} {r.primal:>10.2f} "
                f"{r.dual:>10.2f} {r.relative_gap:>8.3f} {r.validation_score:>8.4f}"
            )
        calls, loose = est.solver_.data.kernel.lp_stats
        nodes, pdhg = est.solver_.data.kernel.search_stats
        times = [r.time for r in est.history_]
        late = (times[-1] - times[max(len(times) - 11, 0)]) / max(min(10, len(times) - 1), 1)
        print(
            f"-> {setting}: test accuracy {rows[-1].validation_score:.4f} after "
            f"{est.n_iter_} passes, {rows[-1].time:.1f} s training ({wall:.1f} s with "
            f"checks); oracle calls {calls}, certified {1 - loose / max(calls, 1):.1%}, "
            f"search nodes {nodes}, PDHG iterations {pdhg}; {late:.2f} s a pass over the "
            "last ten\n"
        )
        solver = est.solver_
        if getattr(solver, "prox_w", None) is not None and len(solver.candidates()) == 3:
            names = ("x (proximal iterate)", "ū (average of u)", "x̄ (mean of x)")
            primals = [solver._primal(w) for w in solver.candidates()]
            print(
                "   primal of each candidate at the end: "
                + ", ".join(f"{n} {p:.2f}" for n, p in zip(names, primals))
                + "\n"
            )
        curves[setting] = [(r.time, r.validation_score) for r in rows]
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for setting, pts in curves.items():
            ax.plot(*zip(*pts), marker="o", label=f"edge features: {setting}")
        ax.set_xlabel("training time (s)")
        ax.set_ylabel("test pixel accuracy")
        ax.set_title(f"snakes, BCFW, C = {args.C:g}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"plot written to {args.plot}")


if __name__ == "__main__":
    main()
