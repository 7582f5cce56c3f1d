"""Why CoCoA+ with K ≥ 2 partitions loses BCFW's linear convergence: a self-contained
diagnosis on the multi-class (Crammer–Singer) structural SVM.

The problem, in the C-form of :mod:`dualstruct.solvers.objective`, with ``φ(x, y) = e_y ⊗ x``
and the 0/1 loss ``δ(y) = [y ≠ y_i]``:

    P(w) = ½‖w‖² + C Σ_i max_y [δ(y) + ⟨w_y − w_{y_i}, x_i⟩]
    D(α) = ℓ(α) − ½‖u(α)‖²,   u(α) = C Σ_i x_i ⊗ (e_{y_i} − α_i),   ℓ(α) = C Σ_i (1 − α_{i,y_i})

with one dual block ``α_i`` per example on the class simplex. CoCoA+ (Ma et al. 2015) splits
the examples into K partitions; each round, every partition starts from the shared ``w`` and
runs H passes over its examples on its local subproblem

    G_k(Δα) = C Σ_{i∈k} ⟨δ_i, Δα_i⟩ − ⟨w, Δu_k⟩ − (σ'/2) ‖Δu_k‖²,   Δu_k = −C Σ_{i∈k} x_i ⊗ Δα_i

(local iterate ``v = w + σ' Δu_k``); the driver sets ``u ← u + γ Σ_k Δu_k``, ``α ← α + γ Δα``.
Adding is (γ = 1, σ' = K), averaging (γ = 1/K, σ' = 1). Two local solvers over the same
partitions and the same visiting orders:

* ``bcfw``: the oracle ``ŷ = argmax_y g_y``, ``g_y = C (δ(y) + ⟨v_y − v_{y_i}, x_i⟩)`` (the
  loss-augmented argmax at v), direction ``d = e_ŷ − α_i``, exact line search
  ``γ_i = clip(⟨g, d⟩ / (σ' C² ‖x_i‖² ‖d‖²), 0, 1)``: BCFW's step with the σ'-scaled quadratic.
* ``sdca``: the block's exact maximizer. For ``Σ_y d_y = 0``, ``‖C x_i ⊗ d‖² = C² ‖x_i‖² ‖d‖²``,
  so the block objective is ``⟨g, d⟩ − (σ'/2) C² ‖x_i‖² ‖d‖²`` (the constant part of g drops out
  on the simplex) and the exact step is the Euclidean projection of
  ``α_i + g / (σ' C² ‖x_i‖²)`` onto the simplex (``--selftest`` checks it against scipy's QP
  solver and against the subproblem evaluated from the joint features).

Further outer schemes (all keep every α feasible, so ``D(α)`` stays a certified lower bound):

* ``linesearch``: σ' = 1 locally, then the driver's exact line search on the aggregated
  direction (the dual is quadratic): ``γ* = clip((Δℓ − ⟨w, Δu⟩) / ‖Δu‖², 0, γ_max)`` with
  γ_max the largest step keeping every α_i on its simplex (≥ 1). ``ls-adding``: the same with
  σ' = K locally.
* ``catalyst``: adding on the proximal subproblem ``P(w) + (κ/2)‖w − z‖²`` (κ = K − 1 by
  default), whose dual ``ℓ − ‖u + κ z‖² / (2(1+κ))`` has the primal–dual map
  ``w = (u + κ z)/(1+κ)``: the local quadratic is scaled by σ'/(1+κ) (= 1 at κ = K − 1). After
  every ``--inner`` rounds the centre moves to ``z = w + β (w − w_prev)``, β = (1−√q)/(1+√q),
  q = 1/(1+κ) (Lin, Mairal, Harchaoui 2015). ``prox``: the same with β = 0 (centre at the
  latest iterate, as the single-machine proximal BCFW). The certificate is P(w) against the
  best dual on the segment from the gold labellings to α (``s ℓ − ½ s² ‖u‖²``). ``--kappa``
  fixes κ (``c*sqrtK``: c √K).
* ``auto``: ``prox`` with the single-machine BCFW's adaptive κ: start at 100, halve (floor
  K − 1) when the proximal term ``½‖u − w‖²`` exceeds the inner gap ``P_κ − D_κ`` or after 10
  rounds without a new lowest inner gap (``--auto-rule patience``: the latter only).

``--sigma`` overrides σ' of every scheme (below γK it is unsafe).

The certified relative gap of a round is ``(min P − max D) / min P`` over the rounds so far
(exact primal). A round is H local passes in every partition (the partitions run in
parallel on K machines). The table gives the rounds to 1% and 0.1% per (data, C, K, H,
scheme, local solver); ``--check`` compares K = 1 with dualstruct's own BCFW.

    NUMBA_NUM_THREADS=1 python benchmarks/cocoa_diagnosis.py --selftest
    NUMBA_NUM_THREADS=1 python benchmarks/cocoa_diagnosis.py --check
    NUMBA_NUM_THREADS=1 DUALSTRUCT_DATA=/work/shared/data python benchmarks/cocoa_diagnosis.py \\
        --data digits ocr --C 0.1 1 --schemes adding averaging --max-rounds 2000
    NUMBA_NUM_THREADS=1 DUALSTRUCT_DATA=/work/shared/data python benchmarks/cocoa_diagnosis.py \\
        --data digits ocr --C 1 --solvers sdca bcfw --schemes linesearch ls-adding catalyst prox
    NUMBA_NUM_THREADS=1 DUALSTRUCT_DATA=/work/shared/data python benchmarks/cocoa_diagnosis.py \\
        --data digits ocr --max-examples 5000 --C 1 --H 1 --solvers bcfw --schemes prox \\
        --kappa 63 --max-rounds 500
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from numba import njit

SCHEMES = ("adding", "averaging", "linesearch", "ls-adding", "catalyst", "prox", "auto")


# -- kernels -------------------------------------------------------------------------------------
@njit(cache=True, error_model="numpy")
def project_simplex(a, out):
    """Euclidean projection of ``a`` onto the probability simplex (sort-based)."""
    m = a.size
    s = np.sort(a)[::-1]
    total = 0.0
    theta = 0.0
    for j in range(m):
        total += s[j]
        t = (total - 1.0) / (j + 1)
        if s[j] - t > 0.0:
            theta = t
    for j in range(m):
        out[j] = max(a[j] - theta, 0.0)


@njit(cache=True, error_model="numpy")
def block_step(alpha_i, g, curv, sdca, d):
    """The change ``d`` of one block maximizing ``⟨g, d⟩ − (curv/2)‖d‖²`` exactly on the
    simplex (sdca) or along the Frank–Wolfe direction (bcfw); returns the block's gain."""
    m = alpha_i.size
    if curv <= 0.0:
        for c in range(m):
            d[c] = 0.0
        return 0.0
    if sdca:
        a = np.empty(m)
        for c in range(m):
            a[c] = alpha_i[c] + g[c] / curv
        project_simplex(a, d)
        for c in range(m):
            d[c] -= alpha_i[c]
    else:
        best = 0
        for c in range(1, m):
            if g[c] > g[best]:
                best = c
        num = 0.0
        nrm = 0.0
        for c in range(m):
            d[c] = (1.0 if c == best else 0.0) - alpha_i[c]
            num += g[c] * d[c]
            nrm += d[c] * d[c]
        den = curv * nrm
        step = min(max(num / den, 0.0), 1.0) if den > 0.0 else 0.0
        for c in range(m):
            d[c] *= step
    gain = 0.0
    for c in range(m):
        gain += g[c] * d[c] - 0.5 * curv * d[c] * d[c]
    return gain


