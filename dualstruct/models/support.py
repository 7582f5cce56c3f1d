"""Sparse feature–label weights: the *support* of a model's unary weights.

A model with d features and K labels (chain tags, multi-label labels, graph node states)
scores label a of an item with feature vector x by ``Σ_f x_f W[f, a]``. With a support,
W keeps a weight only for the allowed pairs (f, a), stored by feature as CSR: feature f's
allowed labels are ``labels[indptr[f]:indptr[f+1]]`` (strictly increasing) and its weights
sit at the same positions of the model's flat ``w``. The joint feature map is restricted
to the same pairs, so a pair outside the support is a feature the model does not have (its
contributions are dropped from φ, from every update and from every norm). The dense model
is the support of all d·K pairs.

The default support (CRFsuite's) holds the pairs that *met* in training at least
``min_count`` times; a feature that met many labels gets its whole row, which the kernels
read as one contiguous block (:func:`support_from_pairs`).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from ..memory import check_memory

#: a feature that met at least this share of the K labels gets all K of them
FULL_ROWS_FROM = 0.25


def check_support(support, n_features, n_labels):
    """The support as (int64 indptr, int32 labels), checked: d + 1 non-decreasing offsets
    from 0, labels in 0..K−1 strictly increasing within each feature's row."""
    try:
        indptr, labels = support
    except (TypeError, ValueError):
        raise ValueError("support must be a pair (indptr, labels)") from None
    indptr = np.asarray(indptr)
    labels = np.asarray(labels)
    if (
        indptr.ndim != 1
        or labels.ndim != 1
        or not np.issubdtype(indptr.dtype, np.integer)
        or not np.issubdtype(labels.dtype, np.integer)
    ):
        raise ValueError("support indptr and labels must be 1-D integer arrays")
    if indptr.shape != (n_features + 1,) or indptr[0] != 0 or indptr[-1] != len(labels):
        raise ValueError(
            f"support indptr must have {n_features + 1} entries from 0 to "
            f"len(labels) = {len(labels)}"
        )
    if np.any(np.diff(indptr) < 0):
        raise ValueError("support indptr must be non-decreasing")
    if len(labels) and (labels.min() < 0 or labels.max() >= n_labels):
        raise ValueError(f"support labels must lie in 0..{n_labels - 1}")
    row_start = np.zeros(len(labels), dtype=bool)
    row_start[indptr[:-1][np.diff(indptr) > 0]] = True
    if np.any((np.diff(labels) <= 0) & ~row_start[1:]):
        raise ValueError("support labels must be strictly increasing within a feature")
    return np.ascontiguousarray(indptr, dtype=np.int64), np.ascontiguousarray(
        labels, dtype=np.int32
    )


#: what to change when building a support would not fit
SUPPORT_ADVICE = (
    "Lower it with fewer features (the largest feature index sets how many there are) "
    "or fewer labels."
)


def support_memory_parts(n_features, n_labels, n_pairs, n_entries=0) -> dict:
    """The peak memory of building a support over ``n_features`` features from at most
    ``n_pairs`` met (feature, label) pairs (and a copy of ``n_entries`` feature entries),
    before anything is allocated: per-feature counts and row offsets (32 bytes a feature),
    and the pairs, sorted, with the rows of full features (48 bytes a pair)."""
    pairs = min(4 * int(n_pairs), int(n_features) * int(n_labels))  # full rows: ≤ 4× met
    return {
        "per-feature counts and row offsets": 32 * (int(n_features) + 1),
        "feature entries (a copy)": 12 * int(n_entries),
        "feature-label pairs": 48 * pairs,
    }


def support_from_pairs(
    features, labels, counts, n_features, n_labels, min_count=1, full_rows_from=FULL_ROWS_FROM
):
    """The support of the distinct pairs ``(features[j], labels[j])`` met ``counts[j]``
    times: those met at least ``min_count`` times, and the whole row of every feature that
    kept at least ``full_rows_from`` × K labels (and at least 2; 1.0 keeps the pairs only)."""
    check_memory(
        "the observed support",
        support_memory_parts(n_features, n_labels, len(counts)),
        SUPPORT_ADVICE,
    )
    keep = np.asarray(counts) >= int(min_count)
    features = np.asarray(features, dtype=np.int64)[keep]
    labels = np.asarray(labels, dtype=np.int64)[keep]
    per_feature = np.bincount(features, minlength=n_features)
    full = per_feature >= max(2.0, float(full_rows_from) * n_labels)
    if full.any():
        kept = ~full[features]
        features = np.concatenate([features[kept], np.repeat(np.flatnonzero(full), n_labels)])
        labels = np.concatenate([labels[kept], np.tile(np.arange(n_labels), int(full.sum()))])
    order = np.lexsort((labels, features))
    features, labels = features[order], labels[order]
    indptr = np.zeros(n_features + 1, dtype=np.int64)
    np.cumsum(np.bincount(features, minlength=n_features), out=indptr[1:])
    return indptr, labels.astype(np.int32)


