"""Which unary (feature, label) weights a model keeps: all d × K of them, or the pairs seen in
training (the estimators' ``weights`` parameter). The estimators and the Spark readers both
choose through :func:`choose_support`, so it sits below both."""

from __future__ import annotations

import numbers

from .models.support import support_size_summary

#: the values of the estimators' ``weights`` parameter
WEIGHTS = ("auto", "dense", "observed")
#: "auto" keeps the observed (feature, label) pairs only when they are fewer than this share
#: of the dense matrix
AUTO_SPARSE_FRACTION = 0.5
#: and only when the dense matrix would take more than this many bytes per copy
AUTO_DENSE_MAX_BYTES = 2**30


def check_weights(weights, min_count):
    """Raise ValueError unless ``weights`` is one of :data:`WEIGHTS` and ``min_count`` an
    integer >= 1."""
    if not isinstance(weights, str) or weights not in WEIGHTS:
        raise ValueError(f"weights must be one of {WEIGHTS}, got {weights!r}")
    if isinstance(min_count, bool) or not isinstance(min_count, numbers.Integral) or min_count < 1:
        raise ValueError(f"weights_min_count must be an integer >= 1, got {min_count!r}")


def dense_fits(weights, n_features, n_labels) -> bool:
    """Whether the ``weights`` rule keeps the dense matrix without counting the observed
    pairs: ``"dense"``, or ``"auto"`` while the matrix takes at most
    :data:`AUTO_DENSE_MAX_BYTES` per copy."""
    return weights == "dense" or (
        weights == "auto" and 8 * n_features * n_labels <= AUTO_DENSE_MAX_BYTES
    )


def choose_support(est, n_features, n_labels, observed):
    """The support of the unary weights by ``est.weights`` (None: dense): ``"dense"``;
    ``"observed"``, the support ``observed()`` returns; ``"auto"``, dense while
    :func:`dense_fits` or while the observed pairs are at least ``AUTO_SPARSE_FRACTION`` of
    the matrix. Sets ``est.weights_info_`` (printed when ``est.verbose``): which weights, how
    many, their memory."""
    dense = n_features * n_labels
    if dense_fits(est.weights, n_features, n_labels):
        support = None
    else:
        support = observed()
        if est.weights == "auto" and len(support[1]) >= AUTO_SPARSE_FRACTION * dense:
            support = None
    n = dense if support is None else len(support[1])
    est.weights_info_ = support_size_summary(
        n, n_features, n_labels, "dense" if support is None else "observed pairs"
    )
    if est.verbose:
        print(est.weights_info_)
    return support
