"""Seeded fuzz cases for ``test_fuzz.py``: random edits of model files and checkpoints, random
graph inputs, misbehaving user models and bad training inputs, each checked for a clear error
or an honest result.

Cases run in worker processes (``python -c "import fuzz_cases; fuzz_cases.main()" work …``)
that announce every case before running it, so that a crash or a hang names the case; the
parent (:func:`run_suite`) restarts a worker after a crash. A case is a ``(family, seed)``
pair; everything it does follows from the seed, and :func:`plan_case` describes it.

Run it alone: ``python tests/package/fuzz_cases.py [n_cases] [seed]`` prints the summary.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FAMILIES = ("file", "graph", "user", "input")
#: the share of each family among the cases
WEIGHTS = (0.55, 0.2, 0.15, 0.1)
#: a relative gap below this is not rounding
NEGATIVE_GAP = -1e-9
FIRST_CASE_TIMEOUT = 240.0  # a worker's first case loads (or compiles) the kernels
CASE_TIMEOUT = 120.0  # generous: a case may compile a kernel for a new type
RESUME_PASSES = 3


# -- data and models ----------------------------------------------------------------------------
def chain_data():
    """Eight sequences of 2–5 tokens, 4 features, string labels a/b/c."""
    rng = np.random.default_rng(11)
    A = rng.normal(size=(4, 3))
    X, y = [], []
    for _ in range(8):
        T = int(rng.integers(2, 6))
        x = rng.normal(size=(T, 4))
        X.append(x)
        codes = np.argmax(x @ A + 0.3 * rng.normal(size=(T, 3)), axis=1)
        y.append(np.array(["a", "b", "c"])[codes])
    y[0][:3] = ["a", "b", "c"][: len(y[0][:3])]
    return X, y


def tagger_data():
    """Twelve sentences of (word, suffix) tokens tagged DT / NN / VB (the command line's
    tagger)."""
    rng = np.random.default_rng(16)
    words = {"DT": ["the", "a"], "NN": ["cat", "dog", "bird"], "VB": ["sat", "ran", "flew"]}
    sentences, tags = [], []
    for _ in range(12):
        t = ["DT", "NN", "VB"] if rng.random() < 0.7 else ["NN", "VB"]
        sentences.append([(w, w[-2:]) for w in (str(rng.choice(words[g])) for g in t)])
        tags.append(t)
    return sentences, tags


def multilabel_data():
    """24 rows of 5 features, 4 binary labels (each column holds both values)."""
    rng = np.random.default_rng(12)
    X = rng.normal(size=(24, 5))
    Y = (X @ rng.normal(size=(5, 4)) + 0.3 * rng.normal(size=(24, 4)) > 0).astype(np.int64)
    Y[0], Y[1] = 0, 1
    return X, Y


def multiclass_data():
    """30 rows of 4 features, classes 0, 1, 2."""
    rng = np.random.default_rng(13)
    X = rng.normal(size=(30, 4))
    y = np.argmax(X @ rng.normal(size=(4, 3)), axis=1)
    y[:3] = [0, 1, 2]
    return X, y


def graph_data(edge_features=False, seed=14, n_graphs=6):
    """Graphs of 2 × 3 grids (loopy): 6 nodes of 4 features, 3 states; with
    ``edge_features`` each edge has 2 features."""
    from dualstruct.models import grid_edges

    rng = np.random.default_rng(seed)
    W = rng.normal(size=(4, 3))
    edges = grid_edges(2, 3)
    X, Y = [], []
    for _ in range(n_graphs):
        nodes = rng.normal(size=(6, 4))
        y = np.argmax(nodes @ W, axis=1)
        if edge_features:
            X.append((nodes, edges.copy(), rng.normal(size=(len(edges), 2))))
        else:
            X.append((nodes, edges.copy()))
        Y.append(y)
    Y[0][:3] = [0, 1, 2]
    return X, Y


def user_data(scalar=False):
    """Six examples for :class:`UserChain` (4 nodes of 3 features, binary) or, with
    ``scalar``, nine for :class:`UserClass` (3 features, classes 0–2)."""
    rng = np.random.default_rng(15)
    if scalar:
        X = [rng.normal(size=3) for _ in range(9)]
        return X, [int(np.argmax(x)) for x in X]
    X = [rng.normal(size=(4, 3)) for _ in range(6)]
    return X, [(x[:, 0] > 0).astype(np.int64) for x in X]


class UserChain:
    """A user model: binary labellings of 4 nodes in a row, node weights and a 2 × 2
    transition table; the oracles enumerate all 16 labellings."""

    def __init__(self, n_features=3, n_states=2):
        self.n_features = n_features
        self.n_states = n_states
        self.size_joint_feature = n_features * n_states + n_states * n_states

    def labellings(self, x):
        n = len(x)
        return [
            np.array(t, dtype=np.int64) for t in itertools.product(range(self.n_states), repeat=n)
        ]

    def joint_feature(self, x, y):
        y = np.asarray(y)
        K = self.n_states
        unary = np.zeros((K, self.n_features))
        np.add.at(unary, y, x)
        pair = np.zeros((K, K))
        np.add.at(pair, (y[:-1], y[1:]), 1.0)
        return np.concatenate([unary.ravel(), pair.ravel()])

    def loss(self, y, y_hat):
        return float(np.sum(np.asarray(y) != np.asarray(y_hat)))

    def inference(self, x, w):
        return max(self.labellings(x), key=lambda c: float(w @ self.joint_feature(x, c)))

    def loss_augmented_inference(self, x, y, w):
        return max(
            self.labellings(x),
            key=lambda c: self.loss(y, c) + float(w @ self.joint_feature(x, c)),
        )


class UserClass(UserChain):
    """A user model with scalar labellings: three classes, one weight block each."""

    def __init__(self, n_features=3, n_states=3):
        self.n_features = n_features
        self.n_states = n_states
        self.size_joint_feature = n_features * n_states

    def labellings(self, x):
        return list(range(self.n_states))

    def joint_feature(self, x, y):
        phi = np.zeros((self.n_states, self.n_features))
        phi[y] = x
        return phi.ravel()

    def loss(self, y, y_hat):
        return float(y != y_hat)


#: how a misbehaving user model fails, and what the library must do about it: "error" (a
#: clear error), "ok" (train normally) or "any" (either, as long as nothing crashes or lies)
USER_MODES = {
    "honest": "ok",
    "ignore_loss": "any",
    "gold": "any",
    "random": "any",
    "three": "any",
    "worst": "error",
    "nondeterministic": "any",
    "out_of_range": "any",
    "negative_label": "any",
    "wrong_length": "error",
    "float_labels": "any",
    "fraction_labels": "error",
    "huge_labels": "error",
    "string_labels": "error",
    "none": "error",
    "loss_self_nonzero": "any",
    "negative_loss": "error",
    "nan_loss": "error",
    "scaled_loss": "ok",
    "raise_oracle": "error",
    "raise_feature": "error",
    "raise_loss": "error",
    "nan_features": "error",
    "inf_features": "error",
    "short_features": "error",
    "list_features": "ok",
    "inference_garbage": "any",
    "size_zero": "error",
    "size_float": "error",
    "size_string": "error",
    "missing_loss": "error",
}


def misbehaving(base, mode, seed):
    """A subclass of the user model ``base`` whose methods misbehave as ``mode`` says."""

    class Misbehaving(base):
        def __init__(self):
            super().__init__()
            self._rng = np.random.default_rng(seed)
            self._calls = 0
            if mode == "size_zero":
                self.size_joint_feature = 0
            elif mode == "size_float":
                self.size_joint_feature = float(self.size_joint_feature) + 0.5
            elif mode == "size_string":
                self.size_joint_feature = str(self.size_joint_feature)

        def _tick(self):
            self._calls += 1
            return self._calls

        def joint_feature(self, x, y):
            phi = super().joint_feature(x, y)
            if mode == "raise_feature" and self._tick() > 40:
                raise RuntimeError("fuzz: joint_feature failed on purpose")
            if mode in ("nan_features", "inf_features") and self._rng.random() < 0.2:
                phi = phi.copy()
                phi[int(self._rng.integers(len(phi)))] = (
                    np.nan if mode == "nan_features" else np.inf
                )
            if mode == "short_features":
                return phi[:-1]
            if mode == "list_features":
                return phi.tolist()
            return phi

        def loss(self, y, y_hat):
            value = super().loss(y, y_hat)
            if mode == "loss_self_nonzero":
                return value + 1.0
            if mode == "negative_loss" and self._rng.random() < 0.3:
                return -1.0
            if mode == "nan_loss" and self._rng.random() < 0.3:
                return math.nan
            if mode == "scaled_loss":
                return 10.0 * value
            if mode == "raise_loss" and self._tick() > 30:
                raise RuntimeError("fuzz: loss failed on purpose")
            return value

        def inference(self, x, w):
            y = super().inference(x, w)
            if mode == "inference_garbage":
                return np.full(np.shape(y), 7) if np.ndim(y) else 7
            return y

        def loss_augmented_inference(self, x, y, w):
            best = super().loss_augmented_inference(x, y, w)
            every = self.labellings(x)
            if mode == "ignore_loss":
                return super().inference(x, w)
            if mode == "gold":
                return y
            if mode == "random":
                return every[int(self._rng.integers(len(every)))]
            if mode == "three":
                return max(
                    every[:3], key=lambda c: self.loss(y, c) + float(w @ self.joint_feature(x, c))
                )
            if mode == "worst":
                return min(
                    every, key=lambda c: self.loss(y, c) + float(w @ self.joint_feature(x, c))
                )
            if mode == "nondeterministic":
                return best if self._rng.random() < 0.5 else y
            if mode == "out_of_range":
                return np.asarray(best) * 0 + self.n_states
            if mode == "negative_label":
                return np.asarray(best) * 0 - 1
            if mode == "wrong_length":
                return np.append(np.atleast_1d(best), 0)
            if mode == "float_labels":
                return np.asarray(best, dtype=np.float64)
            if mode == "fraction_labels":
                return np.asarray(best) + 0.5
            if mode == "huge_labels":
                return np.asarray(best, dtype=np.int64) + 2**40
            if mode == "string_labels":
                return np.asarray(best).astype(str)
            if mode == "none":
                return None
            if mode == "raise_oracle" and self._tick() > 10:
                raise RuntimeError("fuzz: loss_augmented_inference failed on purpose")
            return best

    Misbehaving.__name__ = Misbehaving.__qualname__ = f"{base.__name__}_{mode}"
    if mode == "missing_loss":
        Misbehaving.loss = property(lambda self: (_ for _ in ()).throw(AttributeError("loss")))
    return Misbehaving()


def true_primal(model, X, Y, w, C):
    """``½‖w‖² + C Σ_i max_y [δ(y_i, y) + ⟨w, φ(x_i, y)⟩ − ⟨w, φ(x_i, y_i)⟩]`` by enumeration
    with the honest ``model``."""
    total = 0.0
    for x, y in zip(X, Y):
        gold = float(w @ model.joint_feature(x, y))
        total += max(
            model.loss(y, c) + float(w @ model.joint_feature(x, c)) - gold
            for c in model.labellings(x)
        )
    return 0.5 * float(w @ w) + C * total


# -- fixtures: tiny fitted models of every kind, as model files and checkpoints -----------------
def _fixtures():
    """name -> (make estimator, data function, is a checkpoint)."""
    import dualstruct
    from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
    from dualstruct.features import TokenFeatures
    from dualstruct.models import EdgeFeatureGraphCRF, GraphCRF
    from dualstruct.models.graph import observed_support
    from dualstruct.models.multiclass import MultiClassModel
    from dualstruct.tagger import SequenceTagger

    del dualstruct
    common = {"max_iter": 4, "check_every": 1, "random_state": 0}

    def edge_model():
        X, Y = graph_data(edge_features=True)
        return EdgeFeatureGraphCRF(3, 4, 2, support=observed_support(X, Y, 3))

    return {
        "chain_bcfw": (lambda: StructuredSVM(**common), chain_data, True),
        "chain_fw": (
            lambda: StructuredSVM(solver_options={"step": "fw"}, **common),
            chain_data,
            True,
        ),
        "chain_gdmm": (lambda: StructuredSVM(solver="gdmm", **common), chain_data, True),
        "chain_ssg": (lambda: StructuredSVM(solver="ssg", **common), chain_data, True),
        "chain_cp": (lambda: StructuredSVM(solver="cutting_plane", **common), chain_data, True),
        "chain_observed": (lambda: StructuredSVM(weights="observed", **common), chain_data, True),
        "chain_slack": (lambda: StructuredSVM(rescaling="slack", **common), chain_data, True),
        "ml_full": (lambda: MultiLabelSVM(edges="full", **common), multilabel_data, True),
        "ml_tree_gdmm": (
            lambda: MultiLabelSVM(edges="tree", solver="gdmm", **common),
            multilabel_data,
            True,
        ),
        "ml_explicit": (
            lambda: MultiLabelSVM(
                edges=np.array([[0, 1], [1, 2], [2, 3], [0, 3]]), weights="observed", **common
            ),
            multilabel_data,
            True,
        ),
        "mc_svm": (lambda: MultiClassSVM(**common), multiclass_data, False),
        "ssvm_mc": (lambda: SSVM(MultiClassModel(3, 4), **common), multiclass_data, False),
        "ssvm_graph": (
            lambda: SSVM(GraphCRF(3, 4, inference="lp"), **common),
            graph_data,
            False,
        ),
        "ssvm_edge": (
            lambda: SSVM(edge_model(), **common),
            lambda: graph_data(edge_features=True),
            False,
        ),
        "ssvm_user": (lambda: SSVM(UserChain(), **common), user_data, False),
        "tagger": (
            lambda: SequenceTagger(TokenFeatures(), StructuredSVM(fit_intercept=False, **common)),
            tagger_data,
            True,
        ),
    }


def build_fixtures(folder):
    """Train every fixture and save it (a checkpoint where the estimator has one), with
    bounds on its problem's optimum (``bounds.json``); then train once in every
    configuration the cases use, so that the workers find the kernels compiled."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bounds = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (make, data, checkpoint) in _fixtures().items():
            X, Y = data()
            est = make().fit(X, Y)
            path = folder / f"{name}.npz"
            if checkpoint:
                est.save(path, include_solver_state=True)
                bounds[name] = optimum_bounds(make, X, Y)
            else:
                est.save(path)
        warm_up()
    (folder / "bounds.json").write_text(json.dumps(bounds))


