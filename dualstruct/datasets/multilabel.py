"""Multi-label data: LIBSVM/SVMlight multi-label files and MULAN ARFF (+ XML label names).

Every loader returns ``(X, Y)`` with ``X`` a CSR matrix of float64 (n × d) and ``Y`` a dense
uint8 matrix (n × L) of 0/1 label indicators. Malformed input raises ``ValueError`` naming
the file and line; nothing is skipped silently.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._base import find_data_file, open_text

__all__ = ["load_libsvm_multilabel", "load_arff", "read_mulan_labels", "fetch_multilabel"]


def _csr(rows_idx, rows_val, n_features):
    indptr = np.zeros(len(rows_idx) + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows_idx], out=indptr[1:])
    indices = np.array([j for r in rows_idx for j in r], dtype=np.int64)
    values = np.array([v for r in rows_val for v in r], dtype=np.float64)
    X = sp.csr_matrix((values, indices, indptr), shape=(len(rows_idx), n_features))
    X.sort_indices()
    return X


def _indicators(label_rows, n_labels):
    Y = np.zeros((len(label_rows), n_labels), dtype=np.uint8)
    for i, labels in enumerate(label_rows):
        Y[i, labels] = 1
    return Y


def _number(text, where):
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{where}: value {text!r} is not finite")
    return value


#: the largest (n, L) 0/1 label matrix the LIBSVM reader infers by itself (a stray label
#: index such as 2e9 would otherwise ask for gigabytes)
MAX_LABEL_MATRIX_BYTES = 2**31
#: the most features the LIBSVM reader infers by itself: every model keeps arrays of a few
#: bytes per feature (the support's row offsets, the weights), so a stray index such as 1e9
#: would ask for gigabytes (2^28, above feature hashing's usual 2^18 to 2^24 columns)
MAX_INFERRED_FEATURES = 2**28


def load_libsvm_multilabel(path, n_features=None, n_labels=None):
    """Read a LIBSVM multi-label file into a CSR feature matrix and a 0/1 label matrix.

    One example per line, ``l1,l2,… j:v j:v …``: 0-based label ids and 1-based feature
    indices (a line starting with a space has no labels).

    Parameters
    ----------
    path : str or Path
        The file, plain or gzip.
    n_features, n_labels : int, optional
        The widths (e.g. those of the training file when reading a test file); features or
        labels beyond them are errors. By default the largest index seen plus one.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        (n, n_features) features.
    Y : ndarray of int
        (n, n_labels) 0/1 label matrix.

    Examples
    --------
    >>> import os, tempfile
    >>> from dualstruct.datasets import load_libsvm_multilabel
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.svm")
    >>> with open(path, "w") as f:
    ...     _ = f.write("0,2 1:0.5 3:1\\n1 2:1\\n")
    >>> X, Y = load_libsvm_multilabel(path)
    >>> X.shape, Y.tolist()
    ((2, 3), [[1, 0, 1], [0, 1, 0]])
    """
    path = Path(path)
    rows_idx, rows_val, label_rows = [], [], []
    max_feature, max_label, max_label_line, max_feature_line = 0, -1, 0, 0
    blank = None  # the first blank line: allowed only at the end of the file
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            where = f"{path}:{lineno}"
            line = line.rstrip("\n\r")
            if not line.strip():
                blank = blank or lineno
                continue
            if blank is not None:
                raise ValueError(
                    f"{path}:{blank}: empty line (an example with no labels "
                    "starts with a space and has features)"
                )
            # the label list ends at the first blank or tab; a leading one means no labels
            head, rest = ("", line) if line[0].isspace() else (line.split(None, 1) + [""])[:2]
            if ":" in head:  # no label field: the line starts with a feature
                raise ValueError(
                    f"{where}: the line must start with the label list "
                    "(comma-separated label ids, or a space for none)"
                )
            labels = []
            for tok in head.split(",") if head else []:
                if not tok.isdigit():
                    raise ValueError(f"{where}: label {tok!r} is not a non-negative integer")
                labels.append(int(tok))
            if len(set(labels)) != len(labels):
                raise ValueError(f"{where}: a label is repeated in {head!r}")
            if labels and n_labels is not None and max(labels) >= n_labels:
                raise ValueError(f"{where}: label {max(labels)} outside 0..{n_labels - 1}")
            idx, val = [], []
            for tok in rest.split():
                j, sep, v = tok.partition(":")
                if not sep or not j.isdigit() or int(j) < 1:
                    raise ValueError(f"{where}: {tok!r} is not index:value with a 1-based index")
                j = int(j) - 1
                if n_features is not None and j >= n_features:
                    raise ValueError(f"{where}: feature {j + 1} beyond the {n_features} features")
                idx.append(j)
                val.append(_number(v, where))
            if len(set(idx)) != len(idx):
                raise ValueError(f"{where}: a feature index is repeated")
            if max(idx, default=-1) + 1 > max_feature:  # a row may be all zero
                max_feature, max_feature_line = max(idx) + 1, lineno
            if labels and max(labels) > max_label:
                max_label, max_label_line = max(labels), lineno
            rows_idx.append(idx)
            rows_val.append(val)
            label_rows.append(labels)
    if not rows_idx:
        raise ValueError(f"{path}: no examples")
    d = max_feature if n_features is None else int(n_features)
    L = max_label + 1 if n_labels is None else int(n_labels)
    if n_features is None and d > MAX_INFERRED_FEATURES:
        raise ValueError(
            f"{path}:{max_feature_line}: feature index {d:,} would make a model over {d:,} "
            f"features (more than {MAX_INFERRED_FEATURES:,}, gigabytes of weights and row "
            "offsets); is the index right? (pass n_features to allow it)"
        )
    if n_labels is None and len(label_rows) * L > MAX_LABEL_MATRIX_BYTES:
        raise ValueError(
            f"{path}:{max_label_line}: label {max_label} would make a {len(label_rows)} x {L} "
            f"label matrix ({len(label_rows) * L:,} bytes); is the label list right? (pass "
            "n_labels to allow it)"
        )
    return _csr(rows_idx, rows_val, d), _indicators(label_rows, L)


def read_mulan_labels(path):
    """The label names of a MULAN XML file (``<label name="...">``, nested or flat).

    Parameters
    ----------
    path : str or Path
        The XML file.

    Returns
    -------
    list of str
        The label attribute names, in file order.

    Examples
    --------
    >>> import os, tempfile
    >>> from dualstruct.datasets import read_mulan_labels
    >>> path = os.path.join(tempfile.mkdtemp(), "labels.xml")
    >>> with open(path, "w") as f:
    ...     _ = f.write('<labels><label name="sports"/><label name="news"/></labels>')
    >>> read_mulan_labels(path)
    ['sports', 'news']
    """
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise ValueError(f"{path}: not a valid XML file ({exc})") from None
    names = [el.get("name") for el in root.iter() if el.tag.split("}")[-1] == "label"]
    if not names or any(n is None for n in names):
        raise ValueError(f"{path}: no <label name=...> elements")
    return names


_ATTRIBUTE = re.compile(r"@attribute\s+('(?:[^'\\]|\\.)*'|\"[^\"]*\"|\S+)\s+(.+)$", re.I)


def _attribute(line, where):
    m = _ATTRIBUTE.match(line)
    if not m:
        raise ValueError(f"{where}: cannot parse the @attribute line")
    name, kind = m.group(1), m.group(2).strip()
    if name[0] in "'\"":
        name = name[1:-1].replace("\\'", "'")
    if kind.lower() in ("numeric", "real", "integer"):
        return name, None
    if kind.startswith("{") and kind.endswith("}"):
        return name, [v.strip().strip("'\"") for v in kind[1:-1].split(",")]
    raise ValueError(
        f"{where}: attribute {name!r} has type {kind!r}; only numeric and "
        "nominal attributes are supported"
    )


def load_arff(path, labels=None):
    """Read a MULAN ARFF file (dense or sparse rows).

    Label values must be 0 or 1; feature attributes must be numeric or nominal with numeric
    values (e.g. {0,1}).

    Parameters
    ----------
    path : str or Path
        The ARFF file, plain or gzip.
    labels : str, Path, list of str or int
        The label attributes: a MULAN XML file, a list of attribute names, or an int L for
        the last L attributes.

    Returns
    -------
    X : scipy.sparse.csr_matrix
        (n, d) features.
    Y : ndarray of int
        (n, L) 0/1 labels.
    feature_names, label_names : list of str

    Examples
    --------
    >>> import os, tempfile
    >>> from dualstruct.datasets import load_arff
    >>> path = os.path.join(tempfile.mkdtemp(), "tiny.arff")
    >>> with open(path, "w") as f:
    ...     _ = f.write("@relation tiny\\n@attribute x numeric\\n@attribute a {0,1}\\n"
    ...                 "@attribute b {0,1}\\n@data\\n0.5,1,0\\n2.0,0,1\\n")
    >>> X, Y, features, labels = load_arff(path, labels=2)
    >>> X.toarray().tolist(), Y.tolist(), labels
    ([[0.5], [2.0]], [[1, 0], [0, 1]], ['a', 'b'])
    """
    path = Path(path)
    attrs = []
    rows_idx, rows_val, label_rows = [], [], []
    with open_text(path) as fh:
        in_data = False
        label_pos = None
        for lineno, raw in enumerate(fh, 1):
            where = f"{path}:{lineno}"
            line = raw.strip()
            if not line or line.startswith("%"):
                continue
            if not in_data:
                low = line.lower()
                if low.startswith("@attribute"):
                    attrs.append(_attribute(line, where))
                elif low.startswith("@data"):
                    in_data = True
                    label_pos = _label_positions(attrs, labels, path)
                    is_label = np.zeros(len(attrs), dtype=bool)
                    is_label[label_pos] = True
                    feature_col = np.cumsum(~is_label) - 1
                    label_col = np.cumsum(is_label) - 1
                elif not low.startswith("@relation"):
                    raise ValueError(f"{where}: unexpected header line {line[:40]!r}")
                continue
            if line.startswith("{"):
                if not line.endswith("}"):
                    raise ValueError(f"{where}: a sparse row must end with '}}'")
                pairs = []
                for tok in line[1:-1].split(","):
                    tok = tok.strip()
                    if not tok:
                        continue
                    k, _, v = tok.partition(" ")
                    if not k.isdigit() or int(k) >= len(attrs):
                        raise ValueError(f"{where}: bad sparse entry {tok!r}")
                    pairs.append((int(k), v.strip()))
            else:
                values = [v.strip() for v in line.split(",")]
                if len(values) != len(attrs):
                    raise ValueError(f"{where}: {len(values)} values for {len(attrs)} attributes")
                pairs = list(enumerate(values))
            idx, val, labs = [], [], []
            for k, v in pairs:
                if v in ("?", ""):
                    raise ValueError(f"{where}: missing value for attribute {attrs[k][0]!r}")
                v = v.strip("'\"")
                if is_label[k]:
                    if v not in ("0", "1"):
                        raise ValueError(
                            f"{where}: label attribute {attrs[k][0]!r} has "
                            f"value {v!r}; labels must be 0 or 1"
                        )
                    if v == "1":
                        labs.append(int(label_col[k]))
                else:
                    x = _number(v, f"{where} (attribute {attrs[k][0]!r})")
                    if x != 0.0:
                        idx.append(int(feature_col[k]))
                        val.append(x)
            rows_idx.append(idx)
            rows_val.append(val)
            label_rows.append(labs)
    if label_pos is None:
        raise ValueError(f"{path}: no @data section")
    if not rows_idx:
        raise ValueError(f"{path}: no examples")
    names = [a[0] for a in attrs]
    for k in label_pos:
        if attrs[k][1] is None or sorted(attrs[k][1]) != ["0", "1"]:
            raise ValueError(f"{path}: label attribute {names[k]!r} is not binary {{0,1}}")
    label_names = [names[k] for k in label_pos]
    feature_names = [n for k, n in enumerate(names) if not is_label[k]]
    X = _csr(rows_idx, rows_val, len(feature_names))
    return X, _indicators(label_rows, len(label_names)), feature_names, label_names


def _label_positions(attrs, labels, path):
    names = [a[0] for a in attrs]
    if labels is None:
        raise ValueError(f"{path}: say which attributes are labels (an XML file, names or a count)")
    if isinstance(labels, (int, np.integer)):
        if not 1 <= labels < len(attrs):
            raise ValueError(
                f"{path}: cannot take the last {labels} of {len(attrs)} attributes as labels"
            )
        return list(range(len(attrs) - labels, len(attrs)))
    if isinstance(labels, (str, Path)):
        if not Path(labels).is_file():
            raise ValueError(
                f"labels={str(labels)!r} is not an existing file: pass the MULAN "
                "XML file, a list of label attribute names or the number of "
                "label attributes at the end"
            )
        labels = read_mulan_labels(labels)
    missing = [n for n in labels if n not in names]
    if missing:
        raise ValueError(f"{path}: label attributes not declared in the file: {missing[:5]}")
    return sorted(names.index(n) for n in labels)  # column order, as in labels.txt


def fetch_multilabel(name, subset="train", fmt="arff", data_home=None):
    """A MULAN multi-label data set (yeast, scene, bibtex, delicious, …) from the data folder.

    Parameters
    ----------
    name : str
        The folder ``multilabel/<name>/`` in the data folder.
    subset : {"train", "test"}, default "train"
    fmt : {"arff", "libsvm"}, default "arff"
        Read the ARFF file (with the XML label names) or the LIBSVM file (widths from the ARFF
        header).
    data_home : str or Path, optional
        A data folder to look in first.

    Returns
    -------
    X : scipy.sparse.csr_matrix
    Y : ndarray of int
        0/1 labels.

    Examples
    --------
    >>> from dualstruct.datasets import fetch_multilabel
    >>> X, Y = fetch_multilabel("yeast", "train")   # doctest: +SKIP
    >>> X.shape, Y.shape                            # doctest: +SKIP
    ((1500, 103), (1500, 14))
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    if fmt not in ("arff", "libsvm"):
        raise ValueError(f"fmt must be 'arff' or 'libsvm', got {fmt!r}")

    def need(rel):
        p = find_data_file(f"multilabel/{name}/{rel}", data_home)
        if p is None:
            raise FileNotFoundError(
                f"multilabel/{name}/{rel} not found in the data folders "
                "(set DUALSTRUCT_DATA or pass data_home)"
            )
        return p

    X, Y, _, _ = load_arff(need(f"{name}-{subset}.arff.gz"), need(f"{name}.xml"))
    if fmt == "arff":
        return X, Y
    return load_libsvm_multilabel(need(f"{name}_{subset}.svm.gz"), X.shape[1], Y.shape[1])
