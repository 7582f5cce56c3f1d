"""``BlockData``: one container for every model trained by the block solvers."""

from __future__ import annotations

import numbers

import numpy as np

INT32_MIN, INT32_MAX = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)


def integer_labels(values, what) -> np.ndarray:
    """``values`` as an int64 array of integer labels; ValueError naming ``what`` for
    non-integral or non-finite floats and for labels outside int32 (the kernels' label
    type), TypeError for labels that are not numbers."""
    arr = np.asarray(values)
    kind = arr.dtype.kind
    if kind == "O" and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in arr.ravel()
    ):
        far = [v for v in arr.ravel() if not INT32_MIN <= v <= INT32_MAX]
        if far:
            raise ValueError(f"{what} holds the label {far[0]!r}, outside the 32-bit integer range")
        return arr.astype(np.int64)
    if kind not in "biuf":
        raise TypeError(f"{what} must hold integer labels, got {arr.dtype} values")
    if kind == "f":
        bad = ~np.isfinite(arr)
        bad[~bad] = arr[~bad] != np.floor(arr[~bad])
        if bad.any():
            raise ValueError(
                f"{what} must hold integer labels, got {arr[bad].ravel()[0].item()!r} "
                "(not an integer)"
            )
    if arr.size and kind != "b" and (arr.min() < INT32_MIN or arr.max() > INT32_MAX):
        far = arr.max() if arr.max() > INT32_MAX else arr.min()
        raise ValueError(f"{what} holds the label {far.item()!r}, outside the 32-bit integer range")
    return arr.astype(np.int64)


def state_codes(values, what, n_values) -> np.ndarray:
    """Integer labels (:func:`integer_labels`) that must lie in ``0 … n_values − 1``, as
    int32; the ValueError names ``what`` and the first label out of range."""
    arr = integer_labels(values, what)
    bad = (arr < 0) | (arr >= n_values)
    if bad.any():
        raise ValueError(
            f"{what} must hold labels in 0 … {n_values - 1}, got {int(arr[bad].ravel()[0])}"
        )
    return arr.astype(np.int32)


def labelling_bound(kernel):
    """How many values an entry of a labelling of ``kernel`` takes (entries lie in
    ``0 … bound − 1``), or None when the model does not say (a Python model's callbacks
    check their own labellings)."""
    for field in ("n_states", "n_classes", "n_labels"):
        if hasattr(kernel, field):
            return int(getattr(kernel, field))
    return None


class BlockData:
    """Labelled training data of a kernel model: ``n_blocks`` examples (a sentence, an image,
    a multi-label row, a single point of a multi-class problem).

    Parameters
    ----------
    kernel : NamedTuple
        The model's kernel (:mod:`dualstruct.models.base`): its arrays, with the gold
        labellings ``kernel.labels`` and their block offsets ``kernel.label_offsets``.
    fingerprint : tuple of arrays
        Arrays that identify the data (a checkpoint resumes only on the same data).
    owner : object, optional
        For a Python model, the adapter whose callbacks may fail: :meth:`raise_status`
        re-raises their error after a compiled loop stopped on it.
    source : (build, X, Y), optional
        How the data was made, ``build(X, Y)`` (the model's ``block_data``): :meth:`take`
        makes the block data of a subset of the examples from it.
    """

    kind = "block"

    def __init__(self, kernel, fingerprint=(), owner=None, source=None):
        self.kernel = kernel
        self._fingerprint = tuple(fingerprint)
        self.owner = owner
        self.source = source

    def take(self, indices) -> BlockData:
        """The block data of the examples ``indices`` (in that order), made from
        ``source`` as the full data was."""
        if self.source is None:
            raise TypeError(
                "this block data was made without its source (X, Y) and cannot "
                "be split; make it with the model's block_data(X, Y)"
            )
        build, X, Y = self.source
        return build(take_items(X, indices), take_items(Y, indices))

    def source_part(self, indices):
        """``(build, X[indices], Y[indices])``: what :meth:`take` builds from, small to
        ship to another process (which calls ``build(X, Y)`` itself)."""
        if self.source is None:
            self.take(indices)  # raises the error
        build, X, Y = self.source
        return build, take_items(X, indices), take_items(Y, indices)

    @property
    def n_blocks(self) -> int:
        return len(self.kernel.label_offsets) - 1

    #: the names the pass loop uses (a block is the unit of one step)
    n_sequences = n_blocks

    @property
    def n_tokens(self) -> int:
        """Labelling entries over all blocks (what a pass's chunks are sized by)."""
        return int(self.kernel.label_offsets[-1])

    @property
    def labels(self) -> np.ndarray:
        return self.kernel.labels

    @property
    def label_offsets(self) -> np.ndarray:
        return self.kernel.label_offsets

    def fingerprint_arrays(self):
        return (self.kernel.label_offsets, self.kernel.labels) + self._fingerprint

    def raise_status(self):
        """Raise the error a Python model's callback stored, if any."""
        if self.owner is not None:
            self.owner.raise_pending()


def take_items(items, indices):
    """The rows ``indices`` of an array or sparse matrix, or the items of a sequence."""
    indices = np.asarray(indices, dtype=np.int64)
    if items is None:
        return None
    if hasattr(items, "shape") and hasattr(items, "__getitem__") and not isinstance(items, list):
        return items[indices]
    items = list(items)
    return [items[i] for i in indices]
