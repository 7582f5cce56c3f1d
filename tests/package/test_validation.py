"""Every array that reaches a kernel is checked at the boundary: model files and checkpoints
(edited by hand, checksums recomputed), options, graph inputs, labels and features."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import dualstruct
from dualstruct import SSVM, MultiLabelSVM, StructuredSVM, io, pack_sequences
from dualstruct.datasets import make_chain
from dualstruct.models import EdgeFeatureGraphCRF, GraphCRF, MultiClassModel, grid_edges
from dualstruct.sequences import PackedSequences


def _edit(src, dst, **changes):
    """Rewrite the model file ``src`` to ``dst`` with arrays replaced (checksums recomputed,
    as anyone writing a file by hand would); ``header=`` edits the header in place."""
    header, arrays = io.load_arrays(src)
    edit_header = changes.pop("header", None)
    header = {k: v for k, v in header.items() if k not in ("arrays", "format", "format_version")}
    if edit_header is not None:
        edit_header(header)
    arrays.update(changes)
    io.save_arrays(dst, header, arrays)
    return dst


def _run_python(code, cwd):
    """Run ``code`` in a fresh interpreter (an out-of-bounds write would kill this one)."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc.returncode, proc.stdout + proc.stderr


# -- checkpoints of the chain ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def chain_checkpoint(tmp_path_factory):
    X, y = make_chain(20, 5, 3, 10, random_state=0)
    path = tmp_path_factory.mktemp("chain") / "ck.npz"
    svm = StructuredSVM(max_iter=3, tol=0, random_state=0).fit(X, y)
    svm.save(path, include_solver_state=True)
    return path, X, y


def test_chain_resume_refuses_out_of_range_atom_labels(chain_checkpoint, tmp_path):
    src, X, y = chain_checkpoint
    _, arrays = io.load_arrays(src)
    labels = [10_000_000, 3, -3]
    paths = [
        _edit(
            src,
            tmp_path / f"bad{label}.npz",
            **{"state.atom_labels": np.full_like(arrays["state.atom_labels"], label)},
        )
        for label in labels
    ]
    code, out = _run_python(
        f"""
        import dualstruct
        from dualstruct.datasets import make_chain
        X, y = make_chain(20, 5, 3, 10, random_state=0)
        for path in {[str(p) for p in paths]!r}:
            est = dualstruct.load(path)
            est.set_params(warm_start=True, max_iter=5)
            try:
                est.fit(X, y)
            except ValueError as exc:
                print("refused:", exc)
        """,
        tmp_path,
    )
    assert code == 0, out  # no segfault
    for label in labels:
        assert (
            f"bad{label}.npz: saved atom pool: array 'atom_labels' holds the label {label}" in out
        )


def test_chain_resume_checks_every_state_field(chain_checkpoint, tmp_path):
    src, X, y = chain_checkpoint
    _, arrays = io.load_arrays(src)
    weights = arrays["state.atom_weights"]
    count = arrays["state.atom_count"]
    w = arrays["state.w"]
    cases = {
        "'atom_count'": {"state.atom_count": count + 100},
        "sums to": {"state.atom_weights": weights * 3},
        "negative": {"state.atom_weights": np.where(weights > 0, -weights, 0.0)},
        "NaN or infinite": {"state.w": np.full_like(w, np.nan)},
        "'atom_labels' has shape": {"state.atom_labels": arrays["state.atom_labels"][:-1]},
    }
    for i, (message, change) in enumerate(cases.items()):
        path = _edit(src, tmp_path / f"bad{i}.npz", **change)
        est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
        with pytest.raises(ValueError, match=message) as err:
            est.fit(X, y)
        assert f"bad{i}.npz" in str(err.value)

    def edit(field, value):
        def apply(header):
            if field in header["solver_state"]["scalars"]:
                header["solver_state"]["scalars"][field] = value
            else:
                header["solver_state"][field] = value

        return apply

    for i, (field, value, message) in enumerate(
        [
            ("capacity", 1000, "'atom_labels' has shape"),
            ("capacity", "4", "must be"),
            ("kappa", -1.0, "kappa"),
            ("passes", -4, "'passes'"),
            ("rng", {"state": 1}, "random generator"),
            ("final_choice", "x", "'final_choice'"),
        ]
    ):
        path = _edit(src, tmp_path / f"field{i}.npz", header=edit(field, value))
        est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
        with pytest.raises(ValueError, match=message):
            est.fit(X, y)
    # the untouched checkpoint still resumes
    est = dualstruct.load(src).set_params(warm_start=True, max_iter=5)
    assert est.fit(X, y).n_iter_ > 3


