"""CoNLL / CoNLL-U loaders, token features, chunk metrics, the tagger and the command line."""

import gzip
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

import dualstruct
from dualstruct import StructuredSVM
from dualstruct.cli import main
from dualstruct.datasets.conll import (
    fetch_conll2000,
    fetch_ud_czech,
    load_conll,
    load_conllu,
    split_column,
)
from dualstruct.features import TokenFeatures, short_shape, word_shape
from dualstruct.metrics import chunk_scores, chunks, label_scores, token_accuracy
from dualstruct.tags import is_chunk_tagset, to_bio, to_iobes

CONLL = """-DOCSTART- -X- O

He PRP B-NP
reckons VBZ B-VP
the DT B-NP
current JJ I-NP
account NN I-NP
. . O

Confidence NN B-NP
in IN B-PP
the DT B-NP
pound NN I-NP
"""

CONLLU = """# sent_id = 1
# text = Vidím psa.
1-2\tVidím\t_\t_\t_\t_\t_\t_\t_\t_
1\tVidí\tvidět\tVERB\tVB-S---3P-AA---\tNumber=Sing\t0\troot\t_\t_
2\tm\tjá\tPRON\tPP-S1--1-------\tCase=Nom\t1\tnsubj\t_\t_
3\tpsa\tpes\tNOUN\tNNMS4-----A----\tCase=Acc\t1\tobj\t_\t_
3.1\tx\tx\tX\tX--------------\t_\t_\t_\t_\t_
4\t.\t.\tPUNCT\tZ:-------------\t_\t1\tpunct\t_\t_

"""


@pytest.fixture
def conll_file(tmp_path):
    p = tmp_path / "train.txt.gz"
    with gzip.open(p, "wt") as fh:
        fh.write(CONLL)
    return p


def test_load_conll(conll_file):
    sents, labels = load_conll(conll_file)
    assert len(sents) == 2 and sents[0][0] == ("He", "PRP")
    assert list(labels[1]) == ["B-NP", "B-PP", "B-NP", "I-NP"]
    sents, labels = load_conll(conll_file, label_column=1)
    assert sents[0][1] == ("reckons", "B-VP") and labels[0][1] == "VBZ"
    raw, none = load_conll(conll_file, label_column=None)
    assert none is None and raw[0][0] == ("He", "PRP", "B-NP")


@pytest.mark.parametrize(
    "text, match",
    [
        ("a B\nb C D\n", r":2: expected 2 columns"),
        ("word\n", r":1: a token line needs at least 2 columns"),
        ("\n\n", "no sentences"),
    ],
)
def test_load_conll_errors(tmp_path, text, match):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_conll(p)


