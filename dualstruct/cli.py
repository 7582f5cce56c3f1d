"""The ``dualstruct`` command line: train, predict, evaluate and inspect sequence taggers and
multi-label models.

    dualstruct train train.txt.gz -o chunker.npz --label-column 2 --dev test.txt.gz
    dualstruct predict chunker.npz test.txt.gz -o predicted.txt
    dualstruct evaluate chunker.npz test.txt.gz
    dualstruct info chunker.npz

    dualstruct multilabel train yeast_train.svm.gz -o yeast.npz --edges full
    dualstruct multilabel evaluate yeast.npz yeast_test.svm.gz
    dualstruct multilabel predict yeast.npz yeast_test.svm.gz -o labels.txt

    dualstruct demo      # all of it on a corpus it generates
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from . import __version__, demo
from . import io as model_io
from .datasets._base import open_text
from .datasets.conll import CONLLU_LABELS, conllu_sentence, iter_conll_blocks
from .datasets.multilabel import load_arff, load_libsvm_multilabel
from .distributed.reading import MultiLabelFiles, TaggedFiles, executor_path, spark_session
from .distributed.spark import read_checkpoint, return_large_blocks
from .estimators import MultiLabelSVM, StructuredSVM, load
from .estimators.base import _problem_options, unconverged_gap
from .features import TokenFeatures
from .metrics import chunk_scores, label_scores, token_accuracy
from .plotting import plot_history
from .tagger import SequenceTagger
from .tags import is_chunk_tagset


class CLIError(Exception):
    """A user error: printed as ``dualstruct: error: ...`` with exit status 2."""


# -- reading and writing files ------------------------------------------------------------------
def read_tagged(path, fmt, label_column=None, label=None, n_columns=None, need_labels=True):
    """Sentences (token tuples of feature columns), labels (or None) and the line numbers.

    For CoNLL files, a file with ``n_columns`` columns carries labels in ``label_column``; one
    with ``n_columns - 1`` columns has none (prediction input).
    """
    path = _input_path(path, "file")
    sentences, labels, lines = [], [], []
    try:
        for numbers, rows in iter_conll_blocks(path, fmt):
            if fmt == "conllu":
                toks, labs = conllu_sentence(rows, label)
                has_labels = all(lab not in ("", "_") for lab in labs)
                if need_labels and not has_labels:
                    bad = next(n for n, lab in zip(numbers, labs) if lab in ("", "_"))
                    raise CLIError(f"{path}:{bad}: the {label.upper()} column is empty")
                sentences.append(toks)
                labels.append(np.array(labs) if has_labels else None)
            else:
                width = len(rows[0])
                expected = width if n_columns is None else n_columns
                if not -expected <= label_column < expected:
                    raise CLIError(
                        f"{path}:{numbers[0]}: --label-column {label_column} does not "
                        f"exist in {expected} columns"
                    )
                first_id = rows[0][0].replace("-", "").replace(".", "")
                if (
                    fmt == "conll"
                    and width == 10
                    and first_id.isdigit()
                    and need_labels
                    and n_columns is None
                ):
                    raise CLIError(
                        f"{path}:{numbers[0]}: this looks like CoNLL-U (10 columns "
                        "with a numeric ID); use --format conllu"
                    )
                col = label_column % expected
                if width == expected:
                    sentences.append([tuple(r[:col] + r[col + 1 :]) for r in rows])
                    labels.append(np.array([r[col] for r in rows]))
                elif width == expected - 1 and not need_labels:
                    sentences.append([tuple(r) for r in rows])
                    labels.append(None)
                else:
                    want = f"{expected}" if need_labels else f"{expected} or {expected - 1}"
                    raise CLIError(
                        f"{path}:{numbers[0]}: {width} columns, the model expects {want}"
                    )
            lines.append(numbers)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    except (OSError, EOFError) as exc:
        raise CLIError(f"{path}: cannot be read ({exc})") from None
    if not sentences:
        raise CLIError(f"{path}: no sentences found")
    if any(lab is None for lab in labels):
        labels = None
    return sentences, labels, lines


def write_predictions(src, out, fmt, predictions, lines, label=None):
    """Copy ``src`` to ``out`` with the predicted label appended (CoNLL) or filled in the
    chosen column (CoNLL-U)."""
    by_line = {}
    for numbers, pred in zip(lines, predictions):
        by_line.update(zip(numbers, pred))
    col = {"upos": 3, "xpos": 4, "feats": 5}.get(label)
    with open_text(src) as fin:
        for lineno, line in enumerate(fin, 1):
            line = line.rstrip("\r\n")
            if lineno in by_line:
                tag = str(by_line[lineno])
                if fmt == "conllu":
                    cols = line.split("\t")
                    if label == "upos+feats":
                        upos, _, feats = tag.partition("|")
                        cols[3], cols[5] = upos, feats or "_"
                    else:
                        cols[col] = tag
                    line = "\t".join(cols)
                else:
                    line = line + ("\t" if "\t" in line else " ") + tag
            out.write(line + "\n")


#: the zlib level of checkpoints: fast (level 1 compresses solver state several-fold, several
#: times faster than the default level)
CHECKPOINT_LEVEL = 1


# -- progress -----------------------------------------------------------------------------------
class Progress:
    """One line per pass: pass, objective, gap, dev score, elapsed time, estimated time left.
    ``check_every`` is the estimator's check schedule (read from the estimator at every line:
    training stops on ``tol`` at a check only)."""

    def __init__(
        self, max_iter, tol, out, checkpoint_every=0, checkpoint=None, tagger=None, check_every=1
    ):
        self.max_iter, self.tol, self.out = max_iter, tol, out
        self.checkpoint_every, self.checkpoint, self.tagger = checkpoint_every, checkpoint, tagger
        self.check_every, self.next_check = check_every, None
        self.start = time.perf_counter()
        self.checks = []
        self._first = None  # (time, passes) of the first line

    def eta(self, record, now=None):
        """Seconds left (NaN at the first line, whose pass may include the kernels'
        compilation): the passes left times the wall time per pass since the first line
        (checks included). The passes left run to the last pass or, with ``tol``, to the
        first check at or after the pass where the gap reaches ``tol`` if it keeps falling as
        1 / passes (the rate of BCFW's bound, slower than what a straight line on a log scale
        promises): training stops on the gap at a check only."""
        now = time.perf_counter() if now is None else now
        if self._first is None:
            self._first = (now, record.passes)
        t0, p0 = self._first
        if record.passes <= p0:
            return math.nan
        per_pass = (now - t0) / (record.passes - p0)
        passes = int(record.passes)
        if not math.isnan(record.relative_gap) and record.relative_gap <= self.tol:
            return 0.0  # a check that stops training
        end = self.max_iter
        if self.checks and self.tol > 0:
            p1, g1 = self.checks[-1]
            target = max(passes + 1, math.ceil(p1 * g1 / self.tol - 1e-9))
            end = min(end, self._check_from(target))
        return max(0, end - passes) * per_pass

    def _check_from(self, target):
        """The first scheduled check at pass ``target`` or later."""
        every = self.check_every
        if every != "auto":
            return -(-target // int(every)) * int(every)
        if self.next_check is None:
            return target
        last = self.checks[-1][0] if self.checks else 0
        step = max(1, self.next_check - last)  # the checks spaced as the last two
        return self.next_check + max(0, -(-(target - self.next_check) // step)) * step

    @property
    def reads_weights(self) -> bool:
        """Whether a line needs the estimator's ``coef_``: only to write a checkpoint (else
        the estimator skips its copy of ``w`` at every pass)."""
        return bool(self.checkpoint_every)

    def training_starts(self, estimator):
        """Before the first pass: the solver training uses, and why (``solver_choice_``)."""
        choice = getattr(estimator, "solver_choice_", None)
        if choice is not None and not getattr(self, "_solver_shown", False):
            print(f"solver {choice.solver}: {choice.reason}", file=self.out, flush=True)
            self._solver_shown = True

    def __call__(self, estimator, record):
        info = getattr(estimator, "weights_info_", None)
        if info and not getattr(self, "_weights_shown", False):
            print(info, file=self.out, flush=True)
            self._weights_shown = True
        self.check_every = getattr(estimator, "check_every", self.check_every)
        self.next_check = getattr(getattr(estimator, "solver_", None), "_next_check", None)
        if not math.isnan(record.relative_gap):
            self.checks.append((record.passes, record.relative_gap))
        elapsed = time.perf_counter() - self.start

        def fmt(v, spec):
            return "—" if math.isnan(v) else format(v, spec)

        eta = self.eta(record)
        print(
            f"pass {int(record.passes):>4}/{self.max_iter}"
            f"  primal {fmt(record.primal, '.6g'):>10}  dual {fmt(record.dual, '.6g'):>10}"
            f"  gap {fmt(record.relative_gap, '.2%'):>7}"
            f"  dev {fmt(record.validation_score, '.4f'):>6}  elapsed {elapsed:7.1f}s"
            f"  eta {fmt(eta, '6.0f'):>6}{'' if math.isnan(eta) else 's'}",
            file=self.out,
            flush=True,
        )
        if self.checkpoint_every and record.passes % self.checkpoint_every == 0:
            self.tagger.svm_ = estimator
            self.write_checkpoint()
        return False

    def write_checkpoint(self):
        """Save the model with its solver state, compressed, and say how big it is; a save
        that fails (a full disk) is reported and training goes on, keeping the last good
        checkpoint."""
        t0 = time.perf_counter()
        try:
            self.tagger.save(self.checkpoint, include_solver_state=True, compress=CHECKPOINT_LEVEL)
        except OSError as exc:
            kept = f"; {self.checkpoint} keeps the previous one" if self.checkpoint.exists() else ""
            print(
                f"checkpoint not written ({exc.strerror or exc}){kept}; training goes on",
                file=self.out,
                flush=True,
            )
            return
        size = os.path.getsize(self.checkpoint) / 2**20
        print(
            f"checkpoint {self.checkpoint}: {size:.1f} MB in {time.perf_counter() - t0:.1f}s",
            file=self.out,
            flush=True,
        )


# -- multi-label commands -------------------------------------------------------------------------
def read_multilabel(path, labels=None, n_features=None, n_labels=None):
    """``(X, Y)`` of a LIBSVM multi-label file or a MULAN ARFF file (``.arff``, ``.arff.gz``);
    for ARFF, ``labels`` is the MULAN XML file or the number of (last) label attributes."""
    path = _input_path(path, "file")
    try:
        if path.name.endswith((".arff", ".arff.gz")):
            if labels is None:
                raise CLIError(
                    f"{path}: an ARFF file needs --labels (the MULAN XML file or "
                    "the number of label attributes at the end)"
                )
            if isinstance(labels, str) and labels.isdigit():
                labels = int(labels)
            X, Y, _, _ = load_arff(path, labels)
            if n_features is not None and X.shape[1] != n_features:
                raise CLIError(f"{path}: {X.shape[1]} features, the model has {n_features}")
            if n_labels is not None and Y.shape[1] != n_labels:
                raise CLIError(f"{path}: {Y.shape[1]} labels, the model has {n_labels}")
            return X, Y
        return load_libsvm_multilabel(path, n_features, n_labels)
    except (ValueError, FileNotFoundError) as exc:
        raise CLIError(str(exc)) from None


def _multilabel_on_executors(args, sc, out):
    """The training file as :class:`~dualstruct.distributed.reading.MultiLabelFiles`,
    scanned on the executors (the local loader's checks, run there)."""
    print(f"reading {args.train} on the Spark executors …", file=out, flush=True)
    path = args.train  # checked on the executors, where it is read
    if path.endswith((".arff", ".arff.gz")) and args.labels is None:
        raise CLIError(
            f"{path}: an ARFF file needs --labels (the MULAN XML file or "
            "the number of label attributes at the end)"
        )
    try:
        files = MultiLabelFiles(path, args.labels, args.n_features, args.n_labels)
        files.scan(sc)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return files


class _MultiLabelCheckpoint:
    """What :class:`Progress` saves checkpoints through, for a :class:`MultiLabelSVM`."""

    svm_ = None

    def save(self, path, include_solver_state=True, compress=CHECKPOINT_LEVEL):
        model_io.save_arrays(path, *self.svm_.to_arrays(include_solver_state), compress=compress)


def _load_multilabel(path):
    model = _load_model(path)
    if not isinstance(model, MultiLabelSVM):
        raise CLIError(
            f"{path} does not hold a multi-label model (it holds a {type(model).__name__})"
        )
    return model


def _given_on_command_line(argv):
    """The argument names given on the command line (defaults not filled in)."""
    ap = build_parser()
    parsers = [ap]
    while parsers:
        for action in parsers.pop()._actions:
            action.default = argparse.SUPPRESS
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    return set(vars(ap.parse_args(argv)))


def _refuse_changed_settings(args, saved, source):
    """A resumed model keeps the settings it was trained with: a flag given with another
    value is an error, not silently ignored. ``saved`` maps argument names to the model's
    value, or to a tuple of the values equivalent to it (its value first)."""
    changed = []
    for dest, values in saved.items():
        if dest not in args.given:
            continue
        values = values if isinstance(values, tuple) else (values,)
        given = getattr(args, dest)
        if any(isinstance(v, (str, int, float, type(None))) and given == v for v in values):
            continue
        shown = (
            values[0]
            if isinstance(values[0], (str, int, float, type(None)))
            else ("an explicit list")
        )
        flag = "-C" if dest == "C" else "--" + dest.replace("_", "-")
        changed.append(f"{flag} {given} (the model has {shown!r})")
    if changed:
        raise CLIError(
            f"{source} resumes with the settings it was trained with, but "
            + "; ".join(changed)
            + " differ: drop these flags or train a new model"
        )


def _train_where_read(args, out, backend, train):
    """``train(args, out, backend, sc)``: with a Spark backend the training file is read on
    the executors (``sc`` the SparkContext, open for the reading and the training);
    locally, or with ``--save-state`` (the dual state and data come here), ``sc`` is None."""
    if not backend or args.save_state:
        return train(args, out, backend, None)
    try:  # a URL the executors cannot open is refused before Spark starts
        executor_path(args.train)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    return_large_blocks()  # this process is a Spark driver: freed copies of w leave it
    with contextlib.ExitStack() as stack:
        try:
            session = stack.enter_context(spark_session(backend["backend_options"]))
        except (ImportError, RuntimeError) as exc:  # no pyspark, no Java, no master
            raise CLIError(str(exc)) from None
        return train(args, out, backend, session.sparkContext)


def cmd_multilabel_train(args, out):
    backend = _backend_params(args)
    return _train_where_read(args, out, backend, _multilabel_train)


def _multilabel_train(args, out, backend, sc):
    """``dualstruct multilabel train``; with a SparkContext ``sc`` the training file is read
    on its executors."""
    model_path = Path(args.output)
    _check_model_output(
        model_path, {"training": args.train, "--dev": args.dev, "--labels": args.labels}
    )
    checkpoint = Path(str(model_path) + ".ckpt")
    if args.resume:
        svm = _load_multilabel(args.resume)
        if getattr(svm, "_saved_state", None) is None:
            raise CLIError(
                f"{args.resume} holds no solver state, so training cannot resume from it"
            )
        _refuse_changed_settings(
            args,
            {
                "edges": svm.edges,
                "solver": (svm.solver, svm.solver_choice_.solver),
                "C": svm.C,
                "inference": (svm.inference, svm._inference()),
                "interactions": svm.interactions,
                "rescaling": svm.rescaling,
                "weights": svm.weights,
                "weights_min_count": svm.weights_min_count,
                "check_every": svm.check_every,
                "seed": svm.random_state,
            },
            args.resume,
        )
        X, Y = read_multilabel(args.train, args.labels, svm.n_features_in_, svm.n_labels_)
        done = svm.n_iter_
        if args.max_iter <= done:
            raise CLIError(f"{args.resume} has already made {done} passes; raise --max-iter")
        svm.set_params(
            max_iter=args.max_iter - done, tol=args.tol, warm_start=True, **_on_this_machine(svm)
        )
    else:
        if sc is not None:
            X, Y = _multilabel_on_executors(args, sc, out), None
        else:
            X, Y = read_multilabel(args.train, args.labels, args.n_features, args.n_labels)
        svm = MultiLabelSVM(
            edges=args.edges,
            solver=args.solver,
            C=args.C,
            inference=args.inference,
            max_iter=_passes_left(args, backend),
            tol=args.tol,
            check_every=args.check_every,
            random_state=args.seed,
            rescaling=args.rescaling,
            interactions=args.interactions,
            weights=args.weights,
            weights_min_count=args.weights_min_count,
            **backend,
        )
    n, d, n_labels = (X.shape[0], X.shape[1], Y.shape[1]) if sc is None else X.shape
    dev = None
    if args.dev:
        dev = read_multilabel(args.dev, args.labels, d, n_labels)
    saver = _MultiLabelCheckpoint()
    progress = Progress(args.max_iter, args.tol, out, args.checkpoint_every, checkpoint, saver)
    svm.set_params(callback=progress)
    print(
        f"training on {n} examples, {d} features, {n_labels} labels "
        f"({args.train}); model -> {model_path}",
        file=out,
        flush=True,
    )
    print(FIRST_PASS, file=out, flush=True)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # said below in the command line's own terms
            warnings.simplefilter("ignore", ConvergenceWarning)
            svm.fit(X, Y, validation_data=dev)
    except (MemoryError, ValueError, NotImplementedError) as exc:
        raise CLIError(str(exc)) from None
    svm.set_params(callback=None, warm_start=False)
    stop = svm.history_.stop_reason
    interrupted = stop == "interrupted"
    saved = _save_model(
        lambda p: svm.save(
            p, include_solver_state=(interrupted or args.save_state) and _holds_dual_state(svm)
        ),
        model_path,
        out,
    )
    if checkpoint.exists() and saved:
        checkpoint.unlink()
    if not saved:
        return 1
    last = svm.history_.last_checked()
    summary = f"{svm.n_iter_} passes, {time.perf_counter() - t0:.1f}s, stop: {stop}"
    if last is not None:
        summary += f", primal {last.primal:.6g}"
        if not math.isnan(last.relative_gap):
            summary += f", relative gap {last.relative_gap:.3%}"
    if interrupted:
        print(
            f"interrupted: the model trained so far ({summary}) is saved to {model_path}; "
            f"{_how_to_resume(args, svm, f'--resume {model_path}')}",
            file=out,
            flush=True,
        )
        return 130
    print(f"done: {summary}; model saved to {model_path}", file=out, flush=True)
    _say_if_not_converged(svm, args, out)
    return 0


def cmd_multilabel_evaluate(args, out):
    svm = _load_multilabel(args.model)
    X, Y = read_multilabel(args.test, args.labels, svm.n_features_in_, svm.n_labels_)
    scores = svm.evaluate(X, Y)
    if args.json:
        json.dump(scores, out, indent=1)
        out.write("\n")
        return 0
    for k, v in scores.items():
        print(f"{k:>22}: {v:.4f}", file=out)
    return 0


def cmd_multilabel_predict(args, out):
    _refuse_overwriting_model(args)
    svm = _load_multilabel(args.model)
    svm.set_params(n_jobs=args.jobs)
    X, _ = read_multilabel(args.input, args.labels, svm.n_features_in_, svm.n_labels_)
    pred = svm.predict(X)
    lines = [",".join(str(j) for j in np.flatnonzero(row)) + "\n" for row in pred]
    if args.output:
        _write_output(args.output, lambda fh: fh.writelines(lines))
        print(f"wrote the label sets of {len(lines)} examples to {args.output}", file=out)
    else:
        out.writelines(lines)
    return 0


# -- commands -----------------------------------------------------------------------------------
def _input_format(args, n_columns=None):
    if args.format == "conllu":
        return {"format": "conllu", "label": args.label}
    return {"format": "conll", "label_column": args.label_column, "n_columns": n_columns}


def cmd_train(args, out):
    backend = _backend_params(args)
    if args.format == "conllu" and args.label not in CONLLU_LABELS:
        raise CLIError(f"--label must be one of {', '.join(CONLLU_LABELS)}")
    return _train_where_read(args, out, backend, _train)


def _read_on_executors(args, sc, out):
    """The training file as :class:`~dualstruct.distributed.reading.TaggedFiles`, scanned on
    the executors (checked line by line there); the driver never holds its sentences."""
    print(f"reading {args.train} on the Spark executors …", file=out, flush=True)
    try:
        files = TaggedFiles(args.train, args.format, args.label_column, args.label)
        scans = files.scan(sc)
    except ValueError as exc:
        raise CLIError(str(exc)) from None
    distinct = set(scans[0].labels)
    if len(distinct) < 2:
        raise CLIError(
            f"{args.train}: the label column holds a single value {distinct}; check "
            "--format and --label-column"
        )
    n_columns = None if args.format == "conllu" else scans[0].n_columns + 1
    return files, n_columns


def _train(args, out, backend, sc):
    """``dualstruct train``; with a SparkContext ``sc`` the training file is read on its
    executors."""
    fmt = args.format
    if sc is not None:
        sentences, n_columns = _read_on_executors(args, sc, out)
        labels = None
    else:
        print(f"reading {args.train} …", file=out, flush=True)
        sentences, labels, _ = read_tagged(args.train, fmt, args.label_column, args.label)
        distinct = set(np.concatenate(labels).tolist())
        if len(distinct) < 2:
            raise CLIError(
                f"{args.train}: the label column holds a single value {distinct}; check "
                "--format and --label-column"
            )
        n_columns = None if fmt == "conllu" else len(sentences[0][0]) + 1
    dev = None
    if args.dev:
        ds, dl, _ = read_tagged(args.dev, fmt, args.label_column, args.label, n_columns)
        dev = (ds, dl)
    model_path = Path(args.output)
    _check_model_output(model_path, {"training": args.train, "--dev": args.dev})
    checkpoint = Path(str(model_path) + ".ckpt")
    if args.resume:
        tagger = _load_tagger(args.resume)
        if tagger.input_format != _input_format(args, n_columns):
            raise CLIError(
                f"{args.resume} was trained on input read as {tagger.input_format}, "
                f"not {_input_format(args, n_columns)}"
            )
        if getattr(tagger.svm_, "_saved_state", None) is None:
            raise CLIError(
                f"{args.resume} holds no solver state, so training cannot resume "
                "from it; use a checkpoint (MODEL.ckpt), a model saved on Ctrl-C, "
                "or one trained with --save-state"
            )
        fitted, feats = tagger.svm_, tagger.features
        _refuse_changed_settings(
            args,
            {
                "solver": (fitted.solver, fitted.solver_choice_.solver),
                "C": fitted.C,
                "rescaling": fitted.rescaling,
                "slack_search": fitted.slack_search,
                "check_every": fitted.check_every,
                "weights": fitted.weights,
                "weights_min_count": fitted.weights_min_count,
                "seed": fitted.random_state,
                "window": feats.window,
                "min_count": feats.min_count,
                "hashing": feats.hashing,
                "tag_scheme": tagger.tag_scheme or "none",
            },
            args.resume,
        )
        done = tagger.svm_.n_iter_
        if args.max_iter <= done:
            raise CLIError(f"{args.resume} has already made {done} passes; raise --max-iter")
        tagger.svm_.set_params(
            max_iter=args.max_iter - done, tol=args.tol, **_on_this_machine(tagger.svm_)
        )
    else:
        svm = StructuredSVM(
            solver=args.solver,
            C=args.C,
            rescaling=args.rescaling,
            slack_search=args.slack_search,
            max_iter=_passes_left(args, backend),
            tol=args.tol,
            check_every=args.check_every,
            fit_intercept=False,
            random_state=args.seed,
            weights=args.weights,
            weights_min_count=args.weights_min_count,
            **backend,
        )
        feats = TokenFeatures(window=args.window, min_count=args.min_count, hashing=args.hashing)
        scheme = None if args.tag_scheme == "none" else args.tag_scheme
        tagger = SequenceTagger(
            feats, svm, tag_scheme=scheme, input_format=_input_format(args, n_columns)
        )
    progress = Progress(args.max_iter, args.tol, out, args.checkpoint_every, checkpoint, tagger)
    if args.resume:
        tagger.svm_.set_params(callback=progress)
    else:
        tagger.svm.set_params(callback=progress)
    if sc is not None:
        n_sent, n_tok = sentences.n_sentences, sentences.n_tokens
    else:
        n_sent, n_tok = len(sentences), sum(len(s) for s in sentences)
    print(
        f"training on {n_sent} sentences, {n_tok} tokens ({args.train}); model -> {model_path}",
        file=out,
        flush=True,
    )
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():  # said below in the command line's own terms
            warnings.simplefilter("ignore", ConvergenceWarning)
            tagger.fit(
                sentences,
                labels,
                validation_data=dev,
                resume=bool(args.resume),
                on_stage=partial(_say_stage, out),
            )
    except (MemoryError, ValueError) as exc:
        raise CLIError(str(exc)) from None
    svm = tagger.svm_
    svm.set_params(callback=None)
    release = getattr(getattr(svm, "solver_", None), "release_weights", None)
    if sc is not None and release is not None:  # the Spark run is over: the model file
        release()  # needs coef_ and the vocabulary, not the driver's copies of w
    stop = svm.history_.stop_reason
    interrupted = stop == "interrupted"
    saved = _save_model(
        lambda p: tagger.save(
            p, include_solver_state=(interrupted or args.save_state) and _holds_dual_state(svm)
        ),
        model_path,
        out,
    )
    if checkpoint.exists() and saved:
        checkpoint.unlink()
    if not saved:
        return 1
    last = svm.history_.last_checked()
    summary = f"{svm.n_iter_} passes, {time.perf_counter() - t0:.1f}s, stop: {stop}"
    if last is not None:
        summary += f", primal {last.primal:.6g}"
        if not math.isnan(last.relative_gap):
            summary += f", relative gap {last.relative_gap:.3%}"
    if interrupted:
        how = f"dualstruct train {args.train} -o {model_path} --resume {model_path} ..."
        print(
            f"interrupted: the model trained so far ({summary}) is saved to {model_path}; "
            f"{_how_to_resume(args, svm, how)}",
            file=out,
            flush=True,
        )
        return 130
    print(f"done: {summary}; model saved to {model_path}", file=out, flush=True)
    _say_if_not_converged(svm, args, out)
    return 0


def _say_stage(out, stage, seconds):
    """What training is doing before its first progress line."""
    if stage == "features":
        print("extracting features …", file=out, flush=True)
    elif stage == "training":
        print(f"features ready in {seconds:.1f}s; {FIRST_PASS}", file=out, flush=True)


#: said before the first pass, which can take a while on a first run
FIRST_PASS = "first pass (a first run also compiles the kernels, then caches them) …"


def _holds_dual_state(svm) -> bool:
    """Whether the estimator's solver state is on this machine (a Spark run's stays on the
    cluster unless it was trained with --save-state)."""
    return not hasattr(getattr(svm, "solver_", None), "engine")


def _how_to_resume(args, svm, command):
    if _holds_dual_state(svm):
        return f"resume with: {command}"
    if getattr(args, "spark_checkpoint_dir", None):
        return (
            f"resume the Spark run with --spark-checkpoint-dir {args.spark_checkpoint_dir}"
            " --spark-resume"
        )
    return (
        "this Spark run cannot be resumed: give --spark-checkpoint-dir DIR (or "
        "--save-state) to make it resumable"
    )


def _on_this_machine(svm) -> dict:
    """The settings that continue a model trained on Spark on this machine."""
    if getattr(svm, "backend", "local") == "local":
        return {}
    return {
        "backend": "local",
        "backend_options": None,
        "solver_options": _problem_options(svm.solver_options),
    }


def _say_if_not_converged(svm, args, out):
    """The ConvergenceWarning of the estimators, as advice for the command line."""
    gap = unconverged_gap(svm.history_, args.tol)
    if gap is not None and svm.history_.stop_reason == "resolution":
        print(
            f"note: not converged: the cutting plane found no constraint violated by more "
            f"than its epsilon at a relative gap of {gap:.3%}, above --tol {args.tol:g}; "
            "--solver bcfw certifies smaller gaps",
            file=out,
            flush=True,
        )
    elif gap is not None:
        print(
            f"note: not converged: the relative gap {gap:.3%} is above --tol "
            f"{args.tol:g} after --max-iter {args.max_iter} passes; train with a larger "
            "--max-iter (--save-state keeps what --resume needs to continue)",
            file=out,
            flush=True,
        )


def _input_path(path, what):
    """``path`` if it is an existing file, else a CLIError saying what is there instead."""
    try:
        return model_io.require_file(path, what)
    except OSError as exc:
        raise CLIError(str(exc)) from None


def _load_model(path):
    """Any model file (tagger or bare StructuredSVM), with CLI errors for bad files."""
    path = _input_path(path, "model file")
    try:
        return load(path)
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def _load_tagger(path):
    model = _load_model(path)
    if not isinstance(model, SequenceTagger):
        kind = (
            "a multi-label model (use `dualstruct multilabel ...`)"
            if type(model).__name__ == "MultiLabelSVM"
            else f"a bare {type(model).__name__}"
        )
        raise CLIError(f"{path} holds {kind}, not a tagger trained on text")
    return model


def _read_for_model(tagger, path, need_labels):
    f = tagger.input_format or {"format": "conll", "label_column": -1, "n_columns": None}
    if f["format"] == "conllu":
        return read_tagged(path, "conllu", label=f["label"], need_labels=need_labels)
    return read_tagged(
        path, "conll", f["label_column"], n_columns=f["n_columns"], need_labels=need_labels
    )


def _check_model_output(model_path, inputs, out_flag="-o"):
    """Refuse, before any training, a model path that is a folder, lies in a folder that
    cannot be written, or is one of the ``inputs`` (name -> path; symbolic links count)."""
    model_path = Path(model_path)
    if model_path.is_dir():
        raise CLIError(f"cannot write the model to {model_path}: it is a folder")
    folder = model_path.parent
    if not folder.is_dir():
        raise CLIError(f"cannot write {model_path}: folder {folder} does not exist")
    for name, path in inputs.items():
        if (
            path
            and model_path.exists()
            and Path(str(path)).exists()
            and os.path.samefile(model_path, path)
        ):
            raise CLIError(
                f"{out_flag} {model_path} is the {name} file {path}: writing the "
                "model would overwrite it"
            )
    try:  # a read-only folder (or one we may not write) fails here, not after training
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{model_path.name}.", suffix=".probe")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise CLIError(f"cannot write {model_path}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _finish_despite_signals(what, out):
    """Ctrl-C and SIGTERM during the block say that ``what`` is still under way instead of
    interrupting it (a model file half written is a model lost); in the main thread only."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def wait(signum, frame):
        print(f"still {what}; please wait", file=out, flush=True)

    previous = {sig: signal.signal(sig, wait) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _save_model(save, model_path, out):
    """``save(path)`` to ``model_path`` (a Ctrl-C meanwhile does not stop it); if that fails
    (full disk, removed folder), save a rescue copy in the working folder, the temporary
    folder or the home folder, say where, and return False."""
    print(f"saving {model_path} …", file=out, flush=True)
    try:
        with _finish_despite_signals(f"saving {model_path}", out):
            save(model_path)
        return True
    except OSError as exc:
        reason = exc.strerror or str(exc)
    for folder in (Path.cwd(), Path(tempfile.gettempdir()), Path.home()):
        rescue = folder / f"{Path(model_path).name}.rescued-{os.getpid()}.npz"
        try:
            save(rescue)
        except OSError:
            continue
        print(
            f"error: cannot write {model_path} ({reason}); the trained model is saved to {rescue}",
            file=out,
            flush=True,
        )
        return False
    raise CLIError(f"cannot write {model_path} ({reason}), nor a rescue copy of the model")


def _write_output(path, write):
    """Call ``write(fh)`` on a temporary file beside ``path`` that then replaces it: a full
    disk or an interrupt never leaves a truncated output, and when ``path`` is a file that
    ``write`` streams from (predictions written over their input), it is read whole first.
    An existing file keeps its mode (a symbolic link is followed to the file itself)."""
    path = Path(path)
    if path.is_dir():
        raise CLIError(f"cannot write {path}: it is a folder")
    if not path.parent.is_dir():
        raise CLIError(f"cannot write {path}: its folder does not exist")
    target = Path(os.path.realpath(path)) if path.exists() else path
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            write(fh)
        if target.exists():
            shutil.copymode(target, tmp)
        else:
            os.chmod(tmp, model_io.new_file_mode())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _refuse_overwriting_model(args):
    if args.output and Path(args.output).exists() and os.path.samefile(args.output, args.model):
        raise CLIError(
            f"-o {args.output} is the model file {args.model}: the predictions would overwrite it"
        )


def cmd_predict(args, out):
    _refuse_overwriting_model(args)
    tagger = _load_tagger(args.model)
    tagger.svm_.set_params(n_jobs=args.jobs)
    sentences, _, lines = _read_for_model(tagger, args.input, need_labels=False)
    pred = tagger.predict(sentences)
    f = tagger.input_format or {"format": "conll"}
    if args.output:
        _write_output(
            args.output,
            lambda fh: write_predictions(args.input, fh, f["format"], pred, lines, f.get("label")),
        )
        print(f"wrote {sum(len(p) for p in pred)} predicted labels to {args.output}", file=out)
    else:
        write_predictions(args.input, out, f["format"], pred, lines, f.get("label"))
    return 0


def evaluate_labels(gold, pred) -> dict:
    result = {
        "tokens": int(sum(len(g) for g in gold)),
        "sentences": len(gold),
        "token_accuracy": token_accuracy(gold, pred),
        "labels": label_scores(gold, pred),
    }
    if is_chunk_tagset(np.concatenate([np.asarray(g) for g in gold]).tolist()):
        result["chunks"] = chunk_scores(gold, pred)
    return result


def cmd_evaluate(args, out):
    tagger = _load_tagger(args.model)
    sentences, gold, _ = _read_for_model(tagger, args.test, need_labels=True)
    result = evaluate_labels(gold, tagger.predict(sentences))
    if args.json:
        json.dump(result, out, indent=1)
        out.write("\n")
        return 0
    print(f"{args.test}: {result['sentences']} sentences, {result['tokens']} tokens", file=out)
    print(f"token accuracy: {100 * result['token_accuracy']:.2f}%\n", file=out)
    _table(out, "label", result["labels"])
    if "chunks" in result:
        o = result["chunks"]["overall"]
        print(
            f"\nchunks (conlleval): precision {100 * o['precision']:.2f}  recall "
            f"{100 * o['recall']:.2f}  F1 {100 * o['f1']:.2f}  ({o['support']} chunks)\n",
            file=out,
        )
        _table(out, "chunk type", result["chunks"]["types"])
    return 0


def cmd_demo(args, out):
    """Write the demo corpus, then train, evaluate and reload a tagger, each step shown as
    the command that does it."""
    t0 = time.perf_counter()
    keep = args.dir is not None
    folder = Path(args.dir) if keep else Path(tempfile.mkdtemp(prefix="dualstruct-demo-"))
    try:
        try:
            train, dev, test = demo.write_corpus(folder, seed=args.seed)
        except OSError as exc:
            raise CLIError(f"cannot write the demo corpus into {folder}: {exc}") from None
        print(f"synthetic corpus: {train.name}, {dev.name}, {test.name} in {folder}", file=out)
        model = folder / "model.npz"
        model.unlink(missing_ok=True)
        steps = (
            ["train", str(train), "-o", str(model), "--dev", str(dev), "--seed", str(args.seed)],
            ["evaluate", str(model), str(test)],
        )
        for argv in steps:
            print(f"\n$ dualstruct {shlex.join(argv)}", file=out, flush=True)
            status = main(argv, out=out)
            if status:
                return status
        words = list(demo.SENTENCE)
        tags = _load_tagger(model).predict([[(w,) for w in words]])[0]
        print(f"\nreloaded with dualstruct.load({model.name!r}), new words tagged:", file=out)
        print("  " + " ".join(f"{w}/{t}" for w, t in zip(words, tags)), file=out)
        where = f"kept in {folder}" if keep else "removed (--dir DIR keeps them)"
        print(
            f"\ndemo done in {time.perf_counter() - t0:.1f}s; corpus and model {where}",
            file=out,
            flush=True,
        )
        return 0
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _table(out, title, rows):
    width = max([len(title)] + [len(k) for k in rows])
    print(f"{title:<{width}}  {'precision':>9} {'recall':>7} {'F1':>7} {'support':>8}", file=out)
    for name, r in rows.items():
        print(
            f"{name:<{width}}  {100 * r['precision']:>9.2f} {100 * r['recall']:>7.2f} "
            f"{100 * r['f1']:>7.2f} {r['support']:>8}",
            file=out,
        )


def _plot_curves(history, target, x, title):
    """Write the training curves of ``history`` to the image file ``target``."""
    if not history.records:
        raise CLIError("the model file holds no training history to plot")
    try:
        axes = plot_history(history, x=x)
    except ImportError as exc:
        raise CLIError(str(exc)) from None
    axes[0].set_title(title)
    try:
        axes[0].figure.savefig(target, dpi=120)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot write the plot {target}: {exc}") from None
    finally:
        import matplotlib.pyplot as plt

        plt.close(axes[0].figure)


def cmd_info(args, out):
    path = Path(args.model)
    model = _load_model(path)
    svm = model.svm_ if isinstance(model, SequenceTagger) else model
    multilabel = isinstance(model, MultiLabelSVM)
    kind = (
        "tagger"
        if isinstance(model, SequenceTagger)
        else "multilabel"
        if multilabel
        else "structured_svm"
    )
    info = {
        "file": str(path),
        "kind": kind,
        "labels": (
            [str(j) for j in range(svm.n_labels_)] if multilabel else [str(c) for c in svm.classes_]
        ),
        "n_features": int(svm.n_features_in_),
        "params": {k: v for k, v in svm.get_params().items() if k != "callback"},
        "solver": f"{svm.solver_choice_.solver} ({svm.solver_choice_.reason})",
        "passes": int(svm.n_iter_),
        "stop_reason": svm.history_.stop_reason,
        "resumable": getattr(svm, "_saved_state", None) is not None,
    }
    last = svm.history_.last_checked()
    if last is not None:
        info["final"] = {
            "primal": last.primal,
            "dual": last.dual,
            "gap": last.gap,
            "relative_gap": last.relative_gap,
            "train_seconds": last.time,
        }
    if multilabel:
        info["n_edges"] = int(len(svm.edges_))
        info["params"]["edges"] = svm.model_.edge_kind
    if isinstance(model, SequenceTagger):
        info["tag_scheme"] = model.tag_scheme
        info["input_format"] = model.input_format
        info["feature_params"] = model.features_.get_params()
    if args.plot:
        _plot_curves(svm.history_, args.plot, args.plot_x, path.name)
        info["plot"] = args.plot
    if args.top:
        top = model.top_features(args.top)
        info["top_features"] = {str(k): v for k, v in top.items()}
        if not multilabel:
            info["transitions"] = {
                "labels": info["labels"],
                "weights": svm.transition_weights_.tolist(),
            }
    if args.json:
        json.dump(info, out, indent=1, default=str)
        out.write("\n")
        return 0
    for k, v in info.items():
        if k in ("top_features", "transitions"):
            continue
        if k == "labels":
            v = f"{len(v)}: " + " ".join(v)
        print(f"{k:>14}: {v}", file=out)
    if args.top:
        print(f"\nstrongest {args.top} features per label (weight):", file=out)
        for label, feats in info["top_features"].items():
            shown = "  ".join(f"{name} {weight:+.3g}" for name, weight in feats)
            print(f"  {label}: {shown}", file=out)
    if args.top and not multilabel:
        W = svm.transition_weights_
        labels = info["labels"]
        order = np.argsort(-np.abs(W), axis=None)[: args.top]
        print(f"strongest {args.top} transitions (from -> to: weight):", file=out)
        for a, b in zip(*np.unravel_index(order, W.shape)):
            print(f"  {labels[a]} -> {labels[b]}: {W[a, b]:+.3g}", file=out)
    return 0


def _n_jobs(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value == 0:
        raise argparse.ArgumentTypeError("must be a nonzero integer (-1: every core)")
    return value


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _passes_left(args, backend) -> int:
    """``--max-iter`` counts the passes (rounds on Spark) in total, on ``--resume`` and on
    ``--spark-resume`` alike: the ones still to make after those the run has made."""
    if not (backend.get("backend_options") or {}).get("resume"):
        return args.max_iter
    try:
        done = int(read_checkpoint(args.spark_checkpoint_dir)["round"])
    except (ValueError, OSError, KeyError) as exc:
        raise CLIError(f"--spark-resume: {exc}") from None
    if args.max_iter <= done:
        raise CLIError(
            f"the run in {args.spark_checkpoint_dir} has already made {done} rounds; "
            "raise --max-iter (it counts the rounds in total)"
        )
    return args.max_iter - done


def _backend_params(args):
    """The estimator's backend parameters from ``--spark-master`` and its companions."""
    spark_only = {
        "--partitions": args.partitions,
        "--local-passes": args.local_passes,
        "--spark-checkpoint-dir": args.spark_checkpoint_dir,
        "--spark-resume": args.spark_resume or None,
    }
    if args.spark_master is None:
        given = [k for k, v in spark_only.items() if v is not None]
        if given:
            raise CLIError(f"{', '.join(given)} need --spark-master")
        return {}
    if args.resume:
        raise CLIError(
            "--resume continues a model file; a Spark run resumes from its "
            "checkpoint directory with --spark-checkpoint-dir DIR --spark-resume"
        )
    if args.spark_resume and not args.spark_checkpoint_dir:
        raise CLIError("--spark-resume needs --spark-checkpoint-dir")
    if args.checkpoint_every:
        raise CLIError(
            "a Spark run checkpoints to --spark-checkpoint-dir (every "
            "--spark-checkpoint-every rounds), not with --checkpoint-every"
        )
    options = {"master": args.spark_master}
    if args.save_state:  # the dual state comes back to this machine at the end
        options["keep_dual_state"] = True
    if args.spark_checkpoint_dir:
        options["checkpoint_dir"] = args.spark_checkpoint_dir
        options["resume"] = bool(args.spark_resume)
    if args.spark_checkpoint_every:
        options["checkpoint_every"] = args.spark_checkpoint_every
    solver_options = {}
    if args.local_passes is not None:
        if args.solver not in ("bcfw", "auto"):  # "auto" trains BCFW on Spark
            raise CLIError("--local-passes is for --solver bcfw (CoCoA+)")
        solver_options["local_passes"] = args.local_passes
    return {
        "backend": "spark",
        "n_partitions": args.partitions or 2,
        "backend_options": options,
        "solver_options": solver_options or None,
    }


def _add_spark_arguments(parser):
    g = parser.add_argument_group(
        "Spark",
        "train on Apache Spark with CoCoA+ (--solver bcfw) or mini-batch SSG "
        '(--solver ssg); needs pip install "dualstruct[spark]". --max-iter and '
        "--check-every then count rounds. dualstruct train reads the training file on the "
        "executors (a path each of them reads: local with a local master, else a shared "
        "filesystem; --dev stays on this machine), except with --save-state",
    )
    g.add_argument(
        "--spark-master",
        metavar="MASTER",
        help="e.g. local[2,4] (2 threads, 4 attempts per task), spark://host:7077, yarn",
    )
    g.add_argument(
        "--partitions",
        type=_positive_int,
        metavar="K",
        help="partitions of the training examples (default 2)",
    )
    g.add_argument(
        "--local-passes",
        type=_positive_int,
        metavar="H",
        help="BCFW passes of each partition per round (default 1)",
    )
    g.add_argument(
        "--spark-checkpoint-dir",
        metavar="DIR",
        help="where the run is checkpointed (a shared filesystem on a cluster)",
    )
    g.add_argument(
        "--spark-checkpoint-every",
        type=_positive_int,
        metavar="N",
        help="rounds between checkpoints (default 10)",
    )
    g.add_argument(
        "--spark-resume",
        action="store_true",
        help="continue the run checkpointed in --spark-checkpoint-dir",
    )


SOLVER_HELP = (
    "auto (default): gdmm or bcfw by a rule measured on the benchmarks (the first line of "
    "training says which and why); bcfw: block-coordinate Frank-Wolfe, proximal; ssg: "
    "stochastic subgradient; cutting_plane: 1-slack cutting plane; gdmm: for large label sets"
)
SEED_HELP = "random seed of the training run (default 0)"
JSON_HELP = "print the result as JSON"


def _add_solver_arguments(parser, C, rescaling_help, weights_help):
    """The training options both ``train`` commands share: solver, C, rescaling, weights,
    stopping."""
    parser.add_argument(
        "--solver",
        choices=("auto", "bcfw", "ssg", "cutting_plane", "gdmm"),
        default="auto",
        help=SOLVER_HELP,
    )
    parser.add_argument(
        "-C", type=float, default=C, help=f"regularization constant (default {C:g})"
    )
    parser.add_argument(
        "--rescaling", choices=("margin", "slack"), default="margin", help=rescaling_help
    )
    parser.add_argument(
        "--weights", choices=("auto", "dense", "observed"), default="auto", help=weights_help
    )
    parser.add_argument(
        "--weights-min-count",
        type=int,
        default=1,
        help="observed weights: occurrences a (feature, label) pair needs",
    )
    parser.add_argument(
        "--max-iter",
        type=int,
        default=200,
        help="maximum passes in total, also with --resume or --spark-resume (default 200)",
    )
    parser.add_argument(
        "--tol", type=float, default=0.01, help="stop at this relative duality gap (default 0.01)"
    )
    parser.add_argument(
        "--check-every",
        type=_check_every,
        default=5,
        help="passes between exact objective/gap/dev evaluations (default 5), or 'auto': "
        "checks spaced to take at most a tenth of the training time",
    )


def _add_run_arguments(parser):
    """Seed, checkpoints, resuming and Spark: how a ``train`` command runs."""
    parser.add_argument("--seed", type=int, default=0, help=SEED_HELP)
    parser.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="N",
        help="save a resumable checkpoint to MODEL.ckpt every N passes",
    )
    parser.add_argument("--resume", help="continue training from a checkpoint or interrupted model")
    parser.add_argument(
        "--save-state",
        action="store_true",
        help="keep the solver state in the final model so training can continue",
    )
    _add_spark_arguments(parser)