def optimum_bounds(make, X, Y):
    """``[D, P]``, a certified dual and primal of the fixture's problem within a relative
    1e-6 of each other (the optimum lies between); None for a solver without a dual."""
    est = make()
    params = {"max_iter": 5000, "tol": 1e-7, "check_every": 10}
    params["solver"], params["solver_options"] = "bcfw", None  # the same problem
    if hasattr(est, "svm"):  # a tagger
        params = {"svm__" + k: v for k, v in params.items()}
    est.set_params(**params).fit(X, Y)
    history = _svm(est).history_
    last = history.last_checked()
    if history.stop_reason != "tol" or not math.isfinite(last.dual):
        return None
    return [last.dual, last.primal]


def _svm(est):
    """The estimator that trains: a tagger's SVM, else ``est``."""
    return est.svm_ if hasattr(est, "svm_") else est


def warm_up():
    """A short fit in every model, solver and inference the cases use (fills the numba
    cache once, before the workers start)."""
    from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
    from dualstruct.models.multiclass import MultiClassModel

    short = {"max_iter": 2, "check_every": 1, "random_state": 0}
    for edge_features, inference in itertools.product((False, True), ("auto", "lp", "exact")):
        plan = {"edge_features": edge_features, "inference": inference, "seed": 3}
        for shape in ("grid", "random"):
            X, Y = _random_graphs({**plan, "shape": shape})
            SSVM(_graph_model(plan), **short).fit(X, Y).predict(X)
    for scalar, solver in itertools.product((False, True), ("bcfw", "cutting_plane", "ssg")):
        X, Y = user_data(scalar)
        SSVM((UserClass if scalar else UserChain)(), solver=solver, **short).fit(X, Y)
    X, Y = multiclass_data()
    for solver in ("bcfw", "cutting_plane"):
        SSVM(MultiClassModel(3, 4), solver=solver, **short).fit(X, Y).predict(X)
    MultiClassSVM(**short).fit(X, Y).predict(X)
    X, Y = chain_data()
    for solver in ("bcfw", "gdmm", "cutting_plane"):
        StructuredSVM(solver=solver, **short).fit(X, Y).predict(X)
    X, Y = multilabel_data()
    for solver in ("bcfw", "gdmm", "cutting_plane"):
        MultiLabelSVM(solver=solver, edges="tree", **short).fit(X, Y).predict(X)