@njit(cache=True, error_model="numpy")
def local_passes(X, y, xsq, idx, alpha, V, dU, C, s, H, sdca, seed):
    """H passes over the examples ``idx`` (random order each pass) on the local subproblem
    with local iterate ``V`` (moved by ``s`` times each change of u, ``s`` also scaling the
    block quadratic). Updates ``alpha``, ``V`` and the partition's ``dU`` in place; returns
    the change of the loss term ``Δℓ``."""
    np.random.seed(seed)
    m = alpha.shape[1]
    nf = X.shape[1]
    t = np.empty(m)
    g = np.empty(m)
    d = np.empty(m)
    dl = 0.0
    for _ in range(H):
        order = idx[np.random.permutation(idx.size)]
        for i in order:
            yi = y[i]
            for c in range(m):
                t[c] = 0.0
            for f in range(nf):
                xf = X[i, f]
                if xf != 0.0:
                    for c in range(m):
                        t[c] += xf * V[f, c]
            for c in range(m):
                g[c] = C * ((0.0 if c == yi else 1.0) + t[c] - t[yi])
            block_step(alpha[i], g, s * C * C * xsq[i], sdca, d)
            for c in range(m):
                alpha[i, c] += d[c]
            dl -= C * d[yi]
            for f in range(nf):
                xf = X[i, f]
                if xf != 0.0:
                    for c in range(m):
                        if d[c] != 0.0:
                            dU[f, c] -= C * xf * d[c]
                            V[f, c] -= s * C * xf * d[c]
    return dl


