"""Where numba keeps the compiled kernels.

numba caches a kernel in ``__pycache__`` beside its source file, else under the user cache
folder (``~/.cache/numba``); when neither can be written (a read-only installation and no
writable home, as in some containers and clusters) it refuses to define the kernel at all,
and ``import dualstruct`` would fail. Then the cache goes to a folder under the temporary
directory instead, with one warning (``NUMBA_CACHE_DIR`` chooses another)."""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path


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
    ``NUMBA_CACHE_DIR``, if set, always wins)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    from numba.misc.appdirs import AppDirs

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
    import numba

    numba.config.CACHE_DIR = chosen
    warnings.warn(
        f"dualstruct: cannot write numba's cache beside the package nor in "
        f"{user_dir}; the compiled kernels are cached in {chosen}",
        RuntimeWarning,
        stacklevel=3,
    )
