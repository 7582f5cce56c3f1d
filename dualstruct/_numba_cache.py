"""Where numba keeps the compiled kernels.

numba caches a kernel in ``__pycache__`` beside its source file, else under the user cache
folder (``~/.cache/numba``); when neither can be written (a read-only installation and no
writable home, as in some containers and clusters) it refuses to define the kernel at all,
and ``import dualstruct`` would fail. Then the cache goes to a folder under the temporary
directory instead, with one warning (``NUMBA_CACHE_DIR`` chooses another).

numba keys a cached function on its own source file and bytecode only, so a compiled solver
would keep running a model's kernel implementations as they were when it was compiled. The
key of every cached function whose arguments include a kernel (a ``NamedTuple`` class with
implementations registered by :func:`~dualstruct.models.base.implements`) therefore also
holds a hash of the source files of those implementations and of the compiled functions they
call: editing a kernel recompiles the solvers that use it.

numba's on-disk index of a cached function names the classes of every signature compiled, and
a process that cannot import one cannot load the index at all. Functions compiled for a kernel
class of a script's ``__main__`` or of a test module are therefore not cached. An index that
names a class no process can import any more (one of this package that is gone, or of a test
module or script, written before that rule) counts as empty: the function is compiled again
and the index rewritten. An index that names a class of another module this process cannot
import (a user's kernels, in a cache folder shared with processes that can) is left as it is:
the process compiles the function without the cache, with one warning."""

from __future__ import annotations

import hashlib
import inspect
import io
import os
import pickle
import tempfile
import warnings
from pathlib import Path

import numba
from numba.core import caching, types
from numba.misc.appdirs import AppDirs

#: kernel class → its registered implementations (filled by ``models.base.implements``)
_IMPLEMENTATIONS: dict = {}
_HASHES: dict = {}


def register_implementation(kernel_class, impl) -> None:
    """Record ``impl`` as one of ``kernel_class``'s implementations (for the cache key)."""
    _IMPLEMENTATIONS.setdefault(kernel_class, []).append(impl)
    _HASHES.pop(kernel_class, None)


def _source_files(func, seen: set, files: set) -> None:
    """The source files of ``func`` and of the functions and compiled functions it names."""
    func = getattr(func, "py_func", func)  # a numba dispatcher
    code = getattr(func, "__code__", None)
    if code is None or id(func) in seen:
        return
    seen.add(id(func))
    try:
        files.add(inspect.getsourcefile(func) or code.co_filename)
    except TypeError:
        files.add(code.co_filename)
    names = set(code.co_names)
    for const in code.co_consts:  # nested functions
        if inspect.iscode(const):
            names.update(const.co_names)
    glob = getattr(func, "__globals__", {})
    for name in names:
        value = glob.get(name)
        if inspect.isfunction(value) or hasattr(value, "py_func"):
            _source_files(value, seen, files)


def kernel_source_hash(kernel_class) -> str:
    """sha256 of the source files of ``kernel_class``'s registered implementations and of
    the functions they call ("" when none is registered)."""
    if kernel_class not in _IMPLEMENTATIONS:
        return ""
    if kernel_class not in _HASHES:
        files: set = set()
        seen: set = set()
        for impl in _IMPLEMENTATIONS[kernel_class]:
            _source_files(impl, seen, files)
        digest = hashlib.sha256()
        for name in sorted(files):
            digest.update(name.encode())
            try:
                digest.update(Path(name).read_bytes())
            except OSError:  # no source (a frozen or interactive module): its bytecode
                digest.update(b"?")
        for impl in _IMPLEMENTATIONS[kernel_class]:
            code = getattr(impl, "__code__", None)
            digest.update(code.co_code if code is not None else b"")
        _HASHES[kernel_class] = digest.hexdigest()
    return _HASHES[kernel_class]


def _kernel_key(sig) -> tuple:
    """The source hashes of the kernels among the argument types ``sig``."""
    out = []
    stack = list(sig.args if hasattr(sig, "args") else sig)
    while stack:
        t = stack.pop()
        if isinstance(t, types.BaseNamedTuple):
            h = kernel_source_hash(t.instance_class)
            if h:
                out.append(h)
        elif isinstance(t, types.BaseTuple):
            stack.extend(t.types)
    return tuple(sorted(out))


def cacheable_kernel(kernel_class) -> bool:
    """Whether functions compiled for ``kernel_class`` may go to numba's on-disk cache: not
    for a class of a script's ``__main__`` or of a test module (``test*``, ``conftest``), which
    other processes cannot import."""
    return _cacheable_module(str(getattr(kernel_class, "__module__", "__main__")))


def _cacheable_module(module: str) -> bool:
    if module.startswith("dualstruct."):
        return True
    parts = module.split(".")
    return not any(p == "__main__" or p == "conftest" or p.startswith("test") for p in parts)


class _ClassProbe(pickle.Unpickler):
    """An unpickler that records the first class it cannot import."""

    missing = None

    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            if self.missing is None:
                self.missing = (module, name)
            raise