# -- plans: what a case does, from its family and seed ------------------------------------------
ODD_NUMBERS = [0, -1, 1, -3, 2**31, 2**31 - 1, -(2**31), 2**63, 10**12, -1e12, 1e300, 0.5]
ODD_FLOATS = ["nan", "inf", "-inf"]  # stored in plans as {"__float__": …} (_decode_value)
ODD_OTHERS = [None, "", "x", True, False, [], {}, [0], "nan"]


def _odd_value(rng, current):
    """An adversarial replacement for a header value."""
    pool: list = ODD_NUMBERS + ODD_FLOATS + ODD_OTHERS
    if isinstance(current, bool):
        pool = [not current, None, 0, 2, "true", []]
    elif isinstance(current, (int, float)) and rng.random() < 0.3:
        pool = [current * 10**6, -current, current + 1, current - 1, current * 2]
    value = pool[int(rng.integers(len(pool)))]
    if isinstance(value, str) and value in ODD_FLOATS:
        return {"__float__": value}
    return value


def _leaves(obj, path=()):
    """Every (path, value) of a JSON header whose value is a scalar or an empty container."""
    if isinstance(obj, dict) and obj:
        for k in sorted(obj):
            yield from _leaves(obj[k], path + (k,))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj):
            yield from _leaves(v, path + (i,))
    else:
        yield path, obj


def _header_paths(obj, path=()):
    """Every path of a JSON header (dict keys and list items) except the top level."""
    if isinstance(obj, dict):
        for k in sorted(obj):
            yield path + (k,)
            yield from _header_paths(obj[k], path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield path + (i,)
            yield from _header_paths(v, path + (i,))


def _file_contents(path):
    from dualstruct import io

    header, arrays = io.load_arrays(path)
    header = {k: v for k, v in header.items() if k not in ("format", "format_version", "arrays")}
    return header, arrays


ARRAY_OPS = {
    "i": ["above_max", "below_zero", "int32_max", "int32_min", "huge", "negate", "shuffle"],
    "f": ["nan", "inf", "-inf", "huge", "negate", "zero", "noise"],
    "b": ["flip", "negate"],
}
SHAPE_OPS = ["truncate", "drop_half", "extend", "empty", "scalar", "flatten_or_2d", "transpose"]
DTYPE_OPS = ["int32", "int64", "float32", "float64", "bool", "uint8"]


def plan_file_case(rng, fixture_dir):
    """An edit of one fixture: an array's values, shape or dtype, a dropped array, a header
    value or key, or stray bytes."""
    names = sorted(_fixtures())
    fixture = names[int(rng.integers(len(names)))]
    header, arrays = _file_contents(Path(fixture_dir) / f"{fixture}.npz")
    kind = [
        "values",
        "values",
        "shape",
        "dtype",
        "drop",
        "header",
        "header",
        "header_drop",
        "bytes",
    ][int(rng.integers(9))]
    plan = {"family": "file", "fixture": fixture, "edit": kind}
    array_names = sorted(arrays)
    # the arrays a kernel reads get the most edits: state, support, edges, coef
    kernel_side = [n for n in array_names if not n.startswith("history.")]
    if rng.random() < 0.85 and kernel_side:
        array_names = kernel_side
        indices = [n for n in kernel_side if arrays[n].dtype.kind in "iu"]
        if indices and rng.random() < 0.5:  # index arrays: what an unchecked kernel trusts
            array_names = indices
    if kind in ("values", "shape", "dtype", "drop"):
        name = array_names[int(rng.integers(len(array_names)))]
        plan["array"] = name
        arr = arrays[name]
        if kind == "values":
            ops = ARRAY_OPS.get(arr.dtype.kind if arr.dtype.kind != "u" else "i", ARRAY_OPS["i"])
            plan["op"] = ops[int(rng.integers(len(ops)))]
            plan["count"] = int(rng.choice([1, 1, 2, max(1, arr.size)]))
        elif kind == "shape":
            plan["op"] = SHAPE_OPS[int(rng.integers(len(SHAPE_OPS)))]
        elif kind == "dtype":
            others = [d for d in DTYPE_OPS if d != arr.dtype.name]
            plan["op"] = others[int(rng.integers(len(others)))]
    elif kind == "header":
        leaves = list(_leaves(header))
        focus = [
            p
            for p, _ in leaves
            if p and p[0] in ("solver_state", "model", "estimator_params", "svm", "features")
        ]
        if focus and rng.random() < 0.7:
            paths = focus
        else:
            paths = [p for p, _ in leaves]
        path = paths[int(rng.integers(len(paths)))]
        current = _get(header, path)
        plan["path"] = list(path)
        plan["value"] = _odd_value(rng, current)
    elif kind == "header_drop":
        paths = list(_header_paths(header))
        plan["path"] = list(paths[int(rng.integers(len(paths)))])
    else:
        plan["op"] = ["flip", "truncate"][int(rng.integers(2))]
        plan["where"] = float(rng.random())
    plan["seed"] = int(rng.integers(2**31))
    return plan


def _get(obj, path):
    for k in path:
        obj = obj[k]
    return obj


def _decode_value(value):
    if isinstance(value, dict) and set(value) == {"__float__"}:
        return float(value["__float__"])
    return value


def _apply_values(arr, op, count, rng):
    arr = np.array(arr)
    flat = arr.reshape(-1)
    if flat.size == 0:
        return arr
    where = rng.choice(flat.size, size=min(count, flat.size), replace=False)
    if arr.dtype.kind in "iu":
        info = np.iinfo(arr.dtype)
        top = int(flat.max()) if flat.size else 0
        value = {
            "above_max": top + 1,
            "below_zero": -1,
            "int32_max": 2**31 - 1,
            "int32_min": -(2**31),
            "huge": info.max,
        }.get(op)
        if op == "negate":
            flat[where] = -flat[where]
        elif op == "shuffle":
            flat[:] = rng.permutation(flat)
        elif value is not None:
            flat[where] = np.clip(value, info.min, info.max)
    elif arr.dtype.kind == "f":
        value = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "huge": 1e300, "zero": 0.0}.get(op)
        if op == "negate":
            flat[where] = -flat[where]
        elif op == "noise":
            flat[where] += 1e3 * rng.normal(size=len(where))
        else:
            flat[where] = value
    elif arr.dtype.kind == "b":
        flat[where] = ~flat[where]
    return arr


