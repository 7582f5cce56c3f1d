"""MultiLabelSVM (fit/predict/score/save/load/resume), the multi-label CLI, and the yeast
result of the issue (full graph, margin rescaling: test Hamming loss <= 0.200)."""

import gzip

import numpy as np
import pytest

import dualstruct
from dualstruct import MultiLabelSVM
from dualstruct.cli import main
from dualstruct.metrics import multilabel_scores
from dualstruct.solvers import primal_objective


def _data(seed=0, n=40, d=6, L=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = ((X @ rng.normal(size=(d, L)) + rng.normal(scale=0.5, size=(n, L))) > 0).astype(int)
    return X, Y


@pytest.mark.parametrize("solver", ["bcfw", "ssg", "cutting_plane", "gdmm"])
@pytest.mark.parametrize("edges", ["independent", "tree", "full"])
def test_fit_predict_score_and_objective(solver, edges):
    X, Y = _data()
    m = MultiLabelSVM(edges=edges, solver=solver, C=0.5, max_iter=60, tol=1e-3, random_state=0).fit(
        X, Y
    )
    pred = m.predict(X)
    assert pred.shape == Y.shape and set(np.unique(pred)) <= {0, 1}
    assert 0.0 <= m.score(X, Y) <= 1.0
    scores = m.evaluate(X, Y)
    assert scores["hamming_loss"] < 0.3
    last = m.history_.last_checked()
    data = m.solver_.data
    assert last.primal == pytest.approx(primal_objective(m.model_, data, m.coef_, 0.5), rel=1e-10)
    assert m.unary_weights_.shape == (6, 4) and m.intercept_.shape == (4,)
    assert len(m.interaction_weights_) == len(m.edges_)


def test_save_load_and_resume_exactly(tmp_path):
    X, Y = _data(1)
    full = MultiLabelSVM(edges="full", inference="lp", max_iter=30, tol=0, random_state=3).fit(X, Y)
    part = MultiLabelSVM(edges="full", inference="lp", max_iter=12, tol=0, random_state=3).fit(X, Y)
    part.save(tmp_path / "m.npz", include_solver_state=True)
    back = dualstruct.load(tmp_path / "m.npz")
    assert isinstance(back, MultiLabelSVM)
    assert np.array_equal(back.predict(X), part.predict(X))
    back.set_params(warm_start=True, max_iter=18)
    back.fit(X, Y)
    assert back.n_iter_ == 30
    assert np.allclose(back.coef_, full.coef_, atol=1e-12)
    # an explicit edge list survives the round trip
    edges = np.array([[0, 1], [2, 3], [1, 3]])
    m = MultiLabelSVM(edges=edges, max_iter=3).fit(X, Y)
    m.save(tmp_path / "e.npz")
    assert np.array_equal(dualstruct.load(tmp_path / "e.npz").edges_, edges)


def test_warm_start_refuses_changed_edges_or_loss_weights():
    X, Y = _data(2)
    m = MultiLabelSVM(edges="tree", max_iter=2, warm_start=True).fit(X, Y)
    for change in ({"edges": "full"}, {"loss_weights": [1.0, 2.0, 1.0, 1.0]}):
        m.set_params(**change)
        with pytest.raises(ValueError, match="changed since"):
            m.fit(X, Y)
        m.set_params(edges="tree", loss_weights=None)
    assert m.fit(X, Y).n_iter_ == 4


def test_gdmm_penalty_schedule():
    X, Y = _data(3)
    m = MultiLabelSVM(
        edges="full",
        inference="lp",
        solver="gdmm",
        max_iter=8,
        tol=0,
        check_every=4,
        solver_options={"rho": [(0, 0.1), (4, 1.0)], "eta": 0.1},
        random_state=0,
    ).fit(X, Y)
    assert [r.extra["rho"] for r in m.history_][-1] == pytest.approx(1.0)
    assert m.history_[1].extra["rho"] == pytest.approx(0.1 * 10**0.25)  # after pass 2


def test_estimator_input_errors(tmp_path):
    X, Y = _data()
    Y3 = Y.copy()
    Y3[0, 1] = 2
    with pytest.raises(ValueError, match=r"Y\[:, 1\] holds 3 different values"):
        MultiLabelSVM().fit(X, Y3)
    with pytest.raises(ValueError, match="Only binary classification is supported"):
        MultiLabelSVM().fit(X, Y[:, 0] + Y[:, 1])
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        MultiLabelSVM().fit(X, Y + 0.5)
    with pytest.raises(ValueError, match="edges must be"):
        MultiLabelSVM(edges="ring").fit(X, Y)
    with pytest.raises(ValueError, match="solver must be"):
        MultiLabelSVM(solver="gdmm_x").fit(X, Y)
    with pytest.raises(ValueError, match="edge labels must lie in 0..3"):
        MultiLabelSVM(edges=np.array([[0, 4]])).fit(X, Y)
    m = MultiLabelSVM(max_iter=2).fit(X, Y)
    with pytest.raises(ValueError, match="5 labels, the model was trained on 4"):
        m.evaluate(X, np.zeros((len(X), 5), dtype=int))
    with pytest.raises(ValueError, match="X has 7 features, but MultiLabelSVM is expecting 6"):
        m.predict(np.zeros((2, 7)))
    Xnan = X.copy()
    Xnan[3, 2] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        m.predict(Xnan)
    with pytest.raises(ValueError, match="Expected 2D array"):
        m.predict(X[0])
    with pytest.raises(ValueError, match="0 sample"):
        MultiLabelSVM().fit(np.zeros((0, 6)), np.zeros((0, 4)))
    # a failed refit leaves the model as it was
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        m.fit(X[:, :3], Y[:5])
    assert m.n_features_in_ == 6 and m.predict(X).shape == Y.shape
    # lists are accepted by a warm start as by a first fit
    m.set_params(warm_start=True)
    assert m.fit(X.tolist(), Y.tolist()).n_iter_ == 4
    m.set_params(warm_start=False)
    m.set_params(warm_start=True, averaging=not m.averaging)
    with pytest.raises(ValueError, match="changed"):
        m.fit(X, Y)
    bad = tmp_path / "bad.npz"
    m.set_params(averaging=not m.averaging, warm_start=False)
    header, arrays = m.to_arrays()
    arrays["coef"] = arrays["coef"][:-1]
    dualstruct.io.save_arrays(bad, header, arrays)
    with pytest.raises(ValueError, match="bad.npz: coef has shape"):
        dualstruct.load(bad)


@pytest.mark.parametrize("solver", ["bcfw", "ssg", "cutting_plane"])
def test_slack_rescaling_estimator(solver, tmp_path):
    X, Y = _data(4)
    m = MultiLabelSVM(
        edges="full",
        solver=solver,
        C=0.5,
        rescaling="slack",
        max_iter=300,
        tol=1e-3,
        random_state=0,
    ).fit(X, Y)
    data = m.solver_.data
    last = m.history_.last_checked()
    assert last.primal == pytest.approx(
        primal_objective(m.model_, data, m.coef_, 0.5, "slack"), rel=1e-10
    )
    cp = MultiLabelSVM(
        edges="full", solver="cutting_plane", C=0.5, rescaling="slack", tol=1e-8, max_iter=500
    ).fit(X, Y)
    assert last.primal == pytest.approx(cp.history_.last.primal, rel=2e-2)
    back = dualstruct.load(m.save(tmp_path / "s.npz"))
    assert back.rescaling == "slack" and np.array_equal(back.predict(X), m.predict(X))
    with pytest.raises(ValueError, match="margin rescaling only"):
        MultiLabelSVM(solver="gdmm", rescaling="slack").fit(X, Y)
    with pytest.raises(ValueError, match="unit Hamming loss"):
        MultiLabelSVM(rescaling="slack", loss_weights=[2.0, 1.0, 1.0, 1.0]).fit(X, Y)
    with pytest.raises(ValueError, match="interactions='11' only"):
        MultiLabelSVM(solver="gdmm", interactions="table").fit(X, Y)
    # "auto" predicts exactly under slack even where margin rescaling would take the LP
    assert MultiLabelSVM(rescaling="slack")._inference() == "exact"
    assert MultiLabelSVM(rescaling="slack", inference="lp")._inference() == "lp"
    with pytest.raises(ValueError, match="rescaling must be"):
        MultiLabelSVM(rescaling="both").fit(X, Y)


def test_interaction_tables_estimator(tmp_path):
    X, Y = _data(5)
    m = MultiLabelSVM(
        edges="tree", interactions="table", C=0.5, max_iter=200, tol=1e-3, random_state=0
    ).fit(X, Y)
    assert m.interaction_weights_.shape == (3, 2, 2)
    assert m.coef_.shape == (7 * 4 + 3 * 4,)
    # the tables fit at least as well as the (1, 1) weights (they can represent them)
    one = MultiLabelSVM(edges="tree", C=0.5, max_iter=200, tol=1e-3, random_state=0).fit(X, Y)
    assert m.evaluate(X, Y)["hamming_loss"] <= one.evaluate(X, Y)["hamming_loss"] + 0.05
    back = dualstruct.load(m.save(tmp_path / "t.npz"))
    assert back.interactions == "table" and np.array_equal(back.predict(X), m.predict(X))
    with pytest.raises(ValueError, match="interactions='11' only"):
        MultiLabelSVM(solver="gdmm", interactions="table").fit(X, Y)
    with pytest.raises(ValueError, match="interactions must be"):
        MultiLabelSVM(interactions="2x2").fit(X, Y)


def _write_libsvm(path, X, Y):
    with gzip.open(path, "wt") as fh:
        for x, y in zip(X, Y):
            feats = " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(x) if v != 0)
            fh.write(",".join(str(j) for j in np.flatnonzero(y)) + " " + feats + "\n")


def test_cli_train_evaluate_predict_info_and_errors(tmp_path, capsys):
    X, Y = _data(2, n=60)
    train, model = tmp_path / "train.svm.gz", tmp_path / "m.npz"
    _write_libsvm(train, X, Y)
    assert (
        main(
            [
                "multilabel",
                "train",
                str(train),
                "-o",
                str(model),
                "--edges",
                "tree",
                "--max-iter",
                "20",
                "--dev",
                str(train),
                "--interactions",
                "table",
            ]
        )
        == 0
    )
    assert dualstruct.load(model).interaction_weights_.shape == (3, 2, 2)
    assert main(["multilabel", "evaluate", str(model), str(train), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"hamming_loss"' in out and '"lp_integral_fraction": 1.0' in out
    assert (
        main(["multilabel", "predict", str(model), str(train), "-o", str(tmp_path / "p.txt")]) == 0
    )
    lines = (tmp_path / "p.txt").read_text().splitlines()
    assert len(lines) == 60
    assert main(["info", str(model)]) == 0
    assert "multilabel" in capsys.readouterr().out
    # a test file with a label beyond the model's labels names the file and line
    bad = tmp_path / "bad.svm"
    bad.write_text("0,9 1:1\n")
    assert main(["multilabel", "evaluate", str(model), str(bad)]) == 2
    assert "bad.svm:1: label 9 outside 0..3" in capsys.readouterr().err
    # resuming continues from a checkpointed model
    assert (
        main(
            [
                "multilabel",
                "train",
                str(train),
                "-o",
                str(model),
                "--max-iter",
                "5",
                "--tol",
                "0",
                "--save-state",
            ]
        )
        == 0
    )
    # a resumed model keeps its settings: a flag that contradicts them is an error
    assert (
        main(
            [
                "multilabel",
                "train",
                str(train),
                "-o",
                str(model),
                "--max-iter",
                "12",
                "--resume",
                str(model),
                "--edges",
                "tree",
                "-C",
                "2",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "--edges tree (the model has 'full')" in err and "-C 2.0" in err
    assert (
        main(
            [
                "multilabel",
                "train",
                str(train),
                "-o",
                str(model),
                "--max-iter",
                "9",
                "--tol",
                "0",
                "--resume",
                str(model),
            ]
        )
        == 0
    )
    assert dualstruct.load(model).n_iter_ == 9
    assert main(["multilabel", "train", str(tmp_path / "x.arff"), "-o", str(model)]) == 2
    # --n-features / --n-labels fix the widths, so a test file may use a feature (or a
    # label) the training file never does
    small = tmp_path / "small.svm"
    small.write_text("0 1:1\n1 2:1\n")
    wide = tmp_path / "wide.svm"
    wide.write_text("2 3:1\n0 1:1\n")
    assert main(["multilabel", "train", str(small), "-o", str(model), "--max-iter", "3"]) == 0
    assert main(["multilabel", "evaluate", str(model), str(wide)]) == 2
    assert "wide.svm:1: label 2 outside 0..1" in capsys.readouterr().err
    assert (
        main(
            [
                "multilabel",
                "train",
                str(small),
                "-o",
                str(model),
                "--max-iter",
                "3",
                "--n-features",
                "3",
                "--n-labels",
                "3",
            ]
        )
        == 0
    )
    assert main(["multilabel", "evaluate", str(model), str(wide)]) == 0


def test_yeast_full_graph_hamming_loss(data_dir):
    from dualstruct.datasets import fetch_multilabel

    X, Y = fetch_multilabel("yeast", "train", data_home=data_dir)
    Xt, Yt = fetch_multilabel("yeast", "test", data_home=data_dir)
    m = MultiLabelSVM(
        edges="full", inference="lp", C=1.0, max_iter=200, tol=0.01, random_state=0
    ).fit(X, Y)
    assert m.history_.stop_reason == "tol"
    scores = m.evaluate(Xt, Yt)
    assert scores["hamming_loss"] <= 0.200
    assert scores["micro_f1"] > 0.6
    assert scores["lp_integral_fraction"] > 0.95
    _, integral = m.predict(Xt, return_integral=True)
    assert integral.mean() == scores["lp_integral_fraction"]


def test_label_values_and_single_label(tmp_path):
    """Y may be any matrix with two values per column (here −1/+1, and strings), predicted
    back in those values; a 1-D Y is one binary label with 1-D predictions; both survive a
    model file."""
    X, Y = _data()
    ref = MultiLabelSVM(max_iter=5, random_state=0).fit(X, Y)
    pm = MultiLabelSVM(max_iter=5, random_state=0).fit(X, 2 * Y - 1)
    np.testing.assert_array_equal(pm.predict(X), 2 * ref.predict(X) - 1)
    assert pm.score(X, 2 * Y - 1) == ref.score(X, Y)
    names = np.where(Y == 1, "yes", "no")
    sm = MultiLabelSVM(max_iter=5, random_state=0).fit(X, names)
    np.testing.assert_array_equal(sm.predict(X), np.where(ref.predict(X) == 1, "yes", "no"))
    sm.save(tmp_path / "s.npz")
    np.testing.assert_array_equal(dualstruct.load(tmp_path / "s.npz").predict(X), sm.predict(X))
    one = MultiLabelSVM(max_iter=5, random_state=0).fit(X, Y[:, 0])
    assert one.predict(X).shape == (len(X),) and list(one.classes_) == [0, 1]
    one.save(tmp_path / "one.npz")
    np.testing.assert_array_equal(dualstruct.load(tmp_path / "one.npz").predict(X), one.predict(X))


def test_multilabel_scores_match_scikit_learn():
    from sklearn.metrics import accuracy_score, f1_score, hamming_loss, jaccard_score

    rng = np.random.default_rng(0)
    for _ in range(30):
        T = rng.integers(0, 2, (int(rng.integers(1, 15)), int(rng.integers(2, 5))))
        P = rng.integers(0, 2, T.shape)
        T[:, 0] = P[:, 0] = 0  # a label with no positive at all
        s = multilabel_scores(T, P)
        ref = {
            "hamming_loss": hamming_loss(T, P),
            "subset_accuracy": accuracy_score(T, P),
            "jaccard": jaccard_score(T, P, average="samples", zero_division=1),
            "example_f1": f1_score(T, P, average="samples", zero_division=1),
            "micro_f1": f1_score(T, P, average="micro", zero_division=0),
            "macro_f1": f1_score(T, P, average="macro", zero_division=1),
        }
        for key, value in ref.items():
            assert s[key] == pytest.approx(value, abs=1e-12), key


def test_multilabel_label_scores_top_features_and_jobs():
    """label_scores is each label's own score ⟨w_l, x⟩ + b_l; top_features ranks by
    magnitude; threads predict the same."""
    from dualstruct import MultiLabelSVM

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    Y = (X[:, :3] + 0.2 * rng.normal(size=(400, 3)) > 0).astype(int)
    svm = MultiLabelSVM(edges="chain", max_iter=40, random_state=0).fit(X, Y)
    scores = svm.label_scores(X)
    assert scores.shape == (400, 3)
    assert np.allclose(scores, X @ svm.unary_weights_ + svm.intercept_)
    top = svm.top_features(2, feature_names=list("abcde"))
    assert set(top) == {0, 1, 2} and top[1][0][0] == "b"
    one = svm.predict(X)
    svm.set_params(n_jobs=2)
    assert np.array_equal(one, svm.predict(X))
    with pytest.raises(ValueError, match="feature_names has 2 names for 5 features"):
        svm.top_features(2, feature_names=["a", "b"])
