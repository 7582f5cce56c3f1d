"""Multi-label loaders: LIBSVM multi-label and MULAN ARFF, on small files and the real data."""

import gzip

import numpy as np
import pytest

from dualstruct.datasets.multilabel import (
    fetch_multilabel,
    load_arff,
    load_libsvm_multilabel,
    read_mulan_labels,
)


def _write(tmp_path, name, text):
    path = tmp_path / name
    if name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def test_libsvm_multilabel_rows_widths_and_empty_label_sets(tmp_path):
    path = _write(tmp_path, "a.svm.gz", "0,3 1:0.5 4:2\n 2:1\n2 1:-1.5e-1\n")
    X, Y = load_libsvm_multilabel(path)
    assert X.shape == (3, 4) and Y.shape == (3, 4)
    assert np.allclose(X.toarray(), [[0.5, 0, 0, 2], [0, 1, 0, 0], [-0.15, 0, 0, 0]])
    assert Y.tolist() == [[1, 0, 0, 1], [0, 0, 0, 0], [0, 0, 1, 0]]
    X, Y = load_libsvm_multilabel(path, n_features=10, n_labels=6)
    assert X.shape == (3, 10) and Y.shape == (3, 6)
    # a tab after the labels, a row without features (all zero), blank lines at the end
    path = _write(tmp_path, "b.svm", "0,3\t1:0.5 4:2\n1\n 2:1\n\n\n")
    X, Y = load_libsvm_multilabel(path)
    assert np.allclose(X.toarray(), [[0.5, 0, 0, 2], [0, 0, 0, 0], [0, 1, 0, 0]])
    assert Y.tolist() == [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 0, 0]]


@pytest.mark.parametrize(
    "text, match",
    [
        ("0,x 1:1\n", r"a.svm:1: label 'x'"),
        ("0 1:1\n\n1 1:1\n", r"a.svm:2: empty line"),
        ("1:1 2:1\n", r"a.svm:1: the line must start with the label list"),
        ("0 0:1\n", r"a.svm:1: '0:1' is not index:value"),
        ("0 1:abc\n", r"a.svm:1: 'abc' is not a number"),
        ("0 1:nan\n", r"a.svm:1: value 'nan' is not finite"),
        ("0 1:1 1:2\n", r"a.svm:1: a feature index is repeated"),
        ("0,0 1:1\n", r"a.svm:1: a label is repeated"),
        ("0 1:1\n7 1:1\n", r"a.svm:2: label 7 outside 0..4"),
        ("0 9:1\n", r"a.svm:1: feature 9 beyond the 5 features"),
    ],
)
def test_libsvm_multilabel_errors_name_file_and_line(tmp_path, text, match):
    path = _write(tmp_path, "a.svm", text)
    with pytest.raises(ValueError, match=match):
        load_libsvm_multilabel(path, n_features=5, n_labels=5)


ARFF = """% a comment
@relation 'test'

@attribute f1 numeric
@attribute 'f two' REAL
@attribute lab_b {0,1}
@attribute f3 {0,1}
@attribute lab_a {0,1}

@data
1.5,0,1,1,0
{0 2,3 1,4 1}
"""

XML = """<?xml version="1.0" encoding="utf-8"?>
<labels xmlns="http://mulan.sourceforge.net/labels">
<label name="lab_a"></label>
<label name="lab_b"></label>
</labels>
"""


def test_arff_dense_and_sparse_rows_with_xml_label_names(tmp_path):
    path = _write(tmp_path, "d.arff.gz", ARFF)
    xml = _write(tmp_path, "d.xml", XML)
    assert read_mulan_labels(xml) == ["lab_a", "lab_b"]
    X, Y, features, labels = load_arff(path, xml)
    assert features == ["f1", "f two", "f3"] and labels == ["lab_b", "lab_a"]  # column order
    assert np.allclose(X.toarray(), [[1.5, 0, 1], [2, 0, 1]])
    assert Y.tolist() == [[1, 0], [0, 1]]
    # the same labels given by name, and the last-L convention on a file laid out for it
    assert np.array_equal(load_arff(path, ["lab_a", "lab_b"])[1], Y)
    last = _write(
        tmp_path,
        "e.arff",
        "@relation r\n@attribute x numeric\n@attribute y {0,1}\n@data\n3,1\n0,0\n",
    )
    X, Y, _, names = load_arff(last, 1)
    assert (
        names == ["y"]
        and Y.ravel().tolist() == [1, 0]
        and X.toarray().ravel().tolist() == [3.0, 0.0]
    )


