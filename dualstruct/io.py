"""Safe model files: NumPy ``.npz`` arrays plus a JSON header; loading never unpickles.

The header (stored as the UTF-8 bytes of the array ``__header__``) records the format name and
version, the model type, hyperparameters, the classes, a training summary, and for every array
its shape, dtype and SHA-256, so a truncated or altered file is rejected with a clear error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from .memory import available_bytes

FORMAT_NAME = "dualstruct-model"
FORMAT_VERSION = 1
_HEADER_KEY = "__header__"
_ALLOWED_DTYPES = {"float64", "float32", "int64", "int32", "uint8", "bool"}


def require_file(path, what: str = "file") -> Path:
    """``path`` as a Path if it is an existing file; ``FileNotFoundError`` if nothing is
    there, ``IsADirectoryError`` if it is a directory (both name the path)."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a {what}")
    if not path.is_file():
        raise FileNotFoundError(f"no such {what}: {path}")
    return path


def _digest(arr: np.ndarray) -> str:
    # the bytes of tobytes(), read in place (no copy of a large w)
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return hashlib.sha256(flat.data).hexdigest()


def _json_scalar(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not storable in a model file header")


def save_arrays(path, header: dict, arrays: dict, compress=True) -> Path:
    """Write ``arrays`` (name -> numeric ndarray) and the JSON-able ``header`` to ``path``
    (an ``.npz`` zip: deflated unless ``compress=False``; an integer 1–9 is the zlib level,
    1 being several times faster than the default 6 on large checkpoints, with files a
    little larger)."""
    path = Path(path)
    meta = {}
    for name, arr in arrays.items():
        arr = np.asarray(arr)
        if arr.dtype.name not in _ALLOWED_DTYPES:
            raise TypeError(f"array {name!r} has dtype {arr.dtype}, not storable in a model file")
        meta[name] = {"shape": list(arr.shape), "dtype": arr.dtype.name, "sha256": _digest(arr)}
    full = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **header, "arrays": meta}
    text = json.dumps(full, allow_nan=True, default=_json_scalar)
    blob = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    # write a temporary file of this process's own and rename it over the target: an
    # interrupted save never leaves a broken model, and two processes saving to one path at
    # once each rename a complete file (the last one wins)
    _remove_stale_temporaries(path)
    fd, tmp_name = tempfile.mkstemp(
        dir=path.parent or ".", prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp"
    )
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as fh:
            _write_npz(fh, {_HEADER_KEY: blob, **arrays}, compress)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, new_file_mode())  # mkstemp's file is private; a model file is not
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _write_npz(fh, arrays: dict, compress) -> None:
    """The ``.npz`` layout ``np.load`` reads: one ``<name>.npy`` member per array, stored or
    deflated at the given level."""
    if compress is False or compress is None:
        method, level = zipfile.ZIP_STORED, None
    else:
        method, level = zipfile.ZIP_DEFLATED, (6 if compress is True else int(compress))
    with zipfile.ZipFile(
        fh, mode="w", compression=method, compresslevel=level, allowZip64=True
    ) as zf:
        for name, arr in arrays.items():
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                _write_npy(member, np.asanyarray(arr))


#: bytes of an array handed to the zip member at a time
WRITE_CHUNK = 1 << 20


def _write_npy(member, arr) -> None:
    """``np.lib.format.write_array``'s bytes, a C-contiguous array's data written from its
    own memory slice by slice (``write_array`` copies 16 MiB at a time into a zip member)."""
    if not arr.flags.c_contiguous or arr.dtype.hasobject or arr.dtype.names is not None:
        np.lib.format.write_array(member, arr, allow_pickle=False)
        return
    np.lib.format.write_array_header_1_0(member, np.lib.format.header_data_from_array_1_0(arr))
    data = memoryview(arr.reshape(-1).view(np.uint8))
    for lo in range(0, len(data), WRITE_CHUNK):
        member.write(data[lo : lo + WRITE_CHUNK])


