"""Large label sets: seconds per pass against the number of labels K.

GDMM (the chain's factor functions: the node oracle walks the support's rows with observed
weights, the edge oracle searches a max-tree of the training transitions above 64 labels)
should cost per pass sublinearly in K in its edge factors; BCFW (Viterbi, O(T K²) per
sequence) should not. Datasets, smallest K first:

* OCR (K = 26; folds 1-9 train, fold 0 test), selected by the size 26;
* synthetic chains (``make_chain``, K from ``--sizes``; 2 × 600 sequences of about 13 tokens
  drawn with one seed, the first half for training, the second for testing; d = max(10⁴, 10 K);
  15 non-zeros per token);
* the Czech UD treebanks with XPOS (PDT) tags (``--czech``): train = CLTT train + CLTT dev + CAC
  dev, test = CLTT test + CAC test. The features (``TokenFeatures``, ``--min-count``) come from
  the word forms only: the gold UPOS and FEATS columns would give most of the XPOS tag away.
  Test tags never seen in training count as errors.

C = 1 for OCR and the synthetic chains, 0.1 for Czech (``--C`` overrides both). Each run stops
at ``--max-iter`` passes or at its budget of ``--budget`` seconds of training time (the
``time`` of the history: monitoring, i.e. the exact primal every ``--check-every`` passes, is
extra); a run stops at the last check that fits in the budget, so its final primal is known.
``--timing-only METHOD[:KMIN],...`` runs those methods (on datasets with K >= KMIN) for
``--timing-passes`` passes only, without any check, to measure seconds per pass where they
are too slow to converge.

Seconds per pass is the median of the per-pass increments of the training time. The optimum
of a dataset is bracketed by REFERENCES (recorded long runs: a BCFW dual below, a primal
above; ``--no-references`` ignores them) and by the runs themselves (lowest primal, highest
dual: BCFW's and GDMM's are certified). Time to 1% is the training time of the first check
with primal <= 1.01 × the lower bound: certainly within 1% of the optimum. Without a
recorded bracket it is 1.01 × the lowest primal found, an estimate. Under the table: the
slope of log(s/pass) against log(K) per method, fitted over the OCR and synthetic points.

    DUALSTRUCT_DATA=../shared/data python benchmarks/large_labels.py --plot large_labels.png \\
        --json large_labels.json --timing-only bcfw:3000
    DUALSTRUCT_DATA=../shared/data python benchmarks/large_labels.py --sizes 26,100 \\
        --no-czech --methods bcfw --budget 20
    DUALSTRUCT_DATA=../shared/data python benchmarks/large_labels.py --sizes "" --czech \\
        --methods gdmm,bcfw --C 0.1
    DUALSTRUCT_DATA=../shared/data python benchmarks/large_labels.py --sizes "" --no-czech \
        --czech-pooled --methods gdmm --max-iter 40 --check-every 20 --budget 3600
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import platform
import resource
import tempfile
import time

import numpy as np

from dualstruct import StructuredSVM

METHODS = {
    "gdmm": dict(solver="gdmm", solver_options={}),
    "bcfw": dict(solver="bcfw"),  # proximal, three atom steps (the default)
    "bcfw-plain": dict(solver="bcfw", solver_options={"proximal": 0, "atom_steps": 0}),
    # sklearn-crfsuite (L-BFGS, L2 = --crf-c2) on the same token features, Czech only
    "crfsuite": dict(solver=None),
}
OCR_K = 26
C_DEFAULT = {"ocr": 1.0, "chain": 1.0, "czech": 0.1}
#: GDMM penalty ρ and multiplier step η per dataset, in units of the penalty scale κ of each
#: problem (``GDMM.penalty_scale``: 5.42 on OCR, 4.02 on the synthetic chains, 0.132 on Czech,
#: 0.265 on pooled Czech), the best of the settings tried in BENCHMARKS.md: the best ρ falls as
#: K grows, and the best η is ρ/10 on the larger synthetic chains but ρ itself on Czech.
#: On chain1000 the penalty grows tenfold over passes 40-150 and threefold more up to pass
#: 250 (eta threefold up to pass 150), which cuts the slow tail where consistency is what is
#: left; there and on Czech the averaged iterate never beat the last one, so GDMM runs
#: without averaging, which saves the accumulator's writes (14% of a late pass at K = 954;
#: BENCHMARKS.md)
GDMM_TUNING = {
    "ocr": {"rho": 0.55, "eta": 0.55},
    "chain100": {"rho": 0.75, "eta": 0.25},
    "chain300": {"rho": 0.25, "eta": 0.025},
    "chain1000": {
        "rho": [(0, 0.25), (40, 0.25), (150, 2.5), (250, 7.5)],
        "eta": [(0, 0.025), (40, 0.025), (150, 0.075)],
        "averaging": False,
    },
    "chain3000": {"rho": 0.025, "eta": 0.0025},
    "czech": {"rho": 0.75, "eta": 0.75, "averaging": False},
    "czech_pooled": {"rho": 0.38, "eta": 0.38, "averaging": False},
}
#: certified brackets [lower, upper] of the optimum from long runs (BENCHMARKS.md):
#: the lower bound is a BCFW dual, the upper a primal. "Within 1%" means primal <= 1.01 ×
#: lower, which certainly is within 1% of the optimum. Without a bracket the benchmark falls
#: back on the lowest primal of the runs (an upper estimate, so "1%" is then an estimate).
REFERENCES = {
    "ocr": (13225.2, 13237.78),
    "chain1000": (170.404, 171.343),
    "czech": (568.82, 569.016),
    "chain3000": (218.247, 231.272),
}
GDMM_TUNING_DEFAULT = {"rho": 0.25, "eta": 0.025}  # other synthetic sizes
CZECH_TRAIN = ("cs_cltt-ud-train", "cs_cltt-ud-dev", "cs_cac-ud-dev")
CZECH_TEST = ("cs_cltt-ud-test", "cs_cac-ud-test")
#: the pooled split of the data README: 971 XPOS tags
CZECH_POOLED_TRAIN = ("cs_cltt-ud-train", "cs_cac-ud-dev", "cs_fictree-ud-dev")
CZECH_POOLED_TEST = ("cs_cac-ud-test", "cs_fictree-ud-test")


def nan_to_dash(value, fmt):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return format(value, fmt)


# -- datasets ---------------------------------------------------------------------------------
def ocr_dataset():
    from dualstruct.datasets import fetch_ocr

    X, y, folds = fetch_ocr()
    tr, te = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    return dict(
        name="ocr",
        kind="ocr",
        fit=True,
        fit_intercept=True,
        Xtr=[X[i] for i in tr],
        ytr=[y[i] for i in tr],
        Xte=[X[i] for i in te],
        yte=[y[i] for i in te],
        d=X[0].shape[1],
    )


def chain_dataset(K, n_train=600):
    from dualstruct.datasets import make_chain

    d = max(10_000, 10 * K)
    # one seed for both halves: make_chain draws the label structure from random_state too
    X, y = make_chain(
        n_sequences=2 * n_train,
        length=13,
        n_labels=K,
        n_features=d,
        nnz_per_token=15,
        random_state=0,
    )
    return dict(
        name=f"chain{K}",
        kind="chain",
        fit=True,
        fit_intercept=True,
        Xtr=X[:n_train],
        ytr=y[:n_train],
        Xte=X[n_train:],
        yte=y[n_train:],
        d=d,
    )


def _read_czech(names, forms_only):
    from dualstruct.datasets import find_data_file
    from dualstruct.datasets.conll import load_conllu

    sentences, labels = [], []
    for name in names:
        rel = f"ud_czech/{name}.conllu.gz"
        path = find_data_file(rel)
        if path is None:
            raise FileNotFoundError(f"{rel} not found under $DUALSTRUCT_DATA or the cache")
        s, lab = load_conllu(path, "xpos")
        sentences += [[tok[:1] for tok in sent] for sent in s] if forms_only else s
        labels += lab
    return sentences, labels


def czech_pooled_dataset(min_count):
    """The pooled Czech split (``--czech-pooled``): every CoNLL-U column but XPOS as input,
    the default token features (what ``dualstruct train --format conllu --label xpos`` uses)."""
    from dualstruct.datasets import fetch_ud_czech
    from dualstruct.features import TokenFeatures

    Str, ytr = fetch_ud_czech("pooled-train")
    Ste, yte = fetch_ud_czech("pooled-test")
    t0 = time.perf_counter()
    feats = TokenFeatures(min_count=min_count)
    Xtr = feats.fit_transform(Str)
    Xte = feats.transform(Ste)
    print(
        f"czech_pooled: default features, min_count={min_count}: d = {feats.n_features_} "
        f"({time.perf_counter() - t0:.1f} s); "
        f"{len(set(np.concatenate(ytr).tolist()))} XPOS tags in training"
    )
    return dict(
        name="czech_pooled",
        kind="czech",
        fit=False,
        fit_intercept=False,
        Xtr=Xtr,
        ytr=ytr,
        Xte=Xte,
        yte=yte,
        d=feats.n_features_,
        sentences=(Str, Ste),
        features=feats,
    )


def czech_dataset(min_count):
    from dualstruct.features import TokenFeatures

    Str, ytr = _read_czech(CZECH_TRAIN, forms_only=True)  # the word forms only
    Ste, yte = _read_czech(CZECH_TEST, forms_only=True)
    t0 = time.perf_counter()
    feats = TokenFeatures(min_count=min_count)
    Xtr = feats.fit_transform(Str)
    Xte = feats.transform(Ste)
    seconds = time.perf_counter() - t0
    seen = set(np.concatenate(ytr).tolist())
    flat_te = np.concatenate(yte)
    unseen = float(np.mean([t not in seen for t in flat_te.tolist()]))
    print(
        f"czech: features from the word forms, min_count={min_count}: d = {feats.n_features_} "
        f"({seconds:.1f} s); {len(seen)} XPOS tags in training; {Xtr.n_tokens} train / "
        f"{Xte.n_tokens} test tokens; {unseen:.2%} of the test tokens have a tag unseen in "
        "training (counted as errors)"
    )
    return dict(
        name="czech",
        kind="czech",
        fit=False,
        fit_intercept=False,
        Xtr=Xtr,
        ytr=ytr,
        Xte=Xte,
        yte=yte,
        d=feats.n_features_,
        sentences=(Str, Ste),
        features=feats,
    )


def describe(ds):
    ytr = ds["ytr"]
    ds["K"] = len(np.unique(np.concatenate(ytr)))
    ds["n_train"] = len(ytr)
    ds["train_tokens"] = int(sum(len(t) for t in ytr))
    ds["test_tokens"] = int(sum(len(t) for t in ds["yte"]))
    print(
        f"\n== {ds['name']}: K = {ds['K']} labels in training, d = {ds['d']} features, "
        f"{ds['n_train']} train sequences ({ds['train_tokens']} tokens), "
        f"{len(ds['yte'])} test sequences ({ds['test_tokens']} tokens), C = {ds['C']:g}",
        flush=True,
    )


# -- training ---------------------------------------------------------------------------------
def parse_timing_only(text):
    """``"gdmm,bcfw:3000"`` -> {"gdmm": 0, "bcfw": 3000} (method -> least K)."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, _, kmin = item.partition(":")
        if name not in METHODS:
            raise SystemExit(f"--timing-only: unknown method {name!r}")
        out[name] = int(kmin) if kmin else 0
    return out