@pytest.mark.parametrize(
    "change, match",
    [
        (("1.5,0,1,1,0", "1.5,0,2,1,0"), r"d.arff:11: label attribute 'lab_b' has value '2'"),
        (("1.5,0,1,1,0", "1.5,?,1,1,0"), r"d.arff:11: missing value for attribute 'f two'"),
        (("1.5,0,1,1,0", "1.5,0,1,1"), r"d.arff:11: 4 values for 5 attributes"),
        (("1.5,0,1,1,0", "x,0,1,1,0"), r"d.arff:11 \(attribute 'f1'\): 'x' is not a number"),
        (("{0 2,3 1,4 1}", "{0 2,9 1}"), r"d.arff:12: bad sparse entry '9 1'"),
        (
            ("@attribute lab_a {0,1}", "@attribute lab_a {0,1,2}"),
            r"label attribute 'lab_a' is not "
            r"binary",
        ),
        (
            ("@attribute f3 {0,1}", "@attribute f3 string"),
            r"d.arff:7: attribute 'f3' has type "
            r"'string'",
        ),
        (("@data", "@dat"), r"d.arff:10: unexpected header line"),
    ],
)
def test_arff_errors_name_file_and_line(tmp_path, change, match):
    path = _write(tmp_path, "d.arff", ARFF.replace(*change))
    with pytest.raises(ValueError, match=match):
        load_arff(path, ["lab_a", "lab_b"])


def test_arff_label_selection_errors(tmp_path):
    path = _write(tmp_path, "d.arff", ARFF)
    with pytest.raises(ValueError, match="not declared in the file"):
        load_arff(path, ["lab_a", "lab_c"])
    with pytest.raises(ValueError, match="say which attributes are labels"):
        load_arff(path)
    with pytest.raises(ValueError, match="not a valid XML"):
        load_arff(path, _write(tmp_path, "bad.xml", "<labels><label"))
    # a string is a file name, never a sequence of one-letter names
    for text in ("lab_a", "14", str(tmp_path / "missing.xml")):
        with pytest.raises(ValueError, match=r"is not an existing file: pass the MULAN XML"):
            load_arff(path, text)
    upper = _write(tmp_path, "labels.XML", XML)
    assert load_arff(path, upper)[3] == ["lab_b", "lab_a"]


@pytest.mark.parametrize(
    "name, L, d, n_train, n_test, card",
    [
        ("yeast", 14, 103, 1500, 917, 4.23),
        ("scene", 6, 294, 1211, 1196, 1.06),
        ("bibtex", 159, 1836, 4880, 2515, 2.38),
    ],
)
def test_real_multilabel_data_arff_and_libsvm_copies_agree(
    data_dir, name, L, d, n_train, n_test, card
):
    X, Y = fetch_multilabel(name, "train", data_home=data_dir)
    assert X.shape == (n_train, d) and Y.shape == (n_train, L)
    assert Y.sum(axis=1).mean() == pytest.approx(card, abs=0.005)
    X2, Y2 = fetch_multilabel(name, "train", fmt="libsvm", data_home=data_dir)
    assert (X != X2).nnz == 0 and np.array_equal(Y, Y2)
    Xt, Yt = fetch_multilabel(name, "test", data_home=data_dir)
    assert Xt.shape == (n_test, d) and Yt.shape == (n_test, L)
    with pytest.raises(FileNotFoundError, match="multilabel/nope"):
        fetch_multilabel("nope", data_home=data_dir)


def test_libsvm_stray_label_index_is_refused_by_line(tmp_path):
    from dualstruct.datasets import load_libsvm_multilabel

    path = tmp_path / "big.svm"
    path.write_text("1 1:0.5\n0,2000000000 2:1\n")
    with pytest.raises(ValueError, match=r"big\.svm:2: label 2000000000 would make a 2 x "):
        load_libsvm_multilabel(path)
