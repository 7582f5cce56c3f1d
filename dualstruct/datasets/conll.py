"""CoNLL column files and CoNLL-U treebanks.

A sentence is a list of tokens; a token is a tuple of strings (its columns). The loaders split
off one column as the label and return ``(sentences, labels)`` with ``labels[i]`` an array of
strings. Every malformed line raises ``ValueError`` naming the file and line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ._base import DATA_ENV, find_data_file, open_text

CONLLU_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps", "misc")
CONLLU_LABELS = ("upos", "xpos", "feats", "upos+feats")


def iter_conll_blocks(path, fmt="conll"):
    """Yield ``(line_numbers, rows)`` per sentence: the token lines split into columns.

    ``fmt="conll"``: whitespace- or tab-separated columns, a blank line between sentences,
    ``-DOCSTART-`` lines skipped; every token line of the file must have the same number of
    columns. ``fmt="conllu"``: 10 tab-separated columns, ``#`` comments skipped, multiword
    ranges (``4-5``) and empty nodes (``8.1``) skipped.
    """
    path = Path(path)
    n_cols = None
    first_is_comment = False
    rows, numbers = [], []
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                if rows:
                    yield numbers, rows
                rows, numbers = [], []
                continue
            if fmt == "conllu":
                if line.startswith("#"):
                    continue
                cols = line.split("\t")
                if len(cols) != 10:
                    raise ValueError(
                        f"{path}:{lineno}: a CoNLL-U word line needs 10 tab-separated "
                        f"columns, got {len(cols)}"
                    )
                tid = cols[0]
                if "-" in tid or "." in tid:
                    continue
                if not tid.isdigit():
                    raise ValueError(f"{path}:{lineno}: bad word ID {tid!r}")
            else:
                cols = line.split("\t") if "\t" in line else line.split()
                if cols[0] == "-DOCSTART-":
                    continue
                if n_cols is None:
                    n_cols = len(cols)
                    first_is_comment = line.startswith("#")
                    if n_cols < 2:
                        raise ValueError(
                            f"{path}:{lineno}: a token line needs at least 2 columns (features "
                            "and a label), got 1"
                        )
                elif len(cols) != n_cols:
                    looks_conllu = (len(cols) == 10 and "\t" in line) or first_is_comment
                    hint = (
                        "; this looks like CoNLL-U (use the conllu format)" if looks_conllu else ""
                    )
                    raise ValueError(
                        f"{path}:{lineno}: expected {n_cols} columns like the first token line, "
                        f"got {len(cols)}{hint}"
                    )
            rows.append(cols)
            numbers.append(lineno)
    if rows:
        yield numbers, rows


def load_conll(path, label_column=-1):
    """Read a CoNLL column file.

    Parameters
    ----------
    path : file path (``.gz`` is decompressed)
    label_column : int or None
        Column holding the label (0-based, negative counts from the end; default the last).
        None returns every column as features and ``labels = None``.

    Returns
    -------
    sentences : list of lists of tuples of str (the token's other columns, in order)
    labels : list of ndarray of str, or None

    Examples
    --------
    >>> from dualstruct.datasets import load_conll
    >>> X, y = load_conll("train.txt")                    # doctest: +SKIP
    >>> X[0][:2], y[0][:2]                                # doctest: +SKIP
    ([('Confidence', 'NN'), ('in', 'IN')], array(['B-NP', 'B-PP'], dtype='<U4'))
    """
    sentences, labels = [], []
    for numbers, rows in iter_conll_blocks(path, "conll"):
        if label_column is None:
            sentences.append([tuple(r) for r in rows])
            continue
        n = len(rows[0])
        col = label_column if label_column >= 0 else n + label_column
        if not 0 <= col < n:
            raise ValueError(
                f"{path}:{numbers[0]}: label column {label_column} does not exist (the file has "
                f"{n} columns)"
            )
        sentences.append([tuple(r[:col] + r[col + 1 :]) for r in rows])
        labels.append(np.array([r[col] for r in rows]))
    if not sentences:
        raise ValueError(f"{path}: no sentences found")
    return sentences, (None if label_column is None else labels)


def conllu_label(cols, label):
    """The label of a CoNLL-U word line for ``label`` in :data:`CONLLU_LABELS`."""
    if label == "upos":
        return cols[3]
    if label == "xpos":
        return cols[4]
    if label == "feats":
        return cols[5]
    return cols[3] + "|" + cols[5]


_HIDDEN = {"upos": (3,), "xpos": (4,), "feats": (5,), "upos+feats": (3, 5)}


def conllu_sentence(rows, label):
    """Token tuples ``(form, lemma, upos, xpos, feats)`` with the label's column(s) blanked to
    ``"_"`` (features never see the answer), and the labels, of one sentence's word rows."""
    hidden = _HIDDEN[label]
    toks = [tuple("_" if k in hidden else cols[k] for k in range(1, 6)) for cols in rows]
    return toks, [conllu_label(cols, label) for cols in rows]


def load_conllu(path, label="upos"):
    """Read a CoNLL-U file (multiword ranges and empty nodes skipped).

    Parameters
    ----------
    path : str or Path
        The file (``.gz`` is decompressed).
    label : {"upos", "xpos", "feats", "upos+feats"}, default "upos"
        What is predicted: UPOS, XPOS, FEATS or UPOS+FEATS (``"NOUN|Case=Nom|..."``).

    Returns
    -------
    sentences : list of list of tuple
        Tokens ``(form, lemma, upos, xpos, feats)`` with the label's own column(s) replaced
        by ``"_"``, so that features cannot see the answer.
    labels : list of ndarray of str
        One label per token.

    Examples
    --------
    >>> from dualstruct.datasets import load_conllu
    >>> X, y = load_conllu("cs_cltt-ud-train.conllu.gz", "xpos")   # doctest: +SKIP
    >>> len(X), sum(map(len, y))                                    # doctest: +SKIP
    (467, 13894)
    """
    if label not in CONLLU_LABELS:
        raise ValueError(f"label must be one of {CONLLU_LABELS}, got {label!r}")
    sentences, labels = [], []
    for numbers, rows in iter_conll_blocks(path, "conllu"):
        toks, labs = conllu_sentence(rows, label)
        for lineno, lab in zip(numbers, labs):
            if lab in ("", "_"):
                raise ValueError(f"{path}:{lineno}: the {label.upper()} column is empty")
        sentences.append(toks)
        labels.append(np.array(labs))
    if not sentences:
        raise ValueError(f"{path}: no sentences found")
    return sentences, labels


def _required_file(rel, data_home, what):
    """The path of ``rel`` in the data folders, or FileNotFoundError saying where to put it."""
    path = find_data_file(rel, data_home)
    if path is None:
        raise FileNotFoundError(
            f"{what} file not found; put {rel} under a folder named by data_home or {DATA_ENV}"
        )
    return path


def fetch_conll2000(subset="train", data_home=None):
    """The CoNLL-2000 chunking corpus from the data folder (``conll2000/{train,test}.txt.gz``).

    Returns the sentences as lists of ``(word, pos, chunk)`` tuples; pick the label with
    :func:`split_column` (chunking: column 2, POS tagging: column 1).

    Examples
    --------
    >>> from dualstruct.datasets.conll import fetch_conll2000, split_column
    >>> sentences = fetch_conll2000("train")             # doctest: +SKIP
    >>> X, y = split_column(sentences, 2)                # doctest: +SKIP
    >>> X[0][:2], y[0][:2]                               # doctest: +SKIP
    ([('Confidence', 'NN'), ('in', 'IN')], ['B-NP', 'B-PP'])
    """
    if subset not in ("train", "test"):
        raise ValueError(f"subset must be 'train' or 'test', got {subset!r}")
    path = _required_file(f"conll2000/{subset}.txt.gz", data_home, f"CoNLL-2000 {subset}")
    sentences, _ = load_conll(path, label_column=None)
    return sentences


#: the treebank files of each split of the Czech data (``ud_czech/<name>.conllu.gz``)
UD_CZECH_SPLITS = {
    # the pooled large-tag-set split: 2,379 sentences / 41,520 words / 971 XPOS tags for
    # training, 1,919 / 27,567 / 946 (237 unseen in training) for testing
    "pooled-train": ("cs_cltt-ud-train", "cs_cac-ud-dev", "cs_fictree-ud-dev"),
    "pooled-test": ("cs_cac-ud-test", "cs_fictree-ud-test"),
    "cltt-train": ("cs_cltt-ud-train",),
    "cltt-dev": ("cs_cltt-ud-dev",),
    "cltt-test": ("cs_cltt-ud-test",),
}


def fetch_ud_czech(split="pooled-train", label="xpos", data_home=None):
    """Czech Universal Dependencies treebanks from the data folder (``ud_czech/``).

    FicTree is licensed CC BY-NC-SA: fine for benchmarks, not for a model sold on.

    Parameters
    ----------
    split : str, default "pooled-train"
        A list of treebank files (``UD_CZECH_SPLITS``): ``"pooled-train"`` (CLTT train + CAC
        dev + FicTree dev) and ``"pooled-test"`` (CAC test + FicTree test) form the
        large-tag-set task, 971 PDT-style XPOS tags in training; ``"cltt-train"``,
        ``"cltt-dev"`` and ``"cltt-test"`` are CLTT's own splits.
    label : {"upos", "xpos", "feats", "upos+feats"}, default "xpos"
        The label, as for :func:`load_conllu`.
    data_home : str or Path, optional
        Searched before ``$DUALSTRUCT_DATA`` and the cache.

    Returns
    -------
    sentences : list of list of tuple
        Tokens ``(form, lemma, upos, xpos, feats)`` with the label's column(s) ``"_"``, the
        files' sentences in the listed order.
    labels : list of ndarray of str
        One label per token.

    Examples
    --------
    >>> from dualstruct.datasets import fetch_ud_czech
    >>> X, y = fetch_ud_czech("pooled-train")             # doctest: +SKIP
    >>> len(X), sum(map(len, y))                           # doctest: +SKIP
    (2379, 41520)
    """
    if split not in UD_CZECH_SPLITS:
        raise ValueError(f"split must be one of {sorted(UD_CZECH_SPLITS)}, got {split!r}")
    sentences, labels = [], []
    for name in UD_CZECH_SPLITS[split]:
        path = _required_file(f"ud_czech/{name}.conllu.gz", data_home, "Czech treebank")
        s, lab = load_conllu(path, label)
        sentences += s
        labels += lab
    return sentences, labels


def split_column(sentences, column, drop=()):
    """Split token tuples into (features, labels): the label is ``column``; columns in
    ``drop`` are removed from the features too (e.g. the chunk tag when tagging POS)."""
    feats, labels = [], []
    for sent in sentences:
        n = len(sent[0])
        col = column % n
        gone = {col, *(d % n for d in drop)}
        feats.append([tuple(t[k] for k in range(n) if k not in gone) for t in sent])
        labels.append(np.array([t[col] for t in sent]))
    return feats, labels
