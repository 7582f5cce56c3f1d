"""Fuzzing: random edits of model files and checkpoints of every model, random graph inputs,
misbehaving user models and bad training inputs (``fuzz_cases``), each run in a worker
process. Every case must end in a clear error (ValueError or TypeError) or an honest result:
no exit by signal, no hang, no negative gap without an error, no stop at ``tol`` farther than
``tol`` from the optimum (known for the fixtures, enumerated for the user models), no NaN
weights and no labels outside the label set.

``DUALSTRUCT_FUZZ_CASES`` (default 2000) and ``DUALSTRUCT_FUZZ_SEED`` (default 0) choose the
cases; the same pair runs the same cases."""

import os

import pytest
from fuzz_cases import FAMILIES, run_suite

N_CASES = int(os.environ.get("DUALSTRUCT_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("DUALSTRUCT_FUZZ_SEED", "0"))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    workers = max(1, min(2, os.cpu_count() or 1))
    result = run_suite(N_CASES, SEED, tmp_path_factory.mktemp("fuzz"), n_workers=workers)
    print("\n" + result.summary(limit=0))
    return result


def test_every_case_ran(report):
    assert len(report.rows) == N_CASES
    for family in FAMILIES:  # every family is exercised
        assert report.count(family) > 0


@pytest.mark.parametrize("family", FAMILIES)
def test_no_crash_hang_or_lie(report, family):
    """A case of ``family`` ends in a clear error or an honest result."""
    found = len(report.findings(family))
    assert found == 0, report.summary(family)
