"""GDMM's factorwise oracles alone, on the state GDMM reaches after some passes.

Trains GDMM (sublinear oracles, the benchmark tuning of ``large_labels.py``) on a synthetic
chain and, after each pass count in ``--after``, times one call of an oracle on every factor
of the training set, without steps: the unigram oracle in each mode (exact over label lists,
brute force over all K labels, the paper's sampled search) and the bigram four-case search.
Median of ``--repeats`` runs. (Its figures for the linked label lists of commit 6d391fc
came from the version of this script at that commit.) With each time it prints how full the
unigram oracle's label lists are: their mean length over the tokens' feature entries, the
share of those entries whose row of W_U the oracle streams whole (list longer than K/16),
the labels per token that carry mass and the non-zeros per row of W_U (rows of features
seen in training).

    DUALSTRUCT_DATA=../shared/data python benchmarks/gdmm_oracles.py --size 1000 \\
        --after 1,3,10,150,450
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
from large_labels import GDMM_TUNING, GDMM_TUNING_DEFAULT, chain_dataset
from numba import njit

from dualstruct import StructuredSVM
from dualstruct.solvers import _gdmm_kernels as kern


@njit(cache=True)
def unigram_calls(data, weights, lists, sets, mode, n_groups, perm):
    """The unigram oracle once per token; returns a checksum so nothing is optimized away."""
    offsets, act, n_act = data.offsets, sets.act, sets.n_act
    K = weights.start.shape[0]
    theta = np.empty(act.shape[1])
    mark = np.zeros(K, dtype=np.int64)
    score = np.zeros(K)
    touched = np.empty(K, dtype=np.int64)
    stamp = 0
    total = 0.0
    for i in range(offsets.shape[0] - 1):
        first, last = offsets[i], offsets[i + 1] - 1
        for row in range(first, last + 1):
            stamp += 1
            for s in range(n_act[row]):
                mark[act[row, s]] = stamp
            _, th = kern.unigram_fmo(
                data,
                weights,
                lists,
                mode,
                0,
                n_groups,
                perm,
                row,
                row == first,
                row == last,
                act[row],
                n_act[row],
                theta,
                mark,
                stamp,
                score,
                touched,
            )
            total += th
    return total


@njit(cache=True)
def bigram_calls(trans, W_B, C, rho, offsets, sets):
    """The bigram four-case search once per edge; returns a checksum."""
    act, n_act, q_u = sets.act, sets.n_act, sets.q_u
    lam_in, sum_in, lam_out, sum_out = sets.lam_in, sets.sum_in, sets.lam_out, sets.sum_out
    K = W_B.shape[0]
    cap = act.shape[1]
    mu_a = np.empty(cap)
    mu_b = np.empty(cap)
    mark_a = np.zeros(K, dtype=np.int64)
    mark_b = np.zeros(K, dtype=np.int64)
    slot_b = np.zeros(K, dtype=np.int64)
    stack = np.empty(130, dtype=np.int64)
    stamp = 0
    total = 0.0
    for i in range(offsets.shape[0] - 1):
        for row in range(offsets[i], offsets[i + 1] - 1):
            stamp += 1
            for s in range(n_act[row]):
                mark_a[act[row, s]] = stamp
                mu_a[s] = lam_out[row, s] + rho * (sum_out[row, s] - q_u[row, s])
            for s in range(n_act[row + 1]):
                mark_b[act[row + 1, s]] = stamp
                slot_b[act[row + 1, s]] = s
                mu_b[s] = lam_in[row + 1, s] + rho * (sum_in[row + 1, s] - q_u[row + 1, s])
            _, _, g = kern.bigram_sorted(
                trans,
                W_B,
                C,
                act[row],
                n_act[row],
                mu_a,
                act[row + 1],
                n_act[row + 1],
                mu_b,
                mark_a,
                mark_b,
                slot_b,
                stamp,
                stack,
            )
            total += g
    return total


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1000, help="labels of the synthetic chain")
    ap.add_argument("--after", default="2,5,10,20,40", help="pass counts to time after")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    ds = chain_dataset(args.size)
    tuning = dict(GDMM_TUNING.get(ds["name"], GDMM_TUNING_DEFAULT))
    averaging = bool(tuning.pop("averaging", True))  # an estimator option
    est = StructuredSVM(
        C=1.0,
        solver="gdmm",
        max_iter=1,
        check_every=10**9,
        tol=0,
        random_state=0,
        warm_start=True,
        averaging=averaging,
        solver_options={**tuning, "unigram_oracle": "sparse", "bigram_oracle": "sorted"},
    )
    print(
        f"{ds['name']}, GDMM {tuning}; machine: {platform.machine()}, "
        f"Python {platform.python_version()}; median of {args.repeats} runs (s)"
    )
    print(
        f"{'passes':>6} {'labels/token':>12} {'with mass':>9} {'list len':>8} "
        f"{'streamed':>8} {'W_U row nnz':>11} {'unigram lists':>13} {'unigram brute':>13} "
        f"{'unigram sampled':>15} {'bigram sorted':>13}"
    )
    done = 0
    for passes in (int(p) for p in args.after.split(",")):
        est.set_params(max_iter=passes - done)
        est.fit(ds["Xtr"], ds["ytr"])
        done = passes
        s = est.solver_
        indptr, indices, values, offsets = s.arrays
        data, weights, lists, sets = (
            s._chain_data(),
            s._weights(),
            s._label_lists(),
            s._active_sets(),
        )

        def unigram(mode, s=s, data=data, weights=weights, lists=lists, sets=sets):
            unigram_calls(data, weights, lists, sets, mode, s.n_groups, s.perm)

        def bigram(s=s, offsets=offsets, sets=sets):
            bigram_calls(s._transitions(), s.W.transition, s.C, s.rho, offsets, sets)

        sparse = median_seconds(lambda: unigram(kern.UNIGRAM_SPARSE), args.repeats)
        brute = median_seconds(lambda: unigram(kern.UNIGRAM_BRUTE), args.repeats)
        sampled = median_seconds(lambda: unigram(kern.UNIGRAM_SAMPLED), args.repeats)
        pairs = median_seconds(bigram, args.repeats)
        list_len = s.fl_len[indices]
        streamed = s.streamed_rows()
        with_mass = (s.q_u > 0).sum(axis=1).mean()
        row_nnz = (s.W.unigram[np.unique(indices)] != 0).sum(axis=1).mean()
        print(
            f"{passes:>6} {s.n_act.mean():>12.1f} {with_mass:>9.1f} {list_len.mean():>8.1f} "
            f"{streamed:>8.3f} {row_nnz:>11.1f} {sparse:>13.4f} {brute:>13.4f} "
            f"{sampled:>15.4f} {pairs:>13.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
