"""Training on the real OCR data (standard split: folds 1-9 train, fold 0 test)."""

import numpy as np
import pytest

from dualstruct import StructuredSVM, load
from dualstruct.solvers import primal_objective


@pytest.fixture(scope="module")
def ocr_split(ocr_data):
    X, y, folds = ocr_data
    train, test = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    return ([X[i] for i in train], [y[i] for i in train],
            [X[i] for i in test], [y[i] for i in test])


@pytest.mark.realdata
def test_bcfw_on_ocr_lands_where_expected(ocr_split, tmp_path):
    Xtr, ytr, Xte, yte = ocr_split
    est = StructuredSVM(C=1.0, max_iter=60, check_every=20, random_state=0).fit(Xtr, ytr)
    last = est.history_.last_checked()
    # long runs certify the optimum at about 13,5xx (BENCHMARKS.md); after 60 passes the
    # primal is within 4% of it and the dual has risen past 9,000
    assert 9_000 < last.dual <= last.primal < 14_100
    assert last.gap > 0
    assert 1 - est.score(Xte, yte) <= 0.125
    # the printed objective equals an independent recomputation from the saved model
    loaded = load(est.save(tmp_path / "ocr.npz"))
    data = loaded._pack(Xtr, ytr)
    assert primal_objective(loaded.model_, data, loaded.coef_, 1.0) == pytest.approx(
        last.primal, rel=1e-12)


@pytest.mark.realdata
def test_ssg_on_ocr_improves(ocr_split):
    Xtr, ytr, Xte, yte = ocr_split
    est = StructuredSVM(solver="ssg", C=1.0, max_iter=20, check_every=10,
                        random_state=0).fit(Xtr, ytr)
    p = [r.primal for r in est.history_ if r.primal == r.primal]
    assert p[1] < p[0] < 60_000
    assert 1 - est.score(Xte, yte) < 0.2
