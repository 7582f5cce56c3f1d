"""Slack (and margin) rescaling on a tiny chain against the exact optimum: the dual QP over
every labelling of every sequence, solved by a generic QP solver (SciPy's SLSQP)."""

import itertools

import numpy as np
import pytest
import scipy.optimize
from conftest import tiny_chain_problem

from dualstruct import pack_sequences
from dualstruct.models import ChainModel
from dualstruct.solvers import BCFW, CuttingPlane


def _exact_dual(model, X, Y, C, rescaling):
    """max_α Σ C α δ − ½‖Σ C α g ψ‖² over one simplex per sequence (g = δ for slack)."""
    cols, losses, block = [], [], []
    for i, (x, y) in enumerate(zip(X, Y)):
        gold = model.joint_feature(x, y)
        for labels in itertools.product(range(model.n_labels), repeat=len(y)):
            loss = model.loss(y, np.array(labels))
            g = loss if rescaling == "slack" else 1.0
            cols.append(C * g * (gold - model.joint_feature(x, np.array(labels))))
            losses.append(C * loss)
            block.append(i)
    A, ell, block = np.array(cols).T, np.array(losses), np.array(block)
    start = np.zeros(len(ell))
    for i in range(len(X)):
        start[np.flatnonzero(block == i)[0]] = 1.0  # the gold labelling: w = 0
    result = scipy.optimize.minimize(
        lambda a: 0.5 * (A @ a) @ (A @ a) - ell @ a,
        start,
        jac=lambda a: A.T @ (A @ a) - ell,
        bounds=[(0.0, 1.0)] * len(ell),
        constraints=[
            {"type": "eq", "fun": lambda a, i=i: a[block == i].sum() - 1.0} for i in range(len(X))
        ],
        method="SLSQP",
        options={"maxiter": 3000, "ftol": 1e-15},
    )
    return -result.fun


@pytest.mark.parametrize("rescaling", ["margin", "slack"])
def test_bcfw_and_cutting_plane_reach_the_exact_qp_optimum(rescaling):
    X, Y = tiny_chain_problem()
    model = ChainModel(3, 4)
    data = pack_sequences(X, Y)
    optimum = _exact_dual(model, X, Y, 1.0, rescaling)
    kw = dict(rescaling=rescaling, random_state=0)
    for solver in (
        BCFW(model, 1.0, max_iter=3000, tol=1e-8, check_every=20, **kw),
        BCFW(model, 1.0, max_iter=3000, tol=1e-8, check_every=20, proximal=0, **kw),
        BCFW(model, 1.0, proximal=5.0, max_iter=3000, tol=1e-8, check_every=20, **kw),
        CuttingPlane(model, 1.0, max_iter=1000, tol=1e-9, **kw),
    ):
        history = solver.fit(data).history
        last = history.last_checked()
        assert last.primal == pytest.approx(optimum, rel=1e-6)
        assert last.dual == pytest.approx(optimum, rel=1e-6)
        # every dual reported on the way is a lower bound (the averaged points' too)
        assert all(r.dual <= optimum * (1 + 1e-9) for r in history.records if r.dual == r.dual)
    # the classic step converges sublinearly: close after 3,000 passes, every dual a bound
    for kappa in ("auto", 5.0, 0):
        solver = BCFW(model, 1.0, step="fw", proximal=kappa, max_iter=3000, tol=0, **kw)
        history = solver.fit(data).history
        last = history.last_checked()
        assert last.primal == pytest.approx(optimum, rel=2e-3)
        assert last.dual == pytest.approx(optimum, rel=2e-3)
        assert all(r.dual <= optimum * (1 + 1e-9) for r in history.records if r.dual == r.dual)