def _add_jobs_argument(parser):
    parser.add_argument(
        "-j",
        "--jobs",
        type=_n_jobs,
        default=None,
        metavar="N",
        help="threads that share the input (-1: every core)",
    )


def _add_tagger_train(sub):
    t = sub.add_parser("train", help="train a tagger on a CoNLL or CoNLL-U file")
    t.add_argument("train", help="training file (CoNLL columns or CoNLL-U; .gz allowed)")
    t.add_argument("-o", "--output", required=True, help="model file to write")
    t.add_argument(
        "--format",
        choices=("conll", "conllu"),
        default="conll",
        help="conll: whitespace-separated columns, one token per line (default); "
        "conllu: Universal Dependencies CoNLL-U",
    )
    t.add_argument(
        "--label-column",
        type=int,
        default=-1,
        help="CoNLL: 0-based label column (negative counts from the end; default -1)",
    )
    t.add_argument("--label", default="upos", help=f"CoNLL-U: one of {', '.join(CONLLU_LABELS)}")
    _add_solver_arguments(
        t,
        C=0.1,
        rescaling_help="how the loss enters the hinge: added to the margin (default) or "
        "scaling the slack",
        weights_help="unary weights: every (feature, label) pair, or only those met in "
        "training (auto: observed when the dense matrix would exceed 1 GiB)",
    )
    t.add_argument(
        "--slack-search",
        choices=("exact", "angular", "bisecting", "binary"),
        default="exact",
        help="how the slack-rescaled oracle is computed",
    )
    t.add_argument("--dev", help="held-out file scored at every check")
    t.add_argument(
        "--tag-scheme",
        choices=("iobes", "none"),
        default="none",
        help="train chunk tags re-tagged as IOBES (output stays BIO)",
    )
    t.add_argument(
        "--window",
        type=int,
        default=2,
        metavar="N",
        help="neighbouring words and other columns within ±N tokens are features (default 2)",
    )
    t.add_argument(
        "--min-count",
        type=int,
        default=1,
        metavar="N",
        help="keep features seen at least N times in training (default 1; not with --hashing)",
    )
    t.add_argument(
        "--hashing", type=int, default=None, metavar="N", help="hash features into N columns"
    )
    _add_run_arguments(t)


