"""Kernels of test modules and scripts stay out of numba's on-disk cache. An index that names
a class this process cannot import is read as empty: rewritten when the class is gone for every
process (this package's, a test module's), left as it is when another process may import it;
any other failure to read it is raised."""

import importlib
import os
import subprocess
import sys
from typing import NamedTuple

import numpy as np
import pytest
from numba.core import caching

from dualstruct import _numba_cache
from dualstruct._numba_cache import cacheable_kernel
from dualstruct.models import interface
from dualstruct.models.chain_kernels import ChainKernel

CACHED = """
from typing import NamedTuple

import numpy as np
from numba import njit

import dualstruct.models  # noqa: F401  (the package's cache rules)


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
    # the index names kinds.Elsewhere, which this process cannot import: it runs without
    # the cache and leaves the index to the processes that can
    assert _run(tmp_path, [lib], "from cachedfn import Own", "Own") == "1"
    assert b"Elsewhere" in index.read_bytes()
    assert b"Own" not in index.read_bytes()


def test_which_kernel_classes_are_cached():
    class Local(NamedTuple):
        labels: np.ndarray

    assert cacheable_kernel(ChainKernel)
    assert not cacheable_kernel(Local)  # this test module's
    Local.__module__ = "__main__"
    assert not cacheable_kernel(Local)
    Local.__module__ = "mypackage.kernels"
    assert cacheable_kernel(Local)


class _Missing:
    """Unpickles by looking up an attribute that does not exist (no class is missing)."""

    def __reduce__(self):
        return getattr, (int, "no_such_attribute")


def _index_naming(tmp_path, monkeypatch, module):
    """A numba index file whose one key holds a class of ``module``, which is then gone."""
    _numba_cache.key_cache_on_kernels()
    if module.startswith("dualstruct."):
        cls = type("GoneKernel", (), {"__module__": module})
        monkeypatch.setattr(interface, "GoneKernel", cls, raising=False)
    else:
        (tmp_path / f"{module}.py").write_text("class GoneKernel:\n    pass\n")
        monkeypatch.syspath_prepend(str(tmp_path))
        cls = importlib.import_module(module).GoneKernel
    index = caching.IndexDataCacheFile(str(tmp_path), "fn", "stamp")
    index._save_index({("sig", cls): "fn.1.nbc"})
    if module.startswith("dualstruct."):
        monkeypatch.delattr(interface, "GoneKernel")
    else:
        monkeypatch.delitem(sys.modules, module)
        monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))  # keep the fixture's order
        sys.path.remove(str(tmp_path))
    return caching.IndexDataCacheFile(str(tmp_path), "fn", "stamp"), tmp_path / "fn.nbi"


@pytest.mark.parametrize("module", ["dualstruct.models.interface", "test_gone_kernels"])
def test_an_index_naming_a_class_gone_for_every_process_is_rebuilt(tmp_path, monkeypatch, module):
    index, path = _index_naming(tmp_path, monkeypatch, module)
    assert index._load_index() == {}
    index.save(("sig", 1), b"data")
    assert b"GoneKernel" not in path.read_bytes()
    assert index._load_index() == {("sig", 1): "fn.1.nbc"}


def test_an_index_naming_another_process_class_is_left_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(_numba_cache, "_FOREIGN_WARNED", [])
    index, path = _index_naming(tmp_path, monkeypatch, "user_kernels")
    before = path.read_bytes()
    with pytest.warns(RuntimeWarning, match="names the class GoneKernel of the module user_"):
        assert index._load_index() == {}
    index.save(("sig", 1), b"data")
    assert path.read_bytes() == before
    assert not (tmp_path / "fn.1.nbc").exists()


def test_other_failures_to_read_an_index_are_raised(tmp_path):
    _numba_cache.key_cache_on_kernels()
    caching.IndexDataCacheFile(str(tmp_path), "fn", "stamp")._save_index({("sig", _Missing()): 1})
    with pytest.raises(AttributeError, match="no_such_attribute"):
        caching.IndexDataCacheFile(str(tmp_path), "fn", "stamp")._load_index()
