"""The block solvers over the model-kernel interface: a built-in kernel model (multi-class)
and a user-defined Python model train with every solver to the same optimum, with the duality
gap going to zero, and faults of a user model are named."""

import math

import numpy as np
import pytest
from conftest import PlainMultiClass
from conftest import blobs as _blobs

from dualstruct.models.base import StructuredModel
from dualstruct.models.multiclass import MultiClassModel
from dualstruct.models.user import UserModel
from dualstruct.solvers import CuttingPlane, primal_objective
from dualstruct.solvers.block import BlockBCFW, BlockSSG


def _train(solver_class, model, data, **kwargs):
    opts = dict(C=1.0, max_iter=2000, tol=1e-9, check_every=20, random_state=0)
    opts.update(kwargs)
    return solver_class(model, **opts).fit(data)


def test_plain_model_follows_the_protocol():
    assert isinstance(PlainMultiClass(3, 4), StructuredModel)


def test_multiclass_hinge_matches_brute_force():
    X, y = _blobs(1)
    model = MultiClassModel(3, 4)
    w = np.random.default_rng(2).normal(size=model.size)
    hinge, yhat = model.hinge(w, model.block_data(X, y))
    for i in range(len(y)):
        values = [model.loss(y[i], c) + w @ model.joint_feature(X[i], c) for c in range(3)]
        assert hinge[i] == pytest.approx(max(values) - w @ model.joint_feature(X[i], y[i]))
        assert values[yhat[i]] == pytest.approx(max(values))
    decoded = model.decode(w, model.block_data(X))
    np.testing.assert_array_equal(decoded, [model.inference(x, w) for x in X])


@pytest.mark.parametrize("solver", [BlockBCFW, CuttingPlane])
def test_gap_goes_to_zero(solver):
    X, y = _blobs(3)
    model = MultiClassModel(3, 4)
    data = model.block_data(X, y)
    s = _train(solver, model, data, tol=1e-7)
    gaps = [r.relative_gap for r in s.history if not math.isnan(r.relative_gap)]
    assert s.history.stop_reason == "tol" and gaps[-1] <= 1e-7
    assert all(g >= -1e-12 for g in gaps)
    # the certificate: the returned model's primal is within the gap of every dual value
    w = s.weights()
    assert primal_objective(model, data, w, 1.0) == pytest.approx(s.history.last.primal)


def test_solvers_agree_on_the_optimum():
    X, y = _blobs(4)
    model = MultiClassModel(3, 4)
    data = model.block_data(X, y)
    primals = {}
    for solver in (BlockBCFW, CuttingPlane):
        s = _train(solver, model, data, tol=1e-8)
        primals[solver.name] = primal_objective(model, data, s.weights(), 1.0)
    ssg = _train(BlockSSG, model, data, max_iter=3000)
    primals["ssg"] = primal_objective(model, data, ssg.weights(), 1.0)
    best = min(primals.values())
    assert primals["bcfw"] == pytest.approx(best, rel=1e-6)
    assert primals["cutting_plane"] == pytest.approx(best, rel=1e-6)
    assert primals["ssg"] == pytest.approx(best, rel=1e-3)


@pytest.mark.parametrize("solver", [BlockBCFW, BlockSSG, CuttingPlane])
def test_user_model_reaches_the_builtin_optimum(solver):
    """A Python model trains with each solver along the built-in model's path."""
    X, y = _blobs(5, n=40)
    builtin = MultiClassModel(3, 4)
    user = UserModel(PlainMultiClass(3, 4))
    iters = 300 if solver is not BlockSSG else 200
    a = _train(solver, builtin, builtin.block_data(X, y), max_iter=iters)
    b = _train(solver, user, user.block_data(list(X), list(y)), max_iter=iters)
    pa = primal_objective(builtin, builtin.block_data(X, y), a.weights(), 1.0)
    pb = primal_objective(user, user.block_data(list(X), list(y)), b.weights(), 1.0)
    assert pb == pytest.approx(pa, rel=1e-6)
    np.testing.assert_allclose(b.weights(), a.weights(), rtol=1e-6, atol=1e-8)


