"""``SSVM``: a structural SVM for any model — a built-in kernel model such as
:class:`~dualstruct.models.multiclass.MultiClassModel`, or a user-defined object that follows
the :class:`~dualstruct.models.base.StructuredModel` protocol."""

from __future__ import annotations

import numbers

import numpy as np

from .. import io
from .._pystruct import refuse_pystruct_keywords
from ..models.base import KernelModel
from ..models.chain import ChainModel
from ..models.graph import EdgeFeatureGraphCRF, GraphCRF
from ..models.grid import DirectionalGridCRF, EdgeFeatureGridCRF, GridCRF
from ..models.multiclass import MultiClassModel
from ..models.multilabel import MultiLabelModel
from ..models.user import UserModel
from ..solvers import solver_names
from .auto import AUTO, choose_other, given
from .base import BaseSSVM, changed_params, model_file_errors, read_coef, restore_on_error
from .warm import continue_on, same_shape

#: the built-in models a model file can name; they are rebuilt from their parameters
BUILTIN_MODELS = {
    cls.__name__: cls
    for cls in (
        MultiClassModel,
        GraphCRF,
        EdgeFeatureGraphCRF,
        GridCRF,
        DirectionalGridCRF,
        EdgeFeatureGridCRF,
        ChainModel,
        MultiLabelModel,
    )
}