def unimportable_class(index_path):
    """``(module, name)`` of a class that numba's index file ``index_path`` names and this
    process cannot import, or None (the file reads, or fails for another reason)."""
    probe = None
    try:
        with open(index_path, "rb") as f:
            pickle.load(f)  # numba's version
            probe = _ClassProbe(io.BytesIO(f.read()))
        probe.load()
    except Exception:  # what failed is told by probe.missing
        return None if probe is None else probe.missing
    return None


def stale_class(module: str) -> bool:
    """Whether a class of ``module`` that cannot be imported is gone for every process: one
    of this package (an older version's), or of a module whose kernels are never cached."""
    own = module == "dualstruct" or module.startswith("dualstruct.")
    return own or not _cacheable_module(module)


_FOREIGN_WARNED = []


def _cacheable(sig) -> bool:
    """Whether no kernel among the argument types ``sig`` is kept out of the cache."""
    stack = list(sig.args if hasattr(sig, "args") else sig)
    while stack:
        t = stack.pop()
        if isinstance(t, types.BaseNamedTuple):
            if not cacheable_kernel(t.instance_class):
                return False
            stack.extend(t.types)
        elif isinstance(t, types.BaseTuple):
            stack.extend(t.types)
    return True


def key_cache_on_kernels() -> None:
    """Make numba's cache key of a function include :func:`kernel_source_hash` of every
    kernel among its arguments, keep kernels that are not :func:`cacheable_kernel` out of
    the cache, and read an index naming a :func:`stale_class` that cannot be imported as
    empty, one naming another class this process cannot import as empty and read-only
    (once per process)."""
    if getattr(caching.Cache._index_key, "_dualstruct", False):
        return
    original = caching.Cache._index_key
    original_load = caching.Cache.load_overload
    original_save = caching.Cache.save_overload
    original_index = caching.IndexDataCacheFile._load_index
    original_file_save = caching.IndexDataCacheFile.save

    def _index_key(self, sig, codegen):
        key = original(self, sig, codegen)
        extra = _kernel_key(sig)
        return key + (extra,) if extra else key

    def load_overload(self, sig, target_context):
        return original_load(self, sig, target_context) if _cacheable(sig) else None

    def save_overload(self, sig, data):
        if _cacheable(sig):
            original_save(self, sig, data)

    def _load_index(self):
        if self.__dict__.get("_foreign_class"):
            return {}
        try:
            return original_index(self)
        except (ImportError, AttributeError):
            missing = unimportable_class(self._index_path)
            if missing is None:  # not a class this process cannot import
                raise
            if stale_class(missing[0]):
                return {}  # rewritten by the next save
            self._foreign_class = missing  # another process's class: read nothing, write nothing
            if not _FOREIGN_WARNED:
                _FOREIGN_WARNED.append(missing)
                warnings.warn(
                    f"dualstruct: numba's cache index {self._index_path} names the class "
                    f"{missing[1]} of the module {missing[0]}, which this process cannot "
                    "import; the function is compiled without the cache and the index kept",
                    RuntimeWarning,
                    stacklevel=2,
                )
            return {}

    def save(self, key, data):
        if not self.__dict__.get("_foreign_class"):
            original_file_save(self, key, data)

    _index_key._dualstruct = True
    caching.Cache._index_key = _index_key
    caching.Cache.load_overload = load_overload
    caching.Cache.save_overload = save_overload
    caching.IndexDataCacheFile._load_index = _load_index
    caching.IndexDataCacheFile.save = save


def _writable(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (made if missing), as numba checks."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def choose_cache_dir(package_dir: Path, user_dir: Path, temp_dir: Path, writable=None):
    """``None`` when numba's own places work (the package's ``__pycache__`` or ``user_dir``),
    else the fallback ``temp_dir``, or ``""`` when that cannot be written either."""
    writable = writable or _writable
    if writable(package_dir / "__pycache__") or writable(user_dir):
        return None
    return str(temp_dir) if writable(temp_dir) else ""


def configure_numba_cache() -> None:
    """Point numba at a writable cache folder when its own places are read-only (the user's
    ``NUMBA_CACHE_DIR``, if set, always wins), and key the cache on the kernels' sources."""
    key_cache_on_kernels()
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    uid = os.getuid() if hasattr(os, "getuid") else 0
    temp_dir = Path(tempfile.gettempdir()) / f"dualstruct-numba-cache-{uid}"
    user_dir = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)
    chosen = choose_cache_dir(Path(__file__).parent, user_dir, temp_dir)
    if chosen is None:
        return
    if not chosen:
        warnings.warn(
            f"dualstruct: numba cannot cache the compiled kernels beside the "
            f"package, in {user_dir} or in {temp_dir}; set NUMBA_CACHE_DIR to a "
            "writable folder",
            RuntimeWarning,
            stacklevel=3,
        )
        return
    numba.config.CACHE_DIR = chosen
    warnings.warn(
        f"dualstruct: cannot write numba's cache beside the package nor in "
        f"{user_dir}; the compiled kernels are cached in {chosen}",
        RuntimeWarning,
        stacklevel=3,
    )
