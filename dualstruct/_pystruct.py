"""PyStruct's names (inference methods, learner keywords and classes) and what dualstruct
offers instead: the errors a migrating user meets point to the migration guide."""

from __future__ import annotations

import functools
import inspect

#: where the errors send a migrating user
GUIDE = "see 'Coming from PyStruct' in the user guide (docs/user_guide/migration.rst)"

#: PyStruct's inference methods (``inference_method=``) that dualstruct does not name
INFERENCE_METHODS = {
    "max-product": "'auto' (exact max-product on forests; on loopy graphs the model's exact "
    "or certified method, see its inference_method)",
    "qpbo": "'auto' (dualstruct does not run QPBO; on loopy graphs the bounds of the LP "
    "relaxation keep the duality gap a certificate)",
    "ad3": "'lp' (the LP relaxation over the local polytope, which AD3 solves) or 'auto'",
    "ad3+": "'auto' (exact MAP on loopy graphs where the model offers it, certified by the "
    "LP relaxation's bounds)",
    "ogm": "'auto' or 'lp' (no OpenGM back end)",
    "unary": "nothing: dualstruct has no inference that ignores the edges; use 'auto'",
    "dai": "'auto' or 'lp' (no libDAI back end)",
}

#: PyStruct's learner keywords that dualstruct's estimators do not take, and what to do
LEARNER_KEYWORDS = {
    "inference_cache": "not needed: the BCFW solver keeps the labellings found for every "
    "example (its atoms) and steps among them without the oracle "
    "(solver_options={'atom_steps': k}); the cutting plane keeps its constraints",
    "switch_to": "not needed: there is no approximate-then-exact switch; with an LP oracle "
    "the duality gap is certified against the LP's bound",
    "batch_size": "not needed: BCFW and SSG step one example at a time (use the "
    "distributed solvers of dualstruct.distributed for mini-batches)",
    "show_loss_every": "use verbose=1 (one line per check), validation_data= in fit, and "
    "the estimator's history_",
    "n_jobs": "not needed for training: built-in models train in compiled code; "
    "prediction of the chain and multi-label estimators takes n_jobs",
    "logger": "use callback=, the history_ attribute and save()/dualstruct.load()",
    "check_constraints": "not needed: every oracle answer is checked (user models through "
    "UserModel's checks)",
    "negativity_constraint": "not offered",
    "break_on_bad": "not needed: a negative duality gap stops training with a CertificateError",
    "inactive_threshold": "not needed (the cutting plane manages its constraints)",
    "inactive_window": "not needed (the cutting plane manages its constraints)",
    "cache_tol": "not needed (no inference cache)",
    "check_dual_every": "use check_every=",
    "do_averaging": "use averaging=",
    "line_search": "not needed: BCFW always takes the exact line-search step",
    "batch_mode": "not offered: solver='bcfw' is the block-coordinate version; "
    "solver='cutting_plane' the 1-slack batch method",
    "sample_method": "not needed: every pass visits the examples in a random order "
    "(random_state= seeds it)",
    "lambda_": "use C= (C = 1 / (lambda n))",
    "momentum": "not offered (solver='ssg' is Pegasos' step)",
    "learning_rate": "not needed: solver='ssg' takes Pegasos' step 1 / (λ t)",
    "decay_exponent": "not needed: solver='ssg' takes Pegasos' step",
    "decay_t0": "not needed: solver='ssg' takes Pegasos' step",
    "break_on_no_constraints": "not needed: training stops on the duality gap (tol=)",
    "shuffle": "not needed: every pass visits the examples in a random order",
    "latent_iter": "that is dualstruct.LatentSSVM's max_iter (rounds of imputation and training)",
}

#: PyStruct's learner classes and their dualstruct counterparts
LEARNERS = {
    "OneSlackSSVM": "SSVM(model, solver='cutting_plane')",
    "NSlackSSVM": "SSVM(model, solver='bcfw') (BCFW trains the same n-slack objective, "
    "with a duality-gap certificate)",
    "FrankWolfeSSVM": "SSVM(model, solver='bcfw')",
    "SubgradientSSVM": "SSVM(model, solver='ssg')",
    "StructuredPerceptron": "SSVM(model, solver='ssg') (no perceptron is offered)",
    "PrimalDSStructuredSVM": "SSVM(model) (no downhill simplex is offered)",
    "SubgradientLatentSSVM": "LatentSSVM(SSVM(model, solver='ssg'))",
}

#: PyStruct's model classes and their dualstruct counterparts (dualstruct.models)
MODELS = {
    "ChainCRF": "models.ChainModel(n_labels, n_features)",
    "MultiClassClf": "models.MultiClassModel(n_classes, n_features) (note the order)",
    "MultiLabelClf": "models.MultiLabelModel(n_labels, n_features, edges=...)",
    "GridCRF": "models.GraphCRF with models.grid_edges(height, width)",
    "DirectionalGridCRF": "models.EdgeFeatureGraphCRF with grid_edges(h, w, directions=True)",
    "BinaryClf": "models.MultiClassModel(2, n_features)",
    "CRF": "models.GraphCRF",
    "LatentGraphCRF": "LatentSSVM with a latent graph CRF",
    "LatentGridCRF": "LatentSSVM with a latent graph CRF on grid_edges",
    "LatentNodeCRF": "LatentSSVM with a latent graph CRF",
}