def test_bytes_that_are_not_utf8_are_reported_with_their_line(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes("a B-NP\n\nb I-NP\nd\u00e9j\u00e0 O\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.txt:4: not UTF-8 text \(byte 0xe9 at column 2"):
        load_conll(p)
    g = tmp_path / "ok.txt.gz"
    with gzip.open(g, "wb") as fh:
        fh.write("d\u00e9j\u00e0 O\r\nb O\r\n".encode())
    sents, labels = load_conll(g)
    assert sents[0][0] == ("d\u00e9j\u00e0",) and list(labels[0]) == ["O", "O"]
    # lines ended by a lone carriage return (old Mac files) as text mode reads them
    cr = tmp_path / "cr.txt"
    cr.write_bytes(b"the DT\rcat NN\r\ra DT\rdog NN\r")
    sents, labels = load_conll(cr)
    assert sents == [[("the",), ("cat",)], [("a",), ("dog",)]]


def test_load_conllu(tmp_path):
    p = tmp_path / "a.conllu"
    p.write_text(CONLLU)
    sents, labels = load_conllu(p, "xpos")
    assert list(labels[0]) == [
        "VB-S---3P-AA---",
        "PP-S1--1-------",
        "NNMS4-----A----",
        "Z:-------------",
    ]
    assert sents[0][0] == ("Vidí", "vidět", "VERB", "_", "Number=Sing")
    _, lab = load_conllu(p, "upos+feats")
    assert lab[0][0] == "VERB|Number=Sing"
    p.write_text(CONLLU.replace("\tobj\t_\t_", "\tobj\t_"))
    with pytest.raises(ValueError, match=r"a\.conllu:6: a CoNLL-U word line needs 10"):
        load_conllu(p)
    with pytest.raises(ValueError, match="label must be one of"):
        load_conllu(p, "lemma")


def test_feature_dicts_are_the_matrix_rows():
    """The per-token dicts (CRFsuite's input) hold exactly the matrix's non-zeros, by name."""
    sents = [[("The", "DT"), ("cat", "NN")], [("A", "DT"), ("dog", "NN"), ("barks", "VBZ")]]
    for f in (TokenFeatures(min_count=2), TokenFeatures(hashing=64)):
        f.fit(sents)
        test = sents + [[("zebra", "NN"), ("cat", "VBZ")]]
        X = f.transform(test).X.toarray()
        dicts = [row for sent in f.feature_dicts(test) for row in sent]
        assert len(dicts) == X.shape[0]
        for row, d in zip(X, dicts):
            if f.vocabulary_ is None:  # hashed: compare the total mass
                assert sum(d.values()) == pytest.approx(row.sum())
            else:
                named = np.zeros_like(row)
                for name, value in d.items():
                    named[f.vocabulary_[name]] += value
                assert np.array_equal(named, row)


def test_features_shapes_and_vocabulary():
    assert word_shape("McDonald's-99") == "XxXxxxxx'x-dd" and short_shape("XXxxdd") == "Xxd"
    sents = [[("The", "DT"), ("cat", "NN")], [("A", "DT"), ("dog", "NN"), ("barks", "VBZ")]]
    f = TokenFeatures(min_count=1)
    D = f.fit_transform(sents)
    assert D.n_tokens == 5 and D.n_sequences == 2
    assert "w=cat" in f.vocabulary_ and "c0[0]=NN" in f.vocabulary_
    assert "c0[-1|0]=DT|NN" in f.vocabulary_ and "suf2=at" in f.vocabulary_
    assert np.array_equal(D.X.toarray(), f.transform(sents).X.toarray())
    f2 = TokenFeatures(min_count=2).fit(sents)
    assert "w=cat" not in f2.vocabulary_ and "c0[0]=NN" in f2.vocabulary_
    # unseen words map to no column, the bias is always there
    X = f2.transform([[("zebra", "NN")]]).X
    assert X[0, f2.vocabulary_["bias"]] == 1.0
    from sklearn.exceptions import NotFittedError

    from dualstruct.tagger import SequenceTagger

    with pytest.raises(NotFittedError):
        TokenFeatures().transform(sents)
    with pytest.raises(NotFittedError):
        SequenceTagger().predict(sents)
    # tokens with a column missing (or one too many) are refused, also after a round trip
    for feats in (f2, TokenFeatures.from_arrays(*f2.to_arrays())):
        assert feats.n_columns_ == 2
        with pytest.raises(
            ValueError, match="the tokens have 1 columns, the features were fitted on tokens of 2"
        ):
            feats.transform([[("zebra",)]])
        with pytest.raises(ValueError, match="have 3 columns"):
            feats.transform([[("zebra", "NN", "B-NP")]])
    # hashing keeps a fixed width
    assert TokenFeatures(hashing=64).fit_transform(sents).X.shape == (5, 64)
    # persistence
    header, arrays = f.to_arrays()
    g = TokenFeatures.from_arrays(header, arrays)
    assert g.vocabulary_ == f.vocabulary_


def test_crfsuite_style_dict_features():
    sents = [[{"word": "a", "len": 1, "upper": False}, {"word": "b", "len": 2.5, "upper": True}]]
    f = TokenFeatures()
    X = f.fit_transform(sents).X.toarray()
    assert X[1, f.vocabulary_["len"]] == 2.5 and X[1, f.vocabulary_["upper"]] == 1.0
    assert "upper" in f.vocabulary_ and X[0, f.vocabulary_["upper"]] == 0.0
    with pytest.raises(TypeError, match="value of type list"):
        f.transform([[{"word": [1]}]])
    with pytest.raises(ValueError, match="sentence 0 is empty"):
        f.transform([[]])


def test_chunks_follow_conlleval():
    assert chunks(["B-NP", "I-NP", "O", "B-VP"]) == {("NP", 0, 2), ("VP", 3, 4)}
    # IOB1: I- starts a chunk after O or a different type; B- splits two adjacent chunks
    assert chunks(["I-NP", "I-NP", "B-NP", "I-VP"]) == {("NP", 0, 2), ("NP", 2, 3), ("VP", 3, 4)}
    assert chunks(["S-NP", "B-VP", "E-VP"]) == {("NP", 0, 1), ("VP", 1, 3)}
    t = [np.array(["B-NP", "I-NP", "O", "B-VP"])]
    p = [np.array(["B-NP", "B-NP", "O", "B-VP"])]
    s = chunk_scores(t, p)["overall"]
    assert s["precision"] == pytest.approx(1 / 3) and s["recall"] == pytest.approx(1 / 2)
    assert token_accuracy(t, p) == 0.75
    assert label_scores(t, p)["B-NP"]["precision"] == 0.5


def test_tag_schemes_round_trip():
    rng = np.random.default_rng(0)
    tags = ["O", "B-NP", "I-NP", "B-VP", "I-PP"]
    for _ in range(200):
        seq = list(rng.choice(tags, size=rng.integers(1, 8)))
        assert chunks(to_iobes(seq)) == chunks(seq)
        assert chunks(to_bio(to_iobes(seq))) == chunks(seq)
    assert list(to_iobes(["B-NP", "I-NP", "B-NP", "O"])) == ["B-NP", "E-NP", "S-NP", "O"]
    assert is_chunk_tagset(["B-NP", "O"]) and not is_chunk_tagset(["NN", "B-NP"])


def _run(argv):
    out = io.StringIO()
    code = main(argv, out=out)
    return code, out.getvalue()


def test_cli_train_predict_evaluate_info_resume(conll_file, tmp_path, capsys):
    model = tmp_path / "chunker.npz"
    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(model),
            "--max-iter",
            "6",
            "--check-every",
            "3",
            "--dev",
            str(conll_file),
            "--tag-scheme",
            "iobes",
            "--save-state",
        ]
    )
    assert code == 0 and "pass    6/6" in out and "model saved to" in out
    tagger = dualstruct.load(model)
    assert isinstance(tagger, dualstruct.tagger.SequenceTagger)

    code, out = _run(["evaluate", str(model), str(conll_file), "--json"])
    res = json.loads(out)
    assert code == 0 and res["chunks"]["overall"]["f1"] == 1.0 and res["token_accuracy"] == 1

    code, out = _run(["evaluate", str(model), str(conll_file)])
    assert "chunks (conlleval)" in out and "token accuracy: 100.00%" in out

    pred = tmp_path / "pred.txt"
    code, out = _run(["predict", str(model), str(conll_file), "-o", str(pred)])
    lines = pred.read_text().splitlines()
    assert lines[0] == "-DOCSTART- -X- O" and lines[2] == "He PRP B-NP B-NP"
    # the output may be the input: the predictions are written to it, not into an empty file
    same = tmp_path / "same.txt"
    same.write_text(gzip.open(conll_file, "rt").read())
    code, out = _run(["predict", str(model), str(same), "-o", str(same)])
    assert code == 0 and same.read_text().splitlines() == lines
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".part") == []
    # ... also through a symbolic link, which stays a link; the file keeps its mode
    same.write_text(gzip.open(conll_file, "rt").read())
    same.chmod(0o600)
    link = tmp_path / "link.txt"
    link.symlink_to(same)
    code, out = _run(["predict", str(model), str(link), "-o", str(link)])
    assert code == 0 and link.is_symlink() and same.read_text().splitlines() == lines
    assert same.stat().st_mode & 0o777 == 0o600
    # input without the label column
    nolab = tmp_path / "nolab.txt"
    nolab.write_text("He PRP\nreckons VBZ\n")
    code, out = _run(["predict", str(model), str(nolab)])
    assert out.splitlines() == ["He PRP B-NP", "reckons VBZ B-VP"]

    code, out = _run(["info", str(model), "--json"])
    info = json.loads(out)
    assert info["passes"] == 6 and info["tag_scheme"] == "iobes" and info["resumable"]

    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(tmp_path / "m2.npz"),
            "--resume",
            str(model),
            "--max-iter",
            "9",
            "--tag-scheme",
            "iobes",
        ]
    )
    assert code == 0 and "pass    9/9" in out
    assert dualstruct.load(tmp_path / "m2.npz").svm_.n_iter_ == 9
    code, _ = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(tmp_path / "m3.npz"),
            "--resume",
            str(model),
            "--max-iter",
            "9",
            "--window",
            "1",
        ]
    )
    assert code == 2 and "--window 1 (the model has 2)" in capsys.readouterr().err
    code, _ = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(tmp_path / "m3.npz"),
            "--resume",
            str(model),
            "--max-iter",
            "9",
            "--tag-scheme",
            "none",
        ]
    )
    assert code == 2 and "--tag-scheme none (the model has 'iobes')" in capsys.readouterr().err


