"""``MultiClassModel``: the multi-class SVM of Crammer and Singer as the one-node structured
model, trained by the block solvers."""

from __future__ import annotations

import numbers

import numpy as np
import scipy.sparse as sp

from ..._pystruct import refuse_pystruct_model_keywords
from ...data import BlockData
from ...data.blocks import state_codes
from ..base import KernelModel
from .kernels import MultiClassKernel


class MultiClassModel(KernelModel):
    """K classes over d features: ``s(x, y) = ⟨W[:, y], x⟩`` with ``W`` (d × K) stored
    feature-major in ``w``, and the (optionally class-weighted) 0/1 loss. The structural
    hinge is Crammer and Singer's, ``max(0, max_{y ≠ ȳ} δ(ȳ) + s(x, y) − s(x, ȳ))``.

    Parameters
    ----------
    n_classes : int
    n_features : int
    loss_weights : array of shape (n_classes,), optional
        Mislabelling an example of class ``a`` costs ``loss_weights[a]`` (default 1).

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import MultiClassModel
    >>> model = MultiClassModel(n_classes=3, n_features=2)
    >>> model.size
    6
    >>> model.joint_feature(np.array([1.0, 2.0]), 2).tolist()   # d x K, feature-major
    [0.0, 0.0, 1.0, 0.0, 0.0, 2.0]
    """

    thread_safe = True  # the kernel writes only to the workspace and the block's slots

    @refuse_pystruct_model_keywords
    def __init__(self, n_classes: int, n_features: int, *, loss_weights=None):
        for name, value, low in (("n_classes", n_classes, 2), ("n_features", n_features, 1)):
            if (
                isinstance(value, (bool, np.bool_))
                or not isinstance(value, numbers.Integral)
                or value < low
            ):
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        self.n_classes = int(n_classes)
        self.n_features = int(n_features)
        lw = (
            np.ones(self.n_classes)
            if loss_weights is None
            else np.asarray(loss_weights, dtype=np.float64)
        )
        if lw.shape != (self.n_classes,) or np.any(lw < 0) or not np.all(np.isfinite(lw)):
            raise ValueError(f"loss_weights must be {self.n_classes} finite non-negative numbers")
        self.loss_weights = np.ascontiguousarray(lw)

    @property
    def size(self) -> int:
        return self.n_features * self.n_classes

    def params(self) -> dict:
        return {
            "n_classes": self.n_classes,
            "n_features": self.n_features,
            "loss_weights": self.loss_weights.tolist(),
        }

    def coef(self, w):
        """``W`` (d × K) as a view of ``w``."""
        return np.asarray(w).reshape(self.n_features, self.n_classes)

    def example_cost(self, data) -> float:
        """The estimated cost of one point of ``data`` (its block data) in a compiled pass,
        about a nanosecond a unit: its nonzero features times the classes."""
        indptr = getattr(getattr(data, "kernel", None), "indptr", None)
        if indptr is None or len(indptr) < 2:
            nnz = float(self.n_features)
        else:
            nnz = float(indptr[-1]) / (len(indptr) - 1)
        return 300.0 + 3.0 * self.n_classes * nnz

    def block_data(self, X, y=None) -> BlockData:
        """Block data of the rows of ``X`` (dense or sparse, n × d) and their classes ``y``
        (codes 0 … K−1; all zero when None, for prediction)."""
        if not sp.issparse(X):
            X = np.asarray(X)
            if X.dtype.kind not in "biuf":
                raise TypeError(f"X must hold numbers, got {X.dtype} values")
            if X.ndim != 2:
                raise ValueError(f"X must be a 2-D (examples × features) array, got {X.shape}")
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        n, d = X.shape
        if d != self.n_features:
            hint = (
                " (MultiClassModel takes n_classes first, then n_features: the reverse of "
                "PyStruct's MultiClassClf)"
                if d == self.n_classes
                else ""
            )
            raise ValueError(f"X has {d} features, the model {self.n_features}{hint}")
        if not np.all(np.isfinite(X.data)):
            row = int(np.searchsorted(X.indptr, np.flatnonzero(~np.isfinite(X.data))[0], "right"))
            raise ValueError(f"X contains NaN or infinite values (row {row - 1})")
        if y is None:
            labels = np.zeros(n, dtype=np.int32)
        else:
            labels = np.asarray(y)
            if labels.shape != (n,):
                raise ValueError(f"y must have shape ({n},), got {labels.shape}")
            labels = state_codes(labels, "y (class codes)", self.n_classes)
        kernel = MultiClassKernel(
            X.indptr.astype(np.int64),
            X.indices.astype(np.int64),
            X.data,
            np.asarray(X.multiply(X).sum(axis=1), dtype=np.float64).ravel(),
            labels,
            np.arange(n + 1, dtype=np.int64),
            self.loss_weights,
            self.n_classes,
        )
        return BlockData(
            kernel,
            (kernel.indptr, kernel.indices, kernel.values),
            source=(self.block_data, X, labels),
        )

    def predict(self, w, X) -> np.ndarray:
        """The highest-scoring class code of every row of ``X``."""
        return self.decode(w, self.block_data(X))

    # -- the Python protocol (joint_feature and loss: reference implementations; the oracles:
    # the kernel's, on one example) -------------------------------------------------------------
    def joint_feature(self, x, y) -> np.ndarray:
        """φ(x, y) = x ⊗ e_y, flat in the layout of ``w`` (d × K, feature-major)."""
        x = x.toarray().ravel() if sp.issparse(x) else np.asarray(x, dtype=np.float64).ravel()
        phi = np.zeros((self.n_features, self.n_classes))
        phi[:, int(y)] = x
        return phi.ravel()

    def loss(self, y, y_hat) -> float:
        """δ(y, y_hat) = ``loss_weights[y]`` if the classes differ, else 0."""
        return float(self.loss_weights[int(y)]) if int(y) != int(y_hat) else 0.0

    def inference(self, x, w):
        """The highest-scoring class of the feature vector ``x`` (the kernel's decoding)."""
        return int(self.decode(w, self.block_data(_row(x)))[0])

    def loss_augmented_inference(self, x, y, w):
        """The class maximizing ``loss(y, ·) + ⟨w, φ(x, ·)⟩`` (the kernel's oracle)."""
        return int(self.hinge(w, self.block_data(_row(x), [int(y)]))[1][0])


def _row(x):
    """One feature vector as a 1 × d matrix."""
    if sp.issparse(x):
        return sp.csr_matrix(x).reshape(1, -1)
    return np.asarray(x, dtype=np.float64).reshape(1, -1)