def _add_tagger_use(sub):
    p = sub.add_parser("predict", help="append (CoNLL) or fill (CoNLL-U) predicted labels")
    p.add_argument("model", help="tagger model file (from dualstruct train)")
    p.add_argument("input", help="CoNLL or CoNLL-U file to tag, in the model's format")
    p.add_argument("-o", "--output", help="output file (default: standard output)")
    _add_jobs_argument(p)

    e = sub.add_parser("evaluate", help="accuracy, per-label and chunk P/R/F1 on a labelled file")
    e.add_argument("model", help="tagger model file (from dualstruct train)")
    e.add_argument("test", help="labelled CoNLL or CoNLL-U file, in the model's format")
    e.add_argument("--json", action="store_true", help=JSON_HELP)


def _add_info_and_demo(sub):
    i = sub.add_parser("info", help="labels, features, hyperparameters, final objective and gap")
    i.add_argument("model", help="model file (tagger or multi-label)")
    i.add_argument("--json", action="store_true", help=JSON_HELP)
    i.add_argument(
        "--top",
        type=_positive_int,
        metavar="N",
        help="also the N strongest features of every label (and, for sequence "
        "models, the N strongest label transitions)",
    )
    i.add_argument(
        "--plot",
        metavar="FILE",
        help="draw the training curves (primal, dual, gap, held-out score "
        "against time) into FILE (.png, .pdf, .svg; needs matplotlib)",
    )
    i.add_argument(
        "--plot-x",
        choices=("time", "passes"),
        default="time",
        help="the curves' horizontal axis (default: time)",
    )

    d = sub.add_parser(
        "demo",
        help="train, evaluate and reload a tagger on a corpus it generates (no data needed)",
    )
    d.add_argument(
        "--dir",
        metavar="DIR",
        help="write the corpus and the model into DIR and keep them (default: a temporary "
        "folder, removed at the end)",
    )
    d.add_argument("--seed", type=int, default=0, help="seed of the corpus and of training")


