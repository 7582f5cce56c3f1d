import math

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_chain_problem
from sklearn.base import clone

import dualstruct
from dualstruct import PackedSequences, StructuredSVM


def _letters(Y):
    return [np.array(list("abcd"))[y] for y in Y]


@pytest.fixture
def problem():
    rng = np.random.default_rng(0)
    X, Y = random_chain_problem(rng, n=30, K=4, d=5, max_len=6)
    # make the labels learnable: shift the feature of the true label
    for x, y in zip(X, Y):
        x[np.arange(len(y)), y] += 3.0
    return X, _letters(Y)


def test_fit_predict_score_string_labels(problem):
    X, y = problem
    est = StructuredSVM(C=1.0, max_iter=200, random_state=0).fit(X, y)
    assert list(est.classes_) == ["a", "b", "c", "d"]
    pred = est.predict(X)
    assert [len(p) for p in pred] == [len(t) for t in y]
    assert pred[0].dtype.kind == "U"
    assert est.score(X, y) > 0.9
    assert est.history_.stop_reason in ("tol", "max_iter")
    assert est.unigram_weights_.shape == (4, 5)
    assert est.transition_weights_.shape == (4, 4)
    assert est.intercept_.shape == (4,)


@pytest.mark.parametrize("solver", ["bcfw", "ssg", "gdmm"])
def test_sparse_and_packed_input(problem, solver):
    X, y = problem
    Xs = [sp.csr_matrix(x) for x in X]
    a = StructuredSVM(solver=solver, max_iter=20, random_state=1).fit(X, y)
    b = StructuredSVM(solver=solver, max_iter=20, random_state=1).fit(Xs, y)
    assert np.allclose(a.coef_, b.coef_)
    packed = dualstruct.pack_sequences(X)
    assert isinstance(packed, PackedSequences)
    assert all(np.array_equal(p, q) for p, q in zip(a.predict(packed), a.predict(X)))


def test_save_load_round_trip(problem, tmp_path):
    X, y = problem
    est = StructuredSVM(max_iter=30, loss_weights={"a": 2.0}, random_state=0).fit(X, y)
    path = est.save(tmp_path / "model.dsm")
    loaded = dualstruct.load(path)
    assert np.array_equal(loaded.coef_, est.coef_)
    assert all(np.array_equal(p, q) for p, q in zip(loaded.predict(X), est.predict(X)))
    assert loaded.get_params() == {**est.get_params(), "loss_weights": {"a": 2.0}}
    assert len(loaded.history_) == len(est.history_)
    assert loaded.history_.last_checked().primal == est.history_.last_checked().primal
    assert list(loaded.classes_) == list(est.classes_)


def test_saved_objective_equals_independent_recomputation(problem, tmp_path):
    from dualstruct.solvers import primal_objective

    X, y = problem
    est = StructuredSVM(C=0.5, max_iter=40, check_every=40, random_state=0).fit(X, y)
    loaded = dualstruct.load(est.save(tmp_path / "m.npz"))
    data = loaded._pack(X, y)
    p = primal_objective(loaded.model_, data, loaded.coef_, loaded.C)
    assert p == pytest.approx(loaded.history_.last_checked().primal, rel=1e-12)


def test_int_labels_and_clone(problem):
    X, y = problem
    yi = [np.searchsorted(["a", "b", "c", "d"], t) + 10 for t in y]
    est = StructuredSVM(C=2.0, max_iter=10)
    c = clone(est)
    assert c.get_params() == est.get_params()
    c.set_params(C=3.0)
    assert c.C == 3.0 and est.C == 2.0
    c.fit(X, yi)
    assert set(np.concatenate(c.predict(X))) <= {10, 11, 12, 13}


def test_validation_data_and_verbose(problem, capsys):
    X, y = problem
    est = StructuredSVM(max_iter=10, check_every=5, verbose=1, random_state=0)
    est.fit(X[:20], y[:20], validation_data=(X[20:], y[20:]))
    out = capsys.readouterr().out
    assert "primal" in out and "val.score" in out
    scores = [r.validation_score for r in est.history_ if r.validation_score == r.validation_score]
    assert len(scores) == 2 and all(0 <= s <= 1 for s in scores)


def test_callback_checkpoint_and_stop(problem, tmp_path):
    X, y = problem
    saved = []

    def checkpoint(estimator, record):
        saved.append(estimator.save(tmp_path / f"ckpt{int(record.passes)}.npz"))
        return record.passes >= 3

    est = StructuredSVM(max_iter=50, callback=checkpoint, random_state=0).fit(X, y)
    assert est.n_iter_ == 3 and est.history_.stop_reason == "callback"
    assert len(saved) == 3
    assert dualstruct.load(saved[-1]).score(X, y) == est.score(X, y)


