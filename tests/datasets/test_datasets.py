import gzip

import numpy as np
import pytest

from dualstruct.datasets import fetch_ocr, load_ocr
from dualstruct.datasets import ocr as ocr_module


def _ocr_line(lid, letter, nxt, word, pos, fold, pixels):
    return "\t".join(map(str, [lid, letter, nxt, word, pos, fold, *pixels])) + "\n"


def _tiny_ocr_text(rng):
    lines, lid = [], 1
    for word, (letters, fold) in enumerate([("cat", 0), ("do", 3)], start=1):
        for pos, ch in enumerate(letters, start=1):
            nxt = -1 if pos == len(letters) else lid + 1
            lines.append(_ocr_line(lid, ch, nxt, word, pos, fold, rng.integers(0, 2, 128)))
            lid += 1
    return lines


@pytest.mark.parametrize("compressed", [False, True])
def test_load_ocr_plain_and_gzip(tmp_path, compressed):
    lines = _tiny_ocr_text(np.random.default_rng(0))
    path = tmp_path / ("letter.data.gz" if compressed else "letter.data")
    opener = gzip.open if compressed else open
    with opener(path, "wt") as fh:
        fh.writelines(lines)
    X, y, folds = load_ocr(path)
    assert [list(w) for w in y] == [list("cat"), list("do")]
    assert [x.shape for x in X] == [(3, 128), (2, 128)]
    assert list(folds) == [0, 3]
    expected = np.array(lines[1].split("\t")[6:], dtype=float)
    assert np.array_equal(X[0][1], expected)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda ls: ls[:1] + ["1\ta\t2\n"] + ls[2:], r":2: expected 134 tab-separated fields"),
        (lambda ls: [ls[0].replace("\tc\t", "\tC\t", 1)] + ls[1:], r":1: letter field 'C'"),
        (lambda ls: ls[:-1], r":4: file ends inside a word"),
        (lambda ls: [ls[0].replace("\t0\t", "\t5\t", 1)] + ls[1:], r":2: fold changes"),
        (lambda ls: [ls[0][:-2] + "2\n"] + ls[1:], r":1: pixel values must be 0 or 1"),
        (lambda ls: [ls[0].replace("\t1\t", "\tx\t", 1)] + ls[1:], r":1: non-numeric"),
        # a line deleted inside a word, two lines swapped: the next-id chain breaks
        (lambda ls: ls[:1] + ls[2:], r":2: letter id 3, but the previous letter's next id is 2"),
        (lambda ls: [ls[1], ls[0]] + ls[2:], r":1: position 2 in word 1, expected 1"),
        (lambda ls: [ls[0], ls[2], ls[1]] + ls[3:], r":2: letter id 3, but the previous"),
    ],
)
def test_load_ocr_malformed(tmp_path, edit, match):
    lines = edit(_tiny_ocr_text(np.random.default_rng(1)))
    path = tmp_path / "letter.data"
    path.write_text("".join(lines))
    with pytest.raises(ValueError, match=str(path).replace(".", r"\.") + match):
        load_ocr(path)


def test_fetch_ocr_offline_says_where_to_put_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("DUALSTRUCT_DATA", str(tmp_path / "nowhere"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def no_network(url, target, timeout=30.0):
        raise OSError("network unreachable")

    monkeypatch.setattr(ocr_module, "download", no_network)
    with pytest.raises(FileNotFoundError, match="put letter.data.gz at .*cache/dualstruct/ocr"):
        fetch_ocr()
    with pytest.raises(FileNotFoundError, match="DUALSTRUCT_DATA"):
        fetch_ocr(download_if_missing=False)


def test_fetch_ocr_rejects_a_download_with_the_wrong_content(tmp_path, monkeypatch):
    monkeypatch.delenv("DUALSTRUCT_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    lines = _tiny_ocr_text(np.random.default_rng(2))

    def fake_download(url, target, timeout=30.0):
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(target, "wt") as fh:
            fh.writelines(lines)
        return target

    monkeypatch.setattr(ocr_module, "download", fake_download)
    with pytest.raises(ValueError, match="content digest"):
        fetch_ocr()
    assert not (tmp_path / "cache/dualstruct/ocr/letter.data.gz").exists()
    assert (tmp_path / "cache/dualstruct/ocr/letter.data.gz.rejected").exists()


def test_fetch_ocr_from_data_home(tmp_path):
    (tmp_path / "ocr").mkdir()
    with gzip.open(tmp_path / "ocr/letter.data.gz", "wt") as fh:
        fh.writelines(_tiny_ocr_text(np.random.default_rng(3)))
    X, y, folds = fetch_ocr(data_home=tmp_path)
    assert len(X) == 2


def test_real_ocr_file(ocr_data):
    X, y, folds = ocr_data
    assert len(X) == 6877
    assert sum(len(w) for w in y) == 52152
    assert list(np.bincount(folds)) == [626, 704, 684, 698, 693, 651, 739, 717, 690, 675]
    assert ocr_module.content_digest(X, y, folds) == ocr_module.OCR_CONTENT_SHA256
    assert min(len(w) for w in y) == 3 and max(len(w) for w in y) == 14


def test_make_chain_is_deterministic_and_learnable():
    from dualstruct import StructuredSVM
    from dualstruct.datasets import make_chain

    X, y = make_chain(
        80, 8, n_labels=12, n_features=300, nnz_per_token=6, noise=0.05, random_state=0
    )
    X2, y2 = make_chain(
        80, 8, n_labels=12, n_features=300, nnz_per_token=6, noise=0.05, random_state=0
    )
    assert all((a != b).nnz == 0 for a, b in zip(X, X2))
    assert all(np.array_equal(a, b) for a, b in zip(y, y2))
    assert all(x.shape[1] == 300 and x.shape[0] == len(t) for x, t in zip(X, y))
    assert max(t.max() for t in y) < 12 and min(len(t) for t in y) >= 1
    assert all(np.all(np.diff(x.indptr) <= 6) for x in X)
    est = StructuredSVM(C=1.0, max_iter=30, random_state=0).fit(X[:60], y[:60])
    assert est.score(X[60:], y[60:]) > 0.8
    with pytest.raises(ValueError, match="signature_per_token"):
        make_chain(signature_per_token=9)
    with pytest.raises(ValueError, match="n_labels"):
        make_chain(n_labels=0)
