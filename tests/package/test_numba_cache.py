"""A compiled solver's cache is keyed on the model kernels' sources: an edited kernel runs."""

import os
import subprocess
import sys
import textwrap

from dualstruct._numba_cache import kernel_source_hash
from dualstruct.models.multiclass.kernels import MultiClassKernel

KERNEL = """
from typing import NamedTuple

import numpy as np

from dualstruct.data import BlockData
from dualstruct.models import KernelModel, base


class TinyKernel(NamedTuple):
    labels: np.ndarray
    label_offsets: np.ndarray


@base.implements(base.workspace, TinyKernel)
def _workspace(k):
    return np.zeros(1)


@base.implements(base.prepare, TinyKernel)
def _prepare(k, i, w, ws):
    pass


@base.implements(base.score, TinyKernel)
def _score(k, i, w, ws, y):
    return w[y[0]]


@base.implements(base.loss, TinyKernel)
def _loss(k, i, y):
    return LOSS * (y[0] != k.labels[i])


@base.implements(base.oracle, TinyKernel)
def _oracle(k, i, w, ws, loss_scale, y):
    y[0] = 1 - k.labels[i]
    return w[y[0]] + loss_scale * LOSS


@base.implements(base.oracle_value, TinyKernel)
def _oracle_value(k, i, w, ws, y):
    return w[y[0]] + LOSS * (y[0] != k.labels[i])


@base.implements(base.decode, TinyKernel)
def _decode(k, i, w, ws, y):
    y[0] = 0
    return w[0]


@base.implements(base.add_difference, TinyKernel)
def _add_difference(k, i, ya, yb, c, w):
    w[ya[0]] += c
    w[yb[0]] -= c


@base.implements(base.difference_sq_norm, TinyKernel)
def _difference_sq_norm(k, i, ws, ya, yb):
    return 0.0 if ya[0] == yb[0] else 2.0


@base.implements(base.status, TinyKernel)
def _status(k):
    return 0


class TinyModel(KernelModel):
    size = 2

    def block_data(self, Y):
        k = TinyKernel(np.asarray(Y, dtype=np.int32), np.arange(len(Y) + 1, dtype=np.int64))
        return BlockData(k)
"""

RUN = """
import numpy as np
from tinykernel import TinyModel
model = TinyModel()
print(model.hinge(np.zeros(2), model.block_data([0, 1]))[0].tolist())
"""


def _run(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", RUN], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_an_edited_kernel_runs_in_a_fresh_process(tmp_path):
    module = tmp_path / "tinykernel.py"
    module.write_text(textwrap.dedent(KERNEL).replace("LOSS", "1.0"))
    assert _run(tmp_path) == "[1.0, 1.0]"
    assert any((tmp_path / "cache").rglob("*.nbi"))  # the solver was cached
    module.write_text(textwrap.dedent(KERNEL).replace("LOSS", "5.0"))
    assert _run(tmp_path) == "[5.0, 5.0]"


def test_the_hash_covers_every_registered_kernel():
    h = kernel_source_hash(MultiClassKernel)
    assert len(h) == 64 and h == kernel_source_hash(MultiClassKernel)
    assert kernel_source_hash(tuple) == ""
