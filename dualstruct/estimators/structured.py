"""``StructuredSVM``: the scikit-learn compatible estimator of label sequences (fit / predict /
score / save) over :class:`~dualstruct.models.ChainModel`."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._pystruct import refuse_pystruct_keywords
from ..distributed.reading import TaggedOnExecutors, is_spark_input
from ..inference.slack_search import SEARCHES
from ..metrics import token_accuracy
from ..models import ChainModel
from ..models.chain import observed_support
from ..sequences import PackedSequences, pack_sequences
from ..solvers import solver_names
from ..weight_support import check_weights
from .auto import AUTO, choose_chain, given
from .base import (
    BaseSSVM,
    _classes_from_json,
    _classes_to_json,
    _plain_labels,
    changed_params,
    check_bool,
    check_choice,
    check_integer,
    check_loaded_array,
    check_real,
    header_integer,
    model_file_errors,
    read_coef,
    restore_on_error,
    strongest_per_row,
)

MODELS = ("chain",)


class StructuredSVM(BaseSSVM):
    """Structural SVM for sequence labeling, trained in the dual with a duality-gap certificate.

    Minimizes the C-form primal ``½‖w‖² + C Σ_i max_y [δ(ȳ_i, y) + s(x_i, y) − s(x_i, ȳ_i)]``
    with the Hamming loss δ.

    Parameters
    ----------
    model : {"chain"}
        Linear chain: per-label token weights, label transitions, start and end weights.
    solver : {"auto", "bcfw", "ssg", "cutting_plane", "gdmm"}
        ``"auto"`` (default): GDMM from 500 labels on, else BCFW (BCFW for slack rescaling
        and on Spark); ``solver_choice_`` says which and why
        (:mod:`dualstruct.estimators.auto`).
    C, max_iter, tol, check_every, averaging, random_state, verbose, callback : shared
        The training parameters every estimator shares (:ref:`shared-parameters`); here
        ``max_iter=500`` and ``tol=0.01`` by default.
    warm_start, solver_options, backend, n_partitions, backend_options : shared
        As every estimator (:ref:`shared-parameters`).
    n_jobs : int, optional
        Threads that share the sequences in ``predict``, ``decision_function`` and the
        hinge of the training checks (None: 1; −1: every core).
    rescaling : {"margin", "slack"}
        Margin rescaling ``max_y δ + s(y) − s(ȳ)`` or slack rescaling
        ``max_y δ·(1 + s(y) − s(ȳ))`` (exact dynamic-programming oracle, unit loss only).
    fit_intercept : bool
        Append a constant feature ``intercept_scaling`` to every token (a per-label bias,
        regularized like the other weights).
    intercept_scaling : float
    start_end : bool
        Learn weights for the first and last label of a sequence.
    loss_weights : dict label -> float, optional
        Per-label Hamming loss weights (default 1).
    slack_search : {"exact", "angular", "bisecting", "binary"}
        The slack oracle: exact dynamic program, or the searches of Choi, Meshi, Srebro (2016)
        over λ-oracle calls (angular is exact too; bisecting and binary can miss).
    weights : {"auto", "dense", "observed"}
        The unary (feature, label) weights: ``"dense"`` all d × K of them; ``"observed"``
        only the pairs met in the training data at least ``weights_min_count`` times
        (:func:`~dualstruct.models.chain.observed_support`, CRFsuite's default), which makes
        memory, model files and the unary scores follow the data on large label sets;
        ``"auto"`` the observed pairs when the dense matrix would take over 1 GiB per copy
        and the observed pairs are under half of it, else dense (on a few dozen labels the
        dense rows are read faster).
    weights_min_count : int
        With observed weights, how often a pair must occur to get a weight.

    Attributes
    ----------
    classes_ : ndarray, the labels, sorted
    n_features_in_ : int, token feature width (before the intercept column)
    coef_ : ndarray, the flat weight vector (layout of :class:`~dualstruct.models.ChainModel`)
    history_ : :class:`~dualstruct.solvers.History`
    n_iter_ : int, passes made
    solver_choice_ : ``(solver, reason)``, the solver trained with and why

    Examples
    --------
    >>> from dualstruct import StructuredSVM
    >>> from dualstruct.datasets import make_chain
    >>> X, y = make_chain(40, 6, 4, 20, random_state=0)   # 40 sequences, 4 labels
    >>> svm = StructuredSVM(C=0.1, max_iter=200, random_state=0).fit(X, y)
    >>> svm.history_.stop_reason                          # certified within tol = 1%
    'tol'
    >>> svm.predict(X[:2])[0].shape == y[0].shape
    True
    """

    @refuse_pystruct_keywords
    def __init__(
        self,
        model="chain",
        solver="auto",
        C=1.0,
        max_iter=500,
        tol=1e-2,
        check_every=5,
        averaging=True,
        fit_intercept=True,
        intercept_scaling=1.0,
        start_end=True,
        loss_weights=None,
        random_state=None,
        verbose=0,
        callback=None,
        warm_start=False,
        solver_options=None,
        rescaling="margin",
        slack_search="exact",
        weights="auto",
        weights_min_count=1,
        backend="local",
        n_partitions=2,
        backend_options=None,
        n_jobs=None,
    ):
        super().__init__(
            model=model,
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
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.start_end = start_end
        self.loss_weights = loss_weights
        self.slack_search = slack_search
        self.weights = weights
        self.weights_min_count = weights_min_count

    # -- input handling -----------------------------------------------------------------------
    def _validate_params(self):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        self._check_shared_params(solver_names(ChainModel))
        check_real("intercept_scaling", self.intercept_scaling, 0, False)
        check_bool("fit_intercept", self.fit_intercept)
        check_bool("start_end", self.start_end)
        check_choice("slack_search", self.slack_search, tuple(SEARCHES))
        if self.loss_weights is not None:
            if not hasattr(self.loss_weights, "items"):
                raise ValueError(
                    f"loss_weights must be a dict label -> weight or None, got "
                    f"{self.loss_weights!r}"
                )
            for label, weight in self.loss_weights.items():
                check_real(f"loss_weights[{label!r}]", weight, 0, True)
        check_weights(self.weights, self.weights_min_count)

    _STATE_PARAMS = (
        *BaseSSVM._STATE_PARAMS,
        "model",
        "fit_intercept",
        "intercept_scaling",
        "start_end",
        "loss_weights",
        "rescaling",
        "slack_search",
        "weights",
        "weights_min_count",
    )
    _CHECKPOINTS = True

    def _encode_labels(self, y, fit):
        try:
            y = list(y)
        except TypeError:
            raise TypeError("y must be a list of label sequences") from None
        y = [_label_sequence(yi, i) for i, yi in enumerate(y)]
        for i, yi in enumerate(y):
            if yi.ndim != 1:
                raise ValueError(f"y[{i}] must be a 1-D sequence of labels, got {yi.ndim}-D")
        kinds = {yi.dtype.kind for yi in y if len(yi)} - {"O"}
        if "U" in kinds and kinds & set("biuf"):
            first = next(i for i, yi in enumerate(y) if yi.dtype.kind == "U")
            other = next(i for i, yi in enumerate(y) if yi.dtype.kind in "biuf" and len(yi))
            raise TypeError(
                f"labels must be all str or all numbers: y[{first}] holds strings, "
                f"y[{other}] numbers"
            )
        flat = _plain_labels(np.concatenate(y) if y else np.array([]))
        if flat.dtype.kind == "f" and np.isnan(flat).any():
            where = next(i for i, yi in enumerate(y) if yi.dtype.kind == "f" and np.isnan(yi).any())
            raise ValueError(f"y[{where}] holds a NaN label")
        if fit:
            self.classes_ = np.unique(flat)
        classes = self.classes_
        codes = np.searchsorted(classes, flat)
        codes = np.clip(codes, 0, len(classes) - 1)
        bad = classes[codes] != flat
        if np.any(bad):
            raise ValueError(f"y holds labels not seen in training: {np.unique(flat[bad])[:5]}")
        return np.split(codes.astype(np.int32), np.cumsum([len(yi) for yi in y])[:-1])

    def _pack(self, X, y=None, fit=False):
        n_features = None if fit else self.n_features_in_
        if isinstance(X, PackedSequences):
            data = X
            if n_features is not None and data.n_features != n_features:
                raise ValueError(
                    f"X has {data.n_features} feature columns, the model was fitted with "
                    f"{n_features}"
                )
            if y is not None:
                codes = self._encode_labels(y, fit)
                if len(codes) != len(data):
                    raise ValueError(f"X has {len(data)} sequences but y has {len(codes)}")
                lengths = np.diff(data.offsets)
                for i, c in enumerate(codes):
                    if len(c) != lengths[i]:
                        raise ValueError(
                            f"sequence {i}: X has {lengths[i]} tokens but y[{i}] "
                            f"has {len(c)} labels"
                        )
                data = PackedSequences(data.X, data.offsets, np.concatenate(codes))
            elif fit:
                if data.labels is None:
                    raise ValueError("fit needs labels: pass y or a labelled PackedSequences")
                self.classes_ = np.arange(int(data.labels.max()) + 1)
        else:
            if y is not None and not isinstance(y, (list, tuple, np.ndarray)):
                raise TypeError("y must be a list of label sequences")
            if y is not None and len(X) != len(y):
                raise ValueError(f"X has {len(X)} sequences but y has {len(y)}")
            codes = None if y is None else self._encode_labels(y, fit)
            data = pack_sequences(X, codes, n_features=n_features)
        if fit:
            self.n_features_in_ = data.n_features
        if self.fit_intercept:
            data = PackedSequences(self._with_intercept(data.X), data.offsets, data.labels)
        return data

    def _support(self, data):
        """The support of the unary weights for training on ``data`` (None: dense), by the
        ``weights`` rule; says what it chose when verbose."""
        K = len(self.classes_)
        return self._choose_support(
            data.n_features, K, lambda: observed_support(data, K, self.weights_min_count)
        )

    def _make_model(self, n_features, support=None):
        K = len(self.classes_)
        lw = self._loss_weight_array()
        return ChainModel(K, n_features, start_end=self.start_end, loss_weights=lw, support=support)

    def _loss_weight_array(self):
        """The per-class weights of the Hamming loss that ``loss_weights`` gives (None:
        all 1)."""
        if self.loss_weights is None:
            return None
        lw = np.ones(len(self.classes_))
        for label, weight in dict(self.loss_weights).items():
            pos = np.flatnonzero(self.classes_ == label)
            if len(pos) == 0:
                raise ValueError(f"loss_weights names label {label!r}, not in the data")
            lw[pos[0]] = float(weight)
        return lw

    # -- training -----------------------------------------------------------------------------
    @restore_on_error
    def fit(self, X, y=None, validation_data=None, validation_scorer=None):
        """Train on sequences ``X`` (list of (T_i, d) arrays or sparse matrices, or a
        :class:`PackedSequences`) with label sequences ``y``.

        ``validation_data=(X_val, y_val)`` adds a held-out score to the history at every
        check: token accuracy, or ``validation_scorer(y_val, y_pred)`` (lists of label arrays)
        if given. Ctrl-C stops training after the current pass and keeps the model
        (``history_.stop_reason == "interrupted"``).
        """
        self._validate_params()
        on_executors = isinstance(X, TaggedOnExecutors)  # the examples stay on Spark's executors
        if not on_executors and is_spark_input(X):
            raise TypeError(
                "StructuredSVM.fit takes sequences in memory; sentences in an RDD, a DataFrame "
                "or TaggedFiles train a SequenceTagger (its features are counted on the "
                "executors)"
            )
        if y is None and not isinstance(X, PackedSequences) and not on_executors:
            raise ValueError("fit needs the label sequences y")
        state = self._frozen_params(self._STATE_PARAMS)
        continuing = self._continues()
        resume = getattr(self, "_saved_state", None) if self.warm_start else None
        if resume is not None and not continuing:
            changed = changed_params(state, self._state_params)
            if changed:
                raise ValueError(
                    f"resume: parameters {changed} differ from the checkpoint's; the saved "
                    "solver state belongs to the old problem"
                )
            data = self._pack(X, y, fit=False)
            solver = None
        elif continuing:
            data = self.solver_.data
            new = self._pack(X, y, fit=False)
            if not (
                new.X.shape == data.X.shape
                and np.array_equal(new.offsets, data.offsets)
                and np.array_equal(new.labels, data.labels)
                and (new.X != data.X).nnz == 0
            ):
                raise ValueError("warm_start continues only on the same training data")
            solver = self.solver_
            self._carry_over(solver, changed_params(state, self._state_params))
        elif on_executors:
            data = X.prepare(self)  # sets classes_, n_features_in_ and model_
            self.solver_choice_ = self._choose_solver()
            solver = None
            resume = None
        else:
            data = self._pack(X, y, fit=True)
            self.model_ = self._make_model(data.n_features, self._support(data))
            self.solver_choice_ = self._choose_solver()
            solver = None
            resume = None
        validation = None
        if validation_data is not None:
            Xv, yv = validation_data
            val = self._pack(Xv)  # labels unseen in training are allowed: they count as errors
            yv = [np.asarray(t) for t in yv]
            if len(yv) != val.n_sequences or any(len(t) != n for t, n in zip(yv, val.lengths)):
                raise ValueError("validation_data: X and y differ in sequences or lengths")
            scorer = validation_scorer or token_accuracy

            def validation(w):
                codes = self.model_.predict(w, val)
                pred = [self.classes_[c] for c in np.split(codes, val.offsets[1:-1])]
                return float(scorer(yv, pred))

        return self._fit_solver(
            self.model_,
            data,
            state,
            validation,
            solver=solver,
            resume=resume,
            slack_search=self.slack_search,
        )

    def _choose_solver(self):
        """``solver_choice_`` for a new training run on ``model_``."""
        if self.solver != AUTO:
            return given(self.solver)
        return choose_chain(
            self.model_,
            rescaling=self.rescaling,
            backend=self.backend,
            solver_options=self.solver_options,
        )

    # -- prediction ---------------------------------------------------------------------------
    def predict(self, X):
        """Label sequences (lists of arrays of the training labels) for the sequences ``X``
        (Viterbi; ``n_jobs`` threads share the sequences)."""
        self._check_fitted()
        data = self._pack(X)
        codes = self.model_.predict(self.coef_, data, n_jobs=self.n_jobs)
        return [self.classes_[c] for c in np.split(codes, data.offsets[1:-1])]

    def decision_function(self, X):
        """The score ``⟨w, φ(x, ŷ)⟩`` of each sequence's predicted labelling ŷ (n,): the
        unary and transition weights it collects; higher is more confident, and the margin
        over any other labelling y is ``score − ⟨w, φ(x, y)⟩ ≥ 0``."""
        self._check_fitted()
        _, scores = self.model_.predict(
            self.coef_, self._pack(X), n_jobs=self.n_jobs, return_scores=True
        )
        return scores

    def score(self, X, y):
        """Token accuracy of ``predict(X)`` against ``y``."""
        pred = self.predict(X)
        if len(pred) != len(y):
            raise ValueError(f"X has {len(pred)} sequences but y has {len(y)}")
        hits = total = 0
        for i, (p, t) in enumerate(zip(pred, y)):
            t = np.asarray(t)
            if len(t) != len(p):
                raise ValueError(f"y[{i}] has {len(t)} labels but X[{i}] has {len(p)} tokens")
            hits += int(np.sum(p == t))
            total += len(t)
        return hits / total

    # -- named weights ------------------------------------------------------------------------
    @property
    def unigram_weights_(self):
        """(K, ``n_features_in_``) per-label token weights (without the intercept column): an
        array, or a scipy sparse matrix for observed (sparse) weights."""
        self._check_fitted()
        U = self.model_.unary_matrix(self.coef_).T
        return U[:, : self.n_features_in_]

    @property
    def intercept_(self):
        """(K,) per-label bias (``intercept_scaling`` × its weight), zeros without intercept."""
        self._check_fitted()
        if not self.fit_intercept:
            return np.zeros(len(self.classes_))
        row = self.model_.unary_matrix(self.coef_)[-1]
        row = row.toarray().ravel() if sp.issparse(row) else row
        return row * self.intercept_scaling

    @property
    def transition_weights_(self):
        """(K, K): entry [a, b] scores label ``classes_[a]`` followed by ``classes_[b]``."""
        self._check_fitted()
        return self.model_.unpack(self.coef_).transition

    def top_features(self, n=10, feature_names=None) -> dict:
        """The ``n`` token features of largest weight magnitude for every label,
        ``{label: [(feature, weight), …]}`` strongest first (a positive weight votes for the
        label, a negative one against it); ``feature_names`` (one per input column) names
        them, else they are column indices. The transitions are ``transition_weights_``."""
        check_integer("n", n, 1)
        self._check_fitted()
        if feature_names is not None and len(feature_names) != self.n_features_in_:
            raise ValueError(
                f"feature_names has {len(feature_names)} names for {self.n_features_in_} features"
            )
        rows = strongest_per_row(self.unigram_weights_, n, feature_names)
        return {label: row for label, row in zip(self.classes_.tolist(), rows)}

    # -- persistence --------------------------------------------------------------------------
    def to_arrays(self, include_solver_state=False):
        """``(header, arrays)`` describing the fitted model (see :mod:`dualstruct.io`)."""
        self._check_fitted()
        classes, kind = _classes_to_json(self.classes_)
        params = self._file_params()
        if params["loss_weights"] is not None:
            params["loss_weights"] = [
                [k.item() if hasattr(k, "item") else k, float(v)]
                for k, v in dict(params["loss_weights"]).items()
            ]
        header = self._file_header(
            self.model_.kind,
            params,
            model=self.model_.params(),
            classes=classes,
            classes_type=kind,
            n_features_in=int(self.n_features_in_),
        )
        arrays = {"coef": self.coef_, "loss_weights": self.model_.loss_weights}
        if self.model_.support is not None:
            arrays["support_indptr"], arrays["support_labels"] = self.model_.support
        self._add_training_record(header, arrays, include_solver_state)
        return header, arrays

    @classmethod
    def from_arrays(cls, header, arrays, path="model file"):
        with model_file_errors(path):
            if header["model_type"] not in MODELS:
                raise ValueError(f"unknown model type {header['model_type']!r}")
            params = dict(header["estimator_params"])
            pairs = params.get("loss_weights")
            if pairs is not None:
                if not isinstance(pairs, list) or not all(
                    isinstance(p, list) and len(p) == 2 for p in pairs
                ):
                    raise ValueError(
                        f"the field 'loss_weights' must be None or a list of [label, weight] "
                        f"pairs, got {pairs!r}"
                    )
                params["loss_weights"] = {k: v for k, v in pairs}
            est = cls(**params)
            est._validate_params()
            est._read_training_record(header, arrays, path)
            est.classes_ = _classes_from_json(header["classes"], header["classes_type"])
            est.n_features_in_ = header_integer(header, "n_features_in", 1)
            m = header["model"]
            support = None
            if m.get("sparse", False):
                support = (arrays["support_indptr"], arrays["support_labels"])
            est.model_ = ChainModel(
                m["n_labels"],
                m["n_features"],
                start_end=m["start_end"],
                loss_weights=arrays["loss_weights"],
                support=support,
            )
            if len(est.classes_) != est.model_.n_labels:
                raise ValueError("the number of classes does not match the model")
            if est.model_.n_features != est.n_features_in_ + int(bool(est.fit_intercept)):
                raise ValueError("the feature count does not match the model")
            if est.classes_.ndim != 1 or not np.array_equal(est.classes_, np.unique(est.classes_)):
                raise ValueError("classes must be distinct and sorted")
            lw = est._loss_weight_array()
            lw = np.ones(len(est.classes_)) if lw is None else lw
            check_loaded_array(arrays, "loss_weights", lw)
            est.coef_ = read_coef(arrays, est.model_.size)
        return est


def _label_sequence(yi, i):
    """One label sequence as an array; a list mixing strings and numbers is refused (NumPy
    would turn the numbers into strings)."""
    if isinstance(yi, (list, tuple)) and yi:
        has_str = any(isinstance(v, str) for v in yi)
        if has_str and not all(isinstance(v, str) for v in yi):
            kinds = sorted({type(v).__name__ for v in yi})
            raise TypeError(
                f"y[{i}] mixes label types {kinds}; labels must be all str or all numbers"
            )
    return np.asarray(yi)
