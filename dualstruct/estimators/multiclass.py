"""``MultiClassSVM``: the Crammer–Singer multi-class SVM as a scikit-learn classifier, trained
by the block solvers over :class:`~dualstruct.models.multiclass.MultiClassModel`."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from .._pystruct import refuse_pystruct_keywords
from ..models.multiclass import MultiClassModel
from ..solvers import solver_names
from .auto import AUTO, choose_other, given
from .base import (
    BaseSSVM,
    _classes_from_json,
    _classes_to_json,
    check_bool,
    check_real,
    header_integer,
    model_file_errors,
    read_coef,
    restore_on_error,
)


class MultiClassSVM(ClassifierMixin, BaseSSVM):
    """Multi-class linear SVM of Crammer and Singer (2001), solved in the dual with a
    duality-gap certificate:

        min_W ½‖W‖² + C Σ_i max(0, max_{y ≠ y_i} δ(y_i) + ⟨W_y − W_{y_i}, x_i⟩)

    the structural SVM of the one-node model (its ``δ(y_i)`` is ``loss_weights`` of the true
    class, 1 by default). Same objective as ``LinearSVC(multi_class="crammer_singer")``, whose
    ``C`` it shares; the intercept column is regularized as in LIBLINEAR.

    Parameters
    ----------
    C : float, default 1.0
        Regularization constant.
    solver : {"auto", "bcfw", "ssg", "cutting_plane"}, default "auto"
        Block-coordinate Frank-Wolfe (exact steps on one example's dual block at a time),
        stochastic subgradient, or the 1-slack cutting plane; ``"auto"`` trains BCFW
        (``solver_choice_`` says so and why).
    fit_intercept : bool, default True
        Append a constant feature (value ``intercept_scaling``) so every class has a bias.
    intercept_scaling : float, default 1.0
    loss_weights : dict class -> float, optional
        The margin demanded of an example of that class (default 1 for every class).
    max_iter, tol, check_every, averaging : shared
        The training parameters every estimator shares (:ref:`shared-parameters`); here
        ``max_iter=200`` and ``tol=0.001`` by default.
    random_state, verbose, callback, solver_options : shared
        As every estimator (:ref:`shared-parameters`).

    Attributes
    ----------
    classes_ : array of the class labels (sorted)
    coef_ : (n_classes, ``n_features_in_``) weights; ``intercept_`` : (n_classes,)
    n_features_in_, feature_names_in_ (when X has column names), history_, n_iter_
    solver_choice_ : ``(solver, reason)``, the solver trained with and why

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from dualstruct import MultiClassSVM
    >>> X, y = load_iris(return_X_y=True)
    >>> svm = MultiClassSVM(C=1.0, max_iter=200, random_state=0).fit(X, y)
    >>> svm.score(X, y) > 0.9
    True
    """

    @refuse_pystruct_keywords
    def __init__(
        self,
        C=1.0,
        solver="auto",
        fit_intercept=True,
        intercept_scaling=1.0,
        loss_weights=None,
        max_iter=200,
        tol=1e-3,
        check_every=5,
        averaging=True,
        random_state=None,
        verbose=0,
        callback=None,
        solver_options=None,
    ):
        super().__init__(
            C=C,
            solver=solver,
            max_iter=max_iter,
            tol=tol,
            check_every=check_every,
            averaging=averaging,
            random_state=random_state,
            verbose=verbose,
            callback=callback,
            solver_options=solver_options,
        )
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.loss_weights = loss_weights

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _validate_params(self):
        self._check_shared_params(solver_names(MultiClassModel))
        check_real("intercept_scaling", self.intercept_scaling, 0, False)
        check_bool("fit_intercept", self.fit_intercept)
        if self.loss_weights is not None and not isinstance(self.loss_weights, dict):
            raise ValueError(
                f"loss_weights must be a dict class -> weight, got "
                f"{type(self.loss_weights).__name__}"
            )
        for label, value in (self.loss_weights or {}).items():
            check_real(f"loss_weights[{label!r}]", value, 0, False)

    def _class_loss_weights(self):
        weights = np.ones(len(self.classes_))
        for label, value in (self.loss_weights or {}).items():
            where = np.flatnonzero(self.classes_ == label)
            if where.size == 0:
                raise ValueError(
                    f"loss_weights names the class {label!r}, which is not in "
                    f"the training labels {self.classes_.tolist()}"
                )
            check_real(f"loss_weights[{label!r}]", value, 0, False)
            weights[where[0]] = float(value)
        return weights

    @restore_on_error
    def fit(self, X, y, validation_data=None):
        """Train on ``X`` (n × d, dense or sparse) and class labels ``y`` (n,).

        ``validation_data=(X_val, y_val)`` adds the accuracy on it to every check of the
        history. Ctrl-C stops training after the current pass and keeps the model."""
        self._validate_params()
        X, y = validate_data(self, X, y, accept_sparse=("csr", "csc", "coo"), dtype=np.float64)
        check_classification_targets(y)
        classes, codes = np.unique(y, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"MultiClassSVM needs at least two classes; the training labels "
                f"hold only one class ({classes[0]!r})"
            )
        self.classes_ = classes
        design = self._with_intercept(X)
        model = MultiClassModel(
            len(classes), design.shape[1], loss_weights=self._class_loss_weights()
        )
        data = model.block_data(design, codes)
        validation = None
        if validation_data is not None:
            X_val, y_val = validation_data
            X_val = self._with_intercept(
                validate_data(
                    self, X_val, accept_sparse=("csr", "csc", "coo"), dtype=np.float64, reset=False
                )
            )
            y_val = np.asarray(y_val)

            def validation(w):
                return float(np.mean(classes[model.predict(w, X_val)] == y_val))

        self.model_ = model
        self.solver_choice_ = given(self.solver) if self.solver != AUTO else choose_other(model)
        return self._fit_solver(model, data, None, validation)

    def _set_weights(self, solver):
        super()._set_weights(solver)
        self._set_coef(self.coef_)

    def _set_coef(self, weights):
        """``coef_`` and ``intercept_`` from the model's flat weights (kept as ``weights_``)."""
        self.weights_ = weights
        W = self.model_.coef(weights)
        d = W.shape[0] - int(bool(self.fit_intercept))
        self.coef_ = np.ascontiguousarray(W[:d].T)
        self.intercept_ = (
            W[d] * self.intercept_scaling if self.fit_intercept else np.zeros(W.shape[1])
        )

    def decision_function(self, X):
        """Class scores ``⟨W_y, x⟩ + b_y``: (n, n_classes), or (n,) for two classes (the
        second class's score minus the first's, scikit-learn's convention)."""
        check_is_fitted(self)
        X = validate_data(
            self, X, accept_sparse=("csr", "csc", "coo"), dtype=np.float64, reset=False
        )
        scores = np.asarray(X @ self.coef_.T) + self.intercept_
        if len(self.classes_) == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    def predict(self, X):
        """The highest-scoring class of every row of ``X`` (the first on ties)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.int64)]
        return self.classes_[np.argmax(scores, axis=1)]

    # -- persistence --------------------------------------------------------------------------
    def to_arrays(self):
        """``(header, arrays)`` describing the fitted model (see :mod:`dualstruct.io`)."""
        check_is_fitted(self)
        classes, kind = _classes_to_json(self.classes_)
        header = self._file_header(
            "multiclass",
            self._file_params(leave_out=("loss_weights",)),
            classes=classes,
            class_kind=kind,
            n_features_in=int(self.n_features_in_),
        )
        arrays = {
            "coef": np.asarray(self.weights_, dtype=np.float64),
            "loss_weights": self.model_.loss_weights,
        }
        self._add_training_record(header, arrays)
        return header, arrays

    @classmethod
    def from_arrays(cls, header, arrays, path="model file"):
        with model_file_errors(path):
            if header.get("model_type") != "multiclass":
                raise ValueError(f"not a multi-class model ({header.get('model_type')!r})")
            est = cls(**header["estimator_params"])
            est._validate_params()
            est._read_training_record(header, arrays, path)
            est.classes_ = _classes_from_json(header["classes"], header["class_kind"])
            est.n_features_in_ = header_integer(header, "n_features_in", 1)
            loss_weights = np.asarray(arrays["loss_weights"], dtype=np.float64)
            if loss_weights.shape != est.classes_.shape or not np.all(
                np.isfinite(loss_weights) & (loss_weights > 0)
            ):
                raise ValueError(
                    f"the array 'loss_weights' must hold {len(est.classes_)} finite positive "
                    f"numbers (one per class), got {np.array2string(loss_weights, threshold=8)}"
                )
            est.loss_weights = {
                c.item(): float(v) for c, v in zip(est.classes_, loss_weights) if v != 1.0
            } or None
            est.model_ = MultiClassModel(
                len(est.classes_),
                est.n_features_in_ + int(bool(est.fit_intercept)),
                loss_weights=loss_weights,
            )
            est._set_coef(read_coef(arrays, est.model_.size))
        return est
