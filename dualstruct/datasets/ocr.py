"""The OCR handwritten-letters data set (Taskar, Guestrin, Koller 2003) in the letter.data layout.

Each line: letter id, letter (a–z), next id (-1 ends a word), word id, position, fold (0–9),
then 128 binary pixels of a 16 × 8 image, row-major; tab-separated; plain or gzip.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from ._base import DATA_ENV, default_cache_dir, download, find_data_file, open_text

OCR_RELPATH = "ocr/letter.data.gz"
OCR_URL = "http://ai.stanford.edu/~btaskar/ocr/letter.data.gz"
N_PIXELS = 128
#: SHA-256 of the content that matters (letters, folds, word boundaries, pixels — not the ids,
#: which differ between copies of the file); see :func:`content_digest`.
OCR_CONTENT_SHA256 = "4ad45b8f7d4cf356d8033e5277218fa4c2b47ef0afaf68c0afcf5965d8ccaff6"


def load_ocr(path):
    """Read a letter.data file (the OCR data of Taskar et al.), plain or gzip.

    Parameters
    ----------
    path : str or Path
        The file.

    Returns
    -------
    X : list of ndarray
        Per word a (T_i, 128) float64 array: the 16 × 8 pixels of each letter.
    y : list of ndarray of str
        Per word its (T_i,) letters.
    folds : ndarray of int
        (n_words,): the cross-validation fold of each word.

    Raises
    ------
    ValueError
        Naming the file and line, for a malformed line (wrong number of fields, a non-binary
        pixel, a letter outside a–z, a broken next-id chain or position count, a word whose
        fold changes, a truncated final word).

    Examples
    --------
    >>> from dualstruct.datasets import load_ocr
    >>> X, y, folds = load_ocr("ocr/letter.data.gz")      # doctest: +SKIP
    >>> len(X), sorted(set(folds))[:3]                    # doctest: +SKIP
    (6877, [0, 1, 2])
    """
    path = Path(path)
    words_X, words_y, folds = [], [], []
    cur_X, cur_y, cur_fold, cur_word = [], [], None, None
    expected_id = None
    with open_text(path) as fh:
        lineno = 0
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 6 + N_PIXELS:
                raise ValueError(
                    f"{path}:{lineno}: expected {6 + N_PIXELS} tab-separated fields, "
                    f"got {len(fields)}"
                )
            letter = fields[1]
            if len(letter) != 1 or not ("a" <= letter <= "z"):
                raise ValueError(f"{path}:{lineno}: letter field {letter!r} is not in a-z")
            try:
                letter_id = int(fields[0])
                next_id = int(fields[2])
                word_id = int(fields[3])
                position = int(fields[4])
                fold = int(fields[5])
                pixels = np.array(fields[6:], dtype=np.float64)
            except ValueError as exc:
                raise ValueError(f"{path}:{lineno}: non-numeric field ({exc})") from None
            if not np.all((pixels == 0) | (pixels == 1)):
                raise ValueError(f"{path}:{lineno}: pixel values must be 0 or 1")
            if cur_word is not None and word_id != cur_word:
                raise ValueError(
                    f"{path}:{lineno}: word {cur_word} ended without next id -1 before word "
                    f"{word_id} began"
                )
            if cur_fold is not None and fold != cur_fold:
                raise ValueError(f"{path}:{lineno}: fold changes inside word {word_id}")
            if cur_X and letter_id != expected_id:
                raise ValueError(
                    f"{path}:{lineno}: letter id {letter_id}, but the previous letter's next id "
                    f"is {expected_id} (a line deleted or lines out of order?)"
                )
            if position != len(cur_X) + 1:
                raise ValueError(
                    f"{path}:{lineno}: position {position} in word {word_id}, "
                    f"expected {len(cur_X) + 1}"
                )
            expected_id = next_id
            cur_X.append(pixels)
            cur_y.append(letter)
            cur_fold, cur_word = fold, word_id
            if next_id == -1:
                words_X.append(np.vstack(cur_X))
                words_y.append(np.array(cur_y))
                folds.append(cur_fold)
                cur_X, cur_y, cur_fold, cur_word = [], [], None, None
        if cur_X:
            raise ValueError(f"{path}:{lineno}: file ends inside a word (last next id != -1)")
    if not words_X:
        raise ValueError(f"{path}: no letters found")
    return words_X, words_y, np.array(folds, dtype=np.int64)


def content_digest(X, y, folds) -> str:
    """SHA-256 over word boundaries, letters, folds and pixels (independent of the ids)."""
    h = hashlib.sha256()
    for xi, yi, f in zip(X, y, folds):
        h.update(f"{len(yi)}:{''.join(yi)}:{int(f)};".encode())
        h.update(np.ascontiguousarray(xi, dtype=np.uint8).tobytes())
    return h.hexdigest()


def fetch_ocr(data_home=None, download_if_missing=True):
    """Load the OCR data from the data folder, downloading it into the user cache if missing.

    The file ``ocr/letter.data.gz`` is looked for in ``data_home``, ``$DUALSTRUCT_DATA`` and
    the user cache (:func:`data_dirs`); a downloaded file is accepted only if its content
    digest matches the known one.

    Parameters
    ----------
    data_home : str or Path, optional
        A data folder to look in first.
    download_if_missing : bool, default True
        Download the file into the cache when it is nowhere (else raise).

    Returns
    -------
    X, y, folds
        As :func:`load_ocr`: 6,877 words; fold 0 is the usual test set.

    Examples
    --------
    >>> from dualstruct.datasets import fetch_ocr
    >>> X, y, folds = fetch_ocr()                 # doctest: +SKIP
    >>> len(X), X[0].shape, "".join(y[0])         # doctest: +SKIP
    (6877, (9, 128), 'ommanding')
    """
    path = find_data_file(OCR_RELPATH, data_home)
    if path is not None:
        return load_ocr(path)
    target = default_cache_dir() / OCR_RELPATH
    where = f"put letter.data.gz at {target}, or set {DATA_ENV} to a folder holding {OCR_RELPATH}"
    if not download_if_missing:
        raise FileNotFoundError(f"OCR data not found; {where}")
    try:
        download(OCR_URL, target)
    except OSError as exc:
        raise FileNotFoundError(
            f"OCR data not found locally and the download from {OCR_URL} failed ({exc}); {where}"
        ) from None
    data = load_ocr(target)
    digest = content_digest(*data)
    if digest != OCR_CONTENT_SHA256:
        os.replace(target, str(target) + ".rejected")
        raise ValueError(
            f"downloaded OCR file {target} has content digest {digest}, expected "
            f"{OCR_CONTENT_SHA256}; it was renamed to *.rejected. {where}"
        )
    return data
