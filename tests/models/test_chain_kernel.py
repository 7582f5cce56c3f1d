"""The chain model's kernel: its oracles equal brute force, and the block-solver BCFW on it
follows the chain BCFW's trajectory."""

import warnings

import numpy as np
import pytest
from brute import brute_hinge
from conftest import random_chain_problem

from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BCFW
from dualstruct.solvers.block import BlockBCFW


def _problem(seed, start_end=True, sparse=False):
    rng = np.random.default_rng(seed)
    X, Y = random_chain_problem(rng, n=12, K=3, d=4, max_len=5, sparse=sparse)
    chain = ChainModel(3, 4, start_end=start_end)
    data = pack_sequences(X, Y)
    return X, Y, chain, data, chain.block_data(data)


@pytest.mark.parametrize("start_end", [True, False])
def test_chain_kernel_oracles_match_brute_force(start_end):
    X, Y, chain, data, blocks = _problem(0, start_end)
    w = np.random.default_rng(1).normal(size=chain.size)
    brute = [brute_hinge(chain, w, x, y) for x, y in zip(X, Y)]
    for on in (blocks, data):  # block data, and packed sequences (no Gram matrices)
        np.testing.assert_allclose(chain.hinge(w, on)[0], brute, rtol=1e-12)
    np.testing.assert_array_equal(chain.decode(w, blocks), chain.predict(w, data))


def test_chain_kernel_difference_matches_joint_features():
    from numba import njit

    from dualstruct.models import base

    @njit
    def run(k, i, ya, yb, w):
        base.add_difference(k, i, ya, yb, 1.0, w)
        return base.difference_sq_norm(k, i, base.workspace(k), ya, yb)

    X, Y, chain, data, blocks = _problem(2, sparse=True)
    rng = np.random.default_rng(3)
    for i in range(len(X)):
        ya = rng.integers(0, 3, len(Y[i])).astype(np.int32)
        yb = rng.integers(0, 3, len(Y[i])).astype(np.int32)
        w = np.zeros(chain.size)
        sq = run(blocks.kernel, i, ya, yb, w)
        diff = chain.joint_feature(X[i], ya) - chain.joint_feature(X[i], yb)
        np.testing.assert_allclose(w, diff, atol=1e-12)
        assert sq == pytest.approx(diff @ diff, rel=1e-12, abs=1e-12)


def test_block_bcfw_on_the_chain_kernel_follows_chain_bcfw():
    """The same steps as the chain BCFW (until rounding separates near-ties), and the same
    optimum."""
    X, Y, chain, data, blocks = _problem(4)
    runs = {}
    for passes, tol in ((5, 0.0), (3000, 1e-7)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = BCFW(chain, C=1.0, max_iter=passes, tol=tol, check_every=5, random_state=0).fit(
                data
            )
            b = BlockBCFW(
                chain,
                C=1.0,
                max_iter=passes,
                tol=tol,
                check_every=5,
                random_state=0,
            ).fit(blocks)
        runs[passes] = a, b
    a, b = runs[5]
    np.testing.assert_allclose(b.weights(), a.weights(), atol=1e-12)
    a, b = runs[3000]
    assert a.history.stop_reason == b.history.stop_reason == "tol"
    assert b.history.last.primal == pytest.approx(a.history.last.primal, rel=1e-6)