def _apply_shape(arr, op):
    arr = np.asarray(arr)
    if op == "truncate":
        return arr[:-1] if arr.ndim else arr.reshape(1)[:0]
    if op == "drop_half":
        return arr[: len(arr) // 2] if arr.ndim else arr.reshape(1)[:0]
    if op == "extend":
        if arr.ndim == 0:
            return np.stack([arr, arr])
        return np.concatenate(
            [arr, arr[-1:] if len(arr) else np.zeros((1,) + arr.shape[1:], arr.dtype)]
        )
    if op == "empty":
        return arr.reshape(-1)[:0]
    if op == "scalar":
        return arr.reshape(-1)[:1].reshape(()) if arr.size else np.zeros((), arr.dtype)
    if op == "flatten_or_2d":
        return arr.reshape(1, -1) if arr.ndim == 1 else arr.reshape(-1)
    if op == "transpose":
        return arr.T if arr.ndim == 2 else arr.reshape(-1, 1)
    raise ValueError(op)


def write_edited_file(plan, fixture_dir, out_path):
    """Write the fixture edited as ``plan`` says, with consistent checksums (an edit made
    by someone who rewrote the file), or with stray bytes."""
    from dualstruct import io

    src = Path(fixture_dir) / f"{plan['fixture']}.npz"
    header, arrays = _file_contents(src)
    rng = np.random.default_rng(plan["seed"])
    kind = plan["edit"]
    if kind == "values":
        arrays[plan["array"]] = _apply_values(arrays[plan["array"]], plan["op"], plan["count"], rng)
    elif kind == "shape":
        arrays[plan["array"]] = _apply_shape(arrays[plan["array"]], plan["op"])
    elif kind == "dtype":
        a = arrays[plan["array"]]
        with np.errstate(all="ignore"):
            arrays[plan["array"]] = a.astype(plan["op"])
    elif kind == "drop":
        del arrays[plan["array"]]
    elif kind == "header":
        path = plan["path"]
        _get(header, path[:-1])[path[-1]] = _decode_value(plan["value"])
    elif kind == "header_drop":
        path = plan["path"]
        del _get(header, path[:-1])[path[-1]]
    io.save_arrays(out_path, header, arrays)
    if kind == "bytes":
        data = bytearray(Path(out_path).read_bytes())
        at = int(plan["where"] * len(data))
        if plan["op"] == "flip":
            data[at] ^= 0xFF
        else:
            del data[at:]
        Path(out_path).write_bytes(bytes(data))


GRAPH_EDITS = {
    # edit: expectation ("error", "ok", "equiv": an error or the canonical result, "any")
    "none": "ok",
    "edges_transposed": "equiv",
    "edges_node_n": "error",
    "edges_negative": "error",
    "edges_float_integral": "equiv",
    "edges_float_fraction": "error",
    "edges_nan": "error",
    "edges_huge": "error",
    "edges_wrap": "error",
    "edges_zero": "ok",
    "edges_empty_list": "ok",
    "edges_flat": "equiv",
    "edges_wide": "error",
    "edges_self_loop": "error",
    "edges_duplicate": "any",
    "edges_reversed": "any",
    "edges_string": "error",
    "nodes_nan": "error",
    "nodes_inf": "error",
    "nodes_wrong_width": "error",
    "nodes_empty": "error",
    "nodes_sparse": "equiv",
    "nodes_int": "equiv",
    "edge_features_transposed": "equiv",
    "edge_features_nan": "error",
    "edge_features_short": "error",
    "labels_above": "error",
    "labels_negative": "error",
    "labels_float_integral": "equiv",
    "labels_fraction": "error",
    "labels_wrap": "error",
    "labels_huge": "error",
    "labels_string": "error",
    "labels_short": "error",
    "labels_column": "equiv",
    "graph_missing_part": "error",
    "fewer_labels": "error",
    "lp_sweeps_zero": "error",
    "lp_sweeps_negative": "error",
    "lp_sweeps_one": "ok",
    "lp_tol_nan": "error",
    "lp_tol_negative": "any",
    "enumerate_negative": "any",
    "n_states_one": "error",
    "loss_weights_nan": "error",
}
#: edits of the model's options rather than of the data
GRAPH_OPTION_EDITS = {
    "lp_sweeps_zero": {"lp_sweeps": 0},
    "lp_sweeps_negative": {"lp_sweeps": -1},
    "lp_sweeps_one": {"lp_sweeps": 1},
    "lp_tol_nan": {"lp_tol": math.nan},
    "lp_tol_negative": {"lp_tol": -1.0},
    "enumerate_negative": {"enumerate_up_to": -1},
    "n_states_one": {"n_states": 1},
    "loss_weights_nan": {"loss_weights": [1.0, math.nan, 1.0]},
}


def plan_graph_case(rng):
    edits = sorted(GRAPH_EDITS)
    edit = edits[int(rng.integers(len(edits)))]
    return {
        "family": "graph",
        "edit": edit,
        "edge_features": bool(rng.random() < 0.35) or edit.startswith("edge_features"),
        "inference": ["auto", "lp", "exact"][int(rng.integers(3))]
        if edit != "lp_sweeps_one"
        else "lp",
        "stage": "fit" if rng.random() < 0.7 or edit.startswith(("labels", "fewer")) else "predict",
        "all_graphs": bool(rng.random() < 0.3),
        "shape": ["grid", "tree", "chain", "random"][int(rng.integers(4))],
        "seed": int(rng.integers(2**31)),
    }


def plan_user_case(rng):
    modes = sorted(USER_MODES)
    return {
        "family": "user",
        "mode": modes[int(rng.integers(len(modes)))],
        "scalar": bool(rng.random() < 0.3),
        "solver": ["bcfw", "bcfw", "cutting_plane", "ssg"][int(rng.integers(4))],
        "tol": [1e-2, 1e-3, 0.0][int(rng.integers(3))],
        "seed": int(rng.integers(2**31)),
    }


INPUT_EDITS = {
    # (estimator, edit): expectation
    ("ssvm_mc", "X_nan"): "error",
    ("ssvm_mc", "X_inf"): "error",
    ("ssvm_mc", "y_above"): "error",
    ("ssvm_mc", "y_negative"): "error",
    ("ssvm_mc", "y_fraction"): "error",
    ("ssvm_mc", "y_wrap"): "error",
    ("ssvm_mc", "y_huge"): "error",
    ("ssvm_mc", "y_float_integral"): "equiv",
    ("mc_svm", "X_nan"): "error",
    ("mc_svm", "X_inf"): "error",
    ("mc_svm", "y_nan"): "error",
    ("mc_svm", "y_wrap"): "ok",
    ("chain", "X_nan"): "error",
    ("chain", "X_inf"): "error",
    ("chain", "y_nan"): "error",
    ("chain", "y_short"): "error",
    ("chain", "y_wrap"): "ok",
    ("multilabel", "X_nan"): "error",
    ("multilabel", "Y_three_values"): "error",
    ("multilabel", "Y_nan"): "error",
    ("multilabel", "edges_out_of_range"): "error",
    ("multilabel", "edges_self_loop"): "error",
    ("multilabel", "edges_float_fraction"): "error",
}


def plan_input_case(rng):
    keys = sorted(INPUT_EDITS)
    est, edit = keys[int(rng.integers(len(keys)))]
    solvers = {"ssvm_mc": ["bcfw", "cutting_plane"], "mc_svm": ["bcfw"]}.get(
        est, ["bcfw", "gdmm", "cutting_plane"]
    )
    return {
        "family": "input",
        "estimator": est,
        "edit": edit,
        "solver": solvers[int(rng.integers(len(solvers)))],
        "seed": int(rng.integers(2**31)),
    }


def plan_case(family, seed, fixture_dir):
    """The description of case ``(family, seed)`` (JSON-able)."""
    rng = np.random.default_rng([seed, FAMILIES.index(family)])
    if family == "file":
        return plan_file_case(rng, fixture_dir)
    if family == "graph":
        return plan_graph_case(rng)
    if family == "user":
        return plan_user_case(rng)
    return plan_input_case(rng)


def case_list(n_cases, seed=0):
    """``n_cases`` (family, seed) pairs drawn with the families' weights."""
    rng = np.random.default_rng(seed)
    families = rng.choice(len(FAMILIES), size=n_cases, p=WEIGHTS)
    return [(FAMILIES[f], int(seed) * 1_000_003 + i) for i, f in enumerate(families)]


# -- running a case (in a worker) ---------------------------------------------------------------
class Finding(Exception):
    """A defect the case found (not an error the library raised)."""

    def __init__(self, category, detail):
        super().__init__(f"{category}: {detail}")
        self.category, self.detail = category, detail


def _innermost_file(exc):
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last or ""


def acceptable_error(exc, user_code=False):
    """Whether ``exc`` is a clear error: a ValueError or TypeError (or subclass), a
    MemoryError with a message that the library raised itself, or with ``user_code`` an
    exception raised by the user model's own code."""
    if isinstance(exc, (ValueError, TypeError)):
        return True
    where = _innermost_file(exc)
    if type(exc) is MemoryError and str(exc) and f"{os.sep}dualstruct{os.sep}" in where:
        return True
    return user_code and Path(where).resolve() == Path(__file__).resolve()


def _finite_array(name, value):
    import scipy.sparse as sp

    data = value.data if sp.issparse(value) else np.asarray(value)
    if data.dtype.kind in "fc" and not np.all(np.isfinite(data)):
        raise Finding("nan-model", f"{name} holds NaN or infinite values without an error")


def check_fit(est, n_before, what):
    """An honest history after ``fit``: no new checked record with a negative relative gap,
    no stop at ``tol`` on a NaN gap, finite weights."""
    history = est.history_
    for r in list(history)[n_before:]:
        if r.relative_gap < NEGATIVE_GAP:
            raise Finding(
                "negative-gap",
                f"{what}: pass {r.passes:g} recorded the relative gap {r.relative_gap:.3g} "
                f"(primal {r.primal:.6g}, dual {r.dual:.6g}) without an error; stop_reason "
                f"{history.stop_reason!r}",
            )
    last = history.last_checked()
    if history.stop_reason == "tol" and (last is None or not math.isfinite(last.relative_gap)):
        raise Finding("nan-gap-converged", f"{what}: stopped at 'tol' without a finite gap")
    _finite_array("coef_", est.coef_)


def check_labels(predictions, allowed, shapes=None, what="predict"):
    """Every predicted entry is one of ``allowed`` (and each prediction has its shape)."""
    allowed = np.asarray(allowed)
    for i, p in enumerate(predictions):
        p = np.asarray(p)
        if shapes is not None and p.shape != shapes[i]:
            raise Finding("bad-prediction", f"{what}: prediction {i} has shape {p.shape}")
        if p.dtype.kind == "f" and not np.all(np.isfinite(p)):
            raise Finding("bad-prediction", f"{what}: prediction {i} holds NaN")
        if not np.all(np.isin(p, allowed)):
            bad = p[~np.isin(p, allowed)].ravel()[:5].tolist()
            raise Finding("bad-prediction", f"{what}: prediction {i} holds labels {bad}")


def run_file_case(plan, fixture_dir, workdir):
    import dualstruct

    path = Path(workdir) / f"edited_{plan['fixture']}.npz"
    write_edited_file(plan, fixture_dir, path)
    make, data, checkpoint = _fixtures()[plan["fixture"]]
    X, Y = data()
    user = plan["fixture"] == "ssvm_user"
    est = dualstruct.load(path, model=UserChain() if user else None)
    svm = _svm(est)
    _finite_array("coef_ (loaded)", svm.coef_)
    _check_predictions(plan["fixture"], est, X, Y)
    params = {"max_iter": RESUME_PASSES, "verbose": 0}
    if checkpoint and svm is est:
        params["warm_start"] = True
    svm.set_params(**params)
    n_before = len(svm.history_) if checkpoint else 0
    if svm is est:
        est.fit(X, Y)
    else:
        est.fit(X, Y, resume=True)
    check_fit(svm, n_before, "resumed fit" if checkpoint else "fit with the file's settings")
    bounds = json.loads((Path(fixture_dir) / "bounds.json").read_text()).get(plan["fixture"])
    if bounds is not None and same_problem(plan):
        note = check_optimum(svm, n_before, bounds)
        if note:
            _check_predictions(plan["fixture"], est, X, Y)
            return note
    _check_predictions(plan["fixture"], est, X, Y)
    return "ok"


#: what an edit may change without changing the optimization problem
STATE_ONLY = ("state.", "history.", "coef")


def same_problem(plan):
    """Whether the edit leaves the training problem as it was (only the solver state, the
    history or the stored weights changed)."""
    if plan["edit"] in ("header", "header_drop"):
        path = plan["path"][1:] if plan["path"][0] == "svm" else plan["path"]
        return bool(path) and path[0] in ("solver_state", "final", "n_iter", "stop_reason")
    if plan["edit"] == "bytes":
        return False
    name = plan["array"].removeprefix("svm.")
    return name.startswith(STATE_ONLY)


def check_optimum(est, n_before, bounds):
    """Against the optimum of the fixture's problem (between ``bounds``): a fit that stops
    at ``tol`` must be within ``tol`` of it (else a Finding); a new record that certifies a
    dual above it or a primal below it is returned as a note (the state was inconsistent,
    though the gap the fit reported stayed positive)."""
    low, high = bounds
    slack = 1e-6 * max(abs(high), 1.0)
    history = est.history_
    last = history.last_checked()
    if history.stop_reason == "tol" and last is not None:
        if last.primal - high > est.tol * abs(last.primal) + slack:
            raise Finding(
                "false-convergence",
                f"stopped at tol={est.tol:g} with the primal {last.primal:.9g}, more than "
                f"tol above the problem's optimum (at most {high:.9g})",
            )
    for r in list(history)[n_before:]:
        if r.dual > high + slack:
            return (
                f"dual above the optimum: pass {r.passes:g} certified {r.dual:.9g} (the "
                f"optimum is at most {high:.9g}; primal {r.primal:.9g})"
            )
        if r.primal < low - slack:
            return (
                f"primal below the optimum: pass {r.passes:g} reported {r.primal:.9g} (the "
                f"optimum is at least {low:.9g})"
            )
    return None


def _check_predictions(fixture, est, X, Y):
    pred = est.predict(X)
    if fixture == "tagger":
        check_labels(pred, est.svm_.classes_, [np.shape(y) for y in Y])
    elif fixture.startswith("chain"):
        check_labels(pred, est.classes_, [np.shape(y) for y in Y])
    elif fixture.startswith("ml"):
        check_labels([pred], np.unique(est.label_values_), [np.shape(Y)])
    elif fixture == "mc_svm":
        check_labels([pred], est.classes_, [np.shape(Y)])
    elif fixture == "ssvm_mc":
        check_labels([pred], np.arange(3), [np.shape(Y)])
    elif fixture in ("ssvm_graph", "ssvm_edge"):
        check_labels(pred, np.arange(3), [np.shape(y) for y in Y])
    else:
        check_labels(pred, np.arange(2), [np.shape(y) for y in Y])


def _random_graphs(plan):
    """Canonical graphs for a graph case: grids, trees, chains or random graphs of 2–6
    nodes, 4 node features, 3 states (2 edge features with ``edge_features``)."""
    rng = np.random.default_rng(plan["seed"])
    W = rng.normal(size=(4, 3))
    X, Y = [], []
    for g in range(int(rng.integers(3, 6))):
        n = int(rng.integers(4, 7))  # at least 3 edges, so (2, E) layouts are unambiguous
        shape = plan["shape"]
        if shape == "grid" and n >= 4:
            from dualstruct.models import grid_edges

            edges = grid_edges(2, n // 2)
            n = 2 * (n // 2)
        elif shape in ("tree", "grid"):
            edges = np.array([[int(rng.integers(v)), v] for v in range(1, n)])
        elif shape == "chain":
            edges = np.array([[v, v + 1] for v in range(n - 1)])
        else:
            pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
            keep = rng.random(len(pairs)) < 0.5
            edges = np.array([p for p, k in zip(pairs, keep) if k], dtype=np.int64).reshape(-1, 2)
            if len(edges) < 3:
                edges = np.array(pairs[:3])
        edges = np.asarray(edges, dtype=np.int64)
        nodes = np.round(3 * rng.normal(size=(n, 4)))  # integral: as ints they are the same
        y = np.argmax(nodes @ W + 0.2 * rng.normal(size=(n, 3)), axis=1)
        if g == 0:
            y[:3] = [0, 1, 2]
        if plan["edge_features"]:
            X.append((nodes, edges, rng.normal(size=(len(edges), 2))))
        else:
            X.append((nodes, edges))
        Y.append(y)
    return X, Y


def _edit_graph(x, y, edit, rng, K=3):
    """One graph and its labelling edited as ``edit`` says."""
    parts = list(x)
    nodes, edges = parts[0], np.asarray(parts[1])
    n = len(nodes)
    if edit == "edges_transposed":  # every graph has at least 3 edges: (2, E) is unambiguous
        parts[1] = np.ascontiguousarray(edges.T)
    elif edit == "edges_node_n":
        edges = edges.copy()
        edges[int(rng.integers(len(edges))), int(rng.integers(2))] = n
        parts[1] = edges
    elif edit == "edges_negative":
        edges = edges.copy()
        edges[int(rng.integers(len(edges))), int(rng.integers(2))] = -1
        parts[1] = edges
    elif edit == "edges_float_integral":
        parts[1] = edges.astype(np.float64)
    elif edit == "edges_float_fraction":
        parts[1] = edges + 0.5
    elif edit == "edges_nan":
        e = edges.astype(np.float64)
        e[0, 0] = np.nan
        parts[1] = e
    elif edit == "edges_huge":
        e = edges.copy()
        e[0, 0] = 2**40
        parts[1] = e
    elif edit == "edges_wrap":
        parts[1] = edges + 2**32
    elif edit in ("edges_zero", "edges_empty_list"):
        parts[1] = np.zeros((0, 2), dtype=np.int64) if edit == "edges_zero" else []
        if len(parts) == 3:
            parts[2] = np.zeros((0, 2))
    elif edit == "edges_flat":
        parts[1] = edges.ravel()
    elif edit == "edges_wide":
        parts[1] = np.hstack([edges, edges[:, :1]])
    elif edit == "edges_self_loop":
        e = edges.copy()
        e[0, 1] = e[0, 0]
        parts[1] = e
    elif edit == "edges_duplicate":
        parts[1] = np.vstack([edges, edges[:1]])
        if len(parts) == 3:
            parts[2] = np.vstack([parts[2], parts[2][:1]])
    elif edit == "edges_reversed":
        parts[1] = edges[:, ::-1].copy()
    elif edit == "edges_string":
        parts[1] = edges.astype(str)
    elif edit in ("nodes_nan", "nodes_inf"):
        v = nodes.copy()
        v[int(rng.integers(n)), int(rng.integers(v.shape[1]))] = (
            np.nan if edit == "nodes_nan" else np.inf
        )
        parts[0] = v
    elif edit == "nodes_wrong_width":
        parts[0] = nodes[:, :-1]
    elif edit == "nodes_empty":
        parts[0] = nodes[:0]
    elif edit == "nodes_sparse":
        import scipy.sparse as sp

        parts[0] = sp.csr_matrix(nodes)
    elif edit == "nodes_int":
        parts[0] = nodes.astype(np.int64)
    elif edit == "edge_features_transposed" and len(parts) == 3:  # (2, E), E >= 3
        parts[2] = np.ascontiguousarray(parts[2].T)
    elif edit == "edge_features_nan" and len(parts) == 3:
        z = parts[2].copy()
        z[0, 0] = np.nan
        parts[2] = z
    elif edit == "edge_features_short" and len(parts) == 3:
        parts[2] = parts[2][:-1]
    elif edit == "graph_missing_part":
        parts = parts[:1]
    y = np.asarray(y)
    if edit == "labels_above":
        y = y.copy()
        y[int(rng.integers(len(y)))] = K
    elif edit == "labels_negative":
        y = y.copy()
        y[int(rng.integers(len(y)))] = -1
    elif edit == "labels_float_integral":
        y = y.astype(np.float64)
    elif edit == "labels_fraction":
        y = y + 0.9
    elif edit == "labels_wrap":
        y = y.astype(np.int64) + 2**32
    elif edit == "labels_huge":
        y = y.astype(np.int64)
        y[0] = 10**10 + 2
    elif edit == "labels_string":
        y = y.astype(str)
    elif edit == "labels_short":
        y = y[:-1]
    elif edit == "labels_column":
        y = y.reshape(-1, 1)
    return tuple(parts), y


def _graph_model(plan, **options):
    from dualstruct.models import EdgeFeatureGraphCRF, GraphCRF

    kwargs = {"inference": plan["inference"], **options}
    n_states = kwargs.pop("n_states", 3)
    if plan["edge_features"]:
        return EdgeFeatureGraphCRF(n_states, 4, 2, **kwargs)
    return GraphCRF(n_states, 4, **kwargs)


def _same_result(a, b, what):
    pa, pb = [np.asarray(p) for p in a[1]], [np.asarray(p) for p in b[1]]
    same_pred = len(pa) == len(pb) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(pa, pb)
    )
    same_coef = a[0] is None or b[0] is None or np.allclose(a[0], b[0], rtol=1e-8, atol=1e-10)
    if not (same_pred and same_coef):
        raise Finding(
            "silent-change",
            f"{what}: accepted, but the result differs from that of the canonical input",
        )


def run_graph_case(plan):
    from dualstruct import SSVM

    edit = plan["edit"]
    X, Y = _random_graphs(plan)
    if not plan["edge_features"] and edit.startswith("edge_features"):
        edit = "none"
    # the 'exact' inference refuses large loopy graphs: the canonical input decides
    rng = np.random.default_rng(plan["seed"] + 1)
    targets = range(len(X)) if plan["all_graphs"] else [int(rng.integers(len(X)))]
    Xe, Ye = list(X), list(Y)
    for g in targets:
        Xe[g], Ye[g] = _edit_graph(X[g], Y[g], edit, rng)
    if edit == "fewer_labels":
        Ye = Ye[:-1]
    options = GRAPH_OPTION_EDITS.get(edit, {})

    def train(model_options, Xt, Yt, Xp):
        est = SSVM(
            _graph_model(plan, **model_options),
            max_iter=RESUME_PASSES,
            check_every=1,
            random_state=0,
        )
        est.fit(Xt, Yt)
        check_fit(est, 0, "fit")
        pred = est.predict(Xp)
        return est.coef_, pred

    expectation = GRAPH_EDITS[edit]
    canonical = None
    try:
        canonical = train({}, X, Y, X)
    except Exception as exc:  # noqa: BLE001
        if acceptable_error(exc):
            return "canonical input refused: " + _short(exc)
        raise
    check_labels(canonical[1], np.arange(3), [np.shape(y) for y in Y], "canonical predict")
    if plan["stage"] == "fit" or options:
        result = train(options, Xe, Ye, Xe)
    else:
        est = SSVM(_graph_model(plan), max_iter=RESUME_PASSES, check_every=1, random_state=0)
        est.fit(X, Y)
        result = (None, est.predict(Xe))
    n_nodes = [x[0].shape[0] for x in Xe]
    check_labels(result[1], np.arange(3), [(n,) for n in n_nodes])
    if expectation == "error":
        raise Finding("silent-accept", f"graph edit {edit!r} was accepted without an error")
    if expectation == "equiv":
        _same_result(result, canonical if plan["stage"] == "fit" else (None, canonical[1]), edit)
    return "ok"


def run_user_case(plan):
    from dualstruct import SSVM

    base = UserClass if plan["scalar"] else UserChain
    X, Y = user_data(scalar=plan["scalar"])
    model = misbehaving(base, plan["mode"], plan["seed"])
    est = SSVM(
        model,
        solver=plan["solver"],
        max_iter=30,
        tol=plan["tol"],
        check_every=1,
        random_state=plan["seed"] % 1000,
    )
    est.fit(X, Y)
    check_fit(est, 0, f"user model {plan['mode']!r}")
    if USER_MODES[plan["mode"]] == "error":
        raise Finding("silent-accept", f"user model {plan['mode']!r} trained without an error")
    note = "ok"
    last = est.history_.last_checked()
    if (
        last is not None
        and math.isfinite(last.dual)
        and plan["mode"] not in ("loss_self_nonzero", "scaled_loss", "negative_label")
    ):
        truth = true_primal(base(), X, Y, np.asarray(est.coef_), est.C)
        true_gap = (truth - last.dual) / max(abs(truth), 1e-300)
        if true_gap < NEGATIVE_GAP:
            raise Finding(
                "dual-above-true-primal",
                f"user model {plan['mode']!r}: the certified dual {last.dual:.6g} exceeds the "
                f"true primal {truth:.6g}",
            )
        if est.history_.stop_reason == "tol" and true_gap > plan["tol"] + 1e-6:
            raise Finding(
                "false-convergence",
                f"user model {plan['mode']!r} stopped at tol={plan['tol']:g} with the "
                f"reported gap {last.relative_gap:.3g}; its true primal {truth:.6g} puts the "
                f"gap at {true_gap:.3g}",
            )
        if true_gap > max(2 * last.relative_gap, last.relative_gap + 0.01):
            note = f"understated gap: reported {last.relative_gap:.3g}, true {true_gap:.3g}"
    return note


def run_input_case(plan):
    from dualstruct import SSVM, MultiClassSVM, MultiLabelSVM, StructuredSVM
    from dualstruct.models.multiclass import MultiClassModel

    edit, kind = plan["edit"], plan["estimator"]
    rng = np.random.default_rng(plan["seed"])
    extra = {}
    if kind in ("ssvm_mc", "mc_svm"):
        X, Y = multiclass_data()
        if kind == "ssvm_mc":

            def make(**kw):
                return SSVM(MultiClassModel(3, 4), solver=plan["solver"], **kw)
        else:

            def make(**kw):
                return MultiClassSVM(solver=plan["solver"], **kw)
    elif kind == "chain":
        X, Y = chain_data()

        def make(**kw):
            return StructuredSVM(solver=plan["solver"], **kw)
    else:
        X, Y = multilabel_data()

        def make(**kw):
            return MultiLabelSVM(solver=plan["solver"], edges=extra.get("edges", "tree"), **kw)

    Xe, Ye = _edit_input(kind, edit, X, Y, rng, extra)
    expectation = INPUT_EDITS[(kind, edit)]
    est = make(max_iter=RESUME_PASSES, check_every=1, random_state=0).fit(Xe, Ye)
    check_fit(est, 0, f"{kind} fit")
    pred = est.predict(Xe if kind != "chain" else Xe)
    if kind in ("ssvm_mc",):
        check_labels([pred], np.arange(3))
    if expectation == "error":
        raise Finding("silent-accept", f"{kind} input edit {edit!r} was accepted without an error")
    if expectation == "equiv":
        ref = make(max_iter=RESUME_PASSES, check_every=1, random_state=0).fit(X, Y)
        _same_result((est.coef_, [pred]), (ref.coef_, [ref.predict(X)]), edit)
    return "ok"


def _edit_input(kind, edit, X, Y, rng, extra):
    if kind == "chain":
        X, Y = [x.copy() for x in X], [y.copy() for y in Y]
        i = int(rng.integers(len(X)))
        if edit in ("X_nan", "X_inf"):
            X[i][0, 0] = np.nan if edit == "X_nan" else np.inf
        elif edit == "y_nan":
            Y = [np.array([0.0, 1.0, 2.0])[np.searchsorted(["a", "b", "c"], y)] for y in Y]
            Y[i][0] = np.nan
        elif edit == "y_short":
            Y[i] = Y[i][:-1]
        elif edit == "y_wrap":
            Y = [np.searchsorted(["a", "b", "c"], y).astype(np.int64) + 2**32 for y in Y]
        return X, Y
    X, Y = np.array(X, dtype=np.float64), np.array(Y)
    r = int(rng.integers(len(X)))
    if edit in ("X_nan", "X_inf"):
        X[r, int(rng.integers(X.shape[1]))] = np.nan if edit == "X_nan" else np.inf
    elif edit == "y_above":
        Y[r] = 3
    elif edit == "y_negative":
        Y[r] = -1
    elif edit == "y_fraction":
        Y = Y + 0.9
    elif edit == "y_wrap":
        Y = Y.astype(np.int64) + 2**32
    elif edit == "y_huge":
        Y = Y.astype(np.int64)
        Y[r] = 10**10 + 2
    elif edit == "y_float_integral":
        Y = Y.astype(np.float64)
    elif edit == "y_nan":
        Y = Y.astype(np.float64)
        Y[r] = np.nan
    elif edit == "Y_three_values":
        Y = Y.copy()
        Y[r, 0] = 2
    elif edit == "Y_nan":
        Y = Y.astype(np.float64)
        Y[r, 0] = np.nan
    elif edit == "edges_out_of_range":
        extra["edges"] = np.array([[0, 1], [1, 4]])
    elif edit == "edges_self_loop":
        extra["edges"] = np.array([[0, 1], [2, 2]])
    elif edit == "edges_float_fraction":
        extra["edges"] = np.array([[0, 1], [1.5, 2]])
    return X, Y


def unclear_error(plan, exc):
    """Why the library's error ``exc`` for a user-model or graph case does not name what is
    at fault (the model's class for a user model; the example or the option for a graph),
    or None. Errors the user model's own code raised are its own."""
    if Path(_innermost_file(exc)).resolve() == Path(__file__).resolve():
        return None
    msg = str(exc)
    if plan["family"] == "user":
        base = "UserClass" if plan["scalar"] else "UserChain"
        name = f"{base}_{plan['mode']}"
        if name not in msg:
            return f"the error does not name the model {name}: {_short(exc)}"
    elif plan["family"] == "graph":
        option = GRAPH_OPTION_EDITS.get(plan["edit"])
        if option:
            if not any(k in msg for k in option):
                return f"the error does not name the option {sorted(option)}: {_short(exc)}"
        elif not re.search(r"\b[XY]\[\d+\]|\b[XY] has \d+", msg):
            return f"the error names no example (X[i] or Y[i]): {_short(exc)}"
    return None


def _short(exc):
    return f"{type(exc).__name__}: {str(exc)[:300]}"


def run_case(plan, fixture_dir, workdir):
    """``{"outcome": "ok" | "error" | "finding", ...}`` for one planned case."""
    family = plan["family"]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                if family == "file":
                    note = run_file_case(plan, fixture_dir, workdir)
                elif family == "graph":
                    note = run_graph_case(plan)
                elif family == "user":
                    note = run_user_case(plan)
                else:
                    note = run_input_case(plan)
    except Finding as f:
        return {"outcome": "finding", "category": f.category, "detail": f.detail}
    except Exception as exc:  # noqa: BLE001 - every exception is classified
        user_code = family == "user" or (family == "file" and plan.get("fixture") == "ssvm_user")
        expected_ok = (family == "graph" and GRAPH_EDITS.get(plan["edit"]) == "ok") or (
            family == "user" and USER_MODES[plan["mode"]] == "ok"
        )
        if family == "input" and INPUT_EDITS[(plan["estimator"], plan["edit"])] == "ok":
            expected_ok = True
        if not acceptable_error(exc, user_code):
            tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
            return {
                "outcome": "finding",
                "category": f"bad-exception:{type(exc).__name__}",
                "detail": _short(exc) + " | " + "".join(tb[-3:])[-600:],
            }
        if expected_ok:
            return {
                "outcome": "finding",
                "category": "valid-input-refused",
                "detail": _short(exc),
            }
        unclear = unclear_error(plan, exc)
        if unclear:
            return {"outcome": "finding", "category": "unclear-error", "detail": unclear}
        return {"outcome": "error", "detail": _short(exc)}
    outcome = "ok" if note == "ok" else "note"
    return {"outcome": outcome, "detail": note}


def work(fixture_dir, cases_file, start):
    """The worker: run the cases of ``cases_file`` from index ``start``, announcing each on
    the protocol stream (the original stdout) before running it."""
    import faulthandler

    faulthandler.enable()  # a crash prints where it happened (to the stderr file)
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # the library's prints go to stderr
    sys.stdout = sys.stderr
    cases = json.loads(Path(cases_file).read_text())
    import dualstruct  # noqa: F401 - load the kernels before the first case

    with tempfile.TemporaryDirectory(prefix="fuzz-") as workdir:
        for k in range(start, len(cases)):
            family, seed = cases[k]
            try:
                plan = plan_case(family, seed, fixture_dir)
            except Exception as exc:  # noqa: BLE001 - a broken fixture is the suite's bug
                plan = {"family": family, "plan_error": _short(exc)}
            proto.write("START " + json.dumps({"k": k, "seed": seed, "plan": plan}) + "\n")
            proto.flush()
            if "plan_error" in plan:
                result = {
                    "outcome": "finding",
                    "category": "suite-error",
                    "detail": plan["plan_error"],
                }
            else:
                t0 = time.perf_counter()
                result = run_case(plan, fixture_dir, workdir)
                result["seconds"] = round(time.perf_counter() - t0, 3)
            proto.write("DONE " + json.dumps({"k": k, **result}) + "\n")
            proto.flush()
    proto.close()


# -- the parent: workers, crashes and hangs -----------------------------------------------------
def _worker_command(*args):
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import fuzz_cases; fuzz_cases.main()"
    return [sys.executable, "-c", code, *map(str, args)]


def _run_worker(cases, fixture_dir, folder, name):
    """Run ``cases`` in worker processes (one after a crash), returning per-case results;
    a crash or a hang becomes a finding of the case that was running."""
    folder = Path(folder)
    cases_file = folder / f"{name}.json"
    cases_file.write_text(json.dumps(cases))
    results: dict = {}
    plans: dict = {}
    start, restarts = 0, 0
    while start < len(cases):
        err_path = folder / f"{name}.{restarts}.stderr"
        with open(err_path, "wb") as err:
            proc = subprocess.Popen(
                _worker_command("work", fixture_dir, cases_file, start),
                stdout=subprocess.PIPE,
                stderr=err,
                start_new_session=True,
            )
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf, current, first, last_done = b"", None, True, start - 1
        started = time.monotonic()
        deadline = started + FIRST_CASE_TIMEOUT
        next_start = None
        while next_start is None:
            left = deadline - time.monotonic()
            events = sel.select(timeout=max(left, 0)) if left > 0 else []
            if not events:  # a hang: kill the worker (and its process group) and go on
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if first and current is None:
                    raise RuntimeError(f"a fuzz worker did not start: {_tail(err_path)}")
                k = current if current is not None else last_done + 1
                results[k] = {
                    "outcome": "finding",
                    "category": "hang",
                    "detail": f"no answer within {deadline - started:.0f} s",
                }
                next_start = k + 1
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:  # the worker ended
                rc = proc.wait()
                if first and current is None and rc != 0:
                    raise RuntimeError(f"a fuzz worker failed to start ({rc}): {_tail(err_path)}")
                if current is not None:
                    tail = _tail(err_path, 800)
                    how = f"killed by signal {-rc}" if rc < 0 else f"exited with {rc}"
                    results[current] = {
                        "outcome": "finding",
                        "category": "signal" if rc < 0 else "worker-exit",
                        "detail": f"the worker {how} | {tail}",
                    }
                    next_start = current + 1
                else:
                    done = last_done
                    if done + 1 < len(cases):
                        tail = _tail(err_path, 800)
                        results[done + 1] = {
                            "outcome": "finding",
                            "category": "worker-exit",
                            "detail": f"the worker exited with {rc} between cases | {tail}",
                        }
                    next_start = done + 2 if done + 1 < len(cases) else len(cases)
                break
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                tag, _, payload = line.decode().partition(" ")
                if tag == "START":
                    msg = json.loads(payload)
                    current = msg["k"]
                    plans[current] = msg["plan"]
                    started = time.monotonic()
                    deadline = started + (FIRST_CASE_TIMEOUT if first else CASE_TIMEOUT)
                elif tag == "DONE":
                    msg = json.loads(payload)
                    last_done = msg.pop("k")
                    results[last_done] = msg
                    current, first = None, False
                    deadline = time.monotonic() + CASE_TIMEOUT
        sel.close()
        proc.stdout.close()
        start, restarts = next_start, restarts + 1
    return results, plans, restarts


def _tail(path, size=2000):
    return Path(path).read_text(errors="replace")[-size:]


def build(folder):
    """Train and save the fixtures in a subprocess (it also fills numba's cache)."""
    proc = subprocess.run(
        _worker_command("build", folder), capture_output=True, text=True, timeout=900
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building the fuzz fixtures failed ({proc.returncode}):\n{proc.stderr}")


def run_suite(n_cases, seed, folder, n_workers=2):
    """Build the fixtures, run ``n_cases`` cases over ``n_workers`` workers; returns a
    :class:`Report`."""
    t0 = time.perf_counter()
    folder = Path(folder)
    fixture_dir = folder / "fixtures"
    build(fixture_dir)
    cases = case_list(n_cases, seed)
    shards = [list(range(w, len(cases), n_workers)) for w in range(n_workers)]
    outputs: list = [None] * n_workers

    def run(w):
        outputs[w] = _run_worker([cases[k] for k in shards[w]], fixture_dir, folder, f"w{w}")

    threads = [threading.Thread(target=run, args=(w,)) for w in range(n_workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows, restarts = [], 0
    for w, (results, plans, n) in enumerate(outputs):
        restarts += n
        for j, k in enumerate(shards[w]):
            res = results.get(j, {"outcome": "finding", "category": "lost", "detail": "no result"})
            rows.append({"index": k, "case": cases[k], "plan": plans.get(j), **res})
    rows.sort(key=lambda r: r["index"])
    return Report(rows, time.perf_counter() - t0, restarts)


class Report:
    """The results of a fuzz run."""

    def __init__(self, rows, seconds, workers_started):
        self.rows, self.seconds, self.workers_started = rows, seconds, workers_started

    def findings(self, family=None):
        return [
            r
            for r in self.rows
            if r["outcome"] == "finding" and (family is None or r["case"][0] == family)
        ]

    def count(self, family=None):
        return sum(1 for r in self.rows if family is None or r["case"][0] == family)

    def summary(self, family=None, limit=60):
        rows = [r for r in self.rows if family is None or r["case"][0] == family]
        outcomes: dict = {}
        for r in rows:
            outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
        lines = [
            f"fuzz: {len(rows)} cases{'' if family is None else ' of family ' + family} in "
            f"{self.seconds:.0f} s ({self.workers_started} worker processes): {outcomes}"
        ]
        by_category: dict = {}
        for r in self.findings(family):
            by_category.setdefault(r["category"], []).append(r)
        for cat, found in sorted(by_category.items()):
            lines.append(f"  {cat}: {len(found)} cases")
            for r in found[:limit]:
                lines.append(f"    case {r['case']} plan {json.dumps(r['plan'])}")
                lines.append(f"      {r['detail'][:500]}")
        notes = [r for r in rows if r["outcome"] == "note"]
        if notes:
            lines.append(f"  notes (not failures): {len(notes)}")
            for r in notes[:10]:
                lines.append(f"    case {r['case']} plan {json.dumps(r['plan'])}: {r['detail']}")
        return "\n".join(lines)


def reproduce(plan, fixture_dir=None):
    """Run one case in this process with its exceptions unhandled (a crash crashes here):
    ``python tests/package/fuzz_cases.py repro '<plan as JSON>'``. ``plan`` is a case's plan as the
    summary prints it; the fixtures are built in ``fixture_dir`` (default: a temporary
    folder) when missing."""
    if fixture_dir is None:
        fixture_dir = Path(tempfile.gettempdir()) / "dualstruct-fuzz-fixtures"
    if not (Path(fixture_dir) / "bounds.json").is_file():
        build_fixtures(fixture_dir)
    family = plan["family"]
    with tempfile.TemporaryDirectory(prefix="fuzz-") as workdir:
        if family == "file":
            return run_file_case(plan, fixture_dir, workdir)
        if family == "graph":
            return run_graph_case(plan)
        if family == "user":
            return run_user_case(plan)
        return run_input_case(plan)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "repro":
        print(reproduce(json.loads(argv[1])))
    elif argv and argv[0] == "build":
        build_fixtures(argv[1])
    elif argv and argv[0] == "work":
        work(argv[1], argv[2], int(argv[3]))
    else:
        n = int(argv[0]) if argv else 200
        seed = int(argv[1]) if len(argv) > 1 else 0
        with tempfile.TemporaryDirectory(prefix="fuzz-run-") as folder:
            report = run_suite(n, seed, folder)
        print(report.summary())


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    import fuzz_cases

    fuzz_cases.main()
