"""Token features for text: sentences of tokens -> one sparse CSR matrix (a PackedSequences).

Input is either CoNLL-style (each token a tuple of strings: the word first, then other input
columns such as the POS tag) or sklearn-crfsuite style (each token a dict of feature name ->
value; strings become ``name=value`` indicators, numbers are used as values, booleans as 0/1).
"""

from __future__ import annotations

import io
import json
from array import array
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import NotFittedError
from sklearn.utils import murmurhash3_32

from .sequences import PackedSequences

BOS, EOS = "<s>", "</s>"


class Vocabulary(Mapping):
    """Feature names → columns, column ``k`` the ``k``-th name: the names held as one UTF-8
    buffer and its offsets (about the names' own bytes plus 8 a name, against about 100 a
    name in a dict). The dict that lookups need is built on the first lookup, so a process
    that only keeps or ships the vocabulary (the driver of a distributed run) never holds it.

    Examples
    --------
    >>> from dualstruct.features import Vocabulary
    >>> vocab = Vocabulary.from_names(["a=1", "b=2"])
    >>> vocab["b=2"], len(vocab), list(vocab)
    (1, 2, ['a=1', 'b=2'])
    """

    __slots__ = ("_blob", "_offsets", "_index")

    def __init__(self, blob: bytes, offsets: np.ndarray):
        offsets = np.asarray(offsets, dtype=np.int64)
        if offsets.ndim != 1 or offsets.size < 1 or offsets[0] != 0 or offsets[-1] != len(blob):
            raise ValueError("vocabulary offsets must run from 0 to the buffer's length")
        if np.any(offsets[1:] < offsets[:-1]):  # (no array of the differences)
            raise ValueError("vocabulary offsets must not decrease")
        self._blob = bytes(blob)
        self._offsets = offsets
        self._index: dict | None = None

    @classmethod
    def from_names(cls, names) -> Vocabulary:
        """The vocabulary of ``names`` (an iterable of str, in column order), built in place:
        the buffer becomes the names' bytes and the offsets' array is kept as it is, so a
        stream of names never needs twice their bytes."""
        buf, offsets, end = io.BytesIO(), array("q", [0]), 0
        for name in names:
            end += buf.write(name.encode("utf-8"))
            offsets.append(end)
        return cls(buf.getvalue(), np.frombuffer(offsets, dtype=np.int64))

    def __len__(self) -> int:
        return self._offsets.size - 1

    def __iter__(self):
        blob, offs = self._blob, self._offsets.tolist()
        for k in range(len(offs) - 1):
            yield blob[offs[k] : offs[k + 1]].decode("utf-8")

    def _lookup(self) -> dict:
        index = self._index
        if index is None:
            index = self._index = {name: k for k, name in enumerate(self)}
        return index

    def __getitem__(self, name):
        return self._lookup()[name]

    def get(self, name, default=None):
        return self._lookup().get(name, default)

    def __contains__(self, name) -> bool:
        return name in self._lookup()

    def names(self) -> np.ndarray:
        """The names in column order (an object array; no lookup dict is built)."""
        return np.array(list(self), dtype=object)

    def to_bytes(self) -> bytes:
        """The offsets (little-endian int64) followed by the names' UTF-8 buffer."""
        return b"".join(self.byte_parts())

    def byte_parts(self) -> tuple:
        """:meth:`to_bytes` in its two parts, without copies (for writing in place)."""
        offsets = np.ascontiguousarray(self._offsets, dtype="<i8")
        return offsets.data.cast("B"), self._blob

    @classmethod
    def from_bytes(cls, data: bytes, size: int) -> Vocabulary:
        """The vocabulary of ``size`` names written by :meth:`to_bytes`."""
        head = 8 * (size + 1)
        if size < 0 or len(data) < head:
            raise ValueError(f"a vocabulary of {size} names needs at least {head} bytes")
        return cls.from_parts(data[:head], data[head:])

    @classmethod
    def from_parts(cls, head, blob: bytes) -> Vocabulary:
        """The vocabulary of :meth:`byte_parts` (the offsets' bytes and the names')."""
        offsets = np.frombuffer(head, dtype="<i8").astype(np.int64, copy=False)
        return cls(blob, offsets)

    def __getstate__(self):
        return self._blob, self._offsets

    def __setstate__(self, state):
        self._blob, self._offsets = state
        self._index = None

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} names)"


