"""``LatentSSVM``: structural SVMs with hidden variables, trained by the concave-convex
procedure (Yu and Joachims 2009) around any dualstruct estimator."""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from .._pystruct import refuse_pystruct_keywords
from .base import check_real

#: what a model must offer to be trained with hidden variables
LATENT_METHODS = ("latent", "label_from_latent", "hinge", "block_data")


class LatentSSVM(BaseEstimator):
    """Latent structural SVM: ``min_w ½‖w‖² + C Σ_i [max_{ŷ,ĥ} (δ(y_i, ŷ) + ⟨w, φ(x_i, ŷ,
    ĥ)⟩) − max_h ⟨w, φ(x_i, y_i, h)⟩]``, by alternating imputation and training (CCCP).

    Each round imputes the hidden variables of the training labels with the current
    weights, ``h_i = argmax_h ⟨w, φ(x_i, y_i, h)⟩`` (the model's ``latent``), then trains the
    base estimator on the completed labellings, warm-started from the previous round
    (:class:`~dualstruct.SSVM`'s ``warm_start``). The objective above never increases
    from round to round, up to the base estimator's duality gap: the training step
    minimizes a convex upper bound that touches it at the current weights. Training stops
    when the imputation no longer changes, when the objective decreased by less than
    ``tol`` (relative), or after ``max_iter`` rounds.

    Parameters
    ----------
    base_estimator : SSVM
        The estimator of the completed problem, with a model that offers ``latent(X, Y, w)``,
        ``label_from_latent(h)``, ``hinge`` and ``block_data`` (such as
        :class:`~dualstruct.models.LatentGraphCRF`), and optionally ``init_latent(X, Y,
        random_state)`` for the first imputation. It is cloned; its ``warm_start`` is set
        from the second round on.
    max_iter : int, default 10
        Rounds of imputation and training at most (PyStruct's ``latent_iter``).
    tol : float, default 1e-3
        Stop when a round lowers the objective by less than ``tol`` times its value.
    random_state : int or None
        Seed of the first imputation (the model's ``init_latent``).
    verbose : int, default 0
        Print a line per round.

    Attributes
    ----------
    base_estimator_ : SSVM
        The fitted base estimator (its ``coef_`` are the weights).
    coef_ : ndarray
        The weights.
    objective_history_ : list of float
        The objective at the weights of every round, measured after the next imputation.
    n_iter_ : int
        Rounds of training made.
    stop_reason_ : str
        ``"unchanged"`` (the imputation did not change), ``"tol"``, ``"max_iter"``, or
        ``"increased"``: a round's training stopped short of its optimum (``max_iter`` of
        the base estimator too low) and raised the objective by more than its certified
        duality gap; the previous round's weights are kept.
    H_ : list of arrays
        The last imputed hidden labellings of the training data.

    Examples
    --------
    >>> from dualstruct import SSVM, LatentSSVM
    >>> from dualstruct.datasets import make_crosses
    >>> from dualstruct.models import LatentGraphCRF
    >>> X, Y = make_crosses(10, random_state=0)
    >>> crf = LatentGraphCRF(n_labels=2, n_features=2, n_states_per_label=[1, 2])
    >>> svm = LatentSSVM(SSVM(crf, C=1, max_iter=500, random_state=0), random_state=0)
    >>> svm.fit(X, Y).score(X, Y) > 0.95
    True
    """

    @refuse_pystruct_keywords
    def __init__(self, base_estimator, max_iter=10, tol=1e-3, random_state=None, verbose=0):
        self.base_estimator = base_estimator
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.verbose = verbose

    def _validate_params(self):
        if "warm_start" not in self.base_estimator.get_params():
            raise ValueError(
                f"base_estimator must be an estimator with warm_start (an SSVM), got "
                f"{type(self.base_estimator).__name__}"
            )
        model = self.base_estimator.get_params().get("model")
        missing = [m for m in LATENT_METHODS if not hasattr(model, m)]
        if missing:
            raise ValueError(
                f"base_estimator's model {type(model).__name__} lacks {missing}: a latent "
                "model (such as dualstruct.models.LatentGraphCRF) is needed"
            )
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, numbers.Integral)
            or self.max_iter < 1
        ):
            raise ValueError(f"max_iter must be an integer >= 1, got {self.max_iter!r}")
        check_real("tol", self.tol, 0, True)

    def fit(self, X, Y, H_init=None):
        """Train on inputs ``X`` and visible labellings ``Y``.

        Parameters
        ----------
        X, Y : sequences of equal length
            Inputs and their visible labellings, in the model's format.
        H_init : list of arrays, optional
            The first hidden labellings (default: the model's ``init_latent``, else the
            imputation at zero weights).

        Returns
        -------
        self
        """
        self._validate_params()
        X, Y = list(X), list(Y)
        if len(X) != len(Y):
            raise ValueError(f"X has {len(X)} examples but Y has {len(Y)}")
        est = clone(self.base_estimator).set_params(warm_start=False)
        model = est.model
        if H_init is not None:
            H = [np.asarray(h) for h in H_init]
            if len(H) != len(X):
                raise ValueError(f"H_init has {len(H)} labellings for {len(X)} examples")
            for i, (h, y) in enumerate(zip(H, Y)):
                shown = model.label_from_latent(h)
                if shown.shape != np.shape(y) or np.any(shown != np.asarray(y)):
                    raise ValueError(f"H_init[{i}] does not show the labels Y[{i}]")
        elif hasattr(model, "init_latent"):
            H = model.init_latent(X, Y, random_state=self.random_state)
        else:
            H = model.latent(X, Y, np.zeros(model.size_joint_feature))
        self.objective_history_ = []
        self.stop_reason_ = "max_iter"
        self.base_estimator_ = est
        rounds, previous = 0, None
        while True:
            est.fit(X, H)
            rounds += 1
            w = est.coef_
            H_new = model.latent(X, Y, w)
            hinge, _ = model.hinge(w, model.block_data(X, H_new))
            objective = 0.5 * float(w @ w) + est.C * float(hinge.sum())
            last = est.history_.last_checked()
            slack = 0.0 if last is None or not np.isfinite(last.gap) else max(last.gap, 0.0)
            if previous is not None and objective > self.objective_history_[-1] + slack:
                # the base estimator stopped short of its optimum: keep the last round's
                est.coef_, H = previous
                self.stop_reason_ = "increased"
                break
            self.objective_history_.append(objective)
            previous = (w.copy(), H_new)
            changed = sum(np.any(a != b) for a, b in zip(H_new, H))
            if self.verbose:
                print(
                    f"[latent] round {rounds}: objective {objective:.6g}, "
                    f"{changed} labellings imputed anew"
                )
            H = H_new
            if not changed:
                self.stop_reason_ = "unchanged"
                break
            if len(self.objective_history_) > 1:
                before = self.objective_history_[-2]
                if before - objective < self.tol * abs(before):
                    self.stop_reason_ = "tol"
                    break
            if rounds >= self.max_iter:
                break
            est.set_params(warm_start=True)
        self.coef_ = est.coef_
        self.H_ = H
        self.n_iter_ = rounds
        return self

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise NotFittedError("this LatentSSVM is not fitted yet; call fit first")

    def predict_latent(self, X):
        """The best hidden labelling of every input.

        Parameters
        ----------
        X : sequence
            Inputs in the model's format.

        Returns
        -------
        list of arrays
        """
        self._check_fitted()
        return self.base_estimator_.predict(X)

    def predict(self, X):
        """The visible labelling of every input: its best hidden labelling's labels.

        Parameters
        ----------
        X : sequence
            Inputs in the model's format.

        Returns
        -------
        list of arrays
        """
        model = self.base_estimator_.model if hasattr(self, "base_estimator_") else None
        return [model.label_from_latent(h) for h in self.predict_latent(X)]

    def score(self, X, Y):
        """The share of visible labels predicted right.

        Parameters
        ----------
        X, Y : sequences
            Inputs and their visible labellings.

        Returns
        -------
        float
        """
        right = total = 0
        for p, y in zip(self.predict(X), Y):
            y = np.asarray(y)
            p = np.asarray(p).reshape(y.shape)
            right += int(np.sum(p == y))
            total += y.size
        return right / max(total, 1)