def test_cli_conllu(tmp_path):
    p = tmp_path / "a.conllu"
    p.write_text(CONLLU * 3)
    model = tmp_path / "pos.npz"
    code, _ = _run(
        [
            "train",
            str(p),
            "-o",
            str(model),
            "--format",
            "conllu",
            "--label",
            "upos",
            "--max-iter",
            "5",
        ]
    )
    assert code == 0
    code, out = _run(["predict", str(model), str(p)])
    rows = [r.split("\t") for r in out.splitlines() if r and r[0].isdigit()]
    assert [r[3] for r in rows[:5]] == ["_", "VERB", "PRON", "NOUN", "X"]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["train", "missing.txt", "-o", "m.npz"], "no such file: missing.txt"),
        (["evaluate", "missing.npz", "x"], "no such model file"),
        (["info", "missing.npz"], "no such model file"),
    ],
)
def test_cli_errors(argv, match, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_cli_bad_file_names_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("a B-NP\nb I-NP extra\n")
    assert main(["train", str(bad), "-o", str(tmp_path / "m.npz")]) == 2
    assert "bad.txt:2: expected 2 columns" in capsys.readouterr().err
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"junk")
    assert main(["info", str(junk)]) == 2
    # files of other kinds: a NumPy array, a text file (np.load would try to unpickle it)
    np.save(tmp_path / "arr.npy", np.arange(3))
    for other in (tmp_path / "arr.npy", bad):
        capsys.readouterr()
        assert main(["info", str(other)]) == 2
        err = capsys.readouterr().err
        assert f"{other.name}: not a dualstruct model file (not an .npz archive)" in err
        assert "pickle" not in err
    with pytest.raises(SystemExit):
        main(["train", str(bad), "-o", "m.npz", "-C", "-1"])


