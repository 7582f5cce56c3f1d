"""One estimator with presets: the training parameters live in ``BaseSSVM``; each preset
defines a few parameters of its own and passes the shared ones through."""

import numpy as np
import pytest
from sklearn.base import clone

from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
from dualstruct.estimators.base import BaseSSVM
from dualstruct.models import MultiClassModel
from dualstruct.tagger import SequenceTagger

PRESETS = {
    "StructuredSVM": StructuredSVM,
    "MultiLabelSVM": MultiLabelSVM,
    "MultiClassSVM": MultiClassSVM,
    "SequenceTagger": SequenceTagger,
}


def _made(cls, monkeypatch):
    """A default instance of ``cls`` and the parameters its ``__init__`` handed to the base."""
    handed = set()
    base_init = BaseSSVM.__init__

    def recording(self, **shared):
        handed.update(shared)
        base_init(self, **shared)

    monkeypatch.setattr(BaseSSVM, "__init__", recording)
    return cls(), handed


@pytest.mark.parametrize("name", PRESETS)
def test_a_preset_defines_at_most_eight_parameters_of_its_own(name, monkeypatch):
    est, handed = _made(PRESETS[name], monkeypatch)
    assert handed <= set(BaseSSVM.SHARED_PARAMS)
    own = set(est.get_params(deep=False)) - handed
    assert len(own) <= 8, sorted(own)


@pytest.mark.parametrize("cls", [StructuredSVM, MultiLabelSVM, MultiClassSVM])
def test_the_shared_parameters_a_preset_accepts_go_to_the_base(cls, monkeypatch):
    est, handed = _made(cls, monkeypatch)
    accepted = set(est.get_params(deep=False)) & set(BaseSSVM.SHARED_PARAMS)
    assert handed == accepted


def test_the_base_refuses_a_parameter_it_does_not_share():
    with pytest.raises(TypeError, match="'edges' is not a shared parameter"):
        BaseSSVM(edges="full")


@pytest.mark.parametrize(
    "est",
    [
        StructuredSVM(C=0.5, max_iter=7, tol=0.02, n_jobs=2),
        MultiLabelSVM(C=0.5, max_iter=7, edges="chain"),
        MultiClassSVM(C=0.5, max_iter=7, fit_intercept=False),
        SSVM(MultiClassModel(3, 4), C=0.5, max_iter=7),
    ],
    ids=lambda e: type(e).__name__,
)
def test_presets_store_every_parameter_as_given_and_clone(est):
    again = clone(est)
    assert again.get_params(deep=False).keys() == est.get_params(deep=False).keys()
    for k, v in est.get_params(deep=False).items():
        if k == "model" and not isinstance(v, str):  # a model object is copied
            assert type(getattr(again, k)) is type(v)
        else:
            assert getattr(again, k) == v, k
    assert again.set_params(C=2.0).C == 2.0


@pytest.mark.parametrize(
    "make",
    [
        lambda **kw: MultiClassSVM(**kw),
        lambda **kw: MultiLabelSVM(**kw),
        lambda **kw: SSVM(MultiClassModel(2, 3), **kw),
    ],
    ids=["MultiClassSVM", "MultiLabelSVM", "SSVM"],
)
@pytest.mark.parametrize(
    "bad, message",
    [
        ({"C": -1.0}, "C must be"),
        ({"max_iter": 0}, "max_iter must be"),
        ({"solver": "newton"}, "solver must be one of"),
        ({"callback": 3}, "callback must be callable"),
    ],
)
def test_the_shared_checks_are_the_same_for_every_preset(make, bad, message):
    X = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
    y = np.array([0, 1, 0, 1])
    Y = np.stack([y, 1 - y], axis=1)
    est = make(**bad)
    with pytest.raises(ValueError, match=message):
        if isinstance(est, MultiLabelSVM):
            est.fit(X, Y)
        else:
            est.fit(X, y)


def test_only_checkpointing_presets_save_a_solver_state(tmp_path):
    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    est = MultiClassSVM(max_iter=5, random_state=0).fit(X, [0, 1, 0, 1])
    with pytest.raises(ValueError, match="MultiClassSVM files keep no solver state"):
        est.save(tmp_path / "m.npz", include_solver_state=True)
    assert est.save(tmp_path / "m.npz").exists()


def test_a_solver_state_in_a_file_of_a_preset_without_checkpoints_is_refused(tmp_path):
    from dualstruct import io

    X = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 2.0], [2.0, 0.0]])
    path = MultiClassSVM(max_iter=5, random_state=0).fit(X, [0, 1, 0, 1]).save(tmp_path / "m.npz")
    header, arrays = io.load_arrays(path)
    header["solver_state"] = {}
    io.save_arrays(path, header, arrays)
    with pytest.raises(ValueError, match="never holds a solver state"):
        MultiClassSVM.load(path)