def word_shape(word: str) -> str:
    """``Xxxx-dd`` style shape: upper X, lower x, digit d, other characters kept."""
    out = []
    for ch in word:
        if ch.isupper():
            out.append("X")
        elif ch.islower():
            out.append("x")
        elif ch.isdigit():
            out.append("d")
        else:
            out.append(ch)
    return "".join(out)


def short_shape(shape: str) -> str:
    """The shape with runs of one character collapsed (``Xxxx-dd`` -> ``Xx-d``)."""
    out: list[str] = []
    for ch in shape:
        if not out or out[-1] != ch:
            out.append(ch)
    return "".join(out)


class TokenFeatures(BaseEstimator):
    """Fit a vocabulary of token features and turn sentences into a sparse token matrix.

    Parameters
    ----------
    window : int
        Neighbouring words (lowercased) and neighbouring values of the other columns within
        ±window are features of a token.
    affixes : int
        Prefixes and suffixes of length 1..affixes of the word.
    min_count : int
        Keep features seen at least this often in the training data (ignored when hashing).
    hashing : int or None
        Hash features into this many columns instead of keeping a vocabulary.
    conjunctions : bool
        Add conjunctions of neighbouring words (w-1|w0, w0|w+1) and of neighbouring other-column
        values (p-2|p-1, p-1|p0, p0|p+1, p+1|p+2, p-1|p+1, p-2|p-1|p0, p-1|p0|p+1, p0|p+1|p+2).

    Attributes
    ----------
    vocabulary_ : Vocabulary or None
        Feature name -> column, a read-only mapping (None when hashing).
    n_features_ : int
        Number of columns.
    n_columns_ : int or None
        Columns per token seen in fit (None for dict tokens); ``transform`` refuses tokens
        with another count.

    Examples
    --------
    >>> from dualstruct.features import TokenFeatures
    >>> features = TokenFeatures(window=1)
    >>> data = features.fit_transform([[("The", "DT"), ("cat", "NN")]])
    >>> data.n_tokens, data.n_features == len(features.get_feature_names_out())
    (2, True)
    """

    def __init__(self, window=2, affixes=4, min_count=1, hashing=None, conjunctions=True):
        self.window = window
        self.affixes = affixes
        self.min_count = min_count
        self.hashing = hashing
        self.conjunctions = conjunctions

    # -- feature strings ----------------------------------------------------------------------
    def _sentence_features(self, sent):
        """A list (one per token) of lists of (feature name, value)."""
        if not sent:
            return []
        if isinstance(sent[0], dict):
            return [_dict_features(tok) for tok in sent]
        T = len(sent)
        W = self.window
        words = [tok[0] for tok in sent]
        lowers = [w.lower() for w in words]
        n_other = len(sent[0]) - 1
        others = [[tok[c] for tok in sent] for c in range(1, n_other + 1)]

        def at(seq, i, pad_low=BOS, pad_high=EOS):
            if i < 0:
                return pad_low
            if i >= T:
                return pad_high
            return seq[i]

        feats_all = []
        for t in range(T):
            w = words[t]
            lw = lowers[t]
            shape = word_shape(w)
            f = ["bias", "w=" + w, "lw=" + lw, "shape=" + shape, "sshape=" + short_shape(shape)]
            for k in range(1, self.affixes + 1):
                if len(w) >= k:
                    f.append(f"pre{k}=" + w[:k])
                    f.append(f"suf{k}=" + lw[-k:])
            if w[:1].isupper():
                f.append("title")
            if w.isupper():
                f.append("upper")
            if w.isdigit():
                f.append("digit")
            elif any(ch.isdigit() for ch in w):
                f.append("hasdigit")
            if "-" in w:
                f.append("hyphen")
            if t == 0:
                f.append("first")
            if t == T - 1:
                f.append("last")
            for d in range(1, W + 1):
                f.append(f"lw-{d}=" + at(lowers, t - d))
                f.append(f"lw+{d}=" + at(lowers, t + d))
            if self.conjunctions:
                f.append("lw-1|lw0=" + at(lowers, t - 1) + "|" + lw)
                f.append("lw0|lw+1=" + lw + "|" + at(lowers, t + 1))
                f.append("lw-1|lw+1=" + at(lowers, t - 1) + "|" + at(lowers, t + 1))
                if W >= 2:
                    f.append("lw-2|lw-1=" + at(lowers, t - 2) + "|" + at(lowers, t - 1))
                    f.append("lw+1|lw+2=" + at(lowers, t + 1) + "|" + at(lowers, t + 2))
            for c, col in enumerate(others):
                p = [at(col, t + d) for d in range(-W, W + 1)]  # p[W] is the token's own
                for d in range(-W, W + 1):
                    f.append(f"c{c}[{d}]=" + p[W + d])
                if self.conjunctions and W >= 1:
                    f.append(f"lw0|c{c}[0]=" + lw + "|" + p[W])
                    f.append(f"lw-1|c{c}[0]=" + at(lowers, t - 1) + "|" + p[W])
                    f.append(f"lw+1|c{c}[0]=" + at(lowers, t + 1) + "|" + p[W])
                    f.append(f"c{c}[-1|0]=" + p[W - 1] + "|" + p[W])
                    f.append(f"c{c}[0|1]=" + p[W] + "|" + p[W + 1])
                    f.append(f"c{c}[-1|1]=" + p[W - 1] + "|" + p[W + 1])
                    f.append(f"c{c}[-1|0|1]=" + p[W - 1] + "|" + p[W] + "|" + p[W + 1])
                    if W >= 2:
                        f.append(f"c{c}[-2|-1]=" + p[W - 2] + "|" + p[W - 1])
                        f.append(f"c{c}[1|2]=" + p[W + 1] + "|" + p[W + 2])
                        f.append(f"c{c}[-2|-1|0]=" + p[W - 2] + "|" + p[W - 1] + "|" + p[W])
                        f.append(f"c{c}[0|1|2]=" + p[W] + "|" + p[W + 1] + "|" + p[W + 2])
            feats_all.append([(name, 1.0) for name in f])
        return feats_all

    def _check_sentences(self, sentences):
        """Check the token lists; returns the tokens' column count (None for dict tokens)."""
        if isinstance(sentences, (str, bytes)) or not hasattr(sentences, "__len__"):
            raise TypeError("sentences must be a list of sentences (lists of tokens)")
        width = None
        for i, sent in enumerate(sentences):
            if len(sent) == 0:
                raise ValueError(f"sentence {i} is empty")
            tok = sent[0]
            if isinstance(tok, dict):
                continue
            if isinstance(tok, str) or not isinstance(tok, (tuple, list)):
                raise TypeError(
                    f"sentence {i}: a token must be a tuple of column strings or a feature dict, "
                    f"got {type(tok).__name__}"
                )
            for j, t in enumerate(sent):
                if width is None:
                    width = len(t)
                if len(t) != width:
                    raise ValueError(f"sentence {i}, token {j}: {len(t)} columns, expected {width}")
                for c, value in enumerate(t):
                    if not isinstance(value, str):
                        raise TypeError(
                            f"sentence {i}, token {j}, column {c}: a column must "
                            f"be a string, got {type(value).__name__} "
                            f"({value!r})"
                        )
        return width

    # -- fit / transform ----------------------------------------------------------------------
    def _matrix(self, sentences, vocab, grow):
        """CSR rows of ``sentences``; with ``grow`` unseen names get new ids in ``vocab``."""
        hashed = vocab is None
        n_hash = int(self.hashing) if hashed else 0
        indptr = [0]
        indices, values, lengths = [], [], []
        for sent in sentences:
            lengths.append(len(sent))
            for tok in self._sentence_features(sent):
                row = {}
                for name, val in tok:
                    if hashed:
                        j = murmurhash3_32(name, positive=True) % n_hash
                    else:
                        j = vocab.get(name)
                        if j is None:
                            if not grow:
                                continue  # a feature never seen in training has no weight
                            j = vocab[name] = len(vocab)
                    row[j] = row.get(j, 0.0) + val
                indices.extend(row.keys())
                values.extend(row.values())
                indptr.append(len(indices))
        width = n_hash if hashed else len(vocab)
        X = sp.csr_matrix(
            (
                np.asarray(values, dtype=np.float64),
                np.asarray(indices, dtype=np.int64),
                np.asarray(indptr, dtype=np.int64),
            ),
            shape=(len(indptr) - 1, width),
        )
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return X, offsets

    def fit(self, sentences, y=None):
        self.fit_transform(sentences)
        return self

    def fit_transform(self, sentences, y=None) -> PackedSequences:
        """Fit the vocabulary and return the training matrix, in one pass over the text."""
        self.n_columns_ = self._check_sentences(sentences)
        if self.hashing is not None:
            if int(self.hashing) < 1:
                raise ValueError(
                    f"hashing must be a positive number of columns, got {self.hashing}"
                )
            self.vocabulary_ = None
            self.n_features_ = int(self.hashing)
            X, offsets = self._matrix(sentences, None, grow=False)
        else:
            vocab: dict[str, int] = {}
            X, offsets = self._matrix(sentences, vocab, grow=True)
            counts = np.bincount(X.indices, minlength=len(vocab))
            keep = np.flatnonzero(counts >= self.min_count)
            names: np.ndarray = np.empty(len(vocab), dtype=object)
            names[list(vocab.values())] = list(vocab.keys())
            # sorted as Python strings: a fixed-width string array would cost the number of
            # features times the longest name (one long token made that gigabytes)
            order = np.array(sorted(keep.tolist(), key=names.__getitem__), dtype=np.int64)
            self.vocabulary_ = Vocabulary.from_names(names[order].tolist())
            self.n_features_ = len(order)
            X = X[:, order].tocsr()  # drop rare columns and sort the vocabulary by name
        X.sort_indices()
        return PackedSequences(X, offsets)

    def transform(self, sentences) -> PackedSequences:
        """The token feature matrix of ``sentences`` (features unseen in fit are ignored)."""
        if not hasattr(self, "n_features_"):
            raise NotFittedError("TokenFeatures is not fitted yet; call fit first")
        width = self._check_sentences(sentences)
        fitted = getattr(self, "n_columns_", None)
        if width is not None and fitted is not None and width != fitted:
            raise ValueError(
                f"the tokens have {width} columns, the features were fitted on "
                f"tokens of {fitted} (a column missing or added would shift "
                "every column feature)"
            )
        X, offsets = self._matrix(sentences, self.vocabulary_, grow=False)
        X.sort_indices()
        return PackedSequences(X, offsets)

    def feature_dicts(self, sentences) -> list:
        """The features of ``sentences`` as one ``{name: value}`` dict per token (the format
        of CRFsuite and scikit-learn's DictVectorizer): the names :meth:`transform` keeps
        (all of them when hashed), repeated names summed, so that a CRF trained on them
        sees exactly this featurizer's features.

        Examples
        --------
        >>> from dualstruct.features import TokenFeatures
        >>> feats = TokenFeatures(window=0, affixes=0, conjunctions=False).fit([[("Hi",)]])
        >>> sorted(feats.feature_dicts([[("Hi",)]])[0][0])[:3]
        ['bias', 'first', 'last']
        """
        if not hasattr(self, "n_features_"):
            raise NotFittedError("TokenFeatures is not fitted yet; call fit first")
        vocabulary = self.vocabulary_
        out = []
        for sent in sentences:
            rows = []
            for tok in self._sentence_features(sent):
                row: dict = {}
                for name, value in tok:
                    if vocabulary is None or name in vocabulary:
                        row[name] = row.get(name, 0.0) + value
                rows.append(row)
            out.append(rows)
        return out

    def get_feature_names_out(self, input_features=None) -> np.ndarray:
        """The name of every output column (scikit-learn's accessor): the feature strings,
        or ``hash:<column>`` when the features are hashed."""
        if not hasattr(self, "n_features_"):
            raise NotFittedError("this TokenFeatures is not fitted yet; call fit first")
        if self.vocabulary_ is None:
            return np.array([f"hash:{j}" for j in range(self.n_features_)], dtype=object)
        return _names_in_order(self.vocabulary_)

    # -- persistence (arrays + JSON, no pickle) -----------------------------------------------
    def to_arrays(self) -> tuple[dict, dict]:
        header = {
            "params": self.get_params(),
            "n_features": self.n_features_,
            "n_columns": getattr(self, "n_columns_", None),
        }
        vocabulary = self.vocabulary_
        if vocabulary is None:
            vocabulary = Vocabulary(b"", np.zeros(1, dtype=np.int64))
        elif not isinstance(vocabulary, Vocabulary):
            vocabulary = Vocabulary.from_names(_names_in_order(vocabulary).tolist())
        # the names' UTF-8 bytes and where each ends (files before this held a JSON list)
        blob = np.frombuffer(vocabulary._blob, dtype=np.uint8)
        return header, {"vocabulary_utf8": blob, "vocabulary_offsets": vocabulary._offsets}

    @classmethod
    def from_arrays(cls, header: dict, arrays: dict) -> TokenFeatures:
        feats = cls(**header["params"])
        if "vocabulary_utf8" in arrays:
            vocabulary = _stored_vocabulary(arrays)
        else:  # a JSON list of the names
            names = json.loads(arrays["vocabulary"].tobytes().decode("utf-8"))
            vocabulary = Vocabulary.from_names(names)
        feats.n_features_ = int(header["n_features"])
        n_columns = header.get("n_columns")  # absent from older files: not checked
        feats.n_columns_ = None if n_columns is None else int(n_columns)
        if feats.hashing is None:
            if len(vocabulary) != feats.n_features_:
                raise ValueError("the feature vocabulary does not match its recorded size")
            feats.vocabulary_ = vocabulary
        else:
            feats.vocabulary_ = None
        return feats