def test_keyboard_interrupt_leaves_usable_model_and_warm_start_resumes(problem):
    X, y = problem

    def interrupt(estimator, record):
        if record.passes == 2:
            raise KeyboardInterrupt

    est = StructuredSVM(
        max_iter=50, tol=0, callback=interrupt, warm_start=True, random_state=0
    ).fit(X, y)
    assert est.history_.stop_reason == "interrupted" and est.n_iter_ == 2
    assert len(est.predict(X)) == len(X)
    est.set_params(callback=None, max_iter=3)
    est.fit(X, y)
    assert est.n_iter_ == 5


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda X, y: (X[:-1], y), "sequences but y has"),
        (
            lambda X, y: (X, [t[:-1] if i == 2 else t for i, t in enumerate(y)]),
            r"sequence 2: X\[2\] has \d+ token rows but y\[2\] has",
        ),
        (
            lambda X, y: (X[:3] + [np.zeros((0, 5))], y[:3] + [np.array([], dtype=str)]),
            "empty sequence",
        ),
        (
            lambda X, y: (
                [x.copy() if i != 1 else np.full_like(x, np.nan) for i, x in enumerate(X)],
                y,
            ),
            r"X\[1\] contains NaN",
        ),
        (
            lambda X, y: ([x if i != 1 else np.full_like(x, np.inf) for i, x in enumerate(X)], y),
            "infinite",
        ),
        (
            lambda X, y: ([x if i != 4 else x[:, :3] for i, x in enumerate(X)], y),
            r"X\[4\] has 3 feature columns",
        ),
        (lambda X, y: ([x[0] for x in X], y), "is 1-D"),
    ],
)
def test_bad_training_input(problem, bad, match):
    X, y = problem
    Xb, yb = bad(list(X), list(y))
    with pytest.raises(ValueError, match=match):
        StructuredSVM(max_iter=1).fit(Xb, yb)


def test_bad_prediction_input(problem):
    X, y = problem
    est = StructuredSVM(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match=r"X\[0\] has 4 feature columns, expected 5"):
        est.predict([x[:, :4] for x in X])
    with pytest.raises(ValueError, match="not seen in training"):
        est.fit(X, y)._encode_labels([np.array(["z"])], fit=False)
    with pytest.raises(ValueError, match="not fitted"):
        StructuredSVM().predict(X)
    with pytest.raises(TypeError, match="list of per-sequence"):
        est.predict(np.zeros((3, 5)))


@pytest.mark.parametrize(
    "param, value", [("C", 0), ("C", -1.0), ("solver", "sgd"), ("model", "crf"), ("max_iter", -1)]
)
def test_bad_parameters(problem, param, value):
    X, y = problem
    with pytest.raises(ValueError, match=param):
        StructuredSVM(**{param: value}).fit(X, y)