LABELS_HELP = (
    "ARFF input: the MULAN XML file naming the label attributes, or their number (the last "
    "attributes)"
)


def _add_multilabel_train(mls):
    mt = mls.add_parser("train", help="train a multi-label model")
    mt.add_argument("train", help="LIBSVM multi-label (l1,l2 j:v ...) or ARFF file (.gz allowed)")
    mt.add_argument("-o", "--output", required=True, help="model file to write")
    mt.add_argument("--labels", help=LABELS_HELP)
    mt.add_argument(
        "--edges",
        choices=("independent", "chain", "tree", "full"),
        default="full",
        help="label pairs with an interaction weight: none, consecutive labels, the "
        "Chow-Liu tree of the training labels, or every pair (default)",
    )
    mt.add_argument(
        "--inference",
        choices=("auto", "exact", "lp"),
        default="auto",
        help="exact (forests, or enumeration up to 16 labels), lp (the LP relaxation by "
        "max-flow), auto (default): exact on forests and up to 10 labels, else lp",
    )
    mt.add_argument(
        "--interactions",
        choices=("11", "table"),
        default="11",
        help="what an edge scores: its (1, 1) outcome or a full 2x2 table",
    )
    _add_solver_arguments(
        mt,
        C=1.0,
        rescaling_help="slack: exact oracle by enumeration, at most 16 labels",
        weights_help="unary weights: every (feature, label) pair, or only those that met "
        "in training, label on (auto: observed when the dense matrix would exceed 1 GiB)",
    )
    mt.add_argument(
        "--n-features",
        type=_positive_int,
        metavar="D",
        help="feature width of a LIBSVM file (default: its largest index), so "
        "that test files may use features the training file never does",
    )
    mt.add_argument(
        "--n-labels",
        type=_positive_int,
        metavar="L",
        help="number of labels of a LIBSVM file (default: its largest id + 1)",
    )
    mt.add_argument("--dev", help="held-out file (same format) scored at every check")
    _add_run_arguments(mt)