def test_user_model_resumes_from_a_checkpoint():
    X, y = _blobs(6, n=30)
    user = UserModel(PlainMultiClass(3, 4))
    data = user.block_data(list(X), list(y))
    whole = _train(BlockBCFW, user, data, max_iter=40, tol=0)
    first = _train(BlockBCFW, user, data, max_iter=15, tol=0)
    meta, arrays = first.state_dict()
    second = BlockBCFW(user, C=1.0, max_iter=25, tol=0, check_every=20, random_state=0)
    second.load_state(data, meta, arrays)
    second.fit(data)
    np.testing.assert_array_equal(second.weights(), whole.weights())


class _Faulty(PlainMultiClass):
    def __init__(self, fault, at=3):
        super().__init__(3, 4)
        self.fault, self.at, self.calls = fault, at, 0

    def joint_feature(self, x, y):
        phi = super().joint_feature(x, y)
        if self.fault == "length":
            return phi[:-1]
        if self.fault == "nan" and x is self.bad_x:
            phi[0] = np.nan
        return phi

    def loss_augmented_inference(self, x, y, w):
        y_hat = super().loss_augmented_inference(x, y, w)
        if x is self.bad_x:
            if self.fault == "shape":
                return np.array([y_hat, y_hat])
            if self.fault == "worse":  # a labelling worse than the gold one
                s = self._scores(x, w) + 1.0
                s[y] -= 1.0
                return int(np.argmin(s)) if np.ptp(s) > 0 else y_hat
        return y_hat


@pytest.mark.parametrize(
    "fault, method",
    [
        ("length", "joint_feature"),
        ("nan", "joint_feature"),
        ("shape", "loss_augmented_inference"),
        ("worse", "loss_augmented_inference"),
    ],
)
@pytest.mark.parametrize("solver", [BlockBCFW, BlockSSG, CuttingPlane])
def test_faulty_user_model_is_named(fault, method, solver):
    X, y = _blobs(7, n=12)
    X = [x for x in X]
    faulty = _Faulty(fault)
    faulty.bad_x = X[5]
    user = UserModel(faulty)
    data = user.block_data(X, list(y))
    with pytest.raises(ValueError, match=rf"_Faulty\.{method}.*example (\d+)") as info:
        _train(solver, user, data, max_iter=30)
    if fault != "length":
        assert "example 5" in str(info.value)


def test_user_model_protocol_errors():
    class Incomplete:
        size_joint_feature = 3

    with pytest.raises(TypeError, match="joint_feature"):
        UserModel(Incomplete())
    bad = PlainMultiClass(3, 4)
    bad.size_joint_feature = 0
    with pytest.raises(ValueError, match="size_joint_feature"):
        UserModel(bad)
    user = UserModel(PlainMultiClass(3, 4))
    with pytest.raises(ValueError, match=r"Y\[1\] must be an integer labelling"):
        user.block_data([np.zeros(4)] * 2, [0, 0.5])
    with pytest.raises(ValueError, match="X has 2 examples, Y 1"):
        user.block_data([np.zeros(4)] * 2, [0])


def test_kernel_models_refuse_slack_rescaling():
    with pytest.raises(ValueError, match="margin rescaling only"):
        BlockBCFW(MultiClassModel(3, 4), rescaling="slack")


def test_multiclass_matches_liblinear_crammer_singer():
    """The multi-class model's optimum is LinearSVC's (Crammer-Singer) on a real data set."""
    from sklearn.datasets import load_digits
    from sklearn.svm import LinearSVC

    import dualstruct

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    model = MultiClassModel(10, 64)
    data = model.block_data(X, y)
    C = 0.1
    ref = LinearSVC(
        multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-10, max_iter=200_000
    ).fit(X, y)
    p_ref = primal_objective(model, data, np.ascontiguousarray(ref.coef_.T).ravel(), C)
    est = dualstruct.SSVM(model, C=C, tol=1e-5, max_iter=2000, random_state=0).fit(X, y)
    assert est.history_.stop_reason == "tol"
    assert primal_objective(model, data, est.coef_, C) == pytest.approx(p_ref, rel=1e-4)
    assert np.mean(est.predict(X) == ref.predict(X)) > 0.995  # near-ties may differ