class SSVM(BaseSSVM):
    """Structural SVM ``min_w ½‖w‖² + C Σ_i max_y [δ(y_i, y) + ⟨w, φ(x_i, y)⟩ − ⟨w, φ(x_i, y_i)⟩]``
    for a model that supplies φ, δ and the two maximizations.

    The generic estimator: :class:`~dualstruct.StructuredSVM`,
    :class:`~dualstruct.MultiLabelSVM` and :class:`~dualstruct.MultiClassSVM` are presets
    that share its training parameters (:ref:`shared-parameters`) and add their input
    conversion, model and scoring.

    Parameters
    ----------
    model : StructuredModel or kernel model
        What is predicted. A Python object with ``size_joint_feature``, ``joint_feature``,
        ``loss``, ``inference`` and ``loss_augmented_inference`` (PyStruct's names) trains
        through callbacks, one Python call per example and step (its ``initialize(X, Y)``,
        if it has one, is called first, as PyStruct's learners do); a built-in model
        (:class:`~dualstruct.models.ChainModel`, :class:`~dualstruct.models.MultiLabelModel`,
        :class:`~dualstruct.models.MultiClassModel`, the graph CRFs) trains in compiled
        code. PyStruct's learner keywords (``inference_cache``, ``switch_to``, …) are
        refused with what to use instead.
    solver : {"auto", "bcfw", "ssg", "cutting_plane"}
        Block-coordinate pairwise Frank-Wolfe (duality-gap certificate), Pegasos subgradient,
        or the 1-slack cutting plane (duality-gap certificate); ``"auto"`` (default) trains
        BCFW (``solver_choice_`` says so and why; the chain and multi-label estimators
        choose GDMM where it certifies sooner).
    C : float
        Regularization constant.
    max_iter, tol, check_every, averaging, random_state, verbose
        As in :class:`~dualstruct.StructuredSVM`: passes, relative-gap stopping tolerance,
        passes between exact checks, weighted averaging, seed, progress lines.
    callback : callable ``callback(estimator, record) -> bool``, optional
        Called after every pass; return True to stop. The estimator's ``coef_`` is
        brought up to date before each call (a copy of ``w``) unless the callback has an
        attribute ``reads_weights`` that is False (``history_`` and ``n_iter_`` always are).
    solver_options : dict, optional
        Extra keyword arguments of the solver class.
    warm_start : bool, default False
        A new ``fit`` with the same model continues from the previous solver state, also on
        changed data of the same shape (as many examples, each of the same size; new gold
        labellings, as :class:`~dualstruct.LatentSSVM`'s rounds give). BCFW's pairwise
        step keeps its dual point (its atoms, with w and the loss term recomputed for the
        new data); its classic step restarts the dual from zero on changed data; SSG keeps
        its iterate; the cutting plane starts afresh (:mod:`dualstruct.estimators.warm`). A
        new C is carried over as in :class:`~dualstruct.StructuredSVM`.

    Attributes
    ----------
    coef_ : ndarray (size_joint_feature,), the weights
    history_ : :class:`~dualstruct.solvers.History`
    n_iter_ : int, passes made
    solver_choice_ : ``(solver, reason)``, the solver trained with and why

    Notes
    -----
    :meth:`save` stores a built-in model by its parameters, which :meth:`load` rebuilds. A
    user-defined Python model is stored by its class name, ``size_joint_feature`` and the
    plain attributes it holds (numbers, strings, lists of them, numeric arrays): loading never
    executes code from the file, so :meth:`load` needs the model object again and checks it
    against what was saved.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import SSVM
    >>> from dualstruct.models import GraphCRF, grid_edges
    >>> rng = np.random.default_rng(0)
    >>> edges = grid_edges(2, 3)                          # a 2 x 3 pixel grid
    >>> X = [(rng.normal(size=(6, 4)), edges) for _ in range(10)]
    >>> Y = [(nodes[:, 0] > 0).astype(int) for nodes, _ in X]
    >>> svm = SSVM(GraphCRF(n_states=2, n_features=4), max_iter=50, random_state=0).fit(X, Y)
    >>> [labels.shape for labels in svm.predict(X[:2])]
    [(6,), (6,)]
    """

    @refuse_pystruct_keywords
    def __init__(
        self,
        model,
        solver="auto",
        C=1.0,
        max_iter=500,
        tol=1e-3,
        check_every=5,
        averaging=True,
        random_state=None,
        verbose=0,
        callback=None,
        solver_options=None,
        warm_start=False,
    ):
        super().__init__(
            model=model,
            solver=solver,
            C=C,
            max_iter=max_iter,
            tol=tol,
            check_every=check_every,
            averaging=averaging,
            random_state=random_state,
            verbose=verbose,
            callback=callback,
            solver_options=solver_options,
            warm_start=warm_start,
        )

    #: the parameters a warm start needs unchanged (C may change: the dual point is scaled)
    _STATE_PARAMS = ("model", *BaseSSVM._STATE_PARAMS)

    def _validate_params(self):
        # every model trains through a block kernel here (GDMM needs its own estimators)
        kernel = isinstance(self.model, KernelModel) and not hasattr(self.model, "ssvm_model")
        names = solver_names(self.model if kernel else UserModel)
        if self.solver != AUTO and self.solver not in names:
            names = (AUTO, *names)
            raise ValueError(f"solver must be one of {names} for this model, got {self.solver!r}")
        self._check_shared_params(names)

    def _kernel_model(self):
        if hasattr(self.model, "ssvm_model"):  # the chain and multi-label models
            return self.model.ssvm_model()
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
        state = self._frozen_params(self._STATE_PARAMS)
        continuing = self._continues()
        changed = changed_params(state, self._state_params or {}) if continuing else []
        if "model" in changed:
            raise ValueError(
                "warm_start: the model changed since the last fit; its solver state belongs "
                "to the old model (set warm_start=False to start anew)"
            )
        model = self.model_ if continuing else self._kernel_model()
        if hasattr(model, "initialize") and not continuing:  # a Python model's own
            model.initialize(X, Y)
        data = model.block_data(X, Y)
        if continuing and not same_shape(self.solver_.data, data):
            raise ValueError(
                "warm_start continues only on data of the same shape (as many examples, each "
                "of the same size) as the last fit's; set warm_start=False to start anew"
            )
        validation = None
        if validation_data is not None:
            X_val, Y_val = validation_data

            def validation(w):
                return _accuracy(model.predict(w, X_val), Y_val)

        solver = None
        if continuing:
            self._carry_over(self.solver_, changed)
            if continue_on(self.solver_, data):
                solver = self.solver_
        if solver is None:
            self.solver_choice_ = given(self.solver) if self.solver != AUTO else choose_other(model)
        self.model_ = model
        return self._fit_solver(model, data, state, validation, solver=solver)

    # -- persistence --------------------------------------------------------------------------
    def to_arrays(self):
        """``(header, arrays)`` describing the fitted model (see :mod:`dualstruct.io`)."""
        self._check_fitted()
        model = self.model_
        arrays = {"coef": np.asarray(self.coef_, dtype=np.float64)}
        if isinstance(model, UserModel):
            user = model.model
            scalars, user_arrays = _plain_attributes(user)
            described = {
                "kind": "user",
                "class": _class_name(user),
                "size_joint_feature": int(model.size),
                "attributes": scalars,
            }
            arrays.update({"model." + k: v for k, v in user_arrays.items()})
        elif type(getattr(model, "builtin", model)).__name__ in BUILTIN_MODELS:
            model = getattr(model, "builtin", model)  # the chain and multi-label models
            rebuild = getattr(model, "constructor_params", None) or model.params
            model_params = rebuild()
            described = {"kind": "builtin", "class": type(model).__name__, "params": model_params}
            if getattr(model, "support", None) is not None:  # sparse node weights
                arrays["model.support_indptr"], arrays["model.support_labels"] = model.support
            if isinstance(getattr(model, "edges", None), np.ndarray):  # a label graph
                arrays["model.edges"] = model.edges
        else:
            raise ValueError(
                f"{type(model).__name__} cannot be saved: it is neither a "
                "built-in model nor a Python StructuredModel"
            )
        header = self._file_header("ssvm", self._file_params(leave_out=("model",)), model=described)
        self._add_training_record(header, arrays)
        return header, arrays

    @classmethod
    def load(cls, path, model=None):
        """Read a model written by :meth:`save`. ``model``: the user-defined Python model the
        file was trained with (required for those, checked against the file; not allowed for
        built-in models, which the file describes)."""
        header, arrays = io.load_arrays(path)
        return cls.from_arrays(header, arrays, path, model=model)

    @classmethod
    def from_arrays(cls, header, arrays, path="model file", model=None):
        with model_file_errors(path):
            if header.get("model_type") != "ssvm":
                raise ValueError(
                    f"the file holds a {header.get('model_type')!r} model, not an SSVM"
                )
            described = header["model"]
            if described["kind"] == "builtin":
                if model is not None:
                    raise ValueError("the file describes its built-in model; do not pass one")
                name = described["class"]
                if name not in BUILTIN_MODELS:
                    raise ValueError(f"unknown model class {name!r}")
                params = dict(described["params"])
                if "model.support_indptr" in arrays:
                    params["support"] = (
                        arrays["model.support_indptr"],
                        arrays["model.support_labels"],
                    )
                if "model.edges" in arrays:
                    params["edges"] = arrays["model.edges"]
                user_model = BUILTIN_MODELS[name](**params)
                kernel_model = (
                    user_model.ssvm_model() if hasattr(user_model, "ssvm_model") else user_model
                )
            elif described["kind"] == "user":
                if model is None:
                    raise ValueError(
                        f"the file holds a user-defined model ({described['class']}); pass "
                        "model=<that model> to load it (model files never execute code)"
                    )
                _check_user_model(model, described, arrays)
                user_model = model
                kernel_model = UserModel(model)
            else:
                raise ValueError(f"unknown model kind {described['kind']!r}")
            est = cls(user_model, **header["estimator_params"])
            est._validate_params()
            est._read_training_record(header, arrays, path)
            est.model_, est.coef_ = kernel_model, read_coef(arrays, kernel_model.size)
        return est

    def predict(self, X):
        """The model's highest-scoring labelling of every input."""
        self._check_fitted()
        return self.model_.predict(self.coef_, X)

    def score(self, X, Y):
        """The share of labelling entries predicted right (accuracy over classes, tokens or
        nodes)."""
        return _accuracy(self.predict(X), Y)