@njit(cache=True, error_model="numpy")
def hinge_sum(X, y, W):
    """Σ_i max_y [δ(y) + ⟨w_y − w_{y_i}, x_i⟩]."""
    m = W.shape[1]
    nf = X.shape[1]
    t = np.empty(m)
    total = 0.0
    for i in range(X.shape[0]):
        for c in range(m):
            t[c] = 0.0
        for f in range(nf):
            xf = X[i, f]
            if xf != 0.0:
                for c in range(m):
                    t[c] += xf * W[f, c]
        best = 0.0
        for c in range(m):
            if c != y[i]:
                best = max(best, 1.0 + t[c] - t[y[i]])
        total += best
    return total


# -- data ----------------------------------------------------------------------------------------
def load(name, max_examples=None, seed=0):
    """(X dense n × d with a bias column, y, classes, description)."""
    if name == "digits":
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        what = "sklearn digits (pixels/16, bias)"
    elif name == "ocr":
        from dualstruct.datasets import fetch_ocr

        Xw, yw, folds = fetch_ocr()
        train = np.flatnonzero(folds != 0)
        X = np.vstack([Xw[i] for i in train]).astype(np.float64)
        y = np.concatenate([[ord(c) - 97 for c in yw[i]] for i in train])
        what = "OCR letters (folds 1-9, bias)"
    else:
        raise ValueError(f"unknown data set {name!r} (digits, ocr)")
    y = np.asarray(y, dtype=np.int64)
    if max_examples is not None and len(y) > max_examples:
        keep = np.sort(np.random.default_rng(seed).choice(len(y), max_examples, replace=False))
        X, y = X[keep], y[keep]
        what += f", {max_examples} drawn"
    X = np.ascontiguousarray(np.hstack([X, np.ones((len(y), 1))]))
    return X, y, int(y.max()) + 1, what


