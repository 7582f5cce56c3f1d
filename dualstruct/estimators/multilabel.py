"""``MultiLabelSVM``: the scikit-learn compatible multi-label estimator (fit / predict / score /
save) over :class:`~dualstruct.models.MultiLabelModel` and the multi-label solvers."""

from __future__ import annotations

import numpy as np
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import validate_data

from .._pystruct import refuse_pystruct_keywords
from ..distributed.reading import MultiLabelFiles, is_spark_input
from ..memory import check_memory, memory_advice
from ..metrics import multilabel_scores
from ..models.multilabel import (
    EDGE_KINDS,
    INFERENCE,
    INTERACTIONS,
    MultiLabelDataset,
    MultiLabelModel,
    observed_support,
    training_memory_parts,
)
from ..solvers import solver_names
from ..weight_support import check_weights, dense_fits
from .auto import AUTO, choose_multilabel, given, resolved
from .base import (
    BaseSSVM,
    _classes_from_json,
    _classes_to_json,
    _plain_labels,
    changed_params,
    check_bool,
    check_integer,
    check_real,
    header_integer,
    model_file_errors,
    read_coef,
    restore_on_error,
    strongest_per_row,
)


class MultiLabelSVM(ClassifierMixin, BaseSSVM):
    """Structural SVM over L binary labels with pairwise label interactions.

    Parameters
    ----------
    edges : {"independent", "chain", "tree", "full"} or (E, 2) int array, default "full"
        Which label pairs interact; ``"tree"`` is the Chow–Liu tree of the training labels.
    solver : {"auto", "bcfw", "ssg", "cutting_plane", "gdmm"}, default "auto"
        ``"gdmm"``: GDMM with block-greedy coordinate descent, which never calls the LP and
        is the fast choice for many labels on the full graph (it solves the LP relaxation).
        ``"auto"``: GDMM from 10⁷ examples × weights on (bibtex, also any 10 of its labels),
        or where BCFW's classic step on the LP would keep more than 8 GiB of per-example
        weights; else BCFW (yeast, scene; always for settings GDMM does not train: slack
        rescaling, ``interactions="table"``, exact inference on a loopy graph, Spark).
        ``solver_choice_`` says which and why (:mod:`dualstruct.estimators.auto`).
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)`` (``H_i``: see ``rescaling``).
    inference : {"auto", "exact", "lp"}, default "auto"
        Exact (max-product on forests, enumeration up to 16 labels) or the LP relaxation
        (any graph; training then uses the LP-relaxed hinge). "auto" is exact on forests and
        up to 10 labels, the LP otherwise; with ``solver="gdmm"`` it is the LP, with
        ``rescaling="slack"`` exact.
    max_iter, tol, check_every, averaging, random_state, verbose, callback : shared
        The training parameters every estimator shares (:ref:`shared-parameters`); here
        ``max_iter=200`` and ``tol=0.01`` by default.
    warm_start, solver_options, backend, n_partitions, backend_options : shared
        As every estimator (:ref:`shared-parameters`).
    n_jobs : int, optional
        Threads that share the rows in ``predict`` (None: 1; −1: every core).
    fit_intercept : bool, default True
        Append a constant feature (value ``intercept_scaling``) so every label has a bias.
    intercept_scaling : float, default 1.0
        The constant feature's value (its weight is regularized like the others).
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
    weights : {"auto", "dense", "observed"}, default "auto"
        The unary (feature, label) weights: ``"dense"`` all d × L of them; ``"observed"``
        only the pairs that met in training (feature non-zero, label on) at least
        ``weights_min_count`` times (:func:`~dualstruct.models.multilabel.observed_support`),
        for wide sparse inputs (bag of words over thousands of labels) whose dense matrix
        would not fit; ``"auto"`` dense unless the dense matrix would exceed 1 GiB and the
        observed pairs are under half of it. A feature without a weight for a label cannot
        argue against that label either, so on dense inputs keep the dense weights.
    weights_min_count : int, default 1
        With observed weights, how often a pair must occur to get a weight.

    Attributes
    ----------
    n_labels_, n_features_in_, edges_ (E, 2), coef_ (flat weights), history_, n_iter_;
    ``unary_weights_`` (d × L; a scipy CSR matrix with observed weights), ``intercept_`` (L,)
    and ``interaction_weights_`` ((E,), or (E, 2, 2) tables indexed by the outcomes of the
    edge's two labels) are read from ``coef_``; ``weights_info_`` says which unary weights
    training chose and their memory; ``solver_choice_``, ``(solver, reason)``, the solver
    trained with and why.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import MultiLabelSVM
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 5))
    >>> Y = np.stack([X[:, 0] > 0, X[:, 1] > 0, X[:, 0] + X[:, 1] > 0], axis=1).astype(int)
    >>> svm = MultiLabelSVM(edges="full", max_iter=100, random_state=0).fit(X, Y)
    >>> svm.predict(X[:3]).shape
    (3, 3)
    >>> svm.interaction_weights_.shape                    # one weight per pair of labels
    (3,)
    """

    @refuse_pystruct_keywords
    def __init__(
        self,
        edges="full",
        solver="auto",
        C=1.0,
        inference="auto",
        max_iter=200,
        tol=1e-2,
        check_every=5,
        averaging=True,
        fit_intercept=True,
        intercept_scaling=1.0,
        loss_weights=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
        solver_options=None,
        rescaling="margin",
        interactions="11",
        backend="local",
        n_partitions=2,
        n_jobs=None,
        backend_options=None,
        weights="auto",
        weights_min_count=1,
    ):
        super().__init__(
            solver=solver,
            C=C,
            max_iter=max_iter,
            tol=tol,
            check_every=check_every,
            averaging=averaging,
            rescaling=rescaling,
            random_state=random_state,
            verbose=verbose,
            callback=callback,
            solver_options=solver_options,
            warm_start=warm_start,
            backend=backend,
            n_partitions=n_partitions,
            backend_options=backend_options,
            n_jobs=n_jobs,
        )
        self.edges = edges
        self.inference = inference
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.loss_weights = loss_weights
        self.interactions = interactions
        self.weights = weights
        self.weights_min_count = weights_min_count

    _STATE_PARAMS = (
        *BaseSSVM._STATE_PARAMS,
        "inference",
        "fit_intercept",
        "intercept_scaling",
        "rescaling",
        "interactions",
        "edges",
        "loss_weights",
        "weights",
        "weights_min_count",
    )
    _CHECKPOINTS = True

    def _validate_params(self):
        if isinstance(self.edges, str) and self.edges not in EDGE_KINDS:
            raise ValueError(
                f"edges must be one of {EDGE_KINDS} or an (E, 2) array, got {self.edges!r}"
            )
        if self.interactions not in INTERACTIONS:
            raise ValueError(
                f"interactions must be one of {INTERACTIONS}, got {self.interactions!r}"
            )
        if self.inference not in INFERENCE:
            raise ValueError(f"inference must be one of {INFERENCE}, got {self.inference!r}")
        self._check_shared_params(solver_names(MultiLabelModel))
        check_weights(self.weights, self.weights_min_count)
        check_real("intercept_scaling", self.intercept_scaling, 0, False)
        check_bool("fit_intercept", self.fit_intercept)

    # -- input handling -----------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.target_tags.multi_output = True  # Y is (n, L); a 1-D Y is one label
        tags.classifier_tags.multi_class = False  # every label is binary
        tags.classifier_tags.multi_label = True
        return tags

    def _features(self, X, reset=False):
        """``X`` (checked by scikit-learn's ``validate_data``: numeric, finite, non-empty, the
        fitted width) as CSR with the intercept column."""
        return self._with_intercept(
            validate_data(
                self, X, reset=reset, dtype=np.float64, accept_sparse=("csr", "csc", "coo")
            )
        )

    def _labels(self, Y, n, fit=False):
        """``Y`` (n × L) as 0/1 codes: an indicator matrix, or any matrix whose every column
        holds two values (e.g. −1/+1), the larger one meaning "on" (``label_values_``). A
        1-D ``Y`` is one binary label (L = 1; predictions are then 1-D too)."""
        Y = np.asarray(Y)
        if Y.dtype == object:
            Y = _plain_labels(Y.ravel()).reshape(Y.shape)
        if fit:
            kind = type_of_target(Y, input_name="Y", raise_unknown=True)
            if kind.startswith("continuous"):
                raise ValueError(
                    f"Unknown label type: {kind}. Y must hold labels (0/1, or "
                    "two values per label), not continuous values"
                )
            if kind == "multiclass":
                raise ValueError(
                    "Only binary classification is supported. The type of the target is "
                    "multiclass: a 1-D Y is one binary label (use an (n, L) matrix for L "
                    "labels, or MultiClassSVM for one class out of many)"
                )
            self.outputs_2d_ = Y.ndim == 2
        if Y.ndim == 1 and not self.outputs_2d_:
            Y = Y.reshape(-1, 1)
        if Y.ndim != 2 or Y.shape[0] != n:
            raise ValueError(
                f"Y must be an ({n}, n_labels) matrix (0/1 indicators, or two "
                f"values per column), got shape {Y.shape}"
            )
        if fit:
            self.label_values_ = _label_values(Y)
            self.classes_ = list(self.label_values_) if self.outputs_2d_ else self.label_values_[0]
        elif Y.shape[1] != self.n_labels_:
            raise ValueError(
                f"Y has {Y.shape[1]} labels, the model was trained on {self.n_labels_}"
            )
        off, on = self.label_values_[:, 0], self.label_values_[:, 1]
        is_on = Y == on
        bad = ~(is_on | (Y == off))
        if np.any(bad):
            i, j = np.argwhere(bad)[0]
            raise ValueError(
                f"Y[{i}, {j}] = {Y[i, j]!r} is neither of label {j}'s values "
                f"{off[j]!r} (off) and {on[j]!r} (on)"
            )
        return is_on.astype(np.int64)

    def _inference(self, solver=None):
        """What "auto" resolves to for ``solver`` (default: the one training uses): the LP
        for GDMM (it solves the LP relaxation); exact for slack rescaling (its oracle
        enumerates anyway, and weights trained against exact maximizers need not make the LP
        tight: BENCHMARKS.md, "Slack rescaling (yeast, full graph, 600 s budget)")."""
        if self.inference != "auto":
            return self.inference
        if solver is None and (self.solver != AUTO or hasattr(self, "solver_choice_")):
            solver = resolved(self)  # unfitted under "auto": not chosen yet
        if solver == "gdmm":
            return "lp"
        return "exact" if self.rescaling == "slack" else "auto"

    # -- training -----------------------------------------------------------------------------
    @restore_on_error
    def fit(self, X, Y=None, validation_data=None):
        """Train on features ``X`` (n × d, dense or sparse) and labels ``Y`` (n × L, 0/1).
        With ``backend="spark"``, ``X`` may be
        :class:`~dualstruct.distributed.reading.MultiLabelFiles` (LIBSVM or ARFF files read
        on the executors, ``Y`` None): the driver then never holds the examples.

        ``validation_data=(X_val, Y_val)`` adds ``1 −`` Hamming loss on it to the history at
        every check. Ctrl-C stops training after the current pass and keeps the model."""
        self._validate_params()
        state = self._frozen_params(self._STATE_PARAMS)
        continuing = self._continues()
        resume = getattr(self, "_saved_state", None) if self.warm_start else None
        on_executors = isinstance(X, MultiLabelFiles)  # the examples stay on Spark's executors
        if is_spark_input(X):
            raise TypeError(
                "MultiLabelSVM.fit takes X in memory or MultiLabelFiles (read on the "
                "executors), not an RDD or DataFrame"
            )
        if on_executors and X.scans is None:
            if Y is not None:
                raise ValueError("Y must be None for MultiLabelFiles (the labels come with them)")
            return X.fit(self, validation_data)  # scans the files, then comes back here
        if on_executors:
            self.solver_choice_ = given("bcfw" if self.solver == AUTO else self.solver)
            data = X.prepare(self)  # sets the widths, label values and model_
            if self.solver == AUTO:
                self.solver_choice_ = self._choose_solver(getattr(data, "n_sequences", 0))
            resume = None
        elif continuing or resume is not None:
            changed = changed_params(state, self._state_params)
            if changed and not continuing:
                raise ValueError(
                    f"resume: parameters {changed} differ from the checkpoint's; the saved "
                    "solver state belongs to the old problem"
                )
            Xf = self._features(X)
            data = MultiLabelDataset(Xf, self._labels(Y, Xf.shape[0]))
            if continuing:
                old = self.solver_.data
                if not (
                    old.X.shape == data.X.shape
                    and (old.X != data.X).nnz == 0
                    and np.array_equal(old.Y, data.Y)
                ):
                    raise ValueError("warm_start continues only on the same training data")
                data = old
                self._carry_over(self.solver_, changed)
        else:
            for attr in ("n_features_in_", "feature_names_in_", "n_labels_"):
                self.__dict__.pop(attr, None)
            validate_data(
                self,
                X,
                Y,
                multi_output=True,
                accept_sparse=("csr", "csc", "coo"),
                dtype=np.float64,
                y_numeric=False,
            )  # scikit-learn's input checks
            Xf = self._features(X)
            Y = self._labels(Y, Xf.shape[0], fit=True)
            self.n_labels_ = Y.shape[1]
            data = MultiLabelDataset(Xf, Y)
            edges = self.edges if isinstance(self.edges, str) else np.asarray(self.edges)
            d, L = data.X.shape[1], self.n_labels_
            dense = dense_fits(self.weights, d, L)
            check_memory(  # before the label graph and the support are built
                f"MultiLabelSVM over {self.n_labels_:,} labels (edges={self.edges!r})"
                if isinstance(self.edges, str)
                else f"MultiLabelSVM over {self.n_labels_:,} labels",
                training_memory_parts(L, d, edges, self.interactions, None if dense else 0),
                memory_advice(self),
            )
            support = self._choose_support(
                data.X.shape[1],
                self.n_labels_,
                lambda: observed_support(data, self.weights_min_count),
            )
            solver = self.solver if self.solver != AUTO else "bcfw"
            self.model_ = self._make_model(edges, support, Y, solver)
            self.solver_choice_ = self._choose_solver(data.X.shape[0])
            if self._inference(self.solver_choice_.solver) != self._inference(solver):
                self.model_ = self._make_model(edges, support, Y, self.solver_choice_.solver)
            self.edges_ = self.model_.edges
            resume = None
        validation = None
        if validation_data is not None:
            Xv, Yv = validation_data
            Xv = self._features(Xv)
            Yv = self._labels(Yv, Xv.shape[0])

            def validation(w):
                return 1.0 - multilabel_scores(Yv, self.model_.predict(w, Xv))["hamming_loss"]

        return self._fit_solver(
            self.model_,
            data,
            state,
            validation,
            solver=self.solver_ if continuing else None,
            resume=resume,
        )

    def _make_model(self, edges, support, Y, solver):
        """The model of ``n_labels_`` labels over the training labels ``Y``, with the
        inference ``solver`` trains against."""
        return MultiLabelModel(
            self.n_labels_,
            self.n_features_in_ + int(bool(self.fit_intercept)),
            edges=edges,
            loss_weights=self.loss_weights,
            inference=self._inference(solver),
            interactions=self.interactions,
            support=support,
        ).fit_edges(Y)

    def _choose_solver(self, n_examples):
        """``solver_choice_`` for a new training run of ``model_`` on ``n_examples``."""
        if self.solver != AUTO:
            return given(self.solver)
        model = self.model_
        return choose_multilabel(
            type(model),
            n_examples,
            model.n_labels,
            len(model.edges),
            model.size,
            model._is_forest(),
            inference=self.inference,
            rescaling=self.rescaling,
            interactions=self.interactions,
            backend=self.backend,
            solver_options=self.solver_options,
        )

    # -- prediction ---------------------------------------------------------------------------
    def predict(self, X, return_integral=False):
        """The (n, L) label matrix of the rows of ``X``, in the values of the training labels
        (0/1 for an indicator matrix): the rounded LP solution where the model uses the LP.
        ``return_integral=True`` returns ``(Y, integral)`` as well, ``integral[i]`` telling
        whether row i's LP optimum was integral (its prediction then certified exact)."""
        codes, integral = self._predict_codes(X)
        pred = np.where(codes == 1, self.label_values_[:, 1], self.label_values_[:, 0])
        if not self.outputs_2d_:
            pred = pred.ravel()
        return (pred, integral) if return_integral else pred

    def _predict_codes(self, X):
        self._check_fitted()
        pred = self.model_.predict(self.coef_, self._features(X), n_jobs=self.n_jobs).astype(
            np.int64
        )
        return pred, self.model_.last_integral_.copy()

    def label_scores(self, X):
        """Every label's own score ``⟨w_l, x⟩ + b_l`` for the rows of ``X`` (n, L): positive
        when the label alone would rather be on. The prediction adds the edges'
        interactions to these, so (unlike scikit-learn's ``decision_function``) their signs
        need not agree with ``predict``."""
        self._check_fitted()
        return self.model_.label_scores(self.coef_, self._features(X))

    def top_features(self, n=10, feature_names=None) -> dict:
        """The ``n`` input features of largest weight magnitude for every label, ``{label
        index: [(feature, weight), …]}`` strongest first; ``feature_names`` names them. The
        label pairs' weights are ``interaction_weights_``."""
        check_integer("n", n, 1)
        self._check_fitted()
        if feature_names is not None and len(feature_names) != self.n_features_in_:
            raise ValueError(
                f"feature_names has {len(feature_names)} names for {self.n_features_in_} features"
            )
        rows = strongest_per_row(self.unary_weights_.T, n, feature_names)
        return dict(enumerate(rows))

    def score(self, X, y):
        """Subset accuracy on ``(X, y)`` (scikit-learn's convention for multi-label
        classifiers)."""
        pred, _ = self._predict_codes(X)
        return multilabel_scores(self._labels(y, pred.shape[0]), pred)["subset_accuracy"]

    def evaluate(self, X, Y) -> dict:
        """Hamming loss, subset accuracy, Jaccard accuracy, micro and macro F1 on (X, Y), and
        the fraction of rows whose LP optimum was integral (1 for exact inference)."""
        pred, integral = self._predict_codes(X)
        scores = multilabel_scores(self._labels(Y, pred.shape[0]), pred)
        scores["lp_integral_fraction"] = float(np.mean(integral)) if len(integral) else 1.0
        return scores

    @property
    def unary_weights_(self):
        self._check_fitted()
        U = self.model_.unary_matrix(self.coef_)
        return U[:-1] if self.fit_intercept else U

    @property
    def intercept_(self):
        self._check_fitted()
        if not self.fit_intercept:
            return np.zeros(self.n_labels_)
        row = self.model_.unary_matrix(self.coef_)[-1]
        row = row.toarray().ravel() if hasattr(row, "toarray") else row
        return row * self.intercept_scaling

    @property
    def interaction_weights_(self):
        self._check_fitted()
        return self.model_.unpack(self.coef_).pairwise

    # -- persistence --------------------------------------------------------------------------
    def to_arrays(self, include_solver_state=False):
        """``(header, arrays)`` describing the fitted model (see :mod:`dualstruct.io`)."""
        self._check_fitted()
        params = self._file_params()
        params["edges"] = params["edges"] if isinstance(params["edges"], str) else "explicit"
        params["loss_weights"] = None
        values, kind = _classes_to_json(self.label_values_.ravel())
        header = self._file_header(
            "multilabel",
            params,
            n_labels=int(self.n_labels_),
            n_features_in=int(self.n_features_in_),
            label_values=values,
            label_kind=kind,
            outputs_2d=bool(self.outputs_2d_),
        )
        arrays = {
            "coef": self.coef_,
            "loss_weights": self.model_.loss_weights,
            "edges": self.model_.edges,
        }
        if self.model_.support is not None:
            arrays["support_indptr"], arrays["support_labels"] = self.model_.support
        self._add_training_record(header, arrays, include_solver_state)
        return header, arrays

    @classmethod
    def from_arrays(cls, header, arrays, path="model file"):
        with model_file_errors(path):
            if header["model_type"] != "multilabel":
                raise ValueError(f"not a multi-label model ({header['model_type']!r})")
            params = dict(header["estimator_params"])
            edges = arrays["edges"]
            kinds = (*EDGE_KINDS, "explicit")
            if not isinstance(params["edges"], str) or params["edges"] not in kinds:
                raise ValueError(
                    f"the field 'edges' must be one of {kinds}, got {params['edges']!r}"
                )
            if params["edges"] == "explicit":
                params["edges"] = edges
            if params.get("loss_weights") is not None:  # the array holds them
                raise ValueError(
                    f"the field 'loss_weights' must be null (the weights are the array "
                    f"'loss_weights'), got {params['loss_weights']!r}"
                )
            params["loss_weights"] = arrays["loss_weights"]
            est = cls(**params)
            est._validate_params()
            est._read_training_record(header, arrays, path)
            est.n_labels_ = header_integer(header, "n_labels", 1)
            est.n_features_in_ = header_integer(header, "n_features_in", 1)
            outputs_2d = header.get("outputs_2d", True)
            if not isinstance(outputs_2d, bool) or (not outputs_2d and est.n_labels_ != 1):
                raise ValueError(
                    f"the field 'outputs_2d' must be true, or false for one label only (a 1-D "
                    f"Y); got {outputs_2d!r} with {est.n_labels_} labels"
                )
            est.outputs_2d_ = outputs_2d
            if "label_values" in header:
                values = _classes_from_json(header["label_values"], header["label_kind"])
                if values.shape != (2 * est.n_labels_,):
                    raise ValueError(
                        f"the field 'label_values' must hold 2 values for each of the "
                        f"{est.n_labels_} labels, got {values.size}"
                    )
                est.label_values_ = values.reshape(est.n_labels_, 2)
            else:  # files written before the label values were stored: 0/1 indicators
                est.label_values_ = np.tile(np.array([0, 1], dtype=np.int64), (est.n_labels_, 1))
            est.classes_ = list(est.label_values_) if est.outputs_2d_ else est.label_values_[0]
            d = est.n_features_in_ + int(bool(est.fit_intercept))
            support = None
            if "support_indptr" in arrays:
                support = (arrays["support_indptr"], arrays["support_labels"])
            est.model_ = MultiLabelModel(
                est.n_labels_,
                d,
                edges=edges,
                loss_weights=arrays["loss_weights"],
                inference=est._inference(),
                interactions=est.interactions,
                support=support,
            )
            est.model_.edge_kind = (
                params["edges"] if isinstance(params["edges"], str) else ("explicit")
            )
            est.edges_ = est.model_.edges
            est.coef_ = read_coef(arrays, est.model_.size)
        return est


def _label_values(Y):
    """(L, 2) array of each label's (off, on) values: 0/1 (in Y's dtype) when Y holds only
    0 and 1, else each column's two values in sorted order."""
    L = Y.shape[1]
    values = np.unique(Y)
    if Y.dtype.kind in "biuf" and np.all(np.isin(values, (0, 1))):
        return np.tile(np.array([0, 1], dtype=Y.dtype), (L, 1))
    out = np.empty((L, 2), dtype=Y.dtype)
    for j in range(L):
        column = np.unique(Y[:, j])
        if len(column) != 2:
            raise ValueError(
                f"Y[:, {j}] holds {len(column)} different values ({column[:3].tolist()}); a "
                "label matrix is 0/1, or has two values in every column (one class alone "
                "cannot say which value is 'on')"
            )
        out[j] = column
    return out
