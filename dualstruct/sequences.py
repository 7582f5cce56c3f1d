"""The packed sequence container: all tokens of all sequences in one CSR matrix.

Sequence ``i`` owns the token rows ``offsets[i]:offsets[i + 1]`` of ``X`` and the same slice of
``labels``. Kernels receive the plain arrays (``indptr``, ``indices``, ``data``, ``offsets``,
``labels``); nothing downstream sees Python lists of sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .data.blocks import INT32_MAX, integer_labels


@dataclass(frozen=True, eq=False)
class PackedSequences:
    """Token features and labels of many sequences, packed once.

    Parameters
    ----------
    X : scipy.sparse.csr_matrix, shape (n_tokens, n_features), float64
        One row per token, sorted indices, no explicit duplicates.
    offsets : ndarray of int64, shape (n_sequences + 1,)
        Sequence ``i`` is ``X[offsets[i]:offsets[i + 1]]``.
    labels : ndarray of int32, shape (n_tokens,), or None
        Label codes in ``0..n_labels - 1`` (None for unlabelled data).

    Examples
    --------
    >>> import numpy as np
    >>> import scipy.sparse as sp
    >>> from dualstruct import PackedSequences
    >>> data = PackedSequences(sp.csr_matrix(np.eye(3)), np.array([0, 2, 3]), np.array([0, 1, 1]))
    >>> data.n_sequences, data.n_tokens
    (2, 3)
    """

    X: sp.csr_matrix
    offsets: np.ndarray
    labels: np.ndarray | None = None

    def __post_init__(self):
        if not sp.isspmatrix_csr(self.X):
            raise TypeError("PackedSequences.X must be a scipy.sparse CSR matrix")
        offsets = np.asarray(self.offsets)
        if offsets.dtype.kind not in "iu":
            raise ValueError(f"offsets must be integers, got dtype {offsets.dtype}")
        if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0:
            raise ValueError("offsets must be a 1-D array starting at 0")
        if offsets[-1] != self.X.shape[0]:
            raise ValueError(f"offsets end at {offsets[-1]} but X has {self.X.shape[0]} token rows")
        if np.any(np.diff(offsets) <= 0):
            raise ValueError("every sequence must have at least one token (empty sequence found)")
        if self.labels is not None:
            labels = np.asarray(self.labels)
            if labels.ndim != 1 or len(labels) != self.X.shape[0]:
                raise ValueError(
                    f"labels must be 1-D with one entry per token row ({self.X.shape[0]}), got "
                    f"shape {labels.shape}"
                )
            if labels.dtype.kind not in "iu":
                raise ValueError(f"labels must be integer codes, got dtype {labels.dtype}")
            if len(labels) and labels.min() < 0:
                raise ValueError("labels must be codes >= 0")
            if len(labels) and labels.max() > INT32_MAX:
                raise ValueError(
                    f"labels must be codes of at most {INT32_MAX} (32-bit), got {labels.max()}"
                )
            object.__setattr__(self, "labels", labels.astype(np.int32, copy=False))
        if not np.all(np.isfinite(self.X.data)):
            raise ValueError("X contains NaN or infinite feature values")
        if not self.X.has_canonical_format:
            X = self.X.copy()
            X.sum_duplicates()  # also sorts the indices: kernels rely on sorted rows
            object.__setattr__(self, "X", X)
        object.__setattr__(self, "offsets", offsets.astype(np.int64, copy=False))

    # -- sizes ---------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_sequences(self) -> int:
        return len(self.offsets) - 1

    @property
    def n_tokens(self) -> int:
        return self.X.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    # -- access --------------------------------------------------------------------------------
    def sequence(self, i: int):
        """Return ``(X_i, labels_i)`` of sequence ``i`` (labels_i is None if unlabelled)."""
        start, stop = self.offsets[i], self.offsets[i + 1]
        labels = None if self.labels is None else self.labels[start:stop]
        return self.X[start:stop], labels

    def take(self, indices) -> PackedSequences:
        """The sequences ``indices`` (in that order) as a new PackedSequences."""
        indices = np.asarray(indices, dtype=np.int64)
        rows = (
            np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in indices])
            if len(indices)
            else np.zeros(0, np.int64)
        )
        offsets = np.zeros(len(indices) + 1, dtype=np.int64)
        np.cumsum(self.lengths[indices], out=offsets[1:])
        labels = None if self.labels is None else self.labels[rows]
        return PackedSequences(self.X[rows], offsets, labels)

    def kernel_arrays(self):
        """``(indptr, indices, data, offsets)`` as contiguous typed arrays for numba kernels."""
        X = self.X
        return (
            X.indptr.astype(np.int64, copy=False),
            X.indices.astype(np.int64, copy=False),
            X.data.astype(np.float64, copy=False),
            self.offsets.astype(np.int64, copy=False),
        )


def pack_sequences(X, labels=None, n_features=None, argname="X") -> PackedSequences:
    """Pack a list of per-sequence feature matrices (dense or sparse) into one container.

    Parameters
    ----------
    X : list of array-like or sparse matrices
        Each of shape (T_i, n_features).
    labels : list of integer arrays, optional
        Per sequence its T_i label codes.
    n_features : int, optional
        Required width; a sequence of another width raises ``ValueError``.
    argname : str, default "X"
        The argument's name in error messages.

    Returns
    -------
    PackedSequences

    Raises
    ------
    ValueError
        Naming the offending sequence, for empty sequences, wrong widths, NaN or infinite
        features, and label arrays of the wrong length.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import pack_sequences
    >>> X = [np.eye(3), np.ones((2, 3))]                  # two sequences of 3 and 2 tokens
    >>> data = pack_sequences(X, [np.array([0, 1, 2]), np.array([1, 1])])
    >>> data.n_sequences, data.n_tokens, data.offsets.tolist()
    (2, 5, [0, 3, 5])
    """
    if isinstance(X, PackedSequences):
        return X
    if sp.issparse(X) or isinstance(X, np.ndarray) and X.dtype != object:
        raise TypeError(
            f"{argname} must be a list of per-sequence 2-D arrays or sparse matrices "
            f"(or a PackedSequences), got a single {type(X).__name__}"
        )
    X = list(X)
    if len(X) == 0:
        raise ValueError(f"{argname} holds no sequences")
    blocks = []
    for i, xi in enumerate(X):
        if sp.issparse(xi):
            block = sp.csr_matrix(xi, dtype=np.float64)
        else:
            arr = np.asarray(xi, dtype=np.float64)
            if arr.ndim == 1:
                raise ValueError(
                    f"{argname}[{i}] is 1-D; each sequence must be a 2-D (tokens x features) "
                    "array (use x.reshape(-1, 1) for one feature)"
                )
            if arr.ndim != 2:
                raise ValueError(f"{argname}[{i}] must be 2-D, got {arr.ndim} dimensions")
            block = sp.csr_matrix(arr)
        if block.shape[0] == 0:
            raise ValueError(f"{argname}[{i}] is an empty sequence (0 tokens)")
        if n_features is not None and block.shape[1] != n_features:
            raise ValueError(
                f"{argname}[{i}] has {block.shape[1]} feature columns, expected {n_features}"
            )
        if not np.all(np.isfinite(block.data)):
            raise ValueError(f"{argname}[{i}] contains NaN or infinite feature values")
        blocks.append(block)
    widths = {b.shape[1] for b in blocks}
    if len(widths) != 1:
        first = blocks[0].shape[1]
        bad = next(i for i, b in enumerate(blocks) if b.shape[1] != first)
        raise ValueError(
            f"{argname}[{bad}] has {blocks[bad].shape[1]} feature columns but {argname}[0] "
            f"has {first}"
        )
    lengths = np.array([b.shape[0] for b in blocks], dtype=np.int64)
    offsets = np.zeros(len(blocks) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    Xp = sp.vstack(blocks, format="csr", dtype=np.float64)
    Xp.sum_duplicates()
    Xp.sort_indices()
    codes = None
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(blocks):
            raise ValueError(
                f"{argname} has {len(blocks)} sequences but y has {len(labels)} label sequences"
            )
        for i, (b, lab) in enumerate(zip(blocks, labels)):
            if len(lab) != b.shape[0]:
                raise ValueError(
                    f"sequence {i}: {argname}[{i}] has {b.shape[0]} token rows but y[{i}] has "
                    f"{len(lab)} labels"
                )
        raw = [np.asarray(lab).ravel() for lab in labels]
        try:  # one vectorised check; on failure the sequence at fault is named
            codes = integer_labels(np.concatenate(raw), "y")
        except (TypeError, ValueError):
            for i, lab in enumerate(raw):
                integer_labels(lab, f"y[{i}]")
            raise
    return PackedSequences(Xp, offsets, codes)
