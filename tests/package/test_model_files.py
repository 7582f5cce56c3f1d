"""Model files are written atomically: concurrent saves to one path, interrupted saves and
their leftovers never leave a broken or misleading file."""

import multiprocessing
import os
import stat

import numpy as np

from dualstruct import io


def _save_many(path, seed, times):
    rng = np.random.default_rng(seed)
    for _ in range(times):
        io.save_arrays(path, {"writer": seed}, {"coef": rng.normal(size=20_000)})


def _context():
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def test_two_processes_saving_to_one_path(tmp_path):
    """Two processes save 20 times each to one path while this one reads it: every read
    finds a whole file (the last rename wins), and no temporary is left."""
    path = tmp_path / "same.npz"
    procs = [_context().Process(target=_save_many, args=(str(path), seed, 20)) for seed in (1, 2)]
    for p in procs:
        p.start()
    reads = 0
    while any(p.is_alive() for p in procs):
        if path.exists():
            header, arrays = io.load_arrays(path)
            assert header["writer"] in (1, 2) and arrays["coef"].shape == (20_000,)
            reads += 1
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    header, _ = io.load_arrays(path)
    assert header["writer"] in (1, 2)
    assert [f.name for f in tmp_path.iterdir()] == ["same.npz"]


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path):
    path = tmp_path / "m.npz"
    dead = _context().Process(target=int)
    dead.start()
    dead.join()
    stale = tmp_path / f".m.npz.{dead.pid}.abc.tmp"  # a save killed before its rename
    stale.write_bytes(b"PK\x03\x04 partial")
    live = tmp_path / f".m.npz.{os.getppid()}.def.tmp"  # a save still running elsewhere
    live.write_bytes(b"PK\x03\x04 in progress")
    io.save_arrays(path, {}, {"coef": np.zeros(3)})
    assert not stale.exists() and live.exists()
    io.load_arrays(path)


def test_saved_file_has_the_usual_permissions(tmp_path):
    path = io.save_arrays(tmp_path / "m.npz", {}, {"coef": np.zeros(3)})
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask


def _model_file(tmp_path):
    return io.save_arrays(tmp_path / "m.npz", {"note": "x"}, {"coef": np.arange(5.0)})


def test_decompression_bomb_is_refused_before_reading(tmp_path):
    """An extra member of zeros that unpacks to far more than its compressed size is refused
    from the zip directory, quickly and without unpacking it."""
    import time
    import zipfile

    import pytest

    path = _model_file(tmp_path)
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("bomb.npy", "w", force_zip64=True) as fh:
            block = bytes(2**24)
            for _ in range(2**26 // 2**24):  # the size does not matter: it is never read
                fh.write(block)
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"m\.npz: .*members do not match .*unknown: \['bomb'\]"):
        io.load_arrays(path)
    assert time.perf_counter() - t0 < 1.0


def _rewrite_header(path, change):
    import json
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    import io as stdio

    raw = np.load(stdio.BytesIO(members["__header__.npy"]))
    header = json.loads(raw.tobytes().decode())
    text = change(header)
    blob = np.frombuffer(text.encode(), dtype=np.uint8)
    buf = stdio.BytesIO()
    np.save(buf, blob)
    members["__header__.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_claims_of_terabytes_and_nested_json_give_value_errors(tmp_path):
    import json

    import pytest

    path = _model_file(tmp_path)

    def huge(header):
        header["arrays"]["coef"]["shape"] = [2**40]
        return json.dumps(header)

    _rewrite_header(path, huge)
    with pytest.raises(ValueError, match=r"m\.npz: .*coef"):
        io.load_arrays(path)
    path = _model_file(tmp_path)
    _rewrite_header(path, lambda header: "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match=r"m\.npz: .*nested too deeply"):
        io.load_arrays(path)


def test_every_compression_level_reads_back(tmp_path):
    """Stored, deflated at level 1 and at the default level: the same arrays come back, and
    the deflated files are the smaller."""
    arrays = {"zeros": np.zeros(200_000), "ramp": np.arange(1000, dtype=np.int64)}
    sizes = {}
    for compress in (False, 1, True):
        path = io.save_arrays(
            tmp_path / f"m{compress}.npz", {"kind": "test"}, arrays, compress=compress
        )
        header, back = io.load_arrays(path)
        assert header["kind"] == "test"
        assert all(np.array_equal(back[k], v) for k, v in arrays.items())
        sizes[compress] = os.path.getsize(path)
    assert sizes[1] < sizes[False] / 10 and sizes[True] <= sizes[1]