def test_conll2000_real_files(data_dir):
    train = fetch_conll2000("train", data_home=data_dir)
    test = fetch_conll2000("test", data_home=data_dir)
    assert len(train) == 8936 and sum(len(s) for s in train) == 211727
    assert len(test) == 2012 and sum(len(s) for s in test) == 47377
    X, y = split_column(train, 1, drop=(2,))
    assert X[0][0] == ("Confidence",) and y[0][0] == "NN"


def test_czech_conllu_real_files(data_dir):
    sents, labels = load_conllu(data_dir / "ud_czech" / "cs_cltt-ud-train.conllu.gz", "xpos")
    assert len(sents) == 467 and sum(len(s) for s in sents) == 13894
    assert len(set(np.concatenate(labels))) == 304


def test_pooled_czech_split(data_dir, tmp_path, monkeypatch):
    """The large-tag-set split of the data README: 971 XPOS tags in training, 237 of the
    test set's 946 unseen."""
    Xtr, ytr = fetch_ud_czech("pooled-train", data_home=data_dir)
    Xte, yte = fetch_ud_czech("pooled-test", data_home=data_dir)
    assert (len(Xtr), sum(map(len, ytr)), len(Xte), sum(map(len, yte))) == (
        2379,
        41520,
        1919,
        27567,
    )
    train_tags, test_tags = set(np.concatenate(ytr)), set(np.concatenate(yte))
    assert (len(train_tags), len(test_tags), len(test_tags - train_tags)) == (971, 946, 237)
    assert all(tok[3] == "_" for sent in Xtr[:50] for tok in sent)  # XPOS hidden from features
    with pytest.raises(ValueError, match="split must be one of"):
        fetch_ud_czech("pooled")
    monkeypatch.delenv("DUALSTRUCT_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="ud_czech/cs_cac-ud-test.conllu.gz"):
        fetch_ud_czech("pooled-test", data_home=tmp_path)


@pytest.mark.realdata
def test_chunker_on_conll2000_subset(data_dir):
    from dualstruct import StructuredSVM
    from dualstruct.tagger import SequenceTagger

    Xtr, ytr = split_column(fetch_conll2000("train", data_home=data_dir)[:1500], 2)
    Xte, yte = split_column(fetch_conll2000("test", data_home=data_dir)[:400], 2)
    tagger = SequenceTagger(
        TokenFeatures(),
        StructuredSVM(C=0.1, fit_intercept=False, max_iter=15, random_state=0),
        tag_scheme="iobes",
    ).fit(Xtr, ytr)
    f1 = chunk_scores(yte, tagger.predict(Xte))["overall"]["f1"]
    assert 0.88 < f1 < 0.97
    last = tagger.svm_.history_.last_checked()
    assert 0 < last.dual <= last.primal


@pytest.mark.realdata
def test_cli_on_czech_treebank(data_dir, tmp_path):
    train = data_dir / "ud_czech" / "cs_cltt-ud-train.conllu.gz"
    dev = data_dir / "ud_czech" / "cs_cltt-ud-dev.conllu.gz"
    model = tmp_path / "upos.npz"
    code, out = _run(
        [
            "train",
            str(train),
            "-o",
            str(model),
            "--format",
            "conllu",
            "--label",
            "upos",
            "--max-iter",
            "10",
            "--dev",
            str(dev),
        ]
    )
    assert code == 0
    code, out = _run(["evaluate", str(model), str(dev), "--json"])
    assert code == 0 and json.loads(out)["token_accuracy"] > 0.9


def test_cli_slack_rescaling_and_cutting_plane(conll_file, tmp_path):
    for extra in (
        ["--rescaling", "slack", "--slack-search", "angular"],
        ["--solver", "cutting_plane", "--rescaling", "slack"],
    ):
        model = tmp_path / "m.npz"
        code, out = _run(["train", str(conll_file), "-o", str(model), "--max-iter", "20", *extra])
        assert code == 0, out
        code, out = _run(["info", str(model), "--json"])
        params = json.loads(out)["params"]
        assert params["rescaling"] == "slack"


def test_cli_guards(conll_file, tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert main(["train", str(conll_file), "-o", str(model), "--max-iter", "2"]) == 0
    # a final model without solver state cannot be resumed
    assert (
        main(
            [
                "train",
                str(conll_file),
                "-o",
                str(tmp_path / "m2.npz"),
                "--resume",
                str(model),
                "--max-iter",
                "4",
            ]
        )
        == 2
    )
    assert "holds no solver state" in capsys.readouterr().err
    # missing output folder is refused before training
    assert main(["train", str(conll_file), "-o", str(tmp_path / "nodir" / "m.npz")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # label column out of range, CoNLL-U read as CoNLL, a broken gzip file
    assert main(["train", str(conll_file), "-o", str(model), "--label-column", "3"]) == 2
    assert "--label-column 3 does not exist" in capsys.readouterr().err
    conllu = tmp_path / "a.conllu"
    conllu.write_text(CONLLU.split("\n", 2)[2])
    assert main(["train", str(conllu), "-o", str(model)]) == 2
    assert "use --format conllu" in capsys.readouterr().err
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00junk")
    assert main(["train", str(broken), "-o", str(model)]) == 2
    assert "cannot be read" in capsys.readouterr().err
    # IOBES needs chunk tags
    assert (
        main(
            [
                "train",
                str(conll_file),
                "-o",
                str(model),
                "--label-column",
                "1",
                "--tag-scheme",
                "iobes",
            ]
        )
        == 2
    )
    assert "needs chunk tags" in capsys.readouterr().err


def test_conllu_with_comments_read_as_conll_gets_a_hint(tmp_path):
    p = tmp_path / "a.conllu"
    p.write_text(CONLLU)
    with pytest.raises(ValueError, match="looks like CoNLL-U"):
        load_conll(p)


def test_cli_says_when_training_did_not_converge(conll_file, tmp_path, recwarn):
    model = tmp_path / "m.npz"
    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(model),
            "--max-iter",
            "2",
            "--check-every",
            "1",
            "--tol",
            "1e-9",
        ]
    )
    assert code == 0 and "note: not converged: the relative gap" in out
    assert "--max-iter 2 passes" in out
    assert not [w for w in recwarn if "ConvergenceWarning" in type(w.message).__name__]


def test_cli_checks_the_model_path_before_training(conll_file, tmp_path, capsys):
    """A folder, a training or dev file, or a model given as the output is refused before
    any training, naming both paths (also through a symbolic link)."""
    import shutil

    folder = tmp_path / "out"
    folder.mkdir()
    code, _ = _run(["train", str(conll_file), "-o", str(folder)])
    assert code != 0 and "it is a folder" in capsys.readouterr().err
    dev = tmp_path / "dev.txt.gz"
    shutil.copy(conll_file, dev)
    before = dev.read_bytes()
    link = tmp_path / "link.npz"
    link.symlink_to(dev)
    for target in (dev, link):
        code, _ = _run(["train", str(conll_file), "--dev", str(dev), "-o", str(target)])
        assert code != 0 and "is the --dev file" in capsys.readouterr().err
    code, _ = _run(["train", str(conll_file), "-o", str(conll_file)])
    assert code != 0 and "is the training file" in capsys.readouterr().err
    assert dev.read_bytes() == before
    model = tmp_path / "m.npz"
    assert _run(["train", str(conll_file), "-o", str(model), "--max-iter", "2"])[0] == 0
    saved = model.read_bytes()
    code, _ = _run(["predict", str(model), str(conll_file), "-o", str(model)])
    assert code != 0 and "is the model file" in capsys.readouterr().err
    assert model.read_bytes() == saved


def test_cli_rescues_the_model_when_the_save_fails(conll_file, tmp_path, monkeypatch):
    """A save that fails after training (a full disk) keeps the model in a rescue file,
    says where, and exits non-zero."""
    import errno

    from dualstruct import io as model_io

    model = tmp_path / "m.npz"
    real_save = model_io.save_arrays

    def full_disk(path, *args, **kwargs):
        if str(path) == str(model):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(path, *args, **kwargs)

    monkeypatch.setattr(model_io, "save_arrays", full_disk)
    monkeypatch.chdir(tmp_path)
    code, out = _run(["train", str(conll_file), "-o", str(model), "--max-iter", "2"])
    assert code == 1 and "No space left on device" in out
    rescued = [p for p in tmp_path.iterdir() if ".rescued-" in p.name]
    assert len(rescued) == 1 and f"saved to {rescued[0]}" in out.replace("\n", " ")
    assert dualstruct.load(rescued[0]).predict([[("Confidence", "NN")]])


def test_cli_predict_output_is_written_atomically(conll_file, tmp_path, monkeypatch):
    """A failure while writing predictions (a full disk) leaves the old output whole."""
    import dualstruct.cli as cli

    model = tmp_path / "m.npz"
    assert _run(["train", str(conll_file), "-o", str(model), "--max-iter", "2"])[0] == 0
    out_file = tmp_path / "pred.txt"
    out_file.write_text("previous predictions\n")

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "write_predictions", failing)
    with pytest.raises(OSError):
        cli.main(["predict", str(model), str(conll_file), "-o", str(out_file)])
    assert out_file.read_text() == "previous predictions\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz", "pred.txt", "train.txt.gz"]


