"""What GDMM's active sets hold on a synthetic chain: a token's labels with mass in q_t,
labels held only by pairs of its edges, idle labels; how the non-gold mass spreads over the
labels; and the pairs that have a label without unigram mass (the inconsistency).

    DUALSTRUCT_DATA=../shared/data python benchmarks/gdmm_active_sets.py --size 1000 --passes 460

GDMM runs with the benchmark setting of ``large_labels.py`` (``GDMM_TUNING``).
"""

from __future__ import annotations

import argparse

import numpy as np
from large_labels import C_DEFAULT, GDMM_TUNING, GDMM_TUNING_DEFAULT, chain_dataset

from dualstruct import StructuredSVM


def breakdown(solver):
    """Per-token and per-edge figures of a trained chain GDMM's state."""
    q, n_act, offsets = solver.q_u, solver.n_act, solver.data.offsets
    used = np.arange(q.shape[1]) < n_act[:, None]
    mass = np.where(used, q, 0.0)
    n_tok = len(n_act)
    # the row of every edge's left token: rows that are not the last of their sequence
    last = np.zeros(n_tok, dtype=bool)
    last[offsets[1:] - 1] = True
    left = np.flatnonzero(~last)
    n_pair, pair_a, pair_b, q_b = solver.n_pair, solver.pair_a, solver.pair_b, solver.q_b
    live = np.arange(q_b.shape[1]) < n_pair[:, None]
    e, p = np.nonzero(live)
    in_pair = np.zeros_like(used)
    in_pair[left[e], pair_a[e, p]] = True
    in_pair[left[e] + 1, pair_b[e, p]] = True
    massless = (mass[left[e], pair_a[e, p]] <= 0) | (mass[left[e] + 1, pair_b[e, p]] <= 0)
    without = used & (mass <= 0)
    non_gold = np.sort(mass[:, 1:], axis=1)[:, ::-1]
    total = non_gold.sum(axis=1)
    cum = np.cumsum(non_gold, axis=1)
    out = {
        "active labels per token": n_act.mean(),
        "  with mass in q_t": (used & (mass > 0)).sum(1).mean(),
        "  only in pairs": (without & in_pair).sum(1).mean(),
        "  idle": (without & ~in_pair).sum(1).mean(),
        "non-gold mass per token": total.mean(),
        "median non-gold label mass": np.median(mass[:, 1:][mass[:, 1:] > 0]),
        "labels with mass > 1e-4": (mass > 1e-4).sum(1).mean(),
        "labels with mass > 1e-3": (mass > 1e-3).sum(1).mean(),
    }
    for share in (0.9, 0.99):
        need = (cum < share * total[:, None]).sum(1) + 1
        out[f"labels holding {share:.0%} of the non-gold mass"] = need[total > 0].mean()
    out["pairs per edge"] = n_pair.mean()
    out["  with a label without unigram mass"] = massless.sum() / len(n_pair)
    out["  their mass per edge"] = q_b[e, p][massless].sum() / len(n_pair)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1000, help="labels asked of make_chain")
    ap.add_argument("--passes", type=int, default=460)
    args = ap.parse_args(argv)
    ds = chain_dataset(args.size)
    tuning = dict(GDMM_TUNING.get(ds["name"], GDMM_TUNING_DEFAULT))
    averaging = bool(tuning.pop("averaging", True))
    est = StructuredSVM(
        solver="gdmm", C=C_DEFAULT["chain"], max_iter=args.passes, check_every=args.passes, tol=0,
        averaging=averaging, fit_intercept=ds["fit_intercept"], random_state=0,
        solver_options=tuning,
    )  # fmt: skip
    est.fit(ds["Xtr"], ds["ytr"])
    last = est.history_.last_checked()
    K = len(est.classes_)
    print(
        f"{ds['name']}: K = {K} labels in training, {last.passes} passes, primal {last.primal:.3f}"
    )
    for name, value in breakdown(est.solver_).items():
        print(f"  {name:<45} {value:.4g}")


if __name__ == "__main__":
    main()