def warm_up(methods):
    """Compile (or load from the numba cache) the kernels of each method on a tiny problem."""
    rng = np.random.default_rng(0)
    X = [rng.random((4, 5)) for _ in range(6)]
    y = [rng.integers(0, 4, 4) for _ in range(6)]
    t0 = time.perf_counter()
    for name in methods:
        if METHODS[name]["solver"] is None:
            continue  # not a dualstruct solver
        try:
            est = StructuredSVM(max_iter=2, check_every=1, tol=0, random_state=0, **METHODS[name])
            est.fit(X, y)
            est.score(X, y)
        except Exception as exc:  # the run itself reports it again
            print(f"warm-up of {name} failed: {type(exc).__name__}: {exc}")
    return time.perf_counter() - t0


def seconds_per_pass(history):
    times = [r["time"] for r in history]
    if not times:
        return math.nan
    return float(np.median(np.diff([0.0] + times)))


def train_crfsuite(ds, args):
    """sklearn-crfsuite (L-BFGS, c2 = ``--crf-c2``) on the features of the SSVM runs. Its
    iterations cannot be stopped by time, so a 3-iteration run measures the set-up and the
    seconds per iteration, and the real run gets the iterations that fit in
    ``--crf-budget`` seconds (at most ``--crf-iter``); L-BFGS may also stop by itself."""
    import sklearn_crfsuite

    from dualstruct.metrics import token_accuracy

    out = dict(
        method="crfsuite",
        mode="budget",
        status="ok",
        error="",
        s_per_pass=math.nan,
        final_primal=math.nan,
        best_dual=math.nan,
        monitor_seconds=0.0,
        stop_reason="",
        history=[],
    )
    if "sentences" not in ds:
        out.update(status="failed", error="crfsuite runs on the Czech datasets only", passes=0)
        for key in ("train_seconds", "wall_seconds", "test_accuracy"):
            out[key] = math.nan
        return out
    t0 = time.perf_counter()
    Str, Ste = ds["sentences"]
    train_x = ds["features"].feature_dicts(Str)
    test_x = ds["features"].feature_dicts(Ste)
    train_y = [list(t) for t in ds["ytr"]]
    print(f"  crfsuite    features converted in {time.perf_counter() - t0:.1f} s", flush=True)

    def fit(iterations):
        crf = sklearn_crfsuite.CRF(
            algorithm="lbfgs", c1=0.0, c2=args.crf_c2, max_iterations=iterations
        )
        start = time.perf_counter()
        crf.fit(train_x, train_y)
        return crf, time.perf_counter() - start

    probe, seconds = fit(3)
    steps = probe.training_log_.iterations
    per_iter = float(np.median([it["time"] for it in steps]))
    setup = seconds - sum(it["time"] for it in steps)
    iterations = int(min(args.crf_iter, max(1, (args.crf_budget - setup) // per_iter)))
    print(
        f"  crfsuite    set-up {setup:.1f} s, {per_iter:.1f} s per L-BFGS iteration: "
        f"{iterations} iterations fit in {args.crf_budget:g} s",
        flush=True,
    )
    crf, seconds = fit(iterations)
    done = crf.training_log_.iterations
    pred = [np.array(p) for p in crf.predict(test_x)]
    out.update(
        passes=len(done),
        train_seconds=seconds,
        wall_seconds=seconds,
        s_per_pass=per_iter,
        stop_reason="converged" if len(done) < iterations else "max_iterations",
        test_accuracy=token_accuracy(ds["yte"], pred),
        crf_loss=float(done[-1]["loss"]) if done else math.nan,
        history=[
            dict(passes=it["num"], time=float(sum(d["time"] for d in done[: k + 1])))
            for k, it in enumerate(done)
        ],
    )
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def train(ds, method, args, timing):
    """One run; returns a dict of measurements (and the history), never raises."""
    if method == "crfsuite":
        return train_crfsuite(ds, args)
    passes = args.timing_passes
    if timing:  # no check at all: max_iter one above, stopped by the callback
        max_iter, check_every = passes + 1, passes + 1
    else:
        max_iter, check_every = args.max_iter, args.check_every

    def stop(est, record):
        if record.time >= args.budget or (timing and record.passes >= passes):
            return True
        if timing or math.isnan(record.primal):
            return False
        # at a check: stop here if the next check would not fit in the budget
        per_pass = record.time / max(record.passes, 1)
        return record.time + check_every * per_pass > args.budget

    out = dict(
        method=method,
        mode="timing" if timing else "budget",
        status="ok",
        error="",
        passes=0,
        s_per_pass=math.nan,
        train_seconds=math.nan,
        monitor_seconds=math.nan,
        wall_seconds=math.nan,
        final_primal=math.nan,
        best_dual=math.nan,
        test_accuracy=math.nan,
        stop_reason="",
        history=[],
    )
    kwargs = dict(METHODS[method])
    if kwargs["solver"] == "gdmm":
        tuning = GDMM_TUNING.get(ds["name"], GDMM_TUNING_DEFAULT)
        options = {**kwargs["solver_options"], **tuning, **args.gdmm_option}
        kwargs["averaging"] = bool(options.pop("averaging", True))  # an estimator option
        kwargs["solver_options"] = options
    est = StructuredSVM(
        C=ds["C"],
        max_iter=max_iter,
        check_every=check_every,
        tol=0,
        fit_intercept=ds["fit_intercept"],
        random_state=0,
        callback=stop,
        weights=args.weights,
        weights_min_count=args.weights_min_count,
        **kwargs,
    )
    validation = None
    if args.test_every_check and not timing:
        validation = (ds["Xte"], ds["yte"])
    t0 = time.perf_counter()
    try:
        est.fit(ds["Xtr"], ds["ytr"], validation_data=validation)
    except Exception as exc:
        out.update(
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            wall_seconds=time.perf_counter() - t0,
        )
        return out
    out["wall_seconds"] = time.perf_counter() - t0
    hist = est.history_.to_dicts()
    out.update(
        history=hist,
        passes=int(est.n_iter_),
        stop_reason=est.history_.stop_reason,
        s_per_pass=seconds_per_pass(hist),
    )
    if hist:
        out.update(train_seconds=hist[-1]["time"], monitor_seconds=hist[-1]["eval_time"])
    last = est.history_.last_checked()
    if last is not None:
        out["final_primal"] = last.primal
    duals = [r["dual"] for r in hist if not math.isnan(r["dual"])]
    if duals:
        out["best_dual"] = max(duals)
    if not timing:
        out["test_accuracy"] = est.score(ds["Xte"], ds["yte"])
    out["weights"] = est.weights_info_
    with tempfile.TemporaryDirectory() as folder:
        est.save(os.path.join(folder, "model.npz"))
        out["model_file_mb"] = os.path.getsize(os.path.join(folder, "model.npz")) / 1e6
    # the process's peak so far (run one method per invocation for a per-method figure)
    out["peak_rss_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return out


def reference(runs):
    """P* (lowest primal of any run) and the certified lower bound (highest dual of any run:
    every solver here that reports a dual certifies it)."""
    records = [r for run in runs for r in run["history"]]
    primals = [r["primal"] for r in records if not math.isnan(r.get("primal", math.nan))]
    duals = [r["dual"] for r in records if not math.isnan(r.get("dual", math.nan))]
    return (min(primals) if primals else math.nan), (max(duals) if duals else math.nan)


def time_to(run, target):
    for r in run["history"]:
        if r.get("primal", math.inf) <= target:
            return r["passes"], r["time"]
    return math.nan, math.nan


def note(run):
    if run["status"] != "ok":
        return "FAILED " + run["error"][:60]
    if run["method"] == "crfsuite":
        return f"L-BFGS iterations: {run['passes']} ({run['stop_reason']})"
    if run["mode"] == "timing":
        return f"timing only ({run['passes']} passes)"
    if math.isnan(run["final_primal"]):
        return f"no check within the budget ({run['stop_reason']})"
    return "stop: " + ("budget" if run["stop_reason"] == "callback" else run["stop_reason"])


def slope(points):
    """Least-squares slope of log(s/pass) on log(K), or NaN with fewer than two K values."""
    pts = [(k, s) for k, s in points if s > 0 and not math.isnan(s)]
    if len({k for k, _ in pts}) < 2:
        return math.nan
    k, s = np.array(pts, dtype=float).T
    return float(np.polyfit(np.log(k), np.log(s), 1)[0])


# -- output -----------------------------------------------------------------------------------
HEADER = (
    f"{'dataset':<10} {'K':>5} {'method':<11} {'s/pass':>9} {'passes@1%':>9} "
    f"{'s@1%':>8} {'final primal':>13} {'test acc':>8}  note"
)


def row(ds, run):
    return (
        f"{ds['name']:<10} {ds['K']:>5} {run['method']:<11} "
        f"{nan_to_dash(run['s_per_pass'], '9.4f'):>9} "
        f"{nan_to_dash(run['passes_to_1pct'], '9.0f'):>9} "
        f"{nan_to_dash(run['seconds_to_1pct'], '8.2f'):>8} "
        f"{nan_to_dash(run['final_primal'], '13.6g'):>13} "
        f"{nan_to_dash(run['test_accuracy'], '8.4f'):>8}  {note(run)}"
    )


def plot(results, methods, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in methods:
        pts = sorted(
            (ds["K"], run["s_per_pass"])
            for ds in results
            if ds["fit"]
            for run in ds["runs"]
            if run["method"] == name and run["s_per_pass"] > 0
        )
        czech = [
            (ds["K"], run["s_per_pass"])
            for ds in results
            if not ds["fit"]
            for run in ds["runs"]
            if run["method"] == name and run["s_per_pass"] > 0
        ]
        color = None
        if pts:
            (line,) = ax.plot(*zip(*pts), "o-", label=f"{name} (slope {slope(pts):.2f})")
            color = line.get_color()
        if czech:
            ax.plot(*zip(*czech), "s", color=color, mfc="none", ms=9, label=f"{name}, Czech XPOS")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("number of labels K")
    ax.set_ylabel("seconds per pass (median)")
    ax.set_title("Cost of a pass against K (OCR, synthetic chains; Czech hollow)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def accuracy_curve(run):
    """(training seconds, test accuracy) at every check that scored the test set."""
    return [
        (r["time"], r["validation_score"])
        for r in run["history"]
        if not math.isnan(r.get("validation_score", math.nan))
    ]


def accuracy_summary(results, slack=0.003):
    """Per Czech dataset: when each run first came within ``slack`` of BCFW's final test
    accuracy (``--test-every-check``), and how much sooner than BCFW."""
    for ds in results:
        runs = {run["method"]: run for run in ds["runs"] if run["status"] == "ok"}
        bcfw = runs.get("bcfw") or runs.get("bcfw-plain")
        if ds["kind"] != "czech" or bcfw is None or not accuracy_curve(bcfw):
            continue
        line = bcfw["test_accuracy"] - slack
        print(
            f"\n{ds['name']}: BCFW's final test accuracy {bcfw['test_accuracy']:.4f}; "
            f"first check at or above {line:.4f}:"
        )
        reached = {
            m: next((t for t, a in accuracy_curve(run) if a >= line), math.nan)
            for m, run in runs.items()
        }
        for m, run in runs.items():
            t = reached[m]
            ratio = reached[bcfw["method"]] / t if t > 0 else math.nan
            print(
                f"  {m:<11} final {run['test_accuracy']:.4f} after "
                f"{nan_to_dash(run['train_seconds'], '.1f')} s; at the line after "
                f"{nan_to_dash(t, '.1f')} s ({nan_to_dash(ratio, '.1f')}x BCFW's time)"
            )


def accuracy_plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [ds for ds in results if ds["kind"] == "czech"]
    if not shown:
        return
    fig, axes = plt.subplots(1, len(shown), figsize=(6.5 * len(shown), 4.5), squeeze=False)
    for ax, ds in zip(axes[0], shown):
        for run in ds["runs"]:
            if run["status"] != "ok":
                continue
            curve = accuracy_curve(run)
            if curve:
                ax.plot(*zip(*curve), "o-", ms=3, label=run["method"])
            elif not math.isnan(run.get("test_accuracy", math.nan)):
                ax.plot(
                    [run["train_seconds"]], [run["test_accuracy"]], "s", ms=8,
                    label=f"{run['method']} ({run['passes']} iterations)",
                )  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("training seconds")
        ax.set_ylabel("test token accuracy")
        ax.set_title(f"{ds['name']} (K = {ds['K']})")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def target_summary(results, target):
    """When each run first checked a primal at or below ``target`` (``--target-primal``:
    e.g. the primal a capped BCFW run stopped at, where no run reaches 1%)."""
    print(f"\nfirst check with primal <= {target:g}:")
    for ds in results:
        for run in ds["runs"]:
            if run["status"] != "ok":
                continue
            passes, seconds = time_to(run, target)
            print(
                f"  {ds['name']:<10} {run['method']:<11} after {nan_to_dash(passes, '.0f')} "
                f"passes, {nan_to_dash(seconds, '.1f')} training s "
                f"(final primal {nan_to_dash(run['final_primal'], '.6g')})"
            )


def active_sets(run):
    """(passes, active labels per token, labels with mass per token, pairs per edge) at the
    checks of a GDMM run."""
    return [
        (r["passes"], e["active_states"], e["states_with_mass"], e["active_pairs"])
        for r in run["history"]
        if "states_with_mass" in (e := r.get("extra", {}))
    ]


def active_set_summary(results, rows=6):
    """The GDMM runs' active-set sizes at up to ``rows`` checks spread over each run."""
    for ds in results:
        for run in ds["runs"]:
            sizes = active_sets(run) if run["status"] == "ok" else []
            if not sizes:
                continue
            step = max(1, math.ceil(len(sizes) / rows))
            picked = sizes[::step] + ([sizes[-1]] if (len(sizes) - 1) % step else [])
            print(f"\n{ds['name']} {run['method']}: active sets at checks")
            print("  passes  labels/token  with mass  pairs/edge")
            for passes, labels, with_mass, pairs in picked:
                print(f"  {passes:6d}  {labels:12.1f}  {with_mass:9.1f}  {pairs:10.1f}")


def active_set_plot(results, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [
        (ds, run)
        for ds in results
        for run in ds["runs"]
        if run["status"] == "ok" and active_sets(run)
    ]
    if not shown:
        return
    fig, axes = plt.subplots(1, len(shown), figsize=(6.5 * len(shown), 4.5), squeeze=False)
    for ax, (ds, run) in zip(axes[0], shown):
        passes, labels, with_mass, pairs = zip(*active_sets(run))
        ax.plot(passes, labels, "-", label="active labels per token")
        ax.plot(passes, with_mass, "--", label="labels with mass per token")
        ax.plot(passes, pairs, ":", label="pairs per edge")
        ax.set_xlabel("passes")
        ax.set_ylabel("mean size")
        ax.set_title(f"{ds['name']} (K = {ds['K']}), {run['method']}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot written to {path}")


def _option(text):
    """``KEY=VALUE``: a number where possible, ``P:V,P:V,...`` a schedule of (pass, value)
    points (GDMM's rho and eta), else the string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--gdmm-option wants KEY=VALUE, got {text!r}")
    if ":" in value:
        try:
            return key, [
                (int(p), float(v)) for p, v in (item.split(":") for item in value.split(","))
            ]
        except ValueError:
            raise SystemExit(
                f"--gdmm-option {key}: a schedule is PASS:VALUE,..., got {value!r}"
            ) from None
    try:
        return key, int(value)
    except ValueError:
        try:
            return key, float(value)
        except ValueError:
            return key, value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--sizes",
        default="26,100,300,1000,3000",
        help="numbers of labels: 26 = OCR, others = synthetic chains ('' = none)",
    )
    ap.add_argument(
        "--czech",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the Czech XPOS dataset (default on)",
    )
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument(
        "--budget", type=float, default=600.0, help="training seconds per run (monitoring excluded)"
    )
    ap.add_argument("--check-every", type=int, default=10)
    ap.add_argument("--max-iter", type=int, default=100_000)
    ap.add_argument(
        "--C",
        type=float,
        default=None,
        help="override C (default 1 for OCR and synthetic, 0.1 for Czech)",
    )
    ap.add_argument(
        "--timing-only",
        default="",
        metavar="METHOD[:KMIN],...",
        help="run these methods (on datasets with K >= KMIN) for --timing-passes "
        "passes only, to measure seconds per pass",
    )
    ap.add_argument("--timing-passes", type=int, default=5)
    ap.add_argument(
        "--czech-pooled",
        action="store_true",
        help="the pooled Czech split (971 XPOS tags, default features)",
    )
    ap.add_argument(
        "--pooled-min-count",
        type=int,
        default=1,
        help="feature cut-off of the pooled Czech split (3 makes dense fit)",
    )
    ap.add_argument("--min-count", type=int, default=2, help="Czech feature cut-off")
    ap.add_argument(
        "--weights",
        choices=("auto", "dense", "observed"),
        default="auto",
        help="unary weights (StructuredSVM's weights)",
    )
    ap.add_argument("--weights-min-count", type=int, default=1)
    ap.add_argument(
        "--gdmm-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra GDMM option for every GDMM method, e.g. shrink_after=5, "
        "rho=0:0.25,100:0.25,300:2.5 (a schedule, in units of κ) or averaging=0 (repeatable; "
        "values are parsed as numbers where possible)",
    )
    ap.add_argument(
        "--references",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="use the recorded brackets of the optimum (REFERENCES) for the time "
        "to 1%% (default on)",
    )
    ap.add_argument(
        "--test-every-check",
        action="store_true",
        help="score the test set at every check (the history's validation_score; "
        "monitoring time) for the accuracy-against-time plot",
    )
    ap.add_argument("--crf-c2", type=float, default=0.1, help="crfsuite: the L2 penalty")
    ap.add_argument("--crf-budget", type=float, default=3600.0, help="crfsuite: seconds of L-BFGS")
    ap.add_argument("--crf-iter", type=int, default=1000, help="crfsuite: iterations at most")
    ap.add_argument(
        "--accuracy-plot", help="write test accuracy against training time (Czech datasets)"
    )
    ap.add_argument("--plot", help="write a log-log plot of seconds per pass against K")
    ap.add_argument(
        "--active-plot", help="write GDMM's active-set sizes against passes (at the checks)"
    )
    ap.add_argument(
        "--target-primal",
        type=float,
        help="also report when each run first checked a primal at or below this value",
    )
    ap.add_argument("--json", help="write all results and histories to this JSON file")
    args = ap.parse_args(argv)
    args.gdmm_option = dict(_option(text) for text in args.gdmm_option)

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS:
            raise SystemExit(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    timing_only = parse_timing_only(args.timing_only)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if args.timing_passes < 1 or args.check_every < 1 or args.max_iter < 1:
        raise SystemExit("--timing-passes, --check-every and --max-iter must be >= 1")

    import numba

    print(
        f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"Python {platform.python_version()}, numpy {np.__version__}, numba {numba.__version__}"
    )
    print(
        f"methods: {', '.join(methods)}; budget {args.budget:g} training s per run; check "
        f"every {args.check_every} passes; timing only: "
        f"{', '.join(f'{m} (K >= {k})' for m, k in timing_only.items()) or 'none'}"
    )
    print(f"numba warm-up: {warm_up(methods):.2f} s", flush=True)

    loaders = [
        (lambda: ocr_dataset()) if K == OCR_K else (lambda K=K: chain_dataset(K)) for K in sizes
    ]
    if args.czech:
        loaders.append(lambda: czech_dataset(args.min_count))
    if args.czech_pooled:
        loaders.append(lambda: czech_pooled_dataset(args.pooled_min_count))

    results = []
    for load in loaders:
        try:
            ds = load()
        except FileNotFoundError as exc:
            print(f"\n(skipping a dataset: {exc})")
            continue
        ds["C"] = args.C if args.C is not None else C_DEFAULT[ds["kind"]]
        describe(ds)
        runs = []
        for method in methods:
            timing = method in timing_only and ds["K"] >= timing_only[method]
            run = train(ds, method, args, timing)
            runs.append(run)
            if run["status"] == "ok" and "weights" in run:
                print(
                    f"  {method:<11} {run['weights']}; model file "
                    f"{run['model_file_mb']:.1f} MB; peak RSS so far "
                    f"{run['peak_rss_gb']:.2f} GB"
                )
            print(
                f"  {method:<11} {run['status']:<6} {run['passes']:>6} passes, "
                f"{nan_to_dash(run['train_seconds'], '.1f')} s train + "
                f"{nan_to_dash(run['monitor_seconds'], '.1f')} s monitoring "
                f"({nan_to_dash(run['wall_seconds'], '.1f')} s wall), "
                f"{nan_to_dash(run['s_per_pass'], '.4f')} s/pass, final primal "
                f"{nan_to_dash(run['final_primal'], '.6g')}"
                + (f"  [{run['error']}]" if run["error"] else ""),
                flush=True,
            )
            gc.collect()
        p_star, lower = reference(runs)
        known = REFERENCES.get(ds["name"]) if args.references else None
        if known is not None:
            lower = max(lower, known[0]) if lower == lower else known[0]
            p_star = min(p_star, known[1]) if p_star == p_star else known[1]
        # certified within 1% when a lower bound is known, else 1% of the best primal found
        target = 1.01 * (lower if known is not None else p_star)
        for run in runs:
            run["passes_to_1pct"], run["seconds_to_1pct"] = time_to(run, target)
        gap = (p_star - lower) / p_star if p_star == p_star and lower == lower else math.nan
        print(
            f"  P* = {nan_to_dash(p_star, '.6g')} (lowest primal known: an upper estimate of "
            f"the optimum); certified lower bound = {nan_to_dash(lower, '.6g')} "
            f"({'with the recorded bracket' if known else 'best dual of these runs'}); "
            f"relative gap between them {nan_to_dash(gap, '.2%')}; '1%' means primal <= "
            f"{nan_to_dash(target, '.6g')}",
            flush=True,
        )
        results.append(
            {
                k: ds[k]
                for k in (
                    "name",
                    "kind",
                    "fit",
                    "K",
                    "d",
                    "C",
                    "n_train",
                    "train_tokens",
                    "test_tokens",
                )
            }
            | {
                "P_star": p_star,
                "lower_bound": lower,
                "target_1pct": target,
                "certified_1pct": known is not None,
                "runs": runs,
            }
        )
        del ds
        gc.collect()

    print("\n" + HEADER)
    for ds in results:
        for run in ds["runs"]:
            print(row(ds, run))
    print(
        "(s/pass: median training seconds per pass; @1%: training seconds at the first "
        "check with primal <= the '1%' line below: 1.01 x the certified lower bound where "
        "a bracket is recorded, else 1.01 x P*, the lowest primal found, an estimate)"
    )
    for ds in results:
        kind = "certain" if ds["certified_1pct"] else "estimate"
        print(
            f"  {ds['name']:<10} P* = {nan_to_dash(ds['P_star'], '.6g'):<12} (upper "
            f"estimate)   certified lower bound = {nan_to_dash(ds['lower_bound'], '.6g')}"
            f"   1% line = {nan_to_dash(ds['target_1pct'], '.6g')} ({kind})"
        )

    print("\nslope of log(s/pass) against log(K), OCR + synthetic chains (synthetic only):")
    for name in methods:
        pts = [
            (ds["K"], run["s_per_pass"])
            for ds in results
            if ds["fit"]
            for run in ds["runs"]
            if run["method"] == name and run["status"] == "ok"
        ]
        synth = [
            (ds["K"], run["s_per_pass"])
            for ds in results
            if ds["kind"] == "chain"
            for run in ds["runs"]
            if run["method"] == name and run["status"] == "ok"
        ]
        print(
            f"  {name:<11} {nan_to_dash(slope(pts), '.2f'):>5} over {len(pts)} points "
            f"({nan_to_dash(slope(synth), '.2f')} over {len(synth)})"
        )

    accuracy_summary(results)
    active_set_summary(results)
    if args.target_primal is not None:
        target_summary(results, args.target_primal)
    if args.json:
        machine = {
            "platform": platform.platform(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "numba": numba.__version__,
            "numpy": np.__version__,
        }
        with open(args.json, "w") as fh:
            json.dump({"machine": machine, "args": vars(args), "datasets": results}, fh, indent=1)
        print(f"results written to {args.json}")
    if args.plot:
        plot(results, methods, args.plot)
    if args.accuracy_plot:
        accuracy_plot(results, args.accuracy_plot)
    if args.active_plot:
        active_set_plot(results, args.active_plot)


if __name__ == "__main__":
    main()