def inference_method_error(value, choices, owner, keyword="inference_method"):
    """The ValueError for an inference mode ``value`` (given as ``keyword``) of model
    ``owner`` (a class name) outside ``choices``: for PyStruct's names, what to use
    instead."""
    name = value[0] if isinstance(value, tuple) and value else value
    if isinstance(name, str) and name in INFERENCE_METHODS:
        return ValueError(
            f"{owner}: {keyword}={value!r} is PyStruct's; use {INFERENCE_METHODS[name]}; {GUIDE}"
        )
    return ValueError(f"{owner}: {keyword} must be one of {tuple(choices)}, got {value!r}")


def resolve_inference_method(owner, inference_method, inference, choices, default="auto"):
    """The inference mode of a model from its ``inference_method`` keyword and the older
    ``inference`` keyword (still accepted); refuses both at once when they differ, and
    PyStruct's names with a pointer to the guide."""
    if inference is not None and inference_method is not None and inference != inference_method:
        raise ValueError(
            f"{owner}: inference= is the older name of inference_method=; pass one of them, "
            f"got {inference!r} and {inference_method!r}"
        )
    keyword = "inference_method" if inference_method is not None else "inference"
    value = inference_method if inference_method is not None else inference
    if value is None:
        value = default
    if not isinstance(value, str) or value not in choices:
        raise inference_method_error(value, choices, owner, keyword)
    return value


#: PyStruct's model keywords that dualstruct's models name otherwise
MODEL_KEYWORDS = {
    "class_weight": "use loss_weights= (per-class weights of the Hamming loss)",
    "n_states": "use n_labels= (ChainModel, MultiLabelModel) or n_classes= (MultiClassModel)",
    "inference_method": "not needed: a chain is decoded exactly by Viterbi, a class by argmax",
    "neighborhood": "use GraphCRF on grid_edges(height, width, connectivity=4 or 8)",
    "symmetric_edge_features": "use directed=False (every table symmetric)",
    "antisymmetric_edge_features": "not offered (directed=True learns any table)",
    "rescale_C": "not offered (loss_weights= rescales the loss)",
    "n_states_per_label": "that is the latent graph CRF's (for LatentSSVM)",
}


def keyword_guard(table):
    """A decorator for an ``__init__``: a keyword it does not take is refused with a
    TypeError that says, for PyStruct's keywords in ``table``, what to use instead. The
    signature seen by ``inspect`` (and scikit-learn's ``get_params``) stays ``init``'s."""

    def decorate(init):
        known = set(inspect.signature(init).parameters)

        @functools.wraps(init)
        def checked(self, *args, **kwargs):
            unknown = [k for k in kwargs if k not in known]
            if unknown:
                owner = type(self).__name__
                lines = []
                for k in unknown:
                    if k in table:
                        lines.append(f"{k}= (PyStruct's): {table[k]}")
                    else:
                        lines.append(f"{k}= is not a parameter of {owner}")
                raise TypeError(f"{owner}: " + "; ".join(lines) + f"; {GUIDE}")
            init(self, *args, **kwargs)

        return checked

    return decorate


#: for the estimators' ``__init__``: PyStruct's learner keywords
refuse_pystruct_keywords = keyword_guard(LEARNER_KEYWORDS)
#: for the models' ``__init__``: PyStruct's model keywords
refuse_pystruct_model_keywords = keyword_guard(MODEL_KEYWORDS)


class _Missing:
    """What ``dualstruct.<PyStruct class>`` gives: a stand-in whose construction raises a
    TypeError naming dualstruct's counterpart."""

    def __init__(self, *args, **kwargs):
        raise TypeError(self._message)


_STAND_INS: dict = {}


def missing_name(module, name, model_names):
    """``module``'s ``__getattr__`` for PyStruct's learner and model class names: a
    stand-in class that refuses construction with the counterpart (``models.<name>`` when
    ``name`` is in ``model_names``, dualstruct.models' names); AttributeError for anything
    else."""
    table = {**LEARNERS, **MODELS}
    if name not in table:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    if (module, name) not in _STAND_INS:
        counterpart = f"models.{name}" if name in model_names else table[name]
        message = f"dualstruct has no {name} (PyStruct's); use dualstruct.{counterpart}; {GUIDE}"
        attributes = {"_message": message, "__module__": module, "__doc__": message}
        _STAND_INS[module, name] = type(name, (_Missing,), attributes)
    return _STAND_INS[module, name]


def models_getattr(name, defined):
    """``dualstruct.models``' ``__getattr__``: PyStruct's model class names that the module
    does not ``defined`` raise an ImportError (so ``from dualstruct.models import ChainCRF``
    says what to use instead); AttributeError for anything else."""
    if name in MODELS and name not in defined:
        raise ImportError(
            f"dualstruct.models has no {name} (PyStruct's); use dualstruct.{MODELS[name]}; {GUIDE}",
            name="dualstruct.models",
        )
    raise AttributeError(f"module 'dualstruct.models' has no attribute {name!r}")
