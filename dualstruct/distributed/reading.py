"""Training data read on Spark's executors, for data larger than the driver.

The driver never holds the examples. Files (CoNLL, CoNLL-U) are read with Python on the
executors, so every path must be readable there under the same name: a local path with a
local master, or a shared filesystem mounted on every node (``hdfs://``, ``s3://`` and other
URLs are refused with an error saying so). An RDD or DataFrame of examples is written once,
partition by partition, into a directory the executors share and read from there.

Training from files takes three Spark jobs before the first round:

1. a scan, one task per file: every line is parsed and checked (an error names the file and
   line, as the local readers do), the sentences and tokens are counted and the label set
   and column count of each file are returned;
2. a count, one task per range of sentences: each task featurizes its sentences as
   :class:`~dualstruct.features.TokenFeatures` does and emits ``(feature, tokens)`` and
   ``(label, tokens)`` pairs, summed by ``reduceByKey``; ``min_count`` is applied there and
   only the surviving names reach the driver, which refuses up front (with the estimate) a
   vocabulary that would not fit in its memory;
3. the rounds: the vocabulary goes to every executor once as a file (``SparkContext.addFile``,
   as does a large kernel model, e.g. one with a support) and each partition is a small
   recipe, ``(read_tagged_partition, (spec, indices))``, that reads the files on the
   executor and featurizes exactly its examples.

Multi-label files (LIBSVM, MULAN ARFF) are scanned and read by the local loaders on the
executors, one whole file at a time (:class:`MultiLabelFiles`).

Partitions are the solver's own (a random split of the sentence indices,
:func:`~dualstruct.distributed.partition.assign_examples`), so the model equals the one
trained from the same sentences in memory: the same vocabulary, labels and ``w``. A partition
reads every file once per executor process (it keeps about 1/K of the sentences).
"""

from __future__ import annotations

import atexit
import contextlib
import gzip
import hashlib
import os
import pickle
import shutil
import socket
import tempfile
import time
import uuid
import zlib
from collections import Counter
from functools import partial
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from sklearn.base import clone

from ..data.blocks import BlockData
from ..features import TokenFeatures, Vocabulary
from ..memory import check_memory, memory_advice
from ..models.multilabel import MultiLabelDataset, MultiLabelModel, training_memory_parts
from ..models.support import FULL_ROWS_FROM, SUPPORT_ADVICE, support_memory_parts
from ..sequences import PackedSequences
from ..solvers.block import kernel_model
from ..tags import SCHEMES, is_chunk_tagset, to_iobes
from ..weight_support import choose_support, dense_fits

#: a vocabulary entry on the driver is about ``ENTRY_BYTES + name length`` bytes (its
#: offset, and the transient Python string while the sorted names stream in)
ENTRY_BYTES = 16

#: what a file of examples written from an RDD is read as
SPILLED = "pickled"


# -- paths --------------------------------------------------------------------------------------
def executor_path(path) -> str:
    """``path`` as the executors open it: an absolute local path (``file://`` dropped).
    Other URLs are refused: the files are read with Python on the executors."""
    text = os.fspath(path)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(
            f"{text}: {scheme}:// paths are not read on the executors; the training files are "
            "opened with Python there, so give a local path (local master) or a shared "
            "filesystem mounted at the same path on every executor"
        )
    return os.path.abspath(text)


def _where() -> str:
    return f"on the executor {socket.gethostname()}"


def _fault(path, exc) -> str:
    """The message of a reading error ``exc`` met on an executor."""
    if isinstance(exc, FileNotFoundError):
        return f"{path}: no such file {_where()}"
    if isinstance(exc, PermissionError):
        return f"{path}: cannot be read {_where()} (permission denied)"
    if isinstance(exc, IsADirectoryError):
        return f"{path}: is a directory, not a file"
    if isinstance(exc, (OSError, EOFError)):
        return f"{path}: cannot be read {_where()} ({exc})"
    return str(exc)


# -- reading tagged sentences (the same checks and messages as the command line's reader) -------
class TaggedFormat(NamedTuple):
    """How a tagged file is read: ``fmt`` "conll" (``label_column``) or "conllu" (``label``),
    or :data:`SPILLED` (examples written from an RDD)."""

    fmt: str
    label_column: int = -1
    label: str = "upos"


def iter_tagged(path, how: TaggedFormat):
    """Yield ``(first line, tokens, labels)`` per sentence of ``path``: tokens as tuples of
    the feature columns, labels a list of str. A malformed line raises ValueError naming the
    file and line."""
    if how.fmt == SPILLED:
        with open(path, "rb") as fh:
            for i, (tokens, tags) in enumerate(pickle.load(fh)):
                yield i, tokens, tags
        return
    # the dataset readers (and urllib, xml) load only when files are read
    from ..datasets.conll import conllu_sentence, iter_conll_blocks

    for numbers, rows in iter_conll_blocks(path, how.fmt):
        if how.fmt == "conllu":
            toks, labs = conllu_sentence(rows, how.label)
            for lineno, lab in zip(numbers, labs):
                if lab in ("", "_"):
                    raise ValueError(f"{path}:{lineno}: the {how.label.upper()} column is empty")
            yield numbers[0], toks, labs
            continue
        width = len(rows[0])
        if not -width <= how.label_column < width:
            raise ValueError(
                f"{path}:{numbers[0]}: --label-column {how.label_column} does not exist in "
                f"{width} columns"
            )
        first_id = rows[0][0].replace("-", "").replace(".", "")
        if width == 10 and first_id.isdigit():
            raise ValueError(
                f"{path}:{numbers[0]}: this looks like CoNLL-U (10 columns with a numeric "
                "ID); use the conllu format"
            )
        col = how.label_column % width
        yield numbers[0], [tuple(r[:col] + r[col + 1 :]) for r in rows], [r[col] for r in rows]


class FileScan(NamedTuple):
    """What the scan of one file found."""

    path: str
    n_sentences: int
    n_tokens: int
    n_columns: int | None  # feature columns per token (None: dict tokens)
    first_line: int
    labels: tuple


