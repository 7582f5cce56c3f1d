"""Evaluation of sequence labelings: token accuracy, per-label and chunk-level P/R/F1.

Chunks follow the conventions of the CoNLL shared tasks' ``conlleval`` script: tags are
``B-TYPE``, ``I-TYPE`` (also ``E-``/``S-`` for IOBES) or ``O``; a chunk starts at a ``B``, at an
``I`` whose type differs from the previous tag's (or after ``O``), and ends before the next
start or ``O``. IOB1, IOB2/BIO and IOBES input all work.
"""

from __future__ import annotations

import numpy as np


def _split(tag):
    if tag == "O" or tag == "" or tag is None:
        return "O", ""
    if len(tag) > 1 and tag[1] in "-_":
        return tag[0], tag[2:]
    return "I", tag  # a bare type counts as inside a chunk of that type


def _end_of_chunk(prev_tag, tag, prev_type, type_):
    if prev_tag in ("E", "S"):
        return True
    if prev_tag in ("B", "I") and tag in ("B", "S", "O"):
        return True
    return prev_tag != "O" and prev_type != type_


def _start_of_chunk(prev_tag, tag, prev_type, type_):
    if tag in ("B", "S"):
        return True
    if prev_tag in ("E", "S", "O") and tag in ("E", "I"):
        return True
    return tag != "O" and prev_type != type_


def chunks(tags) -> set:
    """The chunks of one tag sequence as a set of ``(type, start, end)`` (end exclusive)."""
    out = set()
    prev_tag, prev_type, begin = "O", "", 0
    for i, raw in enumerate(list(tags) + ["O"]):
        tag, type_ = _split(str(raw))
        if prev_tag != "O" and _end_of_chunk(prev_tag, tag, prev_type, type_):
            out.add((prev_type, begin, i))
        if tag != "O" and _start_of_chunk(prev_tag, tag, prev_type, type_):
            begin = i
        prev_tag, prev_type = tag, type_
    return out


def _prf(tp, n_pred, n_true):
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_true if n_true else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def chunk_scores(y_true, y_pred) -> dict:
    """Phrase-level precision, recall and F1 (fractions, as conlleval computes them), overall
    and per chunk type.

    Parameters
    ----------
    y_true, y_pred : list of sequences of str
        True and predicted chunk tags (BIO, IOB1 or IOBES), sequence by sequence.

    Returns
    -------
    dict
        ``{"overall": {"precision", "recall", "f1", "support"}, "types": {type: {...}}}``.

    Examples
    --------
    >>> from dualstruct.metrics import chunk_scores
    >>> true = [["B-NP", "I-NP", "O", "B-VP"]]
    >>> pred = [["B-NP", "I-NP", "O", "B-NP"]]
    >>> scores = chunk_scores(true, pred)
    >>> scores["overall"]["f1"], scores["types"]["NP"]["recall"]
    (0.5, 1.0)
    """
    _check_pairs(y_true, y_pred)
    tp: dict[str, int] = {}
    n_pred: dict[str, int] = {}
    n_true: dict[str, int] = {}
    for t, p in zip(y_true, y_pred):
        ct, cp = chunks(t), chunks(p)
        for c in ct:
            n_true[c[0]] = n_true.get(c[0], 0) + 1
        for c in cp:
            n_pred[c[0]] = n_pred.get(c[0], 0) + 1
        for c in ct & cp:
            tp[c[0]] = tp.get(c[0], 0) + 1
    types = {}
    for typ in sorted(set(n_true) | set(n_pred)):
        p, r, f = _prf(tp.get(typ, 0), n_pred.get(typ, 0), n_true.get(typ, 0))
        types[typ] = {"precision": p, "recall": r, "f1": f, "support": n_true.get(typ, 0)}
    p, r, f = _prf(sum(tp.values()), sum(n_pred.values()), sum(n_true.values()))
    return {
        "overall": {"precision": p, "recall": r, "f1": f, "support": sum(n_true.values())},
        "types": types,
    }


def token_accuracy(y_true, y_pred) -> float:
    """The share of tokens labelled right.

    Parameters
    ----------
    y_true, y_pred : list of sequences
        True and predicted labels, sequence by sequence.

    Returns
    -------
    float

    Examples
    --------
    >>> from dualstruct.metrics import token_accuracy
    >>> token_accuracy([["a", "b"], ["c"]], [["a", "x"], ["c"]])
    0.6666666666666666
    """
    _check_pairs(y_true, y_pred)
    hits = sum(int(np.sum(np.asarray(t) == np.asarray(p))) for t, p in zip(y_true, y_pred))
    return hits / max(1, sum(len(t) for t in y_true))