def test_cli_train_resume_refuses_an_edited_checkpoint(tmp_path):
    conll = tmp_path / "train.txt"
    conll.write_text(
        "He PRP B-NP\nreckons VBZ B-VP\nthe DT B-NP\naccount NN I-NP\n\n"
        "Confidence NN B-NP\nin IN B-PP\nthe DT B-NP\npound NN I-NP\n"
    )
    model = tmp_path / "m.npz"
    base = [sys.executable, "-m", "dualstruct", "train", str(conll), "-o", str(model)]
    run = subprocess.run(
        [*base, "--max-iter", "2", "--save-state"], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr
    _, arrays = io.load_arrays(model)
    key = "svm.state.atom_labels"
    _edit(model, model, **{key: np.full_like(arrays[key], 10_000_000)})
    run = subprocess.run(
        [*base, "--max-iter", "4", "--resume", str(model)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode not in (0, -11, 139), run.stderr
    assert "atom_labels" in run.stderr and "m.npz" in run.stderr


# -- multi-label checkpoints ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def multilabel_problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    Y = (X[:, :4] + 0.3 * rng.normal(size=(30, 4)) > 0).astype(int)
    return X, Y


@pytest.mark.parametrize("label", [-3, 2])
def test_multilabel_resume_refuses_non_binary_atom_labels(multilabel_problem, tmp_path, label):
    X, Y = multilabel_problem
    svm = MultiLabelSVM(edges="chain", max_iter=3, tol=0, random_state=0).fit(X, Y)
    svm.save(tmp_path / "ck.npz", include_solver_state=True)
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    atoms = arrays["state.atom_labels"].copy()
    atoms[::3] = label
    path = _edit(tmp_path / "ck.npz", tmp_path / "bad.npz", **{"state.atom_labels": atoms})
    est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
    with pytest.raises(ValueError, match=rf"bad.npz.*'atom_labels' holds the label {label}"):
        est.fit(X, Y)


def test_multilabel_gdmm_resume_refuses_nan_state(multilabel_problem, tmp_path):
    X, Y = multilabel_problem
    svm = MultiLabelSVM(edges="chain", solver="gdmm", max_iter=3, tol=0, random_state=0)
    svm.fit(X, Y).save(tmp_path / "ck.npz", include_solver_state=True)
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    q = arrays["state.q"].copy()
    q[0, 0] = np.inf
    path = _edit(tmp_path / "ck.npz", tmp_path / "bad.npz", **{"state.q": q})
    est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
    with pytest.raises(ValueError, match=r"bad.npz.*'q' holds NaN or infinite"):
        est.fit(X, Y)


# -- the other solvers' states --------------------------------------------------------------------
#: (solver, state array, edit, what the error says); run in a child process, where an edit
#: that reached a kernel unchecked could write out of bounds
STATE_EDITS = [
    ("ssg", "v", "a * np.nan", "'v' holds NaN"),
    ("ssg", "scalars", "a - 10.5", "step count"),
    ("cutting_plane", "alpha", "a - 1.0", "negative"),
    ("cutting_plane", "psi", "a[:, :-1]", "array shapes"),
    ("gdmm", "act", "a + 50", "out of range"),
    ("gdmm", "act", "np.where(np.arange(a.shape[1]) == 1, a[:, :1], a)", "state twice"),
    ("gdmm", "q_e", "a[:-1]", "'q_e' has shape"),
    ("gdmm", "q", "a * np.inf", "'q' holds NaN"),
    ("gdmm", "pair_a", "a + 9", "inactive slot"),
    ("gdmm", "row_u", "a * 0 - 1", "edges differ"),
    ("bcfw", "block_gaps", "a * np.inf", "'block_gaps' holds infinite"),
    ("bcfw", "scalars", "a + [0.0, 1e300, 0.0]", "step count"),
]


def test_solver_states_are_checked(tmp_path):
    code, out = _run_python(
        f"""
        import warnings
        import numpy as np
        import dualstruct
        from dualstruct import StructuredSVM, io
        from dualstruct.datasets import make_chain
        warnings.simplefilter("ignore")
        X, y = make_chain(15, 5, 3, 8, random_state=1)
        for case, (solver, name, edit, _) in enumerate({STATE_EDITS!r}):
            path = f"{{solver}}.npz"
            svm = StructuredSVM(solver=solver, max_iter=3, tol=0, random_state=0).fit(X, y)
            svm.save(path, include_solver_state=True)
            header, arrays = io.load_arrays(path)
            skip = ("arrays", "format", "format_version")
            header = {{k: v for k, v in header.items() if k not in skip}}
            a = arrays["state." + name]
            with np.errstate(invalid="ignore"):
                arrays["state." + name] = eval(edit)
            io.save_arrays(f"bad{{case}}.npz", header, arrays)
            est = dualstruct.load(f"bad{{case}}.npz").set_params(warm_start=True, max_iter=5)
            try:
                est.fit(X, y)
                print(case, "accepted")
            except ValueError as exc:
                print(case, "refused:", exc)
            # the unedited state resumes
            est = dualstruct.load(path).set_params(warm_start=True, max_iter=4)
            print(case, "resumed", est.fit(X, y).n_iter_ > 3)
        """,
        tmp_path,
    )
    assert code == 0, out  # no crash
    lines = out.splitlines()
    for case, (_, _, _, message) in enumerate(STATE_EDITS):
        refused = next(line for line in lines if line.startswith(f"{case} refused:"))
        assert f"bad{case}.npz" in refused and message in refused, refused
        assert f"{case} resumed True" in lines


def test_block_gaps_may_be_nan_after_a_new_C(tmp_path):
    X, y = make_chain(15, 5, 3, 8, random_state=1)
    svm = StructuredSVM(max_iter=2, tol=0, random_state=0, warm_start=True).fit(X, y)
    svm.solver_.set_C(2.0)  # the blocks' gaps are unknown (NaN) until the next pass
    svm.C = 2.0
    svm.save(tmp_path / "ck.npz", include_solver_state=True)
    est = dualstruct.load(tmp_path / "ck.npz").set_params(max_iter=3)
    assert est.fit(X, y).n_iter_ > 2


# -- graph models ---------------------------------------------------------------------------------
def _graphs(n=10, seed=0, features=False):
    rng = np.random.default_rng(seed)
    edges, z = grid_edges(2, 3, directions=True)
    X = [
        (rng.normal(size=(6, 4)), edges, z) if features else (rng.normal(size=(6, 4)), edges)
        for _ in range(n)
    ]
    Y = [(x[0][:, 0] > 0).astype(int) for x in X]
    return X, Y


@pytest.mark.parametrize("sweeps", [0, -1, 2.5, True])
def test_graph_lp_sweeps_must_be_positive(sweeps):
    with pytest.raises(ValueError, match="lp_sweeps must be an integer >= 1"):
        GraphCRF(2, 4, lp_sweeps=sweeps)
    with pytest.raises(ValueError, match="lp_sweeps"):
        EdgeFeatureGraphCRF(2, 4, 2, lp_sweeps=sweeps)


@pytest.mark.parametrize(
    "option, value",
    [("enumerate_up_to", -1), ("lp_tol", float("nan")), ("lp_tol", -1.0), ("n_states", 2.5)],
)
def test_graph_options_are_checked(option, value):
    with pytest.raises(ValueError, match=option):
        GraphCRF(**{"n_states": 2, "n_features": 4, option: value})


def test_graph_model_file_with_bad_lp_sweeps(tmp_path):
    X, Y = _graphs()
    svm = SSVM(GraphCRF(2, 4, inference="lp"), max_iter=5, random_state=0).fit(X, Y)
    svm.save(tmp_path / "g.npz")

    def zero_sweeps(header):
        header["model"]["params"]["lp_sweeps"] = 0

    path = _edit(tmp_path / "g.npz", tmp_path / "bad.npz", header=zero_sweeps)
    with pytest.raises(ValueError, match=r"bad.npz.*lp_sweeps must be an integer >= 1"):
        dualstruct.load(path)


def test_graph_edges_in_pytorch_geometric_layout():
    X, Y = _graphs(features=True)
    model = EdgeFeatureGraphCRF(2, 4, 2)
    ref = SSVM(model, max_iter=20, random_state=0).fit(X, Y).coef_
    flipped = [(nodes, edges.T, z.T) for nodes, edges, z in X]  # (2, E) and (F, E)
    got = SSVM(model, max_iter=20, random_state=0).fit(flipped, Y).coef_
    np.testing.assert_array_equal(ref, got)
    X1, Y1 = _graphs()
    ref = SSVM(GraphCRF(2, 4), max_iter=20, random_state=0).fit(X1, Y1).coef_
    got = SSVM(GraphCRF(2, 4), max_iter=20, random_state=0).fit([(n, e.T) for n, e in X1], Y1)
    np.testing.assert_array_equal(ref, got.coef_)
    # (2, 2) is ambiguous: read as the documented two (u, v) rows
    nodes = np.zeros((3, 4))
    data = GraphCRF(2, 4).block_data([(nodes, np.array([[0, 1], [1, 2]]))], [np.zeros(3, int)])
    assert data.kernel.edges.tolist() == [[0, 1], [1, 2]]


def test_graph_input_errors():
    model = GraphCRF(2, 4)
    nodes = np.zeros((3, 4))
    y = [np.zeros(3, int)]
    with pytest.raises(ValueError, match=r"X\[0\]: edges must hold integer node indices, got 0.5"):
        model.block_data([(nodes, np.array([[0, 1.5]]) - 1)], y)
    with pytest.raises(ValueError, match=r"X\[0\]: edges must name nodes 0 … 2"):
        model.block_data([(nodes, [[0, -1]])], y)
    with pytest.raises(ValueError, match=r"X\[0\]: edges must name nodes 0 … 2"):
        model.block_data([(nodes, [[0, 2**40]])], y)
    with pytest.raises(ValueError, match=r"X\[0\]: edges must be an \(E, 2\) array"):
        model.block_data([(nodes, np.zeros((3, 3), int))], y)
    with pytest.raises(TypeError, match=r"Y\[0\] must hold integer labels"):
        model.block_data([(nodes, [[0, 1]])], [np.array(["a", "b", "a"])])
    with pytest.raises(ValueError, match=r"Y\[0\] must hold integer labels, got 0.9"):
        model.block_data([(nodes, [[0, 1]])], [np.zeros(3) + 0.9])
    with pytest.raises(ValueError, match=r"Y\[0\] must hold labels in 0 … 1, got 2"):
        model.block_data([(nodes, [[0, 1]])], [np.array([0, 1, 2])])
    edge_model = EdgeFeatureGraphCRF(2, 4, 3)
    with pytest.raises(ValueError, match=r"X\[0\] must have 3 finite edge features"):
        edge_model.block_data([(nodes, [[0, 1], [1, 2]], np.ones((2, 2)))], y)
    with pytest.raises(ValueError, match=r"X\[0\] contains NaN or infinite edge features"):
        edge_model.block_data([(nodes, [[0, 1]], [[np.nan, 0, 0]])], y)


@pytest.mark.parametrize("empty", [np.zeros((0, 2), int), [], np.zeros((2, 0))])
def test_graphs_without_edges(empty):
    rng = np.random.default_rng(0)
    X = [(rng.normal(size=(4, 3)), empty) for _ in range(6)]
    Y = [(x[0][:, 0] > 0).astype(int) for x in X]
    svm = SSVM(GraphCRF(2, 3), max_iter=50, random_state=0).fit(X, Y)
    assert [p.shape for p in svm.predict(X[:2])] == [(4,), (4,)]
    Xf = [(n, e, np.zeros((0, 2))) for n, e in X]
    assert SSVM(EdgeFeatureGraphCRF(2, 3, 2), max_iter=5).fit(Xf, Y).n_iter_ >= 1


# -- labels ---------------------------------------------------------------------------------------
def test_sequence_labels_must_be_int32_integers():
    X, y = make_chain(5, 4, 3, 6, random_state=0)
    for bad, message in [
        ([yi + 10**10 for yi in y], "10000000002, outside the 32-bit"),
        ([yi + 2**32 for yi in y], "outside the 32-bit"),
        ([yi + 0.9 for yi in y], "must hold integer labels, got 0.9|got 1.9|got 2.9"),
        ([yi.astype(str) for yi in y], "must hold integer labels"),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            pack_sequences(X, bad)
    Xp = sp.csr_matrix(np.eye(3))
    with pytest.raises(ValueError, match="32-bit"):
        PackedSequences(Xp, np.array([0, 3]), np.array([0, 1, 2**32 + 1]))
    # whole floats are fine
    data = pack_sequences(X, [yi.astype(float) for yi in y])
    assert data.labels.dtype == np.int32


def test_chain_model_refuses_labels_beyond_its_classes():
    from dualstruct.models import ChainModel
    from dualstruct.solvers import BCFW, GDMM

    X, y = make_chain(5, 4, 3, 6, random_state=0)
    y[0] = y[0].copy()
    y[0][0] = 7
    for solver in (BCFW, GDMM):
        with pytest.raises(ValueError, match="label code 7"):
            solver(ChainModel(3, 6), max_iter=2).fit(pack_sequences(X, y))


def test_multiclass_model_labels_and_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    for bad in ([y + 0.9, "got 0.9|got 1.9"], [y + 2**32, "32-bit"], [y + 10**10 + 2, "32-bit"]):
        with pytest.raises(ValueError, match=bad[1]):
            SSVM(MultiClassModel(2, 3)).fit(X, bad[0])
    for value in (np.nan, np.inf):
        Xb = X.copy()
        Xb[4, 2] = value
        for form in (Xb, sp.csr_matrix(Xb)):
            with pytest.raises(ValueError, match=r"NaN or infinite values \(row 4\)"):
                SSVM(MultiClassModel(2, 3), max_iter=5).fit(form, y)


def test_user_model_labels_must_be_int32():
    from dualstruct.models.user import UserModel

    model = UserModel(MultiClassModel(2, 3))
    with pytest.raises(ValueError, match=r"Y\[1\] holds the label 10000000002"):
        model.block_data([np.zeros(3), np.zeros(3)], [1, 10**10 + 2])


def test_multiclass_model_file_with_nan_weights(tmp_path):
    from dualstruct import MultiClassSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    MultiClassSVM(max_iter=5).fit(X, y).save(tmp_path / "m.npz")
    _, arrays = io.load_arrays(tmp_path / "m.npz")
    path = _edit(tmp_path / "m.npz", tmp_path / "bad.npz", coef=arrays["coef"] * np.nan)
    with pytest.raises(ValueError, match="bad.npz.*NaN"):
        dualstruct.load(path)


def test_model_file_fields_are_checked(multilabel_problem, tmp_path):
    X, Y = multilabel_problem
    MultiLabelSVM(edges="chain", max_iter=2).fit(X, Y).save(tmp_path / "ml.npz")
    _, arrays = io.load_arrays(tmp_path / "ml.npz")
    weights = arrays["loss_weights"].copy()
    weights[1] = np.inf
    path = _edit(tmp_path / "ml.npz", tmp_path / "bad.npz", loss_weights=weights)
    with pytest.raises(ValueError, match="bad.npz.*finite positive"):
        dualstruct.load(path)
    X2, y2 = make_chain(8, 4, 3, 6, random_state=0)
    StructuredSVM(max_iter=2).fit(X2, y2).save(tmp_path / "chain.npz")

    def seed(header):
        header["estimator_params"]["random_state"] = 0.5

    path = _edit(tmp_path / "chain.npz", tmp_path / "seed.npz", header=seed)
    with pytest.raises(ValueError, match="seed.npz.*random_state"):
        dualstruct.load(path)


# -- corrupt archives, overflowing states, header fields ------------------------------------------
def _small_multiclass_file(path):
    from dualstruct import MultiClassSVM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    MultiClassSVM(max_iter=4).fit(X, np.arange(30) % 3).save(path)
    return path


def _rewrite_zip(path, change):
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    change(members)
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_corrupt_archive_members_name_the_file_and_member(tmp_path):
    path = _small_multiclass_file(tmp_path / "m.npz")
    data = bytearray(path.read_bytes())
    data[data.rfind(b"PK\x01\x02") + 10] = 99  # an unknown compression method
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"m\.npz: corrupt .*member '.*\.npy'"):
        dualstruct.load(path)
    path = _small_multiclass_file(tmp_path / "n.npz")

    def break_npy_header(members):
        members["coef.npy"] = members["coef.npy"].replace(b"}", b" ", 1)

    _rewrite_zip(path, break_npy_header)
    with pytest.raises(ValueError, match=r"n\.npz: corrupt .*member 'coef\.npy'"):
        dualstruct.load(path)


def test_scaled_dual_does_not_overflow():
    from dualstruct.solvers.objective import scaled_dual

    assert scaled_dual(1e300, 1e301) == pytest.approx(5e298)
    assert scaled_dual(float("inf"), 1.0) == 0.0  # never an infinite certificate
    assert scaled_dual(float("nan"), 1.0) == 0.0


def _chain_problem():
    return make_chain(8, 4, 3, 6, random_state=0)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_chain_gdmm_checkpoint_with_huge_loss_weights(tmp_path):
    X, y = _chain_problem()
    svm = StructuredSVM(solver="gdmm", max_iter=3, random_state=0).fit(X, y)
    svm.save(tmp_path / "ck.npz", include_solver_state=True)
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    for value in (1e300, -1.0, np.nan):
        weights = arrays["loss_weights"].copy()
        weights[:2] = value
        path = _edit(tmp_path / "ck.npz", tmp_path / "bad.npz", loss_weights=weights)
        with pytest.raises(ValueError, match=r"bad\.npz.*loss_weights"):
            dualstruct.load(path)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_chain_gdmm_checkpoint_marginals_are_distributions(tmp_path):
    X, y = _chain_problem()
    svm = StructuredSVM(solver="gdmm", max_iter=3, random_state=0).fit(X, y)
    svm.save(tmp_path / "ck.npz", include_solver_state=True)
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    for name, factor in (("state.q", 1e300), ("state.q_e", 2.0)):
        path = _edit(tmp_path / "ck.npz", tmp_path / "bad.npz", **{name: arrays[name] * factor})
        est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
        with pytest.raises(ValueError, match=rf"bad\.npz.*'{name[6:]}'"):
            est.fit(X, y)


def _multilabel_small():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 5))
    return X, (X @ rng.normal(size=(5, 4)) > 0).astype(int)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multilabel_gdmm_checkpoint_with_huge_mu(tmp_path):
    X, Y = _multilabel_small()
    svm = MultiLabelSVM(solver="gdmm", max_iter=3, random_state=0).fit(X, Y)
    svm.save(tmp_path / "ck.npz", include_solver_state=True)
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    path = _edit(
        tmp_path / "ck.npz", tmp_path / "bad.npz", **{"state.mu": arrays["state.mu"] + 1e300}
    )
    est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
    with pytest.raises(ValueError, match=r"bad\.npz.*'mu'"):
        est.fit(X, Y)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_multilabel_file_outputs_2d_must_match_the_labels(tmp_path):
    X, Y = _multilabel_small()
    MultiLabelSVM(max_iter=3).fit(X, Y).save(tmp_path / "ml.npz")

    def one_dimensional(header):
        header["outputs_2d"] = False

    path = _edit(tmp_path / "ml.npz", tmp_path / "bad.npz", header=one_dimensional)
    with pytest.raises(ValueError, match=r"bad\.npz.*'outputs_2d'"):
        dualstruct.load(path)


#: (estimator parameter, edited value) of a model file, refused at load naming the parameter
PARAM_EDITS = [
    ("random_state", {}),
    ("random_state", "x"),
    ("random_state", -1),
    ("slack_search", []),
    ("averaging", "x"),
    ("fit_intercept", "x"),
    ("start_end", 1),
    ("warm_start", "x"),
    ("loss_weights", "x"),
    ("C", 1e300),
]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["chain", "multilabel", "multiclass"])
def test_model_file_hyperparameters_are_checked_at_load(tmp_path, kind):

    if kind == "chain":
        X, y = _chain_problem()
        StructuredSVM(max_iter=2).fit(X, y).save(tmp_path / "m.npz")
    elif kind == "multilabel":
        X, Y = _multilabel_small()
        MultiLabelSVM(max_iter=2).fit(X, Y).save(tmp_path / "m.npz")
    else:
        _small_multiclass_file(tmp_path / "m.npz")
    params = io.load_arrays(tmp_path / "m.npz")[0]["estimator_params"]
    for name, value in PARAM_EDITS:
        if name not in params:
            continue

        def change(header, name=name, value=value):
            header["estimator_params"][name] = value

        path = _edit(tmp_path / "m.npz", tmp_path / "bad.npz", header=change)
        with pytest.raises(ValueError, match=rf"bad\.npz.*{name}"):
            dualstruct.load(path)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_chain_file_loss_weights_array_must_match_the_parameter(tmp_path):
    X, y = _chain_problem()
    StructuredSVM(max_iter=2).fit(X, y).save(tmp_path / "m.npz")
    path = _edit(tmp_path / "m.npz", tmp_path / "bad.npz", loss_weights=np.array([2.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match=r"bad\.npz.*'loss_weights'"):
        dualstruct.load(path)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_gdmm_checkpoint_weights_must_be_those_of_the_marginals(tmp_path):
    X, y = _chain_problem()
    StructuredSVM(solver="gdmm", max_iter=3, random_state=0).fit(X, y).save(
        tmp_path / "ck.npz", include_solver_state=True
    )
    _, arrays = io.load_arrays(tmp_path / "ck.npz")
    q = arrays["state.q"].copy()
    row = int(np.flatnonzero((arrays["state.n_act"] >= 2) & (q[:, 0] != q[:, 1]))[0])
    q[row, [0, 1]] = q[row, [1, 0]]  # still a distribution, no longer w's
    path = _edit(tmp_path / "ck.npz", tmp_path / "bad.npz", **{"state.q": q})
    est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
    with pytest.raises(ValueError, match=r"bad\.npz.*'w', 'q' and 'q_e' disagree"):
        est.fit(X, y)
    X, Y = _multilabel_small()
    MultiLabelSVM(solver="gdmm", edges="tree", max_iter=3, random_state=0).fit(X, Y).save(
        tmp_path / "ml.npz", include_solver_state=True
    )
    _, arrays = io.load_arrays(tmp_path / "ml.npz")
    mu = arrays["state.mu"].copy()
    mu[Y == 1] = 0.5  # inside [0, 1] and on active labels, but not what w was built from
    path = _edit(tmp_path / "ml.npz", tmp_path / "bad_ml.npz", **{"state.mu": mu})
    est = dualstruct.load(path).set_params(warm_start=True, max_iter=5)
    with pytest.raises(ValueError, match=r"bad_ml\.npz.*'w', 'mu' and 'q' disagree"):
        est.fit(X, Y)
