"""``solver="auto"``: the rule, what each estimator records, model files, the command line."""

import gzip
import io

import numpy as np
import pytest

import dualstruct
from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
from dualstruct.cli import main
from dualstruct.datasets import make_chain
from dualstruct.estimators import auto
from dualstruct.models import ChainModel, GraphCRF, MultiLabelModel, grid_edges
from dualstruct.solvers import GDMM, BlockBCFW, MultiLabelGDMM

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


# -- the rule ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "n_labels, expected",
    [
        (971, "gdmm"),  # the pooled Czech XPOS split
        (954, "gdmm"),  # the synthetic chain of the GDMM benchmarks
        (26, "bcfw"),  # OCR
        (40, "bcfw"),  # CoNLL-2000 chunking, IOBES tags
        (22, "bcfw"),  # CoNLL-2000 chunking, BIO tags
    ],
)
def test_chains_get_gdmm_from_500_labels_on(n_labels, expected):
    choice = auto.choose_chain(ChainModel(n_labels, 20))
    assert choice.solver == expected
    assert f"{n_labels} labels" in choice.reason and "BENCHMARKS.md" in choice.reason


def test_chains_that_gdmm_does_not_train_get_bcfw():
    big = ChainModel(971, 20)
    assert "margin rescaling" in auto.choose_chain(big, rescaling="slack").reason
    assert auto.choose_chain(big, rescaling="slack").solver == "bcfw"
    assert auto.choose_chain(big, backend="spark").solver == "bcfw"


def test_solver_options_of_one_solver_choose_it():
    assert auto.choose_chain(ChainModel(26, 5), solver_options={"rho": 0.3}).solver == "gdmm"
    choice = auto.choose_chain(ChainModel(971, 5), solver_options={"atom_steps": 2})
    assert choice.solver == "bcfw" and "atom_steps" in choice.reason
    # options both take leave the rule to decide
    assert auto.choose_chain(ChainModel(26, 5), solver_options={}).solver == "bcfw"


def _multilabel(n, d, L, pairs, **kw):
    weights = (d + 1) * L + pairs
    return auto.choose_multilabel(MultiLabelModel, n, L, pairs, weights, pairs < L, **kw)


def test_multilabel_rule_on_the_benchmark_problems():
    # bibtex's full graph: BCFW's classic step would keep 11.1 GiB, GDMM certifies 1%
    bibtex = _multilabel(4880, 1836, 159, 12561)
    assert bibtex.solver == "gdmm" and "11.1 GiB" in bibtex.reason
    assert _multilabel(1500, 103, 14, 91).solver == "bcfw"  # yeast: BCFW certifies sooner
    assert _multilabel(1211, 294, 6, 15).solver == "bcfw"  # scene
    assert _multilabel(4880, 1836, 10, 45).solver == "gdmm"  # bibtex's 10 labels
    assert _multilabel(4880, 1836, 20, 190).solver == "gdmm"  # and 20 (also at C = 10)


@pytest.mark.parametrize(
    "setting, words",
    [
        ({"rescaling": "slack"}, "margin rescaling"),
        ({"interactions": "table"}, "2×2"),
        ({"inference": "exact"}, "inference='exact'"),
        ({"backend": "spark"}, "spark"),
    ],
)
def test_multilabel_settings_gdmm_does_not_train_get_bcfw(setting, words):
    choice = _multilabel(4880, 1836, 159, 12561, **setting)
    assert choice.solver == "bcfw" and words in choice.reason


# -- the estimators ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chain():
    return make_chain(20, 5, 4, 12, random_state=0)


@pytest.fixture(scope="module")
def multilabel():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    Y = (X[:, :3] + 0.3 * rng.normal(size=(40, 3)) > 0).astype(int)
    return X, Y


def test_the_default_is_auto_and_records_its_choice(chain, multilabel):
    X, y = chain
    svm = StructuredSVM(max_iter=5, random_state=0).fit(X, y)
    assert svm.solver == "auto" and svm.solver_choice_.solver == "bcfw"
    assert isinstance(svm.solver_, BlockBCFW) and "4 labels" in svm.solver_choice_.reason
    ml = MultiLabelSVM(max_iter=5, random_state=0).fit(*multilabel)
    assert ml.solver == "auto" and ml.solver_choice_.solver == "bcfw"
    assert isinstance(ml.solver_, BlockBCFW)
    mc = MultiClassSVM(max_iter=5, random_state=0).fit(multilabel[0], multilabel[1][:, 0])
    assert mc.solver == "auto" and mc.solver_choice_.solver == "bcfw"
    edges = grid_edges(2, 2)
    Xg = [(np.eye(4)[:, :2] + i, edges) for i in range(4)]
    Yg = [np.array([0, 1, 0, 1])] * 4
    g = SSVM(GraphCRF(n_states=2, n_features=2), max_iter=5, random_state=0).fit(Xg, Yg)
    assert g.solver == "auto" and g.solver_choice_.solver == "bcfw"
    explicit = StructuredSVM(solver="ssg", max_iter=3, random_state=0).fit(X, y)
    assert explicit.solver_choice_ == ("ssg", "set by the solver parameter")