def label_scores(y_true, y_pred) -> dict:
    """Per-label token precision, recall, F1 and support.

    Parameters
    ----------
    y_true, y_pred : list of sequences
        True and predicted labels, sequence by sequence.

    Returns
    -------
    dict
        ``{label: {"precision", "recall", "f1", "support"}}``.

    Examples
    --------
    >>> from dualstruct.metrics import label_scores
    >>> scores = label_scores([["a", "b", "b"]], [["a", "a", "b"]])
    >>> scores["b"]["precision"], scores["b"]["recall"], scores["b"]["support"]
    (1.0, 0.5, 2)
    """
    _check_pairs(y_true, y_pred)
    t = np.concatenate([np.asarray(a, dtype=object) for a in y_true])
    p = np.concatenate([np.asarray(a, dtype=object) for a in y_pred])
    out = {}
    for lab in sorted(set(t.tolist()) | set(p.tolist()), key=str):
        tp = int(np.sum((t == lab) & (p == lab)))
        prec, rec, f = _prf(tp, int(np.sum(p == lab)), int(np.sum(t == lab)))
        out[str(lab)] = {
            "precision": prec,
            "recall": rec,
            "f1": f,
            "support": int(np.sum(t == lab)),
        }
    return out


def _check_pairs(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} true sequences but {len(y_pred)} predicted")
    for i, (t, p) in enumerate(zip(y_true, y_pred)):
        if len(t) != len(p):
            raise ValueError(f"sequence {i}: {len(t)} true labels but {len(p)} predicted")


def multilabel_scores(Y_true, Y_pred) -> dict:
    """Multi-label metrics of two (n, L) 0/1 matrices.

    Hamming loss (fraction of wrong label bits), subset accuracy (whole label sets right),
    example-based (Jaccard) accuracy ``mean |y ∩ ŷ| / |y ∪ ŷ|`` and example-based F1
    ``mean 2 |y ∩ ŷ| / (|y| + |ŷ|)`` (both 1 when the two sets are empty), micro and macro F1
    (a label with no true and no predicted positive counts as F1 = 1 in the
    macro average): the definitions of scikit-learn's ``average="samples"``, ``"micro"`` and
    ``"macro"``, also for a single label.

    Parameters
    ----------
    Y_true, Y_pred : array of shape (n, L)
        0/1 label matrices.

    Returns
    -------
    dict
        ``hamming_loss``, ``subset_accuracy``, ``jaccard``, ``example_f1``, ``micro_f1``,
        ``macro_f1``.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.metrics import multilabel_scores
    >>> scores = multilabel_scores(np.array([[1, 0], [1, 1]]), np.array([[1, 0], [0, 1]]))
    >>> scores["hamming_loss"], scores["subset_accuracy"]
    (0.25, 0.5)
    """
    Y_true, Y_pred = np.asarray(Y_true), np.asarray(Y_pred)
    if Y_true.ndim != 2 or Y_true.shape != Y_pred.shape:
        raise ValueError(
            f"Y_true and Y_pred must be (n, L) matrices of the same shape, got "
            f"{Y_true.shape} and {Y_pred.shape}"
        )
    for name, Y in (("Y_true", Y_true), ("Y_pred", Y_pred)):
        if not np.all((Y == 0) | (Y == 1)):
            raise ValueError(f"{name} must hold only 0 and 1")
    t, p = Y_true.astype(bool), Y_pred.astype(bool)
    both = (t & p).sum(axis=1)
    either = (t | p).sum(axis=1)
    jaccard = np.where(either > 0, both / np.maximum(either, 1), 1.0)
    sizes = t.sum(axis=1) + p.sum(axis=1)
    example_f1 = np.where(sizes > 0, 2 * both / np.maximum(sizes, 1), 1.0)
    tp, fp, fn = (t & p).sum(axis=0), (~t & p).sum(axis=0), (t & ~p).sum(axis=0)
    micro_den = 2 * tp.sum() + fp.sum() + fn.sum()
    macro_den = 2 * tp + fp + fn
    return {
        "hamming_loss": float(np.mean(t != p)),
        "subset_accuracy": float(np.mean(np.all(t == p, axis=1))),
        "jaccard": float(np.mean(jaccard)),
        "example_f1": float(np.mean(example_f1)),
        "micro_f1": float(2 * tp.sum() / micro_den) if micro_den > 0 else 0.0,
        "macro_f1": float(np.mean(np.where(macro_den > 0, 2 * tp / np.maximum(macro_den, 1), 1.0))),
    }