def _add_multilabel_use(mls):
    me = mls.add_parser("evaluate", help="Hamming loss, subset/Jaccard accuracy, micro/macro F1")
    me.add_argument("model", help="multi-label model file (from dualstruct multilabel train)")
    me.add_argument("test", help="labelled LIBSVM multi-label or ARFF file")
    me.add_argument("--labels", help=LABELS_HELP)
    me.add_argument("--json", action="store_true", help=JSON_HELP)
    mp = mls.add_parser("predict", help="write one comma-separated label set per example")
    mp.add_argument("model", help="multi-label model file (from dualstruct multilabel train)")
    mp.add_argument("input", help="LIBSVM multi-label or ARFF file (labels, if any, ignored)")
    mp.add_argument("--labels", help=LABELS_HELP)
    mp.add_argument("-o", "--output", help="output file (default: standard output)")
    _add_jobs_argument(mp)


def build_parser():
    """The ``dualstruct`` command line: the tagger's commands, ``info``, ``demo`` and the
    ``multilabel`` group."""
    ap = argparse.ArgumentParser(
        prog="dualstruct",
        description="Structural SVMs: sequence taggers on CoNLL and CoNLL-U files, "
        "multi-label models on LIBSVM and ARFF files. Start with: dualstruct demo",
    )
    ap.add_argument("--version", action="version", version=f"dualstruct {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    _add_tagger_train(sub)
    _add_tagger_use(sub)
    _add_info_and_demo(sub)
    ml = sub.add_parser("multilabel", help="multi-label models on LIBSVM or MULAN ARFF files")
    mls = ml.add_subparsers(dest="ml_command", required=True)
    _add_multilabel_train(mls)
    _add_multilabel_use(mls)
    return ap


def _check_every(text):
    """``--check-every``: a number of passes or "auto"."""
    return text if text == "auto" else _positive_int(text)


def main(argv=None, out=None):
    out = out or sys.stdout
    ap = build_parser()
    args = ap.parse_args(argv)
    args.given = _given_on_command_line(sys.argv[1:] if argv is None else argv)
    if args.command == "train" or getattr(args, "ml_command", None) == "train":
        if args.max_iter < 1:
            ap.error("--max-iter must be >= 1")
        if not args.C > 0:
            ap.error("-C must be positive")
    commands = {
        "train": cmd_train,
        "predict": cmd_predict,
        "evaluate": cmd_evaluate,
        "info": cmd_info,
        "demo": cmd_demo,
    }
    multilabel = {
        "train": cmd_multilabel_train,
        "evaluate": cmd_multilabel_evaluate,
        "predict": cmd_multilabel_predict,
    }
    try:
        if args.command == "multilabel":
            return multilabel[args.ml_command](args, out)
        return commands[args.command](args, out)
    except CLIError as exc:
        print(f"dualstruct: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before a whole pass (or round) was made: nothing to keep
        print(
            "dualstruct: interrupted before a whole pass was made; nothing saved", file=sys.stderr
        )
        return 130
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
