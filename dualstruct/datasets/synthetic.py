"""Synthetic chains with planted, learnable structure, for any number of labels."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def make_chain(
    n_sequences=600,
    length=13,
    n_labels=1000,
    n_features=10_000,
    *,
    nnz_per_token=15,
    signature_size=5,
    signature_per_token=3,
    successors=3,
    noise=0.1,
    random_state=None,
):
    """Random sequences whose labels follow a sparse Markov chain and whose tokens carry
    label-specific features.

    Each label owns ``signature_size`` features and allows ``successors`` next labels. A
    sequence (length ``length`` ± 30%, at least 1) walks that chain from a uniform start; each
    token shows ``signature_per_token`` of its label's signature features (with probability
    ``noise`` those of another label instead) plus random features up to ``nnz_per_token``
    non-zeros, all of value 1.

    Parameters
    ----------
    n_sequences, length, n_labels, n_features : int
        How many sequences, their mean length, the labels and the feature width.
    nnz_per_token, signature_size, signature_per_token, successors : int
        Non-zeros per token, features owned by a label, of them shown per token, and the
        labels that may follow a label.
    noise : float, default 0.1
        The chance that a token shows another label's signature.
    random_state : int or numpy Generator, optional
        Deterministic given a seed.

    Returns
    -------
    X : list of scipy.sparse.csr_matrix
        (T_i, n_features) per sequence.
    y : list of ndarray of int
        The labels of each sequence.

    Examples
    --------
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(n_sequences=3, length=4, n_labels=5, n_features=30, random_state=0)
    >>> len(X), X[0].shape[1], int(max(labels.max() for labels in y)) < 5
    (3, 30, True)
    """
    for name, value in (
        ("n_sequences", n_sequences),
        ("length", length),
        ("n_labels", n_labels),
        ("n_features", n_features),
        ("nnz_per_token", nnz_per_token),
        ("successors", successors),
    ):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if signature_per_token > signature_size:
        raise ValueError("signature_per_token cannot exceed signature_size")
    if nnz_per_token < signature_per_token:
        raise ValueError("nnz_per_token must be at least signature_per_token")
    if signature_size > n_features:
        raise ValueError("signature_size cannot exceed n_features")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    rng = np.random.default_rng(random_state)
    K, d = int(n_labels), int(n_features)
    signatures = np.array([rng.choice(d, size=signature_size, replace=False) for _ in range(K)])
    nexts = rng.integers(0, K, size=(K, min(successors, K)))
    lengths = np.maximum(1, np.round(length * (1 + 0.3 * (2 * rng.random(n_sequences) - 1))))
    X, y = [], []
    for T in lengths.astype(int):
        labels = np.empty(T, dtype=np.int64)
        labels[0] = rng.integers(K)
        for t in range(1, T):
            labels[t] = nexts[labels[t - 1], rng.integers(nexts.shape[1])]
        shown = np.where(rng.random(T) < noise, rng.integers(0, K, T), labels)
        rows = []
        for t in range(T):
            sig = rng.choice(signatures[shown[t]], size=signature_per_token, replace=False)
            extra = rng.integers(0, d, size=nnz_per_token - signature_per_token)
            rows.append(np.unique(np.concatenate([sig, extra])))
        indptr = np.zeros(T + 1, dtype=np.int64)
        np.cumsum([len(r) for r in rows], out=indptr[1:])
        indices = np.concatenate(rows)
        X.append(sp.csr_matrix((np.ones(len(indices)), indices, indptr), shape=(T, d)))
        y.append(labels)
    return X, y