def test_truncated_and_tampered_model_files(problem, tmp_path):
    X, y = problem
    path = StructuredSVM(max_iter=3).fit(X, y).save(tmp_path / "m.npz")
    blob = path.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ValueError, match="trunc.npz"):
        dualstruct.load(tmp_path / "trunc.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="junk.npz"):
        dualstruct.load(tmp_path / "junk.npz")
    # rewrite one array with other values but keep the header: the checksum catches it
    import zipfile

    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp_path / "tamper.npz", "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "coef.npy":
                arr = np.load(path)["coef"] + 1.0
                import io as _io

                buf = _io.BytesIO()
                np.save(buf, arr)
                data = buf.getvalue()
            zout.writestr(item, data)
    with pytest.raises(ValueError, match="checksum"):
        dualstruct.load(tmp_path / "tamper.npz")
    with pytest.raises(FileNotFoundError):
        dualstruct.load(tmp_path / "missing.npz")


def test_pickled_object_arrays_are_refused(tmp_path):
    evil = tmp_path / "evil.npz"
    np.savez(evil, __header__=np.array([{"format": "dualstruct-model"}], dtype=object))
    with pytest.raises(ValueError, match="evil.npz"):
        dualstruct.load(evil)


def test_warm_start_refuses_a_changed_problem(problem):
    X, y = problem
    est = StructuredSVM(max_iter=2, warm_start=True).fit(X, y)
    est.set_params(averaging=False)
    with pytest.raises(ValueError, match=r"parameters \['averaging'\] changed"):
        est.fit(X, y)
    est.set_params(averaging=True)
    ssg = StructuredSVM(solver="ssg", max_iter=2, warm_start=True).fit(X, y)
    ssg.set_params(C=100.0)
    with pytest.raises(ValueError, match="keeps no dual point to carry to a new C"):
        ssg.fit(X, y)
    with pytest.raises(ValueError, match="same training data"):
        est.fit([x * 5 for x in X], y)
    est.fit(X, y)
    assert est.n_iter_ == 4


def test_fit_without_labels_and_numpy_scalar_params(problem, tmp_path):
    X, y = problem
    with pytest.raises(ValueError, match="needs the label sequences"):
        StructuredSVM().fit(X)
    est = StructuredSVM(C=np.float32(0.5), max_iter=np.int64(2)).fit(X, y)
    assert dualstruct.load(est.save(tmp_path / "m.npz")).max_iter == 2
    with pytest.raises(ValueError, match="intercept_scaling"):
        StructuredSVM(intercept_scaling=float("nan")).fit(X, y)
    with pytest.raises(ValueError, match="C must be"):
        StructuredSVM(C=True).fit(X, y)


def test_corrupted_compressed_payload(problem, tmp_path):
    X, y = problem
    path = StructuredSVM(max_iter=2).fit(X, y).save(tmp_path / "m.npz")
    blob = bytearray(path.read_bytes())
    import zipfile

    with zipfile.ZipFile(path) as z:
        info = z.getinfo("coef.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 20
    for k in range(start, start + 40):
        blob[k] ^= 0xFF
    (tmp_path / "bad.npz").write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="bad.npz"):
        dualstruct.load(tmp_path / "bad.npz")


def test_packed_sequences_validation():
    X = sp.csr_matrix(np.ones((3, 2)))
    with pytest.raises(ValueError, match="codes >= 0"):
        PackedSequences(X, np.array([0, 3]), np.array([0, -1, 1]))
    with pytest.raises(ValueError, match="integer codes"):
        PackedSequences(X, np.array([0, 3]), np.array([0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="empty sequence"):
        PackedSequences(X, np.array([0, 0, 3]))
    unsorted = sp.csr_matrix(
        (np.array([1.0, 2.0]), np.array([1, 0]), np.array([0, 2, 2, 2])), shape=(3, 2)
    )
    assert PackedSequences(unsorted, np.array([0, 3])).X.has_sorted_indices


@pytest.mark.parametrize("solver", ["bcfw", "ssg", "gdmm"])
def test_checkpoint_resume_equals_uninterrupted_training(problem, tmp_path, solver):
    X, y = problem
    full = StructuredSVM(solver=solver, max_iter=12, tol=0, random_state=3).fit(X, y)
    part = StructuredSVM(solver=solver, max_iter=5, tol=0, random_state=3).fit(X, y)
    path = part.save(tmp_path / "ckpt.npz", include_solver_state=True)
    resumed = dualstruct.load(path)
    resumed.set_params(warm_start=True, max_iter=7)
    resumed.fit(X, y)
    assert resumed.n_iter_ == 12 and len(resumed.history_) == 12
    assert np.allclose(resumed.coef_, full.coef_, rtol=1e-10, atol=1e-12)
    # the checkpoint refuses other data and other parameters
    other = dualstruct.load(path)
    other.set_params(warm_start=True)
    with pytest.raises(ValueError, match="different training data"):
        other.fit([x * 2 for x in X], y)
    other = dualstruct.load(path)
    other.set_params(warm_start=True, C=5.0)
    with pytest.raises(ValueError, match=r"parameters \['C'\] differ"):
        other.fit(X, y)


def test_a_failed_resume_keeps_the_checkpoint(problem, tmp_path):
    X, y = problem
    path = (
        StructuredSVM(max_iter=3, tol=0, random_state=0)
        .fit(X, y)
        .save(tmp_path / "c.npz", include_solver_state=True)
    )
    est = dualstruct.load(path)
    est.set_params(warm_start=True, max_iter=2)
    with pytest.raises(ValueError, match="different training data"):
        est.fit([x * 2 for x in X], y)
    est.fit(X, y)
    assert est.n_iter_ == 5 and len(est.history_) == 5


def test_a_failed_first_fit_does_not_block_the_next(problem):
    X, y = problem
    est = StructuredSVM(
        solver="cutting_plane",
        warm_start=True,
        max_iter=2,
        solver_options={"max_constraints": 10**9},
    )
    with pytest.raises(MemoryError):
        est.fit(X, y)
    est.set_params(solver_options={"max_constraints": 100})
    assert est.fit(X, y).n_iter_ == 2


def test_warm_start_sees_parameters_changed_in_place(problem, tmp_path):
    X, y = problem
    opts = {"rho": [(0, 1.0), (5, 2.0)]}
    est = StructuredSVM(
        solver="gdmm", solver_options=opts, warm_start=True, max_iter=2, check_every=1
    ).fit(X, y)
    opts["rho"] = 50.0
    with pytest.raises(ValueError, match=r"parameters \['solver_options'\] changed"):
        est.fit(X, y)
    opts["rho"] = [(0, 1.0), (5, 2.0)]
    est.set_params(check_every=3, max_iter=3)
    est.fit(X, y)  # the same schedule again: continues, with the new check_every
    checked = [r.passes for r in est.history_ if not math.isnan(r.primal)]
    assert est.n_iter_ == 5 and checked == [1, 2, 3, 5]
    # a schedule read back from a checkpoint (lists, not tuples) is the same parameter
    path = est.save(tmp_path / "c.npz", include_solver_state=True)
    again = dualstruct.load(path)
    again.set_params(warm_start=True, max_iter=1, solver_options=opts)
    assert again.fit(X, y).n_iter_ == 6


def test_numpy_integer_seed_is_saved(problem, tmp_path):
    X, y = problem
    est = StructuredSVM(max_iter=2, random_state=np.int64(4)).fit(X, y)
    assert dualstruct.load(est.save(tmp_path / "m.npz")).random_state == 4


def _never_stop(estimator, record):
    return False


@pytest.mark.parametrize("solver", ["bcfw", "gdmm"])
def test_fitted_estimators_pickle_and_deepcopy(problem, solver):
    import copy
    import pickle

    X, y = problem
    est = StructuredSVM(solver=solver, max_iter=3, warm_start=True, callback=_never_stop).fit(
        X, y, validation_data=(X, y)
    )
    twins = (pickle.loads(pickle.dumps(est)), copy.deepcopy(est))
    for twin in twins:
        assert [list(p) for p in twin.predict(X)] == [list(p) for p in est.predict(X)]
    est.fit(X, y)
    for twin in twins:  # the copies' solver states continue exactly as the original's
        assert twin.fit(X, y).n_iter_ == 6
        np.testing.assert_array_equal(twin.coef_, est.coef_)


def test_labels_must_line_up_with_packed_sequences(problem):
    X, y = problem
    j = next(j for j in range(1, len(y)) if len(y[j]) != len(y[0]))
    swapped = list(y)
    swapped[0], swapped[j] = y[j], y[0]  # the same number of tokens, shifted labels
    with pytest.raises(
        ValueError,
        match=rf"sequence 0: X has {len(y[0])} tokens but y\[0\] has "
        rf"{len(y[j])} labels",
    ):
        StructuredSVM(max_iter=1).fit(dualstruct.pack_sequences(X), swapped)


def test_a_failed_refit_keeps_the_previous_model(problem):
    X, y = problem
    est = StructuredSVM(max_iter=3).fit(X, y)
    before = est.predict(X[:2])
    other = [np.array(["B-NP"] * len(t), dtype=object) for t in y]
    other[0] = other[0][:-1]  # one label short: the refit fails after reading the labels
    with pytest.raises(ValueError, match="sequence 0"):
        est.fit(X, other)
    assert [list(p) for p in est.predict(X[:2])] == [list(p) for p in before]
    assert list(est.classes_) == ["a", "b", "c", "d"]


def test_object_labels_are_stored_as_str_or_int(problem, tmp_path):
    X, y = problem
    est = StructuredSVM(max_iter=2).fit(X, [np.asarray(t, dtype=object) for t in y])
    assert est.classes_.dtype.kind == "U"
    assert dualstruct.load(est.save(tmp_path / "m.npz")).classes_.tolist() == list("abcd")
    mixed = [np.array([1, "a"] * (len(t) // 2) + [1] * (len(t) % 2), dtype=object) for t in y]
    with pytest.raises(TypeError, match="all str or all int"):
        StructuredSVM(max_iter=2).fit(X, mixed)


def test_an_error_during_training_leaves_the_estimator_with_its_solver(problem, tmp_path):
    X, y = problem
    path = (
        StructuredSVM(max_iter=3, tol=0, random_state=0)
        .fit(X, y)
        .save(tmp_path / "c.npz", include_solver_state=True)
    )

    def fail_at_5(estimator, record):
        if record.passes == 5:
            raise RuntimeError("callback failed")

    est = dualstruct.load(path)
    est.set_params(warm_start=True, max_iter=4, callback=fail_at_5)
    with pytest.raises(RuntimeError, match="callback failed"):
        est.fit(X, y)
    assert est.n_iter_ == 5 == est.solver_.passes
    assert [r.passes for r in est.history_] == [1, 2, 3, 4, 5]
    est.set_params(callback=None, max_iter=2)
    est.fit(X, y)
    assert est.n_iter_ == 7 and [r.passes for r in est.history_] == list(range(1, 8))
    full = StructuredSVM(max_iter=7, tol=0, random_state=0).fit(X, y)
    np.testing.assert_allclose(est.coef_, full.coef_, rtol=1e-12, atol=1e-14)