# -- CoCoA+ --------------------------------------------------------------------------------------
def run(
    X,
    y,
    m,
    C,
    K,
    H,
    solver,
    scheme,
    max_rounds,
    targets,
    seed=0,
    inner=1,
    kappa=None,
    sigma_override=None,
    auto_rule="both",
):
    """CoCoA+ until the smallest target or ``max_rounds``; returns rounds to each target and
    the certified gap per round."""
    n, nf = X.shape
    xsq = np.einsum("ij,ij->i", X, X)
    rng = np.random.default_rng(seed)
    parts = np.array_split(rng.permutation(n), K)
    alpha = np.zeros((n, m))
    alpha[np.arange(n), y] = 1.0
    U = np.zeros((nf, m))
    ell = 0.0
    sdca = solver == "sdca"
    prox = scheme in ("catalyst", "prox", "auto")
    if isinstance(kappa, str):  # "c*sqrtK": κ = c √K
        kappa = float(kappa.split("*")[0]) * math.sqrt(K)
    kap = (K - 1.0 if kappa is None else kappa) if prox else 0.0
    if scheme == "auto":
        kap = max(100.0 if kappa is None else kappa, K - 1.0)
    lowest, since, patience, kap_next = math.inf, 0, 10, kap
    q = 1.0 / (1.0 + kap)
    beta = (1 - math.sqrt(q)) / (1 + math.sqrt(q)) if scheme == "catalyst" else 0.0
    sigma = {"adding": K, "averaging": 1, "linesearch": 1, "ls-adding": K}.get(scheme, K)
    if sigma_override is not None:
        sigma = sigma_override
    z = np.zeros((nf, m))
    w_prev_centre = np.zeros((nf, m))
    best_p, best_d = math.inf, -math.inf
    gaps, reached = [], {}
    t0 = time.perf_counter()
    for r in range(1, max_rounds + 1):
        W = (U + kap * z) / (1 + kap)
        s = sigma / (1 + kap)
        old = alpha.copy()
        dU = np.zeros((nf, m))
        dl = 0.0
        for k, idx in enumerate(parts):
            dUk = np.zeros((nf, m))
            dl += local_passes(
                X, y, xsq, idx, alpha, W.copy(), dUk, C, s, H, sdca, seed * 100003 + r * 131 + k
            )
            dU += dUk
        if scheme == "averaging":
            gamma = 1.0 / K
        elif scheme in ("linesearch", "ls-adding"):
            dA = alpha - old
            neg = dA < -1e-15
            gmax = float(np.min(old[neg] / -dA[neg])) if neg.any() else 1e6
            gmax = max(gmax, 1.0)
            den = float(np.sum(dU * dU)) * q
            num = dl - float(np.sum(W * dU))
            gamma = 0.0 if den <= 0 else min(max(num / den, 0.0), gmax)
        else:
            gamma = 1.0
        if gamma != 1.0:
            alpha = old + gamma * (alpha - old)
        U += gamma * dU
        ell += gamma * dl
        W = (U + kap * z) / (1 + kap)
        hinge = hinge_sum(X, y, W)
        primal = 0.5 * float(np.sum(W * W)) + C * hinge
        if scheme == "auto":  # halve κ while the proximal term dominates the gap
            inner_gap = (
                primal
                + 0.5 * kap * float(np.sum((W - z) ** 2))
                - ell
                + float(np.sum((U + kap * z) ** 2)) / (2 * (1 + kap))
                - 0.5 * kap * float(np.sum(z * z))
            )
            if inner_gap < lowest:
                lowest, since = inner_gap, 0
            else:
                since += 1
            dominated = 0.5 * float(np.sum((U - W) ** 2)) > inner_gap and auto_rule == "both"
            if dominated or since >= patience:
                kap_next = max(0.5 * kap, K - 1.0)
                if kap_next != kap:
                    lowest, since = math.inf, 0
        if prox and r % inner == 0:  # move the centre
            z = W + beta * (W - w_prev_centre)
            w_prev_centre = W.copy()
        if scheme == "auto":
            kap = kap_next
            q = 1.0 / (1.0 + kap)
        uu = float(np.sum(U * U))
        if prox and uu > 0:
            sc = min(1.0, ell / uu)
            dual = sc * ell - 0.5 * sc * sc * uu
        else:
            dual = ell - 0.5 * uu
        best_p, best_d = min(best_p, primal), max(best_d, dual)
        gap = (best_p - best_d) / abs(best_p)
        gaps.append(gap)
        for tgt in targets:
            if tgt not in reached and gap <= tgt:
                reached[tgt] = r
        if gap <= min(targets):
            break
    return {
        "reached": reached,
        "gaps": gaps,
        "rounds": len(gaps),
        "primal": best_p,
        "dual": best_d,
        "seconds": time.perf_counter() - t0,
        "kappa": kap,
    }


