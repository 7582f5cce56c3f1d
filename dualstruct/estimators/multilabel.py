"""``MultiLabelSVM``: the scikit-learn compatible multi-label estimator (fit / predict / score /
save) over :class:`~dualstruct.models.MultiLabelModel` and the multi-label solvers."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError

from .. import io
from ..metrics import multilabel_scores
from ..models.multilabel import (
    EDGE_KINDS,
    INFERENCE,
    INTERACTIONS,
    MultiLabelDataset,
    MultiLabelModel,
)
from ..solvers import solver_class, solver_names
from .base import (
    SolverResults,
    add_training_record,
    changed_params,
    check_real,
    check_training_params,
    continue_solver,
    continues_training,
    final_summary,
    frozen_params,
    model_file_errors,
    read_coef,
    read_history,
    restore_on_error,
    seed_to_json,
    train,
)


class MultiLabelSVM(SolverResults, BaseEstimator):
    """Structural SVM over L binary labels with pairwise label interactions.

    Parameters
    ----------
    edges : {"independent", "chain", "tree", "full"} or (E, 2) int array, default "full"
        Which label pairs interact; ``"tree"`` is the Chow–Liu tree of the training labels.
    solver : {"bcfw", "ssg", "cutting_plane", "gdmm"}, default "bcfw"
        ``"gdmm"``: GDMM with block-greedy coordinate descent, which never calls the LP and
        is the fast choice for many labels on the full graph (it solves the LP relaxation).
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)`` (``H_i``: see ``rescaling``).
    inference : {"auto", "exact", "lp"}, default "auto"
        Exact (max-product on forests, enumeration up to 16 labels) or the LP relaxation
        (any graph; training then uses the LP-relaxed hinge). "auto" is exact on forests and
        up to 10 labels, the LP otherwise; with ``solver="gdmm"`` it is the LP, with
        ``rescaling="slack"`` exact.
    max_iter, tol, check_every, averaging, random_state, verbose, callback, warm_start,
    solver_options : as :class:`~dualstruct.StructuredSVM`.
    fit_intercept : bool, default True
        Append a constant feature (value ``intercept_scaling``) so every label has a bias.
    loss_weights : array of L positive numbers or None
        Per-label weights of the Hamming loss.
    rescaling : {"margin", "slack"}, default "margin"
        Margin rescaling ``H_i = max_y δ(y) + s(y) − s(ȳ_i)`` or slack rescaling
        ``H_i = max_y δ(y)·(1 + s(y) − s(ȳ_i))`` (Tsochantaridis et al. 2005). The slack oracle
        is exact: for every Hamming distance k it finds the best score of a labelling at
        distance k (enumeration, so at most 16 labels, unit loss weights); bcfw, ssg and
        cutting_plane only. With slack, "auto" inference predicts exactly too (enumeration);
        an explicit ``inference="lp"`` predicts with the LP, which weights trained against
        exact maximizers may leave fractional.
    interactions : {"11", "table"}, default "11"
        What an edge scores: its (1, 1) outcome (one weight, as in the GDMM paper), or a full
        2×2 table (four weights; same labellings representable, different regularization;
        not with gdmm).

    Attributes
    ----------
    n_labels_, n_features_in_, edges_ (E, 2), coef_ (flat weights), history_, n_iter_;
    ``unary_weights_`` (d × L), ``intercept_`` (L,) and ``interaction_weights_`` ((E,), or
    (E, 2, 2) tables indexed by the outcomes of the edge's two labels) are views of ``coef_``.
    """

    def __init__(self, edges="full", solver="bcfw", C=1.0, inference="auto", max_iter=200,
                 tol=1e-2, check_every=5, averaging=True, fit_intercept=True,
                 intercept_scaling=1.0, loss_weights=None, random_state=None, verbose=0,
                 callback=None, warm_start=False, solver_options=None, rescaling="margin",
                 interactions="11"):
        self.edges = edges
        self.solver = solver
        self.C = C
        self.inference = inference
        self.max_iter = max_iter
        self.tol = tol
        self.check_every = check_every
        self.averaging = averaging
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.loss_weights = loss_weights
        self.random_state = random_state
        self.verbose = verbose
        self.callback = callback
        self.warm_start = warm_start
        self.solver_options = solver_options
        self.rescaling = rescaling
        self.interactions = interactions

    _STATE_PARAMS = ("solver", "C", "inference", "averaging", "fit_intercept",
                     "intercept_scaling", "solver_options", "rescaling", "interactions",
                     "edges", "loss_weights")

    def _validate_params(self):
        if isinstance(self.edges, str) and self.edges not in EDGE_KINDS:
            raise ValueError(f"edges must be one of {EDGE_KINDS} or an (E, 2) array, got "
                             f"{self.edges!r}")
        if self.solver not in solver_names(MultiLabelModel):
            raise ValueError(f"solver must be one of {solver_names(MultiLabelModel)}, got "
                             f"{self.solver!r}")
        if self.rescaling not in ("margin", "slack"):
            raise ValueError(f"rescaling must be 'margin' or 'slack', got {self.rescaling!r}")
        if self.interactions not in INTERACTIONS:
            raise ValueError(f"interactions must be one of {INTERACTIONS}, got "
                             f"{self.interactions!r}")
        if self.inference not in INFERENCE:
            raise ValueError(f"inference must be one of {INFERENCE}, got {self.inference!r}")
        check_training_params(self)
        check_real("intercept_scaling", self.intercept_scaling, 0, False)

    # -- input handling -----------------------------------------------------------------------
    def _features(self, X):
        """``X`` as CSR with the intercept column; X must be 2-D, non-empty and finite."""
        if not sp.issparse(X):
            try:
                X = np.asarray(X, dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"X must be a numeric (n_samples, n_features) matrix ({exc})"
                                 ) from None
            if X.ndim != 2:
                raise ValueError(f"X must be a 2-D (n_samples, n_features) matrix, got "
                                 f"{X.ndim}-D (one sample is X.reshape(1, -1))")
        X = sp.csr_matrix(X, dtype=np.float64)
        if X.shape[0] == 0:
            raise ValueError("X has no rows")
        if not np.all(np.isfinite(X.data)):
            raise ValueError("X holds a NaN or infinite value")
        if hasattr(self, "n_features_in_") and X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the model was trained on "
                             f"{self.n_features_in_}")
        if self.fit_intercept:
            X = sp.hstack([X, np.full((X.shape[0], 1), float(self.intercept_scaling))],
                          format="csr")
        return X

    def _labels(self, Y, n):
        Y = np.asarray(Y)
        if Y.ndim != 2 or Y.shape[0] != n:
            raise ValueError(f"Y must be an ({n}, n_labels) 0/1 indicator matrix, got shape "
                             f"{Y.shape}")
        if hasattr(self, "n_labels_") and Y.shape[1] != self.n_labels_:
            raise ValueError(f"Y has {Y.shape[1]} labels, the model was trained on "
                             f"{self.n_labels_}")
        if not np.all((Y == 0) | (Y == 1)):
            raise ValueError("Y must hold only 0 and 1 (an indicator matrix)")
        return Y.astype(np.int64)

    def _inference(self):
        """What "auto" resolves to: the LP for GDMM (it solves the LP relaxation); exact for
        slack rescaling (its oracle enumerates anyway, and weights trained against exact
        maximizers need not make the LP tight: on yeast the LP is fractional on every test
        example for slack-trained weights)."""
        if self.inference != "auto":
            return self.inference
        if self.solver == "gdmm":
            return "lp"
        return "exact" if self.rescaling == "slack" else "auto"

    # -- training -----------------------------------------------------------------------------
    @restore_on_error
    def fit(self, X, Y, validation_data=None):
        """Train on features ``X`` (n × d, dense or sparse) and labels ``Y`` (n × L, 0/1).

        ``validation_data=(X_val, Y_val)`` adds ``1 −`` Hamming loss on it to the history at
        every check. Ctrl-C stops training after the current pass and keeps the model."""
        self._validate_params()
        state = frozen_params(self, self._STATE_PARAMS)
        continuing = continues_training(self)
        resume = getattr(self, "_saved_state", None) if self.warm_start else None
        if continuing or resume is not None:
            changed = changed_params(state, self._state_params)
            if changed:
                raise ValueError(f"warm_start: parameters {changed} changed since the model's "
                                 "last fit; the solver state belongs to the old problem")
            Xf = self._features(X)
            data = MultiLabelDataset(Xf, self._labels(Y, Xf.shape[0]))
            if continuing:
                old = self.solver_.data
                if not (old.X.shape == data.X.shape and (old.X != data.X).nnz == 0
                        and np.array_equal(old.Y, data.Y)):
                    raise ValueError("warm_start continues only on the same training data")
                data = old
        else:
            for attr in ("n_features_in_", "n_labels_"):
                self.__dict__.pop(attr, None)
            Xf = self._features(X)
            self.n_features_in_ = Xf.shape[1] - int(bool(self.fit_intercept))
            Y = self._labels(Y, Xf.shape[0])
            self.n_labels_ = Y.shape[1]
            data = MultiLabelDataset(Xf, Y)
            edges = self.edges if isinstance(self.edges, str) else np.asarray(self.edges)
            self.model_ = MultiLabelModel(self.n_labels_, data.X.shape[1], edges=edges,
                                          loss_weights=self.loss_weights,
                                          inference=self._inference(),
                                          interactions=self.interactions).fit_edges(Y)
            self.edges_ = self.model_.edges
            resume = None
        validation = None
        if validation_data is not None:
            Xv, Yv = validation_data
            Xv = self._features(Xv)
            Yv = self._labels(Yv, Xv.shape[0])

            def validation(w):
                return 1.0 - multilabel_scores(Yv, self.model_.predict(w, Xv))["hamming_loss"]

        solver = self.solver_ if continuing else None

        def callback(record):
            if self.callback is None:
                return False
            self._set_weights(self.solver_)
            return bool(self.callback(self, record))

        if solver is None:
            solver = solver_class(self.solver, self.model_)(
                self.model_, self.C, max_iter=self.max_iter, tol=self.tol,
                check_every=self.check_every, averaging=self.averaging,
                random_state=self.random_state, verbose=self.verbose, callback=callback,
                validation=validation, rescaling=self.rescaling,
                **(self.solver_options or {}))
            if resume is not None:
                solver.load_state(data, *resume)
                solver.history = self.history_
                self._saved_state = None
        else:
            continue_solver(self, solver, callback, validation)
        return train(self, solver, data, state)

    # -- prediction ---------------------------------------------------------------------------
    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError("this MultiLabelSVM is not fitted yet; call fit first")

    def predict(self, X):
        """The (n, L) 0/1 label matrix of the rows of ``X`` (the rounded LP solution where the
        model uses the LP; ``lp_integral_`` then flags rows whose LP optimum was integral)."""
        self._check_fitted()
        pred = self.model_.predict(self.coef_, self._features(X)).astype(np.int64)
        self.lp_integral_ = self.model_.last_integral_.copy()
        return pred

    def score(self, X, Y):
        """Subset accuracy (scikit-learn's convention for multi-label classifiers)."""
        pred = self.predict(X)
        return multilabel_scores(self._labels(Y, pred.shape[0]), pred)["subset_accuracy"]

    def evaluate(self, X, Y) -> dict:
        """Hamming loss, subset accuracy, Jaccard accuracy, micro and macro F1 on (X, Y)."""
        pred = self.predict(X)
        return multilabel_scores(self._labels(Y, pred.shape[0]), pred)

    @property
    def unary_weights_(self):
        self._check_fitted()
        U = self.model_.unpack(self.coef_).unary
        return U[:-1] if self.fit_intercept else U

    @property
    def intercept_(self):
        self._check_fitted()
        U = self.model_.unpack(self.coef_).unary
        return U[-1] * self.intercept_scaling if self.fit_intercept else np.zeros(U.shape[1])

    @property
    def interaction_weights_(self):
        self._check_fitted()
        return self.model_.unpack(self.coef_).pairwise

    # -- persistence --------------------------------------------------------------------------
    def save(self, path, include_solver_state=False):
        """Write the fitted model to ``path`` (``.npz`` arrays + JSON header, no pickle);
        ``include_solver_state=True`` makes it a checkpoint that ``fit`` with
        ``warm_start=True`` resumes exactly."""
        return io.save_arrays(path, *self.to_arrays(include_solver_state))

    def to_arrays(self, include_solver_state=False):
        self._check_fitted()
        params = {k: v for k, v in self.get_params().items() if k != "callback"}
        params["random_state"] = seed_to_json(params["random_state"])
        params["edges"] = params["edges"] if isinstance(params["edges"], str) else "explicit"
        params["loss_weights"] = None
        header = {
            "model_type": "multilabel",
            "estimator_params": params,
            "n_labels": int(self.n_labels_), "n_features_in": int(self.n_features_in_),
            "n_iter": int(self.n_iter_), "stop_reason": self.history_.stop_reason,
            "final": final_summary(self.history_),
        }
        arrays = {"coef": self.coef_, "loss_weights": self.model_.loss_weights,
                  "edges": self.model_.edges}
        add_training_record(self, header, arrays, include_solver_state)
        return header, arrays

    @classmethod
    def load(cls, path):
        header, arrays = io.load_arrays(path)
        return cls.from_arrays(header, arrays, path)

    @classmethod
    def from_arrays(cls, header, arrays, path="model file"):
        with model_file_errors(path):
            if header["model_type"] != "multilabel":
                raise ValueError(f"not a multi-label model ({header['model_type']!r})")
            params = dict(header["estimator_params"])
            edges = arrays["edges"]
            if params["edges"] == "explicit":
                params["edges"] = edges
            params["loss_weights"] = arrays["loss_weights"]
            est = cls(**params)
            est._validate_params()
            est.n_labels_ = int(header["n_labels"])
            est.n_features_in_ = int(header["n_features_in"])
            d = est.n_features_in_ + int(bool(est.fit_intercept))
            est.model_ = MultiLabelModel(est.n_labels_, d, edges=edges,
                                         loss_weights=arrays["loss_weights"],
                                         inference=est._inference(),
                                         interactions=est.interactions)
            est.model_.edge_kind = params["edges"] if isinstance(params["edges"], str) else (
                "explicit")
            est.edges_ = est.model_.edges
            coef = read_coef(arrays, est.model_.size)
            est.coef_ = coef
            est.n_iter_ = int(header["n_iter"])
            est.history_ = read_history(header, arrays)
            if "solver_state" in header:
                state = {k.split(".", 1)[1]: v for k, v in arrays.items()
                         if k.startswith("state.")}
                est._saved_state = (header["solver_state"], state)
                est._state_params = frozen_params(est, cls._STATE_PARAMS)
        return est