def test_ssvm_trains_a_user_model():
    import dualstruct

    X, y = _blobs(8, n=50)
    records = []
    est = dualstruct.SSVM(
        PlainMultiClass(3, 4),
        solver="bcfw",
        C=1.0,
        tol=1e-6,
        random_state=0,
        callback=lambda e, r: records.append(r.passes) or False,
    )
    est.fit(list(X), list(y))
    assert est.history_.stop_reason == "tol" and records
    builtin = dualstruct.SSVM(MultiClassModel(3, 4), C=1.0, tol=1e-6, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, builtin.coef_, rtol=1e-6, atol=1e-9)
    assert est.predict(list(X)) == list(builtin.predict(X))
    assert est.score(list(X), list(y)) == builtin.score(X, y)
    with pytest.raises(ValueError, match="solver must be one of"):
        dualstruct.SSVM(PlainMultiClass(3, 4), solver="gdmm").fit(list(X), list(y))


def test_ssvm_predict_before_fit():
    from sklearn.exceptions import NotFittedError

    import dualstruct

    with pytest.raises(NotFittedError):
        dualstruct.SSVM(MultiClassModel(3, 4)).predict(np.zeros((2, 4)))


def test_ssvm_failed_fit_keeps_the_previous_model():
    import dualstruct

    X, y = _blobs(9, n=30)
    est = dualstruct.SSVM(PlainMultiClass(3, 4), max_iter=20).fit(list(X), list(y))
    coef = est.coef_.copy()
    with pytest.raises(ValueError, match="X has 30 examples, Y 29"):
        est.fit(list(X), list(y)[:-1])
    np.testing.assert_array_equal(est.coef_, coef)


def test_user_block_data_keep_their_own_examples():
    """Block data made later from the same adapter does not change what an earlier one
    trains on."""
    X, y = _blobs(10, n=30)
    X2, y2 = _blobs(11, n=20)
    user = UserModel(PlainMultiClass(3, 4))
    alone = _train(BlockBCFW, user, user.block_data(list(X), list(y)), max_iter=30, tol=0)
    first = user.block_data(list(X), list(y))
    user.block_data(list(X2), list(y2))
    again = _train(BlockBCFW, user, first, max_iter=30, tol=0)
    np.testing.assert_array_equal(again.weights(), alone.weights())


def test_classic_step_reaches_the_pairwise_optimum_on_a_user_model():
    X, y = _blobs(12, n=40)
    builtin = MultiClassModel(3, 4)
    data = builtin.block_data(X, y)
    pairwise = _train(BlockBCFW, builtin, data, tol=1e-8)
    user = UserModel(PlainMultiClass(3, 4))
    classic = _train(
        BlockBCFW, user, user.block_data(list(X), list(y)), step="fw", tol=1e-4, max_iter=5000
    )
    assert classic.resolved_step == "fw" and classic.history.stop_reason == "tol"
    assert classic.history.last.primal == pytest.approx(pairwise.history.last.primal, rel=1e-4)
    assert np.allclose(classic.block_weights.sum(axis=0), classic.w)