def scan_tagged_file(path, how):
    """The :class:`FileScan` of ``path``, or the error message (str) of its first fault."""
    try:
        n = tokens = 0
        labels = set()
        width = first = None
        for line, toks, labs in iter_tagged(path, how):
            cols = None if isinstance(toks[0], dict) else len(toks[0])
            if n == 0:
                width, first = cols, line
            elif cols != width:
                raise ValueError(
                    f"{path}:{line}: tokens of {cols} feature columns, the first sentence "
                    f"(line {first}) has {width}"
                )
            n += 1
            tokens += len(toks)
            labels.update(labs)
        if n == 0:
            return f"{path}: no sentences found"
        return FileScan(path, n, tokens, width, first, tuple(sorted(labels)))
    except (OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
        return _fault(path, exc)


def _scan_task(how, paths):
    for path in paths:
        yield scan_tagged_file(path, how)


def _encode(labels, scheme):
    if scheme is None:
        return list(labels)
    return to_iobes(labels).tolist()


def _count_task(how, feature_params, scheme, ranges):
    """``(("f", name), tokens)`` and ``(("l", label), tokens)`` of the sentences in
    ``ranges`` (``(path, first, stop)`` sentence numbers within the file)."""
    feats = TokenFeatures(**feature_params)
    hashed = feats.hashing is not None
    for path, first, stop in ranges:
        names, labels = Counter(), Counter()
        try:
            for i, (_, toks, labs) in enumerate(iter_tagged(path, how)):
                if i < first:
                    continue
                if i >= stop:
                    break
                labels.update(_encode(labs, scheme))
                if not hashed:
                    for tok in feats._sentence_features(toks):
                        names.update({name for name, _ in tok})
        except (OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            yield ("error", _fault(path, exc)), 1
            return
        for name, count in names.items():
            yield ("f", name), count
        for label, count in labels.items():
            yield ("l", label), count


# -- the vocabulary on the executors ------------------------------------------------------------
class VocabularyRef(NamedTuple):
    """The feature vocabulary as the executors find it: a file shipped with
    ``SparkContext.addFile`` (``name``), or ``local_path`` where the driver wrote it."""

    name: str
    local_path: str
    size: int
    digest: str


#: vocabularies loaded in this process, by digest
_VOCABULARIES: dict = {}
#: the vocabulary files added to each SparkContext (by application id) of this driver
_ADDED: dict = {}


_VOCABULARY_FOLDER = None


def vocabulary_folder() -> str:
    """Where this process writes vocabularies for ``SparkContext.addFile``: Spark serves an
    added file from its path while its SparkContext lives, so the folder goes only at exit."""
    global _VOCABULARY_FOLDER
    if _VOCABULARY_FOLDER is None:
        _VOCABULARY_FOLDER = tempfile.mkdtemp(prefix="dualstruct-vocabularies-")
        atexit.register(_remove_folder, _VOCABULARY_FOLDER, os.getpid())
    return _VOCABULARY_FOLDER


def _remove_folder(folder, owner):
    """At exit, the vocabularies' folder goes with the process that made it (not with a
    forked child that inherited the exit handler)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, True)


def write_vocabulary(names, folder=None) -> VocabularyRef:
    """Write the vocabulary of the sorted feature ``names`` (an iterable of str, or a
    :class:`~dualstruct.features.Vocabulary`) into ``folder`` as gzip of
    :meth:`Vocabulary.to_bytes <dualstruct.features.Vocabulary.to_bytes>` (the same bytes for
    the same names: one name per content, as Spark requires of added files)."""
    vocab = names if isinstance(names, Vocabulary) else Vocabulary.from_names(names)
    parts = vocab.byte_parts()  # written and hashed in place: no copy of the names
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part)
    digest = sha.hexdigest()
    name = f"dualstruct-vocabulary-{digest[:24]}.bin.gz"
    path = os.path.join(folder or vocabulary_folder(), name)
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as fh:
                for part in parts:
                    fh.write(part)
        os.replace(path + ".tmp", path)
    del parts
    _VOCABULARIES.clear()  # this process has it already: not read back
    _VOCABULARIES[digest] = vocab
    return VocabularyRef(name, path, len(vocab), digest)


def load_vocabulary(ref: VocabularyRef):
    """The vocabulary (a :class:`~dualstruct.features.Vocabulary`) of ``ref``, read once per
    process."""
    vocab = _VOCABULARIES.get(ref.digest)
    if vocab is not None:
        return vocab
    vocab = read_vocabulary(ref, _shipped_path(ref))
    _VOCABULARIES.clear()  # one run's vocabulary at a time per process
    _VOCABULARIES[ref.digest] = vocab
    return vocab


def read_vocabulary(ref: VocabularyRef, path) -> Vocabulary:
    """The vocabulary of ``ref`` read from its file ``path`` (checked against its digest)."""
    offsets, blob = _read_parts(ref, path)
    return Vocabulary(blob, offsets)


#: bytes per read when a vocabulary file is read back
READ_SLICE = 1 << 20


def _read_parts(ref, path, where=None):
    """``(offsets, names' UTF-8 buffer)`` of the vocabulary file of ``ref`` at ``path`` (or
    an open binary file, read from its start): the offsets first, then the names read into
    a buffer of their size (no copies)."""
    head_bytes = 8 * (ref.size + 1)
    where = _where() if where is None else where
    try:
        if isinstance(path, (str, os.PathLike)):
            stored = os.path.getsize(path)
        else:
            path.seek(0)
            stored = os.fstat(path.fileno()).st_size
        with gzip.open(path, "rb") as fh:
            head = fh.read(head_bytes)
            whole = len(head) == head_bytes
            offsets = np.frombuffer(head if whole else bytes(8), dtype="<i8")
            offsets = offsets.astype(np.int64, copy=False)
            size = int(offsets[-1])
            # deflate expands at most about 1032-fold: a damaged size is not allocated
            blob = bytearray(size if 0 <= size <= 1100 * stored else 0)
            view, at = memoryview(blob), 0
            while at < len(blob):
                part = fh.read(min(READ_SLICE, len(blob) - at))
                if not part:
                    break
                view[at : at + len(part)] = part
                at += len(part)
            view.release()
            complete = whole and at == size and not fh.read(1)
    except (OSError, EOFError) as exc:
        raise ValueError(
            f"the feature vocabulary {ref.name} is not readable {where} ({exc})"
        ) from None
    sha = hashlib.sha256(head)
    sha.update(blob)
    if not complete or sha.hexdigest() != ref.digest:
        raise ValueError(f"the feature vocabulary {ref.name} {where} is not the driver's")
    return offsets, blob


class DriverVocabulary(Vocabulary):
    """The vocabulary a driver wrote for its executors (:func:`write_vocabulary`), read
    back from that file the first time its names are needed (a prediction, the model
    file): the driver does not hold the names while it trains. The file is opened here and
    read through that handle, so it may be removed meanwhile (a temporary-file cleaner, a
    forked child's exit). Pickled, it is a plain :class:`~dualstruct.features.Vocabulary`."""

    __slots__ = ("_ref", "_handle")

    def __init__(self, ref: VocabularyRef):
        self._ref = ref
        self._index = None
        self._handle = open(ref.local_path, "rb")  # noqa: SIM115 (read and closed on first use)

    def __len__(self) -> int:
        return self._ref.size

    def __getattr__(self, name):
        if name not in ("_blob", "_offsets"):
            raise AttributeError(name)
        with self._handle:
            offsets, blob = _read_parts(self._ref, self._handle, "on the driver")
        self._offsets, self._blob = offsets, bytes(blob)  # immutable, as a Vocabulary's
        del blob
        return getattr(self, name)

    def __reduce__(self):
        return Vocabulary, (self._blob, self._offsets)

    def __del__(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            handle.close()

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} names)"


def _shipped_path(ref) -> str:
    """Where this process finds the file ``ref`` the driver added: Spark's copy, or (no
    Spark here, as with the in-process engine) the driver's own."""
    with contextlib.suppress(Exception):
        from pyspark import SparkFiles

        shipped = SparkFiles.get(ref.name)
        if os.path.exists(shipped):
            return shipped
    return ref.local_path


def _add_file(sc, name, path):
    """``sc.addFile(path)`` once per SparkContext (Spark refuses a second, different add)."""
    added = _ADDED.setdefault(sc.applicationId, set())
    if name not in added:
        sc.addFile(path)
        added.add(name)


class SharedRef(NamedTuple):
    """A large object every partition's recipe needs (the kernel model with its support), as
    a pickle file shipped once per executor instead of once per recipe."""

    name: str
    local_path: str
    digest: str


#: objects shared this way larger than this go by file; smaller ones travel in the recipe
SHARE_FROM_BYTES = 16 * 1024
#: shared objects loaded in this process, by digest
_SHARED: dict = {}


def share(obj, sc):
    """``obj``, or a :class:`SharedRef` to it when it pickles large and ``sc`` is given."""
    if sc is None:
        return obj
    try:
        blob = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError):
        return obj  # the recipe's own pickling says what is wrong
    if len(blob) <= SHARE_FROM_BYTES:
        return obj
    digest = hashlib.sha256(blob).hexdigest()
    name = f"dualstruct-object-{digest[:24]}.pkl"
    path = os.path.join(vocabulary_folder(), name)
    if not os.path.exists(path):
        with open(path + ".tmp", "wb") as fh:
            fh.write(blob)
        os.replace(path + ".tmp", path)
    _add_file(sc, name, path)
    _SHARED.clear()
    _SHARED[digest] = obj
    return SharedRef(name, path, digest)


def resolve(obj):
    """The object a :class:`SharedRef` stands for (loaded once per process), or ``obj``."""
    if not isinstance(obj, SharedRef):
        return obj
    cached = _SHARED.get(obj.digest)
    if cached is not None:
        return cached
    path = _shipped_path(obj)
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError as exc:
        raise ValueError(f"{obj.name} is not readable {_where()} ({exc})") from None
    if hashlib.sha256(blob).hexdigest() != obj.digest:
        raise ValueError(f"{path} {_where()} is not the driver's")
    value = pickle.loads(blob)
    _SHARED.clear()  # one run's at a time per process
    _SHARED[obj.digest] = value
    return value


# -- a partition, read where it is trained --------------------------------------------------------
class TaggedSpec(NamedTuple):
    """Everything a partition of tagged files needs, small enough to ship with each recipe."""

    files: tuple  # (path, first global sentence index, sentences) per file
    how: TaggedFormat
    feature_params: dict
    n_columns: int | None
    n_features: int
    vocabulary: VocabularyRef | None
    classes: tuple
    scheme: str | None
    intercept: float | None  # the intercept column's value (None: no intercept)
    kmodel: object


def read_tagged_sentences(spec: TaggedSpec, indices):
    """The sentences ``indices`` (sorted global numbers) of ``spec``'s files: tokens and
    labels, in order."""
    indices = np.asarray(indices, dtype=np.int64)
    sentences, labels = [], []
    for path, start, count in spec.files:
        lo, hi = np.searchsorted(indices, [start, start + count])
        if lo == hi:
            continue
        wanted = indices[lo:hi] - start
        k = 0
        try:
            for i, (_, toks, labs) in enumerate(iter_tagged(path, spec.how)):
                if i != wanted[k]:
                    continue
                sentences.append(toks)
                labels.append(labs)
                k += 1
                if k == len(wanted):
                    break
        except (OSError, EOFError, ValueError, pickle.UnpicklingError) as exc:
            raise ValueError(_fault(path, exc)) from None
        if k != len(wanted):
            raise ValueError(
                f"{path}: has {start + k} sentences {_where()}, the scan counted {count}; was "
                "the file changed during training?"
            )
    return sentences, labels


def read_tagged_partition(spec: TaggedSpec, indices) -> BlockData:
    """The block data of the sentences ``indices``, read and featurized on this executor
    exactly as :meth:`SequenceTagger.fit <dualstruct.tagger.SequenceTagger.fit>` does in
    memory."""
    sentences, labels = read_tagged_sentences(spec, indices)
    feats = TokenFeatures(**spec.feature_params)
    feats.vocabulary_ = None if spec.vocabulary is None else load_vocabulary(spec.vocabulary)
    feats.n_features_ = spec.n_features
    feats.n_columns_ = spec.n_columns
    data = feats.transform(sentences)
    classes = np.asarray(spec.classes)
    flat = np.asarray([t for labs in labels for t in _encode(labs, spec.scheme)])
    codes = np.clip(np.searchsorted(classes, flat), 0, len(classes) - 1)
    if np.any(classes[codes] != flat):
        unseen = np.unique(flat[classes[codes] != flat])[:5].tolist()
        raise ValueError(f"labels {unseen} were not in the scan's label set {_where()}")
    X = data.X
    if spec.intercept is not None:
        X = sp.hstack([X, np.full((X.shape[0], 1), spec.intercept)], format="csr")
    packed = PackedSequences(X, data.offsets, codes.astype(np.int32))
    return resolve(spec.kmodel).block_data(packed)


class ExecutorData(BlockData):
    """Training data that stays on the executors: what the driver knows of it (the example
    and labelling-entry counts, a fingerprint) and the recipe of any subset, which an engine
    runs where the subset is trained (:func:`~dualstruct.distributed.partition.split_sources`).
    """

    kind = "block"

    def __init__(self, build, spec, n_examples, n_entries, fingerprint):
        super().__init__(None, (fingerprint,))
        self._build = build
        self._spec = spec
        self._n = int(n_examples)
        self._entries = int(n_entries)

    @property
    def n_blocks(self) -> int:
        return self._n

    n_sequences = n_blocks

    @property
    def n_tokens(self) -> int:
        return self._entries

    def fingerprint_arrays(self):
        return self._fingerprint

    def take(self, indices):
        raise TypeError(
            "this training data is read on the Spark executors and cannot be subset on the "
            "driver (primal_sample and keep_dual_state need data in memory)"
        )

    def source_part(self, indices):
        return self._build, self._spec, PackedIndices(indices)


class PackedIndices:
    """Sorted example numbers, shipped as their compressed gaps (a random 1/K of n examples
    takes about a byte each instead of eight)."""

    def __init__(self, indices):
        arr = np.sort(np.asarray(indices, dtype=np.int64))
        gaps = np.diff(arr, prepend=0)
        dtype = np.uint8 if gaps.max(initial=0) < 256 else np.int64
        self.n = len(arr)
        self.dtype = np.dtype(dtype).str
        self.blob = zlib.compress(gaps.astype(dtype).tobytes(), 6)

    def __array__(self, dtype=None, copy=None):
        gaps = np.frombuffer(zlib.decompress(self.blob), dtype=self.dtype).astype(np.int64)
        if len(gaps) != self.n:
            raise ValueError("corrupted example numbers in a partition's recipe")
        return np.cumsum(gaps).astype(dtype or np.int64)


# -- the Spark side on the driver -----------------------------------------------------------------
@contextlib.contextmanager
def spark_session(backend_options):
    """The active Spark session, or one started with ``backend_options`` (as the engine would)
    and stopped at the end."""
    from .spark import SparkEngine  # the Spark engine: loaded by Spark runs only

    options = {
        k: v for k, v in (backend_options or {}).items() if k not in ("keep_dual_state", "resume")
    }
    engine = SparkEngine(**options)
    engine.open()
    try:
        yield engine.session
    finally:
        engine.stop()


def _errors(items):
    """Raise the first error message among ``items`` (strings), sorted for a stable choice."""
    errors = sorted(i for i in items if isinstance(i, str))
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ValueError(errors[0] + more)


def refuse_large_vocabulary(n_names, n_chars, n_labels, what="feature vocabulary"):
    """MemoryError (with the estimate) when the driver cannot hold the vocabulary and a
    weight vector over it."""
    check_memory(
        f"the {what} of {n_names:,} features (collected on the driver)",
        {
            "names": ENTRY_BYTES * n_names + n_chars,
            "weights and their copies": 8 * 4 * (n_names * max(n_labels, 1)),
        },
        "Lower it with a larger min_count (--min-count), feature hashing (--hashing) or "
        "a smaller window.",
    )


class TaggedFiles:
    """CoNLL or CoNLL-U files to be read on the Spark executors: pass this instead of
    ``(sentences, labels)`` to :meth:`SequenceTagger.fit
    <dualstruct.tagger.SequenceTagger.fit>` (its SVM with ``backend="spark"``).

    Parameters
    ----------
    paths : str or list of str
        The training files (``.gz`` allowed), read in this order; each must be readable on
        every executor under the same path (``file://`` or a plain path).
    format : {"conll", "conllu"}
    label_column : int, default -1
        CoNLL: the label's column.
    label : str, default "upos"
        CoNLL-U: what is predicted (:data:`~dualstruct.datasets.conll.CONLLU_LABELS`).

    Examples
    --------
    >>> from dualstruct import StructuredSVM
    >>> from dualstruct.distributed.reading import TaggedFiles
    >>> from dualstruct.tagger import SequenceTagger
    >>> svm = StructuredSVM(C=0.1, fit_intercept=False, backend="spark")
    >>> tagger = SequenceTagger(svm=svm)
    >>> tagger.fit(TaggedFiles(["/data/train-1.txt.gz", "/data/train-2.txt.gz"]))  # doctest: +SKIP
    """

    def __init__(self, paths, format="conll", label_column=-1, label="upos"):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        paths = [executor_path(p) for p in paths]
        if not paths:
            raise ValueError("TaggedFiles needs at least one path")
        if format not in ("conll", "conllu"):
            raise ValueError(f"format must be 'conll' or 'conllu', got {format!r}")
        # the dataset readers (and urllib, xml) load only when files are read
        from ..datasets.conll import CONLLU_LABELS

        if format == "conllu" and label not in CONLLU_LABELS:
            raise ValueError(f"label must be one of {CONLLU_LABELS}, got {label!r}")
        self.paths = paths
        self.how = TaggedFormat(format, int(label_column), label)
        self.scans = None

    def scan(self, sc) -> list:
        """Read every file once on the executors (one task per file): the
        :class:`FileScan` of each, or a ValueError naming the file (and line) at fault."""
        if self.scans is None:
            out = (
                sc.parallelize(self.paths, len(self.paths))
                .mapPartitions(partial(_scan_task, self.how))
                .collect()
            )
            _errors(out)
            check_same_columns(out)
            check_label_sets(out)
            self.scans = out
        return self.scans

    @property
    def n_sentences(self):
        return sum(s.n_sentences for s in self.scans)

    @property
    def n_tokens(self):
        return sum(s.n_tokens for s in self.scans)


def check_same_columns(scans):
    """Every file's tokens have the first file's feature columns."""
    first = scans[0]
    for s in scans[1:]:
        if s.n_columns != first.n_columns:
            raise ValueError(
                f"{s.path}:{s.first_line}: tokens of {s.n_columns} feature columns, but "
                f"{first.path}:{first.first_line} has {first.n_columns}: the files must share "
                "one column layout"
            )


def check_label_sets(scans):
    """No file's labels are disjoint from all the others' (mixed label sets: a file of
    another tag set or with the label in another column)."""
    if len(scans) < 2:
        return
    for s in reversed(scans):  # two files disjoint: the later one is named
        others = set().union(*(set(o.labels) for o in scans if o is not s))
        if not others & set(s.labels):
            raise ValueError(
                f"{s.path}: its labels {list(s.labels[:5])} share none with the other files' "
                f"({sorted(others)[:5]}): mixed label sets (another tag set, or the label in "
                "another column)"
            )


def _ranges(scans, n_tasks):
    """``(path, first, stop)`` sentence ranges: the files cut into about ``n_tasks`` pieces."""
    total = sum(s.n_sentences for s in scans)
    per = max(1, -(-total // max(1, n_tasks)))
    out = []
    for s in scans:
        for first in range(0, s.n_sentences, per):
            out.append((s.path, first, min(s.n_sentences, first + per)))
    return out


def count_vocabulary(sc, how, scans, feature_params, scheme):
    """The distributed count: ``(vocabulary ref or None, n_features, classes)``; the
    vocabulary (``min_count`` applied on the executors) is shipped to every executor."""
    feats = TokenFeatures(**feature_params)
    ranges = _ranges(scans, 2 * sc.defaultParallelism)
    counts = (
        sc.parallelize(ranges, len(ranges))
        .mapPartitions(partial(_count_task, how, feature_params, scheme))
        .reduceByKey(lambda a, b: a + b, max(1, sc.defaultParallelism))
    )
    min_count = int(feature_params.get("min_count", 1))
    kept = counts.filter(lambda kv: kv[0][0] != "f" or kv[1] >= min_count).persist()
    try:
        n_names, n_chars, labels, errors = kept.map(_tally).reduce(_add_tally)
        if errors:
            _errors(_names(kept, "error").collect())
        classes = tuple(sorted(_names(kept, "l").collect()))
        if feats.hashing is not None:
            return None, int(feats.hashing), classes
        refuse_large_vocabulary(n_names, n_chars, len(classes))
        # sorted on the executors, streamed here into the compact vocabulary: the driver
        # never holds the names as Python strings
        names = _names(kept, "f").sortBy(_identity, numPartitions=max(1, sc.defaultParallelism))
        vocab = Vocabulary.from_names(names.toLocalIterator())
    finally:
        kept.unpersist()
    ref = write_vocabulary(vocab)
    _VOCABULARIES.pop(ref.digest)  # the driver reads it back when it needs the names
    _add_file(sc, ref.name, ref.local_path)
    return ref, len(vocab), classes


def _identity(x):
    return x


def _names(counts, kind):
    """The names of the counted keys of ``kind`` ("f" features, "l" labels, "error")."""
    return counts.filter(lambda kv: kv[0][0] == kind).map(lambda kv: kv[0][1])


def _tally(kv):
    (kind, name), _ = kv
    if kind == "f":
        return 1, len(name), 0, 0
    return 0, 0, int(kind == "l"), int(kind == "error")


def _add_tally(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _pairs_task(spec, ranges):
    """The (column, label) pairs of the sentences in ``ranges``, as ``(key, count)`` with
    ``key = column · K + label`` (the intercept column too), featurized as the partitions
    are."""
    feats = TokenFeatures(**spec.feature_params)
    feats.vocabulary_ = None if spec.vocabulary is None else load_vocabulary(spec.vocabulary)
    feats.n_features_ = spec.n_features
    feats.n_columns_ = spec.n_columns
    classes = np.asarray(spec.classes)
    K = len(classes)
    for path, first, stop in ranges:
        sentences, labels = [], []
        for i, (_, toks, labs) in enumerate(iter_tagged(path, spec.how)):
            if i >= stop:
                break
            if i >= first:
                sentences.append(toks)
                labels.append(labs)
        X = feats.transform(sentences).X
        flat = np.asarray([t for labs in labels for t in _encode(labs, spec.scheme)])
        codes = np.searchsorted(classes, flat).astype(np.int64)
        token = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
        keys = X.indices.astype(np.int64) * K + codes[token]
        if spec.intercept is not None:
            keys = np.concatenate([keys, spec.n_features * K + codes])
        keys, counts = np.unique(keys, return_counts=True)
        yield from zip(keys.tolist(), counts.tolist())


def _kept_keys(min_count, items):
    """The counted keys met at least ``min_count`` times, as one int64 array."""
    yield np.fromiter((k for k, c in items if c >= min_count), dtype=np.int64)


def count_observed_pairs(sc, spec, scans, min_count):
    """The observed support ``(indptr, labels)`` of the sentences on the executors, as
    :func:`~dualstruct.models.chain.observed_support` finds it in memory: the pairs are
    counted by ``reduceByKey`` and ``min_count`` applied there; only the kept pairs' keys
    reach the driver (8 bytes a pair)."""
    ranges = _ranges(scans, 2 * sc.defaultParallelism)
    parts = (
        sc.parallelize(ranges, len(ranges))
        .mapPartitions(partial(_pairs_task, spec))
        .reduceByKey(lambda a, b: a + b, max(1, sc.defaultParallelism))
        .mapPartitions(partial(_kept_keys, int(min_count)))
        .collect()
    )
    width = spec.n_features + (spec.intercept is not None)
    return support_from_keys(parts, width, len(spec.classes))


#: keys per slice where :func:`support_from_keys` derives features and labels from them
KEY_CHUNK = 1 << 16


def support_from_keys(parts, n_features, n_labels, full_rows_from=FULL_ROWS_FROM):
    """:func:`~dualstruct.models.support.support_from_pairs` of the distinct kept pairs
    given as keys ``feature · K + label`` (a list of int64 arrays, emptied as they are
    read): sorted keys are the support's order, so the driver holds the keys, the labels
    (12 bytes a pair, against about 80 for the pairs divided and sorted), four arrays over
    the features and one slice's temporaries."""
    n = sum(len(p) for p in parts)
    check_memory(
        "the observed support", support_memory_parts(n_features, n_labels, n), SUPPORT_ADVICE
    )
    keys, pos = np.empty(n, dtype=np.int64), 0
    while parts:
        part = parts.pop()
        keys[pos : pos + len(part)] = part
        pos += len(part)
        del part
    keys.sort()
    met = np.zeros(n_features, dtype=np.int64)  # the kept pairs of each feature
    for lo in range(0, n, KEY_CHUNK):
        met += np.bincount(keys[lo : lo + KEY_CHUNK] // n_labels, minlength=n_features)
    full = met >= max(2.0, float(full_rows_from) * n_labels)
    first = np.zeros(n_features + 1, dtype=np.int64)  # where a feature's keys start
    np.cumsum(met, out=first[1:])
    met[full] = n_labels  # now the support's row lengths
    indptr = np.zeros(n_features + 1, dtype=np.int64)
    np.cumsum(met, out=indptr[1:])
    del met
    labels = np.empty(int(indptr[-1]), dtype=np.int32)
    for lo in range(0, n, KEY_CHUNK):
        features, label = np.divmod(keys[lo : lo + KEY_CHUNK], n_labels)
        kept = ~full[features]
        features = features[kept]
        at = indptr[features] + (np.flatnonzero(kept) + lo - first[features])
        labels[at] = label[kept]
    rows = np.flatnonzero(full)
    per = max(1, KEY_CHUNK // n_labels)
    for lo in range(0, len(rows), per):
        starts = indptr[rows[lo : lo + per]]
        labels[(starts[:, None] + np.arange(n_labels)).ravel()] = np.tile(
            np.arange(n_labels, dtype=np.int32), len(starts)
        )
    return indptr, labels


def fingerprint(*parts) -> np.ndarray:
    h = hashlib.sha256(repr(parts).encode("utf-8"))
    return np.frombuffer(h.digest(), dtype=np.uint8).copy()


class TaggedOnExecutors:
    """What :meth:`StructuredSVM.fit <dualstruct.StructuredSVM.fit>` trains on when the
    sentences stay on the executors (made by :func:`fit_tagger`)."""

    def __init__(self, files, spec_fields, n_features, classes, sc=None):
        self.files = files
        self.spec_fields = spec_fields
        self.n_features = n_features
        self.classes = classes
        self.sc = sc

    def prepare(self, est):
        """Set ``est``'s classes, width and model; return the :class:`ExecutorData`."""
        est.classes_ = np.asarray(self.classes)
        est.n_features_in_ = self.n_features
        width = self.n_features + (1 if est.fit_intercept else 0)

        def observed():
            return count_observed_pairs(
                self.sc,
                TaggedSpec(
                    files=(),
                    intercept=float(est.intercept_scaling) if est.fit_intercept else None,
                    kmodel=None,
                    **self.spec_fields,
                ),
                self.files.scans,
                est.weights_min_count,
            )

        support = choose_support(est, width, len(est.classes_), observed)
        est.model_ = est._make_model(width, support)
        scans = self.files.scans
        files, start = [], 0
        for s in scans:
            files.append((s.path, start, s.n_sentences))
            start += s.n_sentences
        spec = TaggedSpec(
            files=tuple(files),
            intercept=float(est.intercept_scaling) if est.fit_intercept else None,
            kmodel=share(kernel_model(est.model_), self.sc),
            **self.spec_fields,
        )
        fp = fingerprint(
            [(s.path, s.n_sentences, s.n_tokens) for s in scans],
            spec.vocabulary.digest if spec.vocabulary else spec.n_features,
            spec.classes,
            spec.how,
            spec.scheme,
            spec.intercept,
        )
        return ExecutorData(read_tagged_partition, spec, start, self.files.n_tokens, fp)


def is_spark_input(obj) -> bool:
    """Whether ``obj`` is training input for the executors: :class:`TaggedFiles`, or a
    PySpark RDD or DataFrame."""
    if isinstance(obj, TaggedFiles):
        return True
    module = type(obj).__module__ or ""
    kinds = ("RDD", "PipelinedRDD", "DataFrame")
    return module.startswith("pyspark.") and type(obj).__name__ in kinds


def fit_tagger(tagger, examples, labels=None, validation_data=None, on_stage=None):
    """:meth:`SequenceTagger.fit <dualstruct.tagger.SequenceTagger.fit>` on ``examples`` read
    on the executors: :class:`TaggedFiles`, or an RDD of ``(tokens, tags)`` pairs, or a
    DataFrame whose first two columns are the tokens and the tags (:func:`spill_examples`).
    The validation data, if any, is featurized on the driver."""

    if labels is not None:
        raise ValueError(
            "labels must be None when the sentences are read on the executors (the tags come "
            "with them)"
        )
    if tagger.tag_scheme is not None and tagger.tag_scheme not in SCHEMES:
        raise ValueError(f"tag_scheme must be None or one of {SCHEMES}, got {tagger.tag_scheme!r}")
    if tagger.svm is None or getattr(tagger.svm, "backend", "local") != "spark":
        raise ValueError(
            "sentences read on the Spark executors need an SVM with backend='spark' "
            "(SequenceTagger(svm=StructuredSVM(..., backend='spark')))"
        )
    if (tagger.svm.backend_options or {}).get("keep_dual_state"):
        raise ValueError(
            "keep_dual_state brings the training data to the driver: read the sentences in memory"
        )
    clock = time.perf_counter()

    def stage(name):
        nonlocal clock
        if on_stage is not None:
            now = time.perf_counter()
            on_stage(name, now - clock)
            clock = now

    callback = tagger.svm.callback
    svm = clone(tagger.svm.set_params(callback=None)).set_params(callback=callback)
    tagger.svm.set_params(callback=callback)
    svm._validate_params()
    features = clone(tagger.features) if tagger.features is not None else TokenFeatures()
    params = features.get_params()
    stage("features")
    spill = None
    try:
        with spark_session(svm.backend_options) as session:
            sc = session.sparkContext
            if not isinstance(examples, TaggedFiles):
                examples, spill = spill_examples(examples, svm.backend_options, sc)
            scans = examples.scan(sc)
            raw = sorted(set().union(*(s.labels for s in scans)))
            if len(raw) < 2:
                raise ValueError(
                    f"{scans[0].path}: the label column holds a single value {raw}; check the "
                    "format and the label column"
                )
            if tagger.tag_scheme is not None and not is_chunk_tagset(raw):
                raise ValueError(
                    f"tag_scheme={tagger.tag_scheme!r} needs chunk tags (B-/I-/O); these "
                    "labels are not"
                )
            ref, n_features, classes = count_vocabulary(
                sc, examples.how, scans, params, tagger.tag_scheme
            )
            features.n_columns_ = scans[0].n_columns
            features.n_features_ = n_features
            val = scorer = None
            if validation_data is not None:
                if ref is not None:  # its lookup (a dict of every name) goes with it
                    features.vocabulary_ = read_vocabulary(ref, ref.local_path)
                vs, vl = validation_data
                val = (features.transform(vs), tagger._encode(vl))
                scorer = tagger._make_scorer(vl)
            # the names are read back from the driver's file when needed, after training
            features.vocabulary_ = None if ref is None else DriverVocabulary(ref)
            source = TaggedOnExecutors(
                examples,
                dict(
                    how=examples.how,
                    feature_params=params,
                    n_columns=features.n_columns_,
                    n_features=n_features,
                    vocabulary=ref,
                    classes=classes,
                    scheme=tagger.tag_scheme,
                ),
                n_features,
                classes,
                sc,
            )
            tagger.features_ = features
            tagger.svm_ = svm
            stage("training")
            svm.fit(source, validation_data=val, validation_scorer=scorer)
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    _VOCABULARIES.clear()
    return tagger


# -- RDDs and DataFrames ---------------------------------------------------------------------------
def _spill_task(folder, index, examples):
    rows = []
    for i, example in enumerate(examples):
        where = f"partition {index}, example {i} of the RDD"
        try:
            tokens, tags = example
            toks = [t if isinstance(t, dict) else tuple(t) for t in tokens]
            tags = list(tags)
        except (TypeError, ValueError):
            yield index, f"{where}: not a (tokens, tags) pair: {example!r:.80}"
            return
        if not toks or len(toks) != len(tags):
            yield index, f"{where}: {len(toks)} tokens but {len(tags)} tags"
            return
        if not all(isinstance(t, str) for t in tags):
            yield index, f"{where}: the tags must be strings"
            return
        rows.append((toks, tags))
    if not rows:
        return
    path = os.path.join(folder, f"part-{index:06d}.pkl")
    with open(path, "wb") as fh:
        pickle.dump(rows, fh, protocol=pickle.HIGHEST_PROTOCOL)
    yield index, path


def spill_folder(backend_options, sc) -> tuple:
    """``(folder, made)``: where an RDD's examples are written for the executors: under the
    ``checkpoint_dir`` (a shared filesystem on a cluster), else a temporary directory
    (local masters only)."""
    checkpoint = (backend_options or {}).get("checkpoint_dir")
    if checkpoint is not None:
        base = executor_path(checkpoint)
        folder = os.path.join(base, f"input-{uuid.uuid4().hex[:12]}")
        os.makedirs(folder)
        return folder, folder
    if not sc.master.startswith("local"):
        raise ValueError(
            "an RDD or DataFrame of examples is written once into a folder every executor "
            "reads: give backend_options={'checkpoint_dir': ...} on a filesystem the "
            f"executors share (the master is {sc.master!r})"
        )
    folder = tempfile.mkdtemp(prefix="dualstruct-examples-")
    return folder, folder


def spill_examples(examples, backend_options, sc):
    """An RDD of ``(tokens, tags)`` pairs (tokens: a list of token tuples of str, or of
    feature dicts; tags: a list of str), or a DataFrame whose first two columns are those,
    written partition by partition into a folder the executors share: ``(TaggedFiles over
    the written parts, the folder)``."""
    rdd = examples
    if type(examples).__name__ == "DataFrame":
        if len(examples.columns) < 2:
            raise ValueError(
                "a DataFrame of examples needs two columns: the tokens (array of arrays of "
                "str) and the tags (array of str)"
            )
        rdd = examples.rdd.map(_row_pair)
    folder, made = spill_folder(backend_options, sc)
    parts = sorted(rdd.mapPartitionsWithIndex(partial(_spill_task, folder)).collect())
    try:
        _errors([p for _, p in parts if not p.startswith(folder)])
    except ValueError:
        shutil.rmtree(made, ignore_errors=True)
        raise
    if not parts:
        shutil.rmtree(made, ignore_errors=True)
        raise ValueError("the RDD of examples is empty")
    files = TaggedFiles.__new__(TaggedFiles)
    files.paths = [path for _, path in parts]
    files.how = TaggedFormat(SPILLED)
    files.scans = None
    return files, made


def _row_pair(row):
    return row[0], row[1]


# -- multi-label files (LIBSVM, MULAN ARFF) --------------------------------------------------------
def _load_multilabel(path, labels, n_features, n_labels):
    """``(X, Y, feature names, label names)`` of one LIBSVM or ARFF file, read by the local
    loaders (their checks and messages); names are None for LIBSVM."""
    # the dataset readers (and urllib, xml) load only when files are read
    from ..datasets.multilabel import load_arff, load_libsvm_multilabel

    if path.endswith((".arff", ".arff.gz")):
        X, Y, features, label_names = load_arff(path, labels)
        if n_features is not None and X.shape[1] != n_features:
            raise ValueError(f"{path}: {X.shape[1]} features, the other files have {n_features}")
        return X, Y, tuple(features), tuple(label_names)
    X, Y = load_libsvm_multilabel(path, n_features, n_labels)
    return X, Y, None, None


class MultiLabelScan(NamedTuple):
    path: str
    n_examples: int
    n_features: int
    n_labels: int
    feature_names: tuple | None
    label_names: tuple | None


def _scan_multilabel_task(labels, n_features, n_labels, paths):
    for path in paths:
        try:
            X, Y, features, names = _load_multilabel(path, labels, n_features, n_labels)
            yield MultiLabelScan(path, X.shape[0], X.shape[1], Y.shape[1], features, names)
        except (OSError, EOFError, ValueError) as exc:
            yield _fault(path, exc)


class MultiLabelSpec(NamedTuple):
    files: tuple  # (path, first global example index, examples) per file
    labels: object  # ARFF: what names the label attributes
    n_features: int
    n_labels: int
    intercept: float | None
    kmodel: object


def read_multilabel_partition(spec: MultiLabelSpec, indices) -> BlockData:
    """The block data of the examples ``indices`` (sorted), read on this executor as the
    local loaders read them (one file in memory at a time)."""
    indices = np.asarray(indices, dtype=np.int64)
    Xs, Ys = [], []
    for path, start, count in spec.files:
        lo, hi = np.searchsorted(indices, [start, start + count])
        if lo == hi:
            continue
        try:
            X, Y, _, _ = _load_multilabel(path, spec.labels, spec.n_features, spec.n_labels)
        except (OSError, EOFError, ValueError) as exc:
            raise ValueError(_fault(path, exc)) from None
        if X.shape[0] != count:
            raise ValueError(
                f"{path}: has {X.shape[0]} examples {_where()}, the scan counted {count}; was "
                "the file changed during training?"
            )
        Xs.append(X[indices[lo:hi] - start])
        Ys.append(Y[indices[lo:hi] - start])
    X = sp.vstack(Xs, format="csr")
    if spec.intercept is not None:
        X = sp.hstack([X, np.full((X.shape[0], 1), spec.intercept)], format="csr")
    data = MultiLabelDataset(X, np.vstack(Ys).astype(np.int64))
    return resolve(spec.kmodel).block_data(data)


class MultiLabelFiles:
    """LIBSVM multi-label or MULAN ARFF files to be read on the Spark executors: pass this as
    ``X`` (``Y=None``) to :meth:`MultiLabelSVM.fit <dualstruct.MultiLabelSVM.fit>` with
    ``backend="spark"``. Each executor reads one whole file at a time (split large data
    into several files); the driver holds only their counts.

    Parameters
    ----------
    paths : str or list of str
        The files, read in this order (``.arff``/``.arff.gz`` are ARFF, others LIBSVM).
    labels : str, list of str or int, optional
        ARFF: the MULAN XML file, the label attributes' names or their number (the last ones).
    n_features, n_labels : int, optional
        LIBSVM widths (default: the largest index seen in any file, plus one).

    Examples
    --------
    >>> from dualstruct import MultiLabelSVM
    >>> from dualstruct.distributed.reading import MultiLabelFiles
    >>> svm = MultiLabelSVM(edges="full", backend="spark")
    >>> svm.fit(MultiLabelFiles(["/data/yeast-1.svm", "/data/yeast-2.svm"]))  # doctest: +SKIP
    """

    def __init__(self, paths, labels=None, n_features=None, n_labels=None):
        if isinstance(paths, (str, os.PathLike)):
            paths = [paths]
        self.paths = [executor_path(p) for p in paths]
        if not self.paths:
            raise ValueError("MultiLabelFiles needs at least one path")
        if isinstance(labels, str) and labels.isdigit():
            labels = int(labels)
        elif isinstance(labels, (str, os.PathLike)):
            labels = executor_path(labels)
        self.labels = labels
        self.n_features = n_features
        self.n_labels = n_labels
        self.scans = None
        self._sc = None

    def scan(self, sc) -> list:
        """Read every file once on the executors (one task per file), with the local
        loaders' checks: the :class:`MultiLabelScan` of each, or a ValueError naming the file
        (and line) at fault; ARFF files must share their feature and label attributes."""
        if self.scans is None:
            task = partial(_scan_multilabel_task, self.labels, self.n_features, self.n_labels)
            self._sc = sc
            out = sc.parallelize(self.paths, len(self.paths)).mapPartitions(task).collect()
            _errors(out)
            first = out[0]
            for s in out[1:]:
                if s.label_names != first.label_names:
                    raise ValueError(
                        f"{s.path}: label attributes {list(s.label_names or ())[:5]} differ from "
                        f"{first.path}'s {list(first.label_names or ())[:5]}: mixed label sets"
                    )
                if s.feature_names != first.feature_names:
                    raise ValueError(f"{s.path}: its feature attributes differ from {first.path}'s")
            self.scans = out
        return self.scans

    @property
    def n_examples(self):
        return sum(s.n_examples for s in self.scans)

    @property
    def shape(self):
        """``(examples, features, labels)`` found by the scan."""
        d = self.n_features or max(s.n_features for s in self.scans)
        L = self.n_labels or max(s.n_labels for s in self.scans)
        return self.n_examples, d, L

    def fit(self, est, validation_data=None):
        """``est.fit(self)`` with the files scanned on the (active, or started) session."""
        if getattr(est, "backend", "local") != "spark":
            raise ValueError("MultiLabelFiles are read on Spark's executors: use backend='spark'")
        with spark_session(est.backend_options) as session:
            self.scan(session.sparkContext)
            return est.fit(self, None, validation_data=validation_data)

    def prepare(self, est):
        """Set ``est``'s widths, label values and model as its ``fit`` does from the matrices;
        return the :class:`ExecutorData`."""
        n, d, L = self.shape
        if (est.backend_options or {}).get("keep_dual_state"):
            raise ValueError(
                "keep_dual_state brings the training data to the driver: read it in memory"
            )
        if isinstance(est.edges, str) and est.edges == "tree":
            raise ValueError(
                "edges='tree' fits the Chow-Liu tree to the whole label matrix on the "
                "driver: give the edges, or read the data in memory"
            )
        est.n_features_in_ = d
        est.n_labels_ = L
        est.outputs_2d_ = True
        est.label_values_ = np.tile(np.array([0, 1], dtype=np.uint8), (L, 1))
        est.classes_ = list(est.label_values_)
        width = d + (1 if est.fit_intercept else 0)
        edges = est.edges if isinstance(est.edges, str) else np.asarray(est.edges)
        dense = dense_fits(est.weights, width, L)
        check_memory(
            f"MultiLabelSVM over {L:,} labels",
            training_memory_parts(L, width, edges, est.interactions, None if dense else 0),
            memory_advice(est),
        )

        def observed():
            raise ValueError(
                "weights='observed' is not available for examples read on the Spark "
                "executors; use weights='dense'"
            )

        support = choose_support(est, width, L, observed)
        est.model_ = MultiLabelModel(
            L,
            width,
            edges=edges,
            loss_weights=est.loss_weights,
            inference=est._inference(),
            interactions=est.interactions,
            support=support,
        ).fit_edges(np.zeros((1, L), dtype=np.int64))
        est.edges_ = est.model_.edges
        files, start = [], 0
        for s in self.scans:
            files.append((s.path, start, s.n_examples))
            start += s.n_examples
        spec = MultiLabelSpec(
            tuple(files),
            self.labels,
            d,
            L,
            float(est.intercept_scaling) if est.fit_intercept else None,
            share(kernel_model(est.model_), self._sc),
        )
        fp = fingerprint([(s.path, s.n_examples) for s in self.scans], d, L, spec.intercept)
        return ExecutorData(read_multilabel_partition, spec, n, n, fp)
