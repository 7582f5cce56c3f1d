"""The observed support of input read on the executors: the driver builds it from the kept
pairs' keys (``feature · K + label``) as the in-memory rule does from the pairs, holding
about 12 bytes a pair (the pairs, divided and sorted, took about 80)."""

import tracemalloc

import numpy as np
import pytest

from dualstruct.distributed import reading
from dualstruct.distributed.reading import _kept_keys, support_from_keys
from dualstruct.models.support import support_from_pairs


def _counted(rng, d, K, n):
    keys = rng.choice(d * K, size=n, replace=False).astype(np.int64)
    return keys, rng.integers(1, 4, size=n)


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_support_from_keys_is_the_support_of_the_pairs(monkeypatch, chunk):
    monkeypatch.setattr(reading, "KEY_CHUNK", chunk)
    rng = np.random.default_rng(0)
    for _ in range(40):
        d, K = int(rng.integers(1, 25)), int(rng.integers(2, 8))
        keys, counts = _counted(rng, d, K, int(rng.integers(0, d * K + 1)))
        min_count = int(rng.integers(1, 3))
        features, labels = np.divmod(keys, K)
        expected = support_from_pairs(features, labels, counts, d, K, min_count)
        kept = next(_kept_keys(min_count, zip(keys.tolist(), counts.tolist())))
        third = len(kept) // 3
        got = support_from_keys([kept[:third], kept[third:]], d, K)
        assert np.array_equal(got[0], expected[0])
        assert np.array_equal(got[1], expected[1])
        assert got[1].dtype == expected[1].dtype == np.int32


def test_the_driver_builds_the_support_in_about_12_bytes_a_pair():
    rng = np.random.default_rng(1)
    d, K, n = 400_000, 20, 1_000_000
    keys, _ = _counted(rng, d, K, n)
    parts = list(np.array_split(keys, 4))
    del keys
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        indptr, labels = support_from_keys(parts, d, K)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(labels) >= n and not parts  # the parts are let go as they are copied
    # the keys and their labels, four arrays over the features, a slice's temporaries
    assert peak < 12 * n + 36 * (d + 1) + 64 * reading.KEY_CHUNK