def test_auto_trains_gdmm_where_the_rule_says_so(chain, multilabel, monkeypatch):
    monkeypatch.setattr(auto, "CHAIN_GDMM_MIN_LABELS", 4)
    monkeypatch.setattr(auto, "MULTILABEL_GDMM_MIN_WORK", 10)
    svm = StructuredSVM(max_iter=5, random_state=0).fit(*chain)
    assert svm.solver_choice_.solver == "gdmm" and isinstance(svm.solver_, GDMM)
    ml = MultiLabelSVM(max_iter=5, random_state=0).fit(*multilabel)
    assert ml.solver_choice_.solver == "gdmm" and isinstance(ml.solver_, MultiLabelGDMM)
    assert ml.model_.inference_method == "lp"  # what GDMM trains, as with solver="gdmm"


def test_model_files_keep_the_choice_and_an_explicit_solver(chain, tmp_path, monkeypatch):
    X, y = chain
    monkeypatch.setattr(auto, "CHAIN_GDMM_MIN_LABELS", 4)
    svm = StructuredSVM(max_iter=3, tol=0, random_state=0).fit(X, y)
    svm.save(tmp_path / "auto.npz", include_solver_state=True)
    monkeypatch.setattr(auto, "CHAIN_GDMM_MIN_LABELS", 500)  # the rule changed since
    back = dualstruct.load(tmp_path / "auto.npz")
    assert back.solver == "auto" and back.solver_choice_ == svm.solver_choice_
    back.set_params(warm_start=True, max_iter=2).fit(X, y)  # resumes the file's GDMM
    assert isinstance(back.solver_, GDMM) and back.n_iter_ == 5
    StructuredSVM(solver="bcfw", max_iter=2, random_state=0).fit(X, y).save(tmp_path / "b.npz")
    again = dualstruct.load(tmp_path / "b.npz")
    assert again.solver == "bcfw" and again.solver_choice_.solver == "bcfw"


def test_a_file_of_auto_without_its_choice_is_refused(chain, tmp_path):
    header, arrays = StructuredSVM(max_iter=2, random_state=0).fit(*chain).to_arrays()
    del header["solver_choice"]
    with pytest.raises(ValueError, match="solver_choice"):
        StructuredSVM.from_arrays(header, arrays, "m.npz")
    header["solver_choice"] = ["auto", "x"]
    with pytest.raises(ValueError, match="solver_choice"):
        StructuredSVM.from_arrays(header, arrays, "m.npz")


# -- the command line -------------------------------------------------------------------------
CONLL = "".join(
    f"{w} {p} {t}\n" + ("\n" if k % 4 == 3 else "")
    for k, (w, p, t) in enumerate(
        [("the", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), (".", ".", "O")] * 6
    )
)


def test_the_command_line_says_the_solver_before_the_first_pass(tmp_path, monkeypatch):
    train = tmp_path / "train.txt.gz"
    with gzip.open(train, "wt") as fh:
        fh.write(CONLL)
    out = io.StringIO()
    assert main(["train", str(train), "-o", str(tmp_path / "m.npz"), "--max-iter", "2"], out) == 0
    lines = out.getvalue().splitlines()
    said = [i for i, line in enumerate(lines) if line.startswith("solver bcfw: 4 labels")]
    passes = [i for i, line in enumerate(lines) if line.startswith("pass ")]
    assert said and passes and said[0] < passes[0], lines
    monkeypatch.setattr(auto, "CHAIN_GDMM_MIN_LABELS", 4)
    out = io.StringIO()
    assert main(["train", str(train), "-o", str(tmp_path / "g.npz"), "--max-iter", "2"], out) == 0
    assert "solver gdmm: 4 labels, at least 4" in out.getvalue()
    out = io.StringIO()
    assert main(["info", str(tmp_path / "g.npz")], out) == 0
    assert "gdmm (4 labels" in out.getvalue()


def test_the_multilabel_command_line_says_the_solver(tmp_path):
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(30):
        x = rng.normal(size=3)
        labels = ",".join(str(j) for j in range(3) if x[j] > 0) or ""
        rows.append(f"{labels} " + " ".join(f"{j + 1}:{v:.3f}" for j, v in enumerate(x)))
    data = tmp_path / "train.svm"
    data.write_text("\n".join(rows) + "\n")
    out = io.StringIO()
    argv = ["multilabel", "train", str(data), "-o", str(tmp_path / "m.npz"), "--max-iter", "2"]
    assert main(argv, out) == 0
    assert "solver bcfw: 30 examples × 15 weights (3 labels, 3 pairs)" in out.getvalue()
