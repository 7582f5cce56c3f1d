"""Estimators: HOW a model is used (the scikit-learn API), and reading model files."""

from .. import io
from .latent import LatentSSVM
from .multiclass import MultiClassSVM
from .multilabel import MultiLabelSVM
from .path import PathPoint, regularization_path
from .ssvm import SSVM
from .structured import StructuredSVM
from .tagger import SequenceTagger

__all__ = [
    "StructuredSVM",
    "MultiLabelSVM",
    "MultiClassSVM",
    "SSVM",
    "LatentSSVM",
    "load",
    "regularization_path",
    "PathPoint",
]


def load(path, model=None):
    """Load a model file written by any estimator's ``save``.

    Parameters
    ----------
    path : str or Path
        The model file (``.npz`` arrays and a JSON header; never unpickled).
    model : StructuredModel, optional
        For a file of an :class:`~dualstruct.SSVM` trained with a user-defined Python model:
        that model again (files never hold code; it is checked against the attributes saved).

    Returns
    -------
    estimator
        A :class:`~dualstruct.StructuredSVM`, :class:`~dualstruct.tagger.SequenceTagger`,
        :class:`~dualstruct.MultiLabelSVM`, :class:`~dualstruct.MultiClassSVM` or
        :class:`~dualstruct.SSVM`, whichever the file holds, fitted.

    Examples
    --------
    >>> import os, tempfile
    >>> import dualstruct
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(20, 5, 3, 10, random_state=0)
    >>> svm = dualstruct.StructuredSVM(max_iter=20, random_state=0).fit(X, y)
    >>> path = os.path.join(tempfile.mkdtemp(), "chain.npz")
    >>> _ = svm.save(path)
    >>> again = dualstruct.load(path)                     # a StructuredSVM again, no pickle
    >>> all((a == b).all() for a, b in zip(again.predict(X), svm.predict(X)))
    True
    """
    header, arrays = io.load_arrays(path)
    if header.get("model_type") == "ssvm":
        return SSVM.from_arrays(header, arrays, path, model=model)
    if model is not None:
        raise ValueError(
            f"{path}: model= is for files of user-defined models; this file "
            f"holds a {header.get('model_type')!r} model"
        )
    if header.get("model_type") == "tagger":
        return SequenceTagger.from_arrays(header, arrays, path)
    if header.get("model_type") == "multilabel":
        return MultiLabelSVM.from_arrays(header, arrays, path)
    if header.get("model_type") == "multiclass":
        return MultiClassSVM.from_arrays(header, arrays, path)
    return StructuredSVM.from_arrays(header, arrays, path)