def test_cli_finishes_the_save_despite_ctrl_c(conll_file, tmp_path, monkeypatch):
    import os
    import signal

    from dualstruct import io as model_io

    model = tmp_path / "m.npz"
    real_save = model_io.save_arrays

    def interrupted_save(path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the file is being written
        return real_save(path, *args, **kwargs)

    monkeypatch.setattr(model_io, "save_arrays", interrupted_save)
    code, out = _run(["train", str(conll_file), "-o", str(model), "--max-iter", "2"])
    assert code == 0 and f"saving {model}" in out and f"still saving {model}" in out
    assert dualstruct.load(model).predict([[("Confidence", "NN")]])


def test_one_long_token_does_not_cost_memory_per_feature():
    """Sorting the vocabulary must not build a fixed-width string array (features × the
    longest name): one 20,000-character token among 2,000 words stays cheap."""
    import tracemalloc

    from dualstruct.features import TokenFeatures

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(2000)]
    sents = [[(words[k],) for k in rng.integers(0, 2000, 10)] for _ in range(300)]
    sents[0][0] = ("x" * 20_000,)
    tracemalloc.start()
    feats = TokenFeatures(window=0, conjunctions=False)
    feats.fit_transform(sents)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 40 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    names = sorted(feats.vocabulary_, key=feats.vocabulary_.get)
    assert names == sorted(names)  # the vocabulary is still ordered by name


