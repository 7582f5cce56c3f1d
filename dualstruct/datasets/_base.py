"""Where data files are looked for, and how a missing file is fetched safely."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

DATA_ENV = "DUALSTRUCT_DATA"
REQUIRE_ENV = "DUALSTRUCT_REQUIRE_DATA"


def default_cache_dir() -> Path:
    """The user cache folder: ``$XDG_CACHE_HOME/dualstruct`` (default ``~/.cache/dualstruct``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dualstruct"


def data_dirs(data_home=None) -> list[Path]:
    """Folders searched for data, in order: ``data_home``, ``$DUALSTRUCT_DATA``, the cache."""
    dirs = []
    if data_home is not None:
        dirs.append(Path(data_home).expanduser())
    env = os.environ.get(DATA_ENV)
    if env:
        dirs.append(Path(env).expanduser())
    dirs.append(default_cache_dir())
    return dirs


def find_data_file(relpath: str, data_home=None) -> Path | None:
    """The first existing ``<dir>/<relpath>`` over :func:`data_dirs`, or None."""
    for d in data_dirs(data_home):
        p = d / relpath
        if p.is_file():
            return p
    return None


def open_text(path):
    """Open a text file for reading, transparently gunzipping ``*.gz``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def sha256_of(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(url: str, target: Path, timeout: float = 30.0) -> Path:
    """Download ``url`` to ``target`` atomically (a partial download never lands)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            shutil.copyfileobj(resp, out)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return target