def _class_name(obj):
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _plain_attributes(model):
    """The attributes of a Python model a file can hold without code: JSON scalars and lists
    of them (returned as a dict) and numeric arrays (a second dict)."""
    scalars, arrays = {}, {}
    for name, value in sorted(vars(model).items()):
        if name.startswith("_"):
            continue
        if isinstance(value, (bool, str, type(None))) or (
            isinstance(value, numbers.Real) and np.isfinite(float(value))
        ):
            scalars[name] = value.item() if isinstance(value, np.generic) else value
        elif isinstance(value, (list, tuple)) and all(
            isinstance(v, (bool, str, numbers.Real)) for v in value
        ):
            scalars[name] = [v.item() if isinstance(v, np.generic) else v for v in value]
        elif isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            arrays[name] = value
    return scalars, arrays


def _check_user_model(model, described, arrays):
    """Refuse a user model that differs from the saved one: its class, φ's length, or any
    plain attribute saved with it."""
    if _class_name(model) != described["class"]:
        raise ValueError(
            f"the file was trained with {described['class']}, not {_class_name(model)}"
        )
    size = getattr(model, "size_joint_feature", None)
    if size is None:
        raise ValueError(
            "the model's size_joint_feature is not set: call its initialize(X, Y) with the "
            "training data (as fit did) before loading"
        )
    size = int(size)
    if size != described["size_joint_feature"]:
        raise ValueError(
            f"the model's size_joint_feature is {size}, the file's "
            f"{described['size_joint_feature']}"
        )
    scalars, model_arrays = _plain_attributes(model)
    for name, saved in described["attributes"].items():
        if name not in scalars or scalars[name] != saved:
            raise ValueError(
                f"model attribute {name!r} is {scalars.get(name)!r}, the file's {saved!r}"
            )
    for key, saved in arrays.items():
        if key.startswith("model."):
            name = key.split(".", 1)[1]
            if name not in model_arrays or not np.array_equal(model_arrays[name], saved):
                raise ValueError(f"model attribute {name!r} differs from the file's")


def _accuracy(predictions, Y):
    right = total = 0
    for p, y in zip(predictions, Y):
        p, y = np.asarray(p), np.asarray(y)
        if p.shape != y.shape:
            raise ValueError(f"a prediction has shape {p.shape}, its labelling {y.shape}")
        right += int(np.sum(p == y))
        total += y.size
    return right / max(total, 1)