def _dict_features(tok: dict):
    out = []
    for name, val in tok.items():
        if isinstance(val, bool):
            if val:
                out.append((str(name), 1.0))
        elif isinstance(val, (int, float, np.integer, np.floating)):
            if not np.isfinite(val):
                raise ValueError(f"feature {name!r} has the non-finite value {val!r}")
            if val != 0:
                out.append((str(name), float(val)))
        elif isinstance(val, str):
            out.append((f"{name}={val}", 1.0))
        else:
            raise TypeError(
                f"feature {name!r} has a value of type {type(val).__name__}; "
                "use str, number or bool"
            )
    return out


def _names_in_order(vocabulary) -> np.ndarray:
    """The names of a vocabulary (a :class:`Vocabulary` or a ``{name: column}`` dict) in
    column order."""
    if isinstance(vocabulary, Vocabulary):
        return vocabulary.names()
    return np.array(sorted(vocabulary, key=vocabulary.__getitem__), dtype=object)


def _stored_vocabulary(arrays) -> Vocabulary:
    """The vocabulary of a model file's ``vocabulary_utf8`` and ``vocabulary_offsets``."""
    blob = np.asarray(arrays["vocabulary_utf8"])
    offsets = np.asarray(arrays["vocabulary_offsets"])
    if blob.dtype != np.uint8 or blob.ndim != 1:
        raise ValueError("the feature vocabulary's names must be a 1-d uint8 array")
    if offsets.dtype.kind not in "iu" or offsets.ndim != 1:
        raise ValueError("the feature vocabulary's offsets must be a 1-d integer array")
    try:
        return Vocabulary(blob.tobytes(), offsets.astype(np.int64))
    except ValueError as exc:
        raise ValueError(f"the feature vocabulary is damaged: {exc}") from None