def new_file_mode() -> int:
    """The mode ``open`` gives a new file (0o666 less the umask), for a temporary file
    (private from ``mkstemp``) that replaces the target."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _remove_stale_temporaries(path: Path) -> None:
    """Delete the temporary files of saves to ``path`` whose process no longer runs (a save
    killed before its rename); those of running processes are left alone."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        try:
            pid = int(tmp.name[len(path.name) + 2 :].split(".", 1)[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (PermissionError, OSError):
            pass  # the process exists (another user's) or cannot be asked: keep the file


def load_arrays(path):
    """Read a file written by :func:`save_arrays`; returns ``(header, arrays)``.

    Raises ``ValueError`` naming the file if it is not a model file, is truncated or
    corrupt (naming the member that cannot be read), has an unsupported format version, or
    if any array differs from what the header records.
    """
    path = require_file(path, "model file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):  # model files are .npz (zip) archives
        raise ValueError(f"{path}: not a dualstruct model file (not an .npz archive)")
    try:
        with zipfile.ZipFile(path) as archive:
            sizes = {info.filename: info.file_size for info in archive.infolist()}
    except Exception as exc:  # any failure of the zip directory: a corrupt file
        raise ValueError(f"{path}: corrupt or truncated model file ({exc!r})") from None
    member = _HEADER_KEY + ".npy"
    if member not in sizes:
        raise ValueError(f"{path}: not a dualstruct model file (no header)")
    if sizes[member] > MAX_HEADER_BYTES:
        raise ValueError(
            f"{path}: the header member claims {sizes[member]:,} bytes "
            f"(at most {MAX_HEADER_BYTES:,})"
        )
    try:
        npz = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"{path}: corrupt or truncated model file ({exc!r})") from None
    with npz:  # members are read one by one
        blob = _read_member(path, npz, _HEADER_KEY)
        try:
            header = json.loads(blob.tobytes().decode("utf-8"))
        except RecursionError:
            raise ValueError(f"{path}: the header's JSON is nested too deeply") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: the header is not valid JSON ({exc})") from None
        if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
            raise ValueError(f"{path}: not a dualstruct model file")
        version = header.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(
                f"{path}: model file format version {version} is not supported by this "
                f"version of dualstruct (supports {FORMAT_VERSION})"
            )
        # members, shapes and sizes against the header before any array is read
        try:
            _check_members(header.get("arrays"), sizes)
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:
            raise ValueError(f"{path}: not a valid dualstruct model file ({exc})") from None
        arrays = {k: _read_member(path, npz, k) for k in npz.files if k != _HEADER_KEY}
    try:
        _check_arrays(header["arrays"], arrays)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: malformed array table in the header ({exc!r})") from None
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return header, arrays


def _read_member(path, npz, name) -> np.ndarray:
    """The array ``name`` of the open archive ``npz``; any failure to read it (a corrupt
    zip entry or ``.npy`` header, an unsupported compression, a short member) is a
    ``ValueError`` naming the file and the member."""
    try:
        return npz[name]
    except Exception as exc:
        raise ValueError(
            f"{path}: corrupt or truncated model file: cannot read the member "
            f"{name + '.npy'!r} ({type(exc).__name__}: {exc})"
        ) from None


#: the JSON header of a model file is small (tens of KB; the arrays hold everything large)
MAX_HEADER_BYTES = 64 * 2**20
_NPY_HEADER_ROOM = 1 << 16  # the .npy format's own header, at most 64 KiB


def _check_members(meta, sizes: dict) -> None:
    """The archive's members are exactly the header's arrays, each of the size its shape and
    dtype give, and all of them fit in memory: checked from the zip directory, so a
    decompression bomb or a member claiming terabytes is refused before it is read."""
    if not isinstance(meta, dict):
        raise ValueError("the header has no array table")
    members = {name[:-4] for name in sizes if name.endswith(".npy")} - {_HEADER_KEY}
    other = sorted(name for name in sizes if not name.endswith(".npy"))
    if other or members != set(meta):
        unknown = sorted(members - set(meta)) + other
        raise ValueError(
            f"the archive's members do not match the header's arrays (unknown: "
            f"{unknown}, missing: {sorted(set(meta) - members)})"
        )
    total, largest = 0, (0, "")
    for name, m in meta.items():
        dtype, shape = m.get("dtype"), m.get("shape")
        if dtype not in _ALLOWED_DTYPES:
            raise ValueError(f"array {name!r} has the unsupported dtype {dtype!r}")
        if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
        ):
            raise ValueError(f"array {name!r} has an invalid shape {shape!r}")
        nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if sizes[name + ".npy"] > nbytes + _NPY_HEADER_ROOM:
            raise ValueError(
                f"array {name!r}: its member unpacks to {sizes[name + '.npy']:,} "
                f"bytes, its shape {tuple(shape)} {dtype} needs {nbytes:,}"
            )
        total += nbytes
        largest = max(largest, (nbytes, name))
    room = available_bytes()
    if room is not None and total > room:
        raise ValueError(
            f"its arrays would take {total:,} bytes (array {largest[1]!r} "
            f"{largest[0]:,}), more than the {room:,} bytes of memory available"
        )


def _check_arrays(meta: dict, arrays: dict) -> None:
    if set(meta) != set(arrays):
        raise ValueError(f"arrays {sorted(arrays)} do not match the header's {sorted(meta)}")
    for name, m in meta.items():
        arr = arrays[name]
        if arr.dtype.name not in _ALLOWED_DTYPES:
            raise ValueError(f"array {name!r} has the unsupported dtype {arr.dtype}")
        if list(arr.shape) != list(m["shape"]) or arr.dtype.name != m["dtype"]:
            raise ValueError(
                f"array {name!r} has shape {arr.shape} and dtype {arr.dtype}, the header says "
                f"{tuple(m['shape'])} {m['dtype']}"
            )
        if _digest(arr) != m["sha256"]:
            raise ValueError(f"array {name!r} does not match its checksum (file altered)")
