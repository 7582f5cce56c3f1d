"""A driver's last step writes the model: the arrays go into the file from their own memory
(a dense ``w`` is a driver's largest array; writing it must not copy it in large pieces)."""

import io
import tracemalloc
import zipfile

import numpy as np

from dualstruct import io as model_io


def test_writing_a_model_file_allocates_little_beside_its_arrays(tmp_path):
    w = np.random.default_rng(0).normal(size=4_000_000)  # 32 MB
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        model_io.save_arrays(tmp_path / "m.npz", {"kind": "test"}, {"w": w})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * w.nbytes  # numpy's writer took 16 MiB copies and their deflation
    header, arrays = model_io.load_arrays(tmp_path / "m.npz")
    assert header["kind"] == "test" and np.array_equal(arrays["w"], w)


def test_the_members_are_the_bytes_numpy_writes():
    rng = np.random.default_rng(1)
    arrays = [
        rng.normal(size=300_000),
        rng.integers(0, 9, size=(70, 33)).astype(np.int32),
        np.zeros(0),
        np.array(2.5),
        np.arange(10)[::2],
        np.asfortranarray(rng.normal(size=(20, 7))),
        np.ones((3, 4), dtype=bool),
    ]
    for arr in arrays:
        expected = io.BytesIO()
        np.lib.format.write_array(expected, arr, allow_pickle=False)
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf, zf.open("a.npy", "w", force_zip64=True) as member:
            model_io._write_npy(member, arr)
        with zipfile.ZipFile(buf) as zf:
            assert zf.read("a.npy") == expected.getvalue()
