"""Where data files are looked for, and how a missing file is fetched safely."""

from __future__ import annotations

import gzip
import os
import re
import shutil
import tempfile
import urllib.request
from pathlib import Path

from ..io import require_file

DATA_ENV = "DUALSTRUCT_DATA"
REQUIRE_ENV = "DUALSTRUCT_REQUIRE_DATA"


def default_cache_dir() -> Path:
    """The user cache folder of downloaded data.

    Returns
    -------
    Path
        ``$XDG_CACHE_HOME/dualstruct`` (default ``~/.cache/dualstruct``).

    Examples
    --------
    >>> from dualstruct.datasets import default_cache_dir
    >>> default_cache_dir().name
    'dualstruct'
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dualstruct"


def data_dirs(data_home=None) -> list[Path]:
    """The folders searched for data, in order.

    Parameters
    ----------
    data_home : str or Path, optional
        Searched first.

    Returns
    -------
    list of Path
        ``data_home``, ``$DUALSTRUCT_DATA``, the user cache (those that are set).

    Examples
    --------
    >>> from dualstruct.datasets import data_dirs
    >>> data_dirs("/tmp/my-data")[0].as_posix()
    '/tmp/my-data'
    """
    dirs = []
    if data_home is not None:
        dirs.append(Path(data_home).expanduser())
    env = os.environ.get(DATA_ENV)
    if env:
        dirs.append(Path(env).expanduser())
    dirs.append(default_cache_dir())
    return dirs


def find_data_file(relpath: str, data_home=None) -> Path | None:
    """The first existing ``<dir>/<relpath>`` over :func:`data_dirs`.

    Parameters
    ----------
    relpath : str
        The file's path inside a data folder, e.g. ``"ocr/letter.data.gz"``.
    data_home : str or Path, optional
        Searched first.

    Returns
    -------
    Path or None
        None when no data folder holds the file.

    Examples
    --------
    >>> from dualstruct.datasets import find_data_file
    >>> find_data_file("no/such/file.txt", data_home="/nonexistent") is None
    True
    """
    for d in data_dirs(data_home):
        p = d / relpath
        if p.is_file():
            return p
    return None


def open_text(path):
    """Open a UTF-8 text file for reading line by line, transparently gunzipping ``*.gz``.
    Bytes that are not UTF-8 raise a ``ValueError`` naming the file and the line."""
    return _Utf8Lines(require_file(path))


_LONE_CR = re.compile(rb"\r(?!\n)")


class _Utf8Lines:
    """The lines of a (gzipped) file, each decoded on its own, so that a decoding error is
    reported with its line number."""

    def __init__(self, path):
        self.path = path
        self._fh = gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")

    def __iter__(self):
        # universal newlines, as text mode reads them: "\n", "\r\n" and a lone "\r" end a
        # line, and each line is handed on ending in "\n"
        lineno = 0
        for chunk in self._fh:
            pieces = _LONE_CR.split(chunk) if b"\r" in chunk else [chunk]
            for k, raw in enumerate(pieces):
                if k < len(pieces) - 1:
                    raw += b"\n"
                elif not raw:  # the chunk ended in a lone "\r"
                    break
                elif raw.endswith(b"\r\n"):
                    raw = raw[:-2] + b"\n"
                lineno += 1
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise ValueError(
                        f"{self.path}:{lineno}: not UTF-8 text (byte "
                        f"{raw[exc.start]:#04x} at column {exc.start + 1})"
                    ) from None

    def close(self):
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


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
