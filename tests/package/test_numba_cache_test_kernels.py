"""Kernels of test modules and scripts stay out of numba's on-disk cache, and an index that
names a class this process cannot import is read as empty: a later process still runs."""

import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np

from dualstruct._numba_cache import cacheable_kernel
from dualstruct.models.chain_kernels import ChainKernel

CACHED = """
from typing import NamedTuple

import numpy as np
from numba import njit

import dualstruct  # noqa: F401  (its cache rules)


class Own(NamedTuple):
    labels: np.ndarray


@njit(cache=True)
def first(k):
    return k.labels[0]
"""

KIND = """
from typing import NamedTuple

import numpy as np


class {name}(NamedTuple):
    labels: np.ndarray
"""

USE = """
import numpy as np
from cachedfn import first
{imports}
print(sum(first(c(np.arange(3) + 1)) for c in ({classes},)))
"""


def _run(tmp_path, paths, imports, classes):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    code = USE.format(imports=imports, classes=classes)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_later_process_without_the_classes_modules_loads_the_cache(tmp_path):
    lib, extra = tmp_path / "lib", tmp_path / "extra"
    lib.mkdir()
    extra.mkdir()
    (lib / "cachedfn.py").write_text(CACHED)
    (extra / "test_kinds.py").write_text(KIND.format(name="InTest"))
    (extra / "kinds.py").write_text(KIND.format(name="Elsewhere"))
    imports = "from test_kinds import InTest\nfrom kinds import Elsewhere"
    assert _run(tmp_path, [lib, extra], imports, "InTest, Elsewhere") == "2"
    (index,) = (tmp_path / "cache").rglob("*first*.nbi")
    assert b"Elsewhere" in index.read_bytes()  # cached, under a module ...
    assert b"InTest" not in index.read_bytes()  # ... but not a test module's class
    # the index names kinds.Elsewhere, which this process cannot import
    assert _run(tmp_path, [lib], "from cachedfn import Own", "Own") == "1"


def test_which_kernel_classes_are_cached():
    class Local(NamedTuple):
        labels: np.ndarray

    assert cacheable_kernel(ChainKernel)
    assert not cacheable_kernel(Local)  # this test module's
    Local.__module__ = "__main__"
    assert not cacheable_kernel(Local)
    Local.__module__ = "mypackage.kernels"
    assert cacheable_kernel(Local)
