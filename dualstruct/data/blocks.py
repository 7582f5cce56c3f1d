"""``BlockData``: one container for every model trained by the block solvers."""

from __future__ import annotations

import numpy as np


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