def support_matrix(unary, support, n_features, n_labels):
    """The unary weights (the support's values, in its order) as a (d, K) CSR matrix."""
    indptr, labels = support
    return sp.csr_matrix((np.array(unary), labels, indptr), shape=(n_features, n_labels))


def support_size_summary(n_support, n_features, n_labels, kind):
    """One line for the start of training: which weights, how many, their memory."""
    dense = n_features * n_labels
    return (
        f"weights: {kind}, {n_support:,} unary weights of {dense:,} "
        f"({n_support / dense:.2%}), {8 * n_support / 2**20:.1f} MiB per copy"
    )


@njit(cache=True, inline="always")
def _row_position(labels, lo, hi, K, a):
    """The position of label a in the sorted row ``labels[lo:hi]``, or −1: direct when the
    row holds all K labels, else a binary search."""
    if hi - lo == K:
        return lo + a
    end = hi
    while lo < hi:
        mid = (lo + hi) // 2
        if labels[mid] < a:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and labels[lo] == a:
        return lo
    return -1


@njit(cache=True, inline="always")
def support_position(support_indptr, support_labels, K, f, a):
    """The position of the pair (f, a) in the support, or −1 (binary search in f's row;
    direct for a row of all K labels). Any sorted CSR structure: the support itself, and
    the chain's listed transitions for GDMM (``K = −1``: no shortcut)."""
    return _row_position(support_labels, support_indptr[f], support_indptr[f + 1], K, a)


def entry_rows(indices, support_indptr):
    """For every entry of a CSR matrix (its column ``indices``), where its feature's support
    row starts and how many labels it holds: ``(int64 start, int32 count)``. Kernels that
    read the support once per entry keep these beside the data, so that a rare feature
    costs two cold reads (its labels and weights) instead of three (its row pointer too):
    at a few dozen labels that makes the observed weights' unary scores as fast as the
    dense ones (12 bytes per entry)."""
    start = support_indptr[indices]
    return start.astype(np.int64), (support_indptr[indices + 1] - start).astype(np.int32)


def kernel_support(support, indices):
    """The support as the kernels hold it, for a CSR matrix of column ``indices``:
    ``(labels, entry_start, entry_count)`` (:func:`entry_rows`), or three empty arrays for
    dense weights."""
    if support is None:
        return np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32)
    indptr, labels = support
    return (labels, *entry_rows(indices, indptr))


@njit(cache=True, inline="always")
def entry_position(entry_start, entry_count, support_labels, K, p, a):
    """The support position of the pair (feature of entry p, a), or −1: direct in a row of
    all K labels, else a binary search in the entry's row."""
    lo = entry_start[p]
    return _row_position(support_labels, lo, lo + entry_count[p], K, a)


@njit(cache=True, fastmath=True, inline="always")
def entry_unigram_scores(
    indptr, entry_start, entry_count, values, row_start, row_stop, support_labels, w, out, acc
):
    """``out[t, a] = Σ_f x_tf w[f, a]`` for the rows ``row_start..row_stop`` of a CSR matrix,
    over the supported pairs (f, a) only, from the entries' support rows (:func:`entry_rows`):
    each active feature costs its allowed-label count, not K (a feature allowed every label
    is read as a contiguous row). Each row is summed in the K-vector ``acc`` (scratch) and
    then stored."""
    K = out.shape[1]
    for t in range(row_stop - row_start):
        row = row_start + t
        for a in range(K):
            acc[a] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            v = values[p]
            q0 = entry_start[p]
            n = entry_count[p]
            if n == K:
                for a in range(K):
                    acc[a] += v * w[q0 + a]
            else:
                for q in range(q0, q0 + n):
                    acc[support_labels[q]] += v * w[q]
        for a in range(K):
            out[t, a] = acc[a]


@njit(cache=True)
def support_gather(indptr, indices, values, D, support_indptr, support_labels, out):
    """``out[q] += Σ_i x_if D[i, a]`` for every support pair q = (f, a): the support's part
    of ``Xᵀ D`` (n × d CSR X, n × K dense D) without forming the d × K product."""
    for i in range(indptr.shape[0] - 1):
        for p in range(indptr[i], indptr[i + 1]):
            f = indices[p]
            v = values[p]
            for q in range(support_indptr[f], support_indptr[f + 1]):
                out[q] += v * D[i, support_labels[q]]