# -- checks --------------------------------------------------------------------------------------
def selftest():
    """The exact block step against scipy's QP solver and brute force, and the block
    objective against the subproblem evaluated from the joint features."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(1)
    worst = 0.0
    for trial in range(200):
        m = int(rng.integers(2, 6))
        a = rng.dirichlet(np.ones(m) * 0.5)
        if trial % 3 == 0:
            a = np.eye(m)[rng.integers(m)]
        g = rng.normal(size=m) * 3
        curv = float(rng.uniform(0.1, 5))
        d = np.empty(m)
        gain = block_step(a, g, curv, True, d)

        def neg(x, g=g, a=a, curv=curv):
            dd = x - a
            return -(g @ dd - 0.5 * curv * dd @ dd)

        res = minimize(
            neg,
            np.full(m, 1.0 / m),
            method="SLSQP",
            bounds=[(0, 1)] * m,
            constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1}],
            options={"ftol": 1e-14, "maxiter": 500},
        )
        worst = max(worst, -res.fun - gain)
        assert gain >= -res.fun - 1e-8, (trial, gain, -res.fun)
        assert abs(np.sum(a + d) - 1) < 1e-12 and np.all(a + d >= -1e-15)
        # brute force on a grid (m = 3): no feasible point is better
        if m == 3:
            grid = np.linspace(0, 1, 61)
            P = np.array([(u, v, 1 - u - v) for u in grid for v in grid if u + v <= 1 + 1e-12])
            D = P - a
            best = np.max(D @ g - 0.5 * curv * np.sum(D * D, axis=1))
            assert gain >= best - 1e-9, (trial, gain, best)
        # the BCFW step is never better than the exact one, and never negative
        d2 = np.empty(m)
        fw = block_step(a, g, curv, False, d2)
        assert -1e-12 <= fw <= gain + 1e-12
    # the block objective is the local subproblem evaluated from the joint features
    m, nf, C, sig = 4, 3, 0.7, 3.0
    for _ in range(50):
        x = rng.normal(size=nf)
        yi = int(rng.integers(m))
        w = rng.normal(size=(nf, m))
        a = rng.dirichlet(np.ones(m))
        new = rng.dirichlet(np.ones(m))
        dd = new - a
        phi = [np.outer(x, np.eye(m)[c]).ravel() for c in range(m)]
        du = -C * sum(dd[c] * phi[c] for c in range(m))
        delta = np.array([0.0 if c == yi else 1.0 for c in range(m)])
        direct = C * delta @ dd - w.ravel() @ du - 0.5 * sig * du @ du
        t = x @ w
        g = C * (delta + t - t[yi])
        formula = g @ dd - 0.5 * sig * C * C * (x @ x) * dd @ dd
        assert abs(direct - formula) < 1e-10, (direct, formula)
    print(f"selftest passed (exact step beats scipy's SLSQP by {worst:.2e} at most)")


def check_against_dualstruct(C=0.1, tol=1e-4):
    """K = 1 with the BCFW step against dualstruct's BCFW(step="fw", proximal=0): both run to
    a certified ``tol``; their primal objectives agree to about ``tol``."""
    from dualstruct.models import MultiClassModel
    from dualstruct.solvers import BCFW

    X, y, m, what = load("digits")
    res = run(X, y, m, C, 1, 1, "bcfw", "adding", 5000, [tol])
    model = MultiClassModel(m, X.shape[1])
    s = BCFW(model, C, step="fw", proximal=0, max_iter=5000, tol=tol, check_every=5, random_state=0)
    s.fit(model.block_data(X, y))
    ref = s.history.last_checked()
    rel = abs(res["primal"] - ref.primal) / ref.primal
    print(
        f"K = 1, BCFW step, {what}, C = {C}: here P = {res['primal']:.6f} after "
        f"{res['rounds']} passes; dualstruct BCFW P = {ref.primal:.6f} after {s.passes} "
        f"passes (gap {ref.relative_gap:.1e}); relative difference {rel:.1e}"
    )
    assert rel <= 3 * tol, "K = 1 does not reach dualstruct's BCFW optimum"


# -- main ----------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--check", action="store_true", help="K = 1 against dualstruct's BCFW")
    ap.add_argument("--data", nargs="+", default=["digits"], choices=("digits", "ocr"))
    ap.add_argument("--max-examples", type=int, default=None, help="subsample each data set")
    ap.add_argument("--C", type=float, nargs="+", default=[0.1, 1.0])
    ap.add_argument("--K", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--H", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--solvers", nargs="+", default=["sdca", "bcfw"], choices=("sdca", "bcfw"))
    ap.add_argument("--schemes", nargs="+", default=["adding", "averaging"], choices=SCHEMES)
    ap.add_argument("--targets", type=float, nargs="+", default=[0.01, 0.001])
    ap.add_argument("--max-rounds", type=int, default=1000)
    ap.add_argument("--inner", type=int, default=1, help="catalyst/prox: rounds per centre")
    ap.add_argument(
        "--kappa",
        type=lambda v: v if v.endswith("*sqrtK") else float(v),
        default=None,
        help="catalyst/prox: κ (default K − 1; 'c*sqrtK': c √K)",
    )
    ap.add_argument("--sigma", type=float, default=None, help="σ' of every scheme (unsafe < γK)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--auto-rule", choices=("both", "patience"), default="both")
    ap.add_argument("--plot", help="write gap against rounds to this PNG")
    args = ap.parse_args(argv)
    if args.selftest:
        return selftest()
    if args.check:
        return check_against_dualstruct()
    runs = []
    cols = [f"{t:g}" for t in args.targets]
    for name in args.data:
        X, y, m, what = load(name, args.max_examples, args.seed)
        print(
            f"# {what}: n = {len(y)}, d = {X.shape[1]}, {m} classes; cells: rounds to "
            f"{' / '.join(cols)} (— not within {args.max_rounds}; then the last gap)\n"
            "| data | C | scheme | solver | H | "
            + " | ".join(f"K={K}" for K in args.K)
            + " |\n|---|---|---|---|---|"
            + "---|" * len(args.K),
            flush=True,
        )
        for C in args.C:
            for scheme in args.schemes:
                for solver in args.solvers:
                    for H in args.H:
                        cells = []
                        for K in args.K:
                            res = run(
                                X,
                                y,
                                m,
                                C,
                                K,
                                H,
                                solver,
                                scheme,
                                args.max_rounds,
                                args.targets,
                                args.seed,
                                args.inner,
                                args.kappa,
                                args.sigma,
                                args.auto_rule,
                            )
                            runs.append((name, C, scheme, solver, H, K, res))
                            cell = " / ".join(str(res["reached"].get(t, "—")) for t in args.targets)
                            if len(res["reached"]) < len(args.targets):
                                cell += f" ({res['gaps'][-1]:.1e})"
                            if scheme == "auto":
                                cell += f" κ→{res['kappa']:g}"
                            cells.append(cell)
                        print(
                            f"| {name} | {C:g} | {scheme} | {solver} | {H} | "
                            + " | ".join(cells)
                            + " |",
                            flush=True,
                        )
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        keys = sorted({(r[0], r[1]) for r in runs})
        fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5), squeeze=False)
        for ax, key in zip(axes[0], keys):
            for name, C, scheme, solver, H, K, res in runs:
                if (name, C) == key:
                    ax.semilogy(
                        range(1, len(res["gaps"]) + 1),
                        res["gaps"],
                        label=f"{scheme} {solver} H={H} K={K}",
                        lw=0.8,
                    )
            ax.set_title(f"{key[0]}, C={key[1]:g}")
            ax.set_xlabel("rounds")
            ax.set_ylabel("certified relative gap")
            ax.legend(fontsize=5, ncol=2)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()
