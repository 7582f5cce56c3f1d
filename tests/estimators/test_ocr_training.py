"""Training on the real OCR data (standard split: folds 1-9 train, fold 0 test)."""

import numpy as np
import pytest

from dualstruct import StructuredSVM, load
from dualstruct.solvers import primal_objective


@pytest.fixture(scope="module")
def ocr_split(ocr_data):
    X, y, folds = ocr_data
    train, test = np.flatnonzero(folds != 0), np.flatnonzero(folds == 0)
    return (
        [X[i] for i in train],
        [y[i] for i in train],
        [X[i] for i in test],
        [y[i] for i in test],
    )


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
        last.primal, rel=1e-12
    )


@pytest.mark.realdata
def test_ssg_on_ocr_improves(ocr_split):
    Xtr, ytr, Xte, yte = ocr_split
    est = StructuredSVM(solver="ssg", C=1.0, max_iter=20, check_every=10, random_state=0).fit(
        Xtr, ytr
    )
    p = [r.primal for r in est.history_ if r.primal == r.primal]
    assert p[1] < p[0] < 60_000
    assert 1 - est.score(Xte, yte) < 0.2


@pytest.mark.realdata
@pytest.mark.parametrize("rescaling", ["margin", "slack"])
def test_solvers_agree_on_an_ocr_subset(ocr_split, rescaling):
    """BCFW, the cutting plane and SSG reach the same optimum (relative 1e-3) on 40 words."""
    from dualstruct.models import ChainModel
    from dualstruct.sequences import pack_sequences
    from dualstruct.solvers import BCFW, SSG, CuttingPlane

    Xtr, ytr, _, _ = ocr_split
    X = [np.hstack([x, np.ones((len(x), 1))]) for x in Xtr[:40]]
    Y = [np.array([ord(c) - 97 for c in w]) for w in ytr[:40]]
    data = pack_sequences(X, Y)
    model = ChainModel(26, 129)
    bc = BCFW(
        model, 0.1, rescaling=rescaling, max_iter=10000, tol=1e-6, check_every=25, random_state=0
    ).fit(data)
    cp = CuttingPlane(model, 0.1, rescaling=rescaling, max_iter=3000, tol=1e-4).fit(data)
    ssg = SSG(
        model, 0.1, rescaling=rescaling, max_iter=12000, check_every=12000, random_state=0
    ).fit(data)
    p = bc.history.last.primal
    assert bc.history.stop_reason == "tol" and cp.history.stop_reason == "tol"
    assert cp.history.last.primal == pytest.approx(p, rel=1e-4)
    assert ssg.history.last.primal == pytest.approx(p, rel=1e-3)