def test_progress_eta_counts_checks_and_a_sublinear_gap():
    """The time left uses the wall time per pass (checks included) and a gap falling as
    1 / passes, not a straight line on a log scale (which promised 2-3x too little)."""
    from types import SimpleNamespace

    from dualstruct.cli import Progress

    progress = Progress(max_iter=1000, tol=0.01, out=io.StringIO())
    first = SimpleNamespace(passes=1, time=1.0, eval_time=0.0, relative_gap=float("nan"))
    assert math.isnan(progress.eta(first, now=100.0))  # a first pass may include compiling
    progress.checks = [(5, 0.2), (10, 0.1)]
    later = SimpleNamespace(passes=10, time=9.0, eval_time=0.0, relative_gap=0.1)
    # 9 passes took 27 s of wall time (checks too): 3 s a pass; the gap 0.1 at pass 10
    # reaches 0.01 near pass 100 at a 1 / passes rate: 90 passes left
    assert progress.eta(later, now=127.0) == pytest.approx(90 * 3.0)


def test_a_directory_is_called_a_directory(tmp_path, capsys):
    """A folder given where a file belongs is named as a folder, not as a missing file."""
    from dualstruct.datasets.conll import load_conll

    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match="is a directory, not a model file"):
        dualstruct.load(folder)
    with pytest.raises(IsADirectoryError, match="is a directory, not a file"):
        load_conll(folder)
    for argv in (
        ["info", folder],
        ["train", folder, "-o", tmp_path / "m.npz"],
        ["predict", folder, folder],
        ["multilabel", "train", folder, "-o", tmp_path / "m.npz"],
    ):
        assert main([str(a) for a in argv]) == 2
        assert f"{folder} is a directory, not a" in capsys.readouterr().err
    with pytest.raises(FileNotFoundError, match="no such model file"):
        dualstruct.load(tmp_path / "missing.npz")