def test_ssvm_files_of_builtin_and_user_models(tmp_path):
    import dualstruct
    from dualstruct.models.graph import GraphCRF

    X, y = _blobs(13, n=40)
    est = dualstruct.SSVM(
        MultiClassModel(3, 4, loss_weights=[1.0, 2.0, 1.0]), C=0.5, random_state=0, max_iter=30
    ).fit(X, y)
    est.save(tmp_path / "mc.npz")
    back = dualstruct.load(tmp_path / "mc.npz")
    assert isinstance(back, dualstruct.SSVM) and back.C == 0.5
    np.testing.assert_array_equal(back.coef_, est.coef_)
    np.testing.assert_array_equal(back.model.loss_weights, [1.0, 2.0, 1.0])
    np.testing.assert_array_equal(back.predict(X), est.predict(X))
    assert back.history_.last.primal == est.history_.last.primal
    with pytest.raises(ValueError, match="do not pass one"):
        dualstruct.load(tmp_path / "mc.npz", model=MultiClassModel(3, 4))

    # a graph model: its parameters rebuild it
    rng = np.random.default_rng(0)
    graphs = [(rng.normal(size=(4, 2)), np.array([[0, 1], [1, 2], [2, 3]])) for _ in range(6)]
    labels = [rng.integers(0, 2, 4) for _ in range(6)]
    g = dualstruct.SSVM(GraphCRF(2, 2, inference="exact"), max_iter=10).fit(graphs, labels)
    g.save(tmp_path / "g.npz")
    gb = dualstruct.SSVM.load(tmp_path / "g.npz")
    assert gb.model.inference_method == "exact" and not gb.model.directed
    assert [list(p) for p in gb.predict(graphs)] == [list(p) for p in g.predict(graphs)]

    # a user model: the file names it, loading needs it and checks it
    user = PlainMultiClass(3, 4)
    user.scale = np.array([1.0, 2.0])
    u = dualstruct.SSVM(user, max_iter=20, random_state=0).fit(list(X), list(y))
    u.save(tmp_path / "user.npz")
    with pytest.raises(ValueError, match="PlainMultiClass.*pass model="):
        dualstruct.load(tmp_path / "user.npz")
    same = PlainMultiClass(3, 4)
    same.scale = np.array([1.0, 2.0])
    ub = dualstruct.load(tmp_path / "user.npz", model=same)
    np.testing.assert_array_equal(ub.coef_, u.coef_)
    assert ub.predict(list(X)) == u.predict(list(X))
    with pytest.raises(ValueError, match="'n_classes' is 4"):
        dualstruct.load(tmp_path / "user.npz", model=PlainMultiClass(4, 3))
    other = PlainMultiClass(3, 4)
    other.scale = np.array([1.0, 3.0])
    with pytest.raises(ValueError, match="'scale' differs"):
        dualstruct.load(tmp_path / "user.npz", model=other)
    with pytest.raises(ValueError, match="trained with .*PlainMultiClass"):
        dualstruct.load(tmp_path / "user.npz", model=_Faulty("nan"))
    # the header is JSON and the arrays numbers: nothing in the file is code
    import zipfile

    with zipfile.ZipFile(tmp_path / "user.npz") as z:
        assert all(n.endswith(".npy") or n.endswith(".json") for n in z.namelist())


@pytest.mark.parametrize("rescaling", ["margin", "slack"])
def test_atom_steps_keep_the_dual_state_and_certify(rescaling):
    """Pairwise steps among a block's own atoms (no oracle call) keep BCFW's dual state
    consistent (w is the atoms' weighted corners), and its certificate stays valid: the dual
    below the cutting plane's optimum, the primal above; on margin rescaling both settings
    reach that optimum."""
    from dualstruct import pack_sequences
    from dualstruct.datasets import make_chain
    from dualstruct.models import ChainModel

    X, y = make_chain(25, 4, 3, 10, noise=0.3, random_state=1)
    data = pack_sequences(X, y)
    model = ChainModel(3, 10)
    kw = dict(rescaling=rescaling, random_state=0)
    cp = CuttingPlane(model, 1.0, max_iter=3000, tol=1e-9, **kw).fit(data)
    optimum = cp.history.last_checked().primal
    for steps in (0, 5):
        bc = BlockBCFW(
            model,
            1.0,
            max_iter=2000 if rescaling == "margin" else 200,
            tol=1e-3,
            check_every=5,
            atom_steps=steps,
            **kw,
        ).fit(data)
        last = bc.history.last_checked()
        assert last.dual <= optimum * (1 + 1e-9) and last.primal >= optimum * (1 - 1e-9)
        if rescaling == "margin":
            assert bc.history.stop_reason == "tol"
            assert last.primal == pytest.approx(optimum, rel=1e-3)
        w = np.zeros(model.size)
        for i in range(data.n_sequences):
            s0, s1 = data.offsets[i], data.offsets[i + 1]
            x, gold, T = data.X[s0:s1], data.labels[s0:s1], s1 - s0
            for a in range(bc.atom_count[i]):
                base = s0 * bc.capacity + a * T
                atom = bc.atom_labels[base : base + T]
                g = model.loss(gold, atom) if rescaling == "slack" else 1.0
                w += (
                    bc.atom_weights[i, a]
                    * g
                    * (model.joint_feature(x, gold) - model.joint_feature(x, atom))
                )
        np.testing.assert_allclose(w, bc.w, atol=1e-8)
    with pytest.raises(ValueError, match="atom_steps"):
        BlockBCFW(model, 1.0, atom_steps=-1)