def test_cli_checkpoints_are_compact_honest_and_survive_a_full_disk(
    conll_file, tmp_path, monkeypatch
):
    """--checkpoint-every: a compressed checkpoint whose size is reported and whose header
    says training was still running; it resumes; a checkpoint that cannot be written (a full
    disk) is reported and training goes on to a saved model. Before pass 1 the command says
    what it is doing."""
    import errno

    from dualstruct import io as model_io

    model = tmp_path / "m.npz"
    seen = {}
    real_save = dualstruct.tagger.SequenceTagger.save

    def spy(self, path, include_solver_state=False, compress=True):
        if str(path).endswith(".ckpt"):
            seen["compress"] = compress
            out = real_save(self, path, include_solver_state, compress)
            seen["header"] = model_io.load_arrays(path)[0]
            seen["copy"] = tmp_path / "copy.npz"
            seen["copy"].write_bytes(Path(path).read_bytes())
            return out
        return real_save(self, path, include_solver_state, compress)

    monkeypatch.setattr(dualstruct.tagger.SequenceTagger, "save", spy)
    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(model),
            "--max-iter",
            "4",
            "--check-every",
            "2",
            "--checkpoint-every",
            "2",
            "--tol",
            "0",
        ]
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("reading ") and "extracting features" in out
    assert lines.index(next(x for x in lines if x.startswith("features ready"))) < lines.index(
        next(x for x in lines if x.startswith("pass    1/4"))
    )
    assert f"checkpoint {model}.ckpt: " in out and " MB in " in out
    assert seen["compress"] not in (False, 0, None)  # deflated (at a fast level)
    assert seen["header"]["svm"]["stop_reason"] == "running"
    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(tmp_path / "r.npz"),
            "--resume",
            str(seen["copy"]),
            "--max-iter",
            "6",
        ]
    )
    assert code == 0 and dualstruct.load(tmp_path / "r.npz").svm_.n_iter_ == 6

    def full_disk(self, path, include_solver_state=False, compress=True):
        if str(path).endswith(".ckpt"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(self, path, include_solver_state, compress)

    monkeypatch.setattr(dualstruct.tagger.SequenceTagger, "save", full_disk)
    code, out = _run(
        [
            "train",
            str(conll_file),
            "-o",
            str(tmp_path / "f.npz"),
            "--max-iter",
            "4",
            "--checkpoint-every",
            "2",
            "--tol",
            "0",
        ]
    )
    assert code == 0 and "checkpoint not written (No space left on device)" in out
    assert "pass    4/4" in out and dualstruct.load(tmp_path / "f.npz").svm_.n_iter_ == 4


def test_decision_function_top_features_and_jobs(conll_file, tmp_path):
    """The score of the predicted tags is ⟨w, φ(x, ŷ)⟩ and no other tagging scores higher;
    top_features names the strongest features; n_jobs threads predict the same tags; the
    command line shows both (info --top, predict --jobs)."""
    from itertools import product

    sents, labels = load_conll(conll_file)
    tagger = dualstruct.tagger.SequenceTagger(
        TokenFeatures(),
        StructuredSVM(C=1.0, fit_intercept=False, max_iter=30, tol=0, random_state=0),
    ).fit(sents, labels)
    svm = tagger.svm_
    scores = tagger.decision_function(sents)
    data = tagger.features_.transform(sents)
    model = svm.model_
    for i, (lo, hi) in enumerate(zip(data.offsets[:-1], data.offsets[1:])):
        x = data.X[lo:hi]
        best = max(
            model.joint_feature(x, np.array(y)) @ svm.coef_
            for y in product(range(len(svm.classes_)), repeat=hi - lo)
        )
        assert scores[i] == pytest.approx(best, rel=1e-9, abs=1e-12)
    top = tagger.top_features(3)
    assert set(top) == set(svm.classes_.tolist())
    names = set(tagger.features_.get_feature_names_out())
    for feats in top.values():
        assert 1 <= len(feats) <= 3 and all(f in names for f, _ in feats)
        assert [abs(w) for _, w in feats] == sorted((abs(w) for _, w in feats), reverse=True)
    U = svm.unigram_weights_
    label0 = svm.classes_[0]
    col = tagger.features_.vocabulary_[top[label0][0][0]]
    assert U[0, col] == top[label0][0][1] and abs(U[0]).max() == abs(top[label0][0][1])
    many = [s for s in sents for _ in range(100)]
    one = tagger.predict(many)
    svm.set_params(n_jobs=2)
    assert all(np.array_equal(a, b) for a, b in zip(one, tagger.predict(many)))
    with pytest.raises(ValueError, match="n_jobs must be None or a nonzero integer"):
        svm.set_params(n_jobs=0).predict(data)

    path = tmp_path / "m.npz"
    tagger.svm_.set_params(n_jobs=None)
    tagger.save(path)
    code, out = _run(["info", str(path), "--top", "2"])
    assert code == 0 and "strongest 2 features per label" in out and " -> " in out
    code, out = _run(["info", str(path), "--top", "2", "--json"])
    info = json.loads(out)
    assert len(info["top_features"][str(label0)]) == 2 and "transitions" in info
    code, out = _run(["predict", str(path), str(conll_file), "--jobs", "2"])
    assert code == 0 and "B-NP" in out


def test_vocabulary_is_compact_and_builds_its_lookup_only_when_asked():
    from dualstruct.features import Vocabulary

    names = ["a", "b=ü", "c|d"]
    vocab = Vocabulary.from_names(names)
    assert vocab._index is None and list(vocab) == names and len(vocab) == 3
    assert vocab.names().tolist() == names and vocab._index is None
    again = Vocabulary.from_bytes(vocab.to_bytes(), 3)
    assert list(again) == names
    assert vocab["b=ü"] == 1 and vocab.get("zz") is None and "c|d" in vocab
    assert vocab == {"a": 0, "b=ü": 1, "c|d": 2}
    with pytest.raises(ValueError, match="offsets"):
        Vocabulary(b"ab", np.array([0, 3]))


def test_model_files_with_the_json_vocabulary_still_load(tmp_path):
    import json

    f = TokenFeatures(window=0, affixes=0, conjunctions=False).fit([[("Hi",), ("there",)]])
    header, arrays = f.to_arrays()
    names = list(f.vocabulary_)
    old = {"vocabulary": np.frombuffer(json.dumps(names).encode(), dtype=np.uint8)}
    g = TokenFeatures.from_arrays(header, old)
    h = TokenFeatures.from_arrays(header, arrays)
    assert list(g.vocabulary_) == list(h.vocabulary_) == names
