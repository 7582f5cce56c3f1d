"""A restored block-solver state must describe what its dual variables determine: counters
within what the pass count allows, weights and loss term equal to the atoms' (or the blocks'
shares', or the working set's) sums, and no NaN weights coming out of a pass silently."""

import numpy as np
import pytest

import dualstruct
from dualstruct import MultiLabelSVM, StructuredSVM, io
from dualstruct.datasets import make_chain
from dualstruct.models import ChainModel
from dualstruct.sequences import pack_sequences
from dualstruct.solvers import BlockBCFW, BlockSSG

COMMON = {"max_iter": 4, "check_every": 1, "random_state": 0}


def edit(path, change):
    """Rewrite a model file with ``change(header, arrays)`` applied and fresh checksums."""
    h, a = io.load_arrays(path)
    h = {k: v for k, v in h.items() if k not in ("format", "format_version", "arrays")}
    change(h, a)
    io.save_arrays(path, h, a)


def chain():
    return make_chain(8, 4, 3, 6, random_state=0)


def multilabel():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 5))
    Y = (X[:, :4] + 0.5 * rng.normal(size=(12, 4)) > 0).astype(int)
    Y[0] = [1, 1, 0, 0]
    return X, Y


def saved(tmp_path, est, X, Y):
    path = tmp_path / "c.npz"
    est.fit(X, Y).save(path, include_solver_state=True)
    return path


def resume(path, X, Y, **params):
    m = dualstruct.load(path)
    m.set_params(warm_start=True, max_iter=3, **params)
    return m.fit(X, Y)


def test_ssg_zeroed_scalars_refused(tmp_path):
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(solver="ssg", **COMMON), X, y)
    edit(path, lambda h, a: a["state.scalars"].__setitem__(slice(None), 0.0))
    with pytest.raises(ValueError, match="'scalars'"):
        resume(path, X, y)


@pytest.mark.parametrize("index, value", [(1, 2.0), (0, 1e6), (0, 0.0)])
def test_ssg_scalars_checked(tmp_path, index, value):
    """``C n`` must be the solver's, the step count within the passes' steps, and a count of
    0 holds no directions."""
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(solver="ssg", **COMMON), X, y)
    edit(path, lambda h, a: a["state.scalars"].__setitem__(index, value))
    with pytest.raises(ValueError, match="'scalars'"):
        resume(path, X, y)


@pytest.mark.parametrize("value", [1e6, 2.0**52])
def test_bcfw_averaging_counter_bounded(tmp_path, value):
    X, Y = multilabel()
    path = saved(tmp_path, MultiLabelSVM(**COMMON), X, Y)
    edit(path, lambda h, a: a["state.scalars"].__setitem__(1, value))
    with pytest.raises(ValueError, match="'scalars'"):
        resume(path, X, Y)


def test_ssg_multilabel_counter_bounded(tmp_path):
    X, Y = multilabel()
    path = saved(tmp_path, MultiLabelSVM(solver="ssg", **COMMON), X, Y)
    edit(path, lambda h, a: a["state.scalars"].__setitem__(0, 1e6))
    with pytest.raises(ValueError, match="'scalars'"):
        resume(path, X, Y)


def test_resume_of_untouched_checkpoints_works(tmp_path):
    X, y = chain()
    for est in (
        StructuredSVM(**COMMON),
        StructuredSVM(solver="ssg", **COMMON),
        StructuredSVM(solver="cutting_plane", **COMMON),
        StructuredSVM(solver_options={"step": "fw"}, **COMMON),
        StructuredSVM(rescaling="slack", **COMMON),
        StructuredSVM(solver_options={"proximal": 0}, **COMMON),
    ):
        path = saved(tmp_path, est, X, y)
        m = resume(path, X, y)
        assert np.isfinite(m.coef_).all()
    X, Y = multilabel()
    path = saved(tmp_path, MultiLabelSVM(**COMMON), X, Y)
    assert np.isfinite(resume(path, X, Y).coef_).all()


def _negate_some(name, count=30):
    def change(h, a):
        arr = a[name].reshape(-1)
        picks = np.random.default_rng(1).choice(arr.size, min(count, arr.size), replace=False)
        arr[picks] = -arr[picks] - 1.0

    return change


def _shuffle(name):
    def change(h, a):
        arr = a[name]
        arr[:] = np.random.default_rng(2).permutation(arr)

    return change


def _zero(name):
    return lambda h, a: a[name].__setitem__(slice(None), 0)


@pytest.mark.parametrize(
    "options, change, named",
    [
        ({}, _negate_some("state.w"), "'w'"),
        ({}, _shuffle("state.atom_labels"), "'w'"),
        ({"rescaling": "slack"}, _shuffle("state.atom_labels"), "'w'"),
        ({"solver_options": {"proximal": 0}}, _negate_some("state.w"), "'w'"),
        ({}, lambda h, a: a["state.scalars"].__setitem__(0, 1e3), "'scalars'"),
        ({"solver_options": {"step": "fw"}}, _negate_some("state.w"), "'w'"),
        ({"solver_options": {"step": "fw"}}, _zero("state.block_losses"), "'block_losses'"),
        ({"solver_options": {"step": "fw"}}, _negate_some("state.block_weights"), "'w'"),
        ({"solver": "cutting_plane"}, _negate_some("state.w"), "'w'"),
    ],
)
def test_inconsistent_dual_state_refused(tmp_path, options, change, named):
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(**COMMON, **options), X, y)
    edit(path, change)
    with pytest.raises(ValueError, match=named):
        resume(path, X, y)


def test_negated_accumulator_refused(tmp_path):
    """``R`` with the step count 0 holds nothing."""
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(**COMMON), X, y)

    def change(h, a):
        a["state.scalars"][1:] = 0.0
        a["state.R"][:] = -a["state.R"] - 1.0

    edit(path, change)
    with pytest.raises(ValueError, match="'R'"):
        resume(path, X, y)


def test_cutting_plane_lowered_best_primal_refused(tmp_path):
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(solver="cutting_plane", **COMMON), X, y)

    def change(h, a):
        h["solver_state"]["scalars"]["best_primal"] *= 0.5

    edit(path, change)
    with pytest.raises(ValueError, match="best_primal"):
        resume(path, X, y)


def _huge_counter(solver):
    solver.scalars[1] = 1e300


def _huge_accumulator(solver):
    solver.R[:] = np.finfo(float).max


@pytest.mark.parametrize(
    "solver_class, spoil", [(BlockBCFW, _huge_counter), (BlockSSG, _huge_accumulator)]
)
def test_nan_weights_never_silent(solver_class, spoil):
    """A pass that leaves non-finite weights stops training with an error."""
    X, y = chain()
    data = pack_sequences(X, [np.asarray(t) for t in y])
    solver = solver_class(ChainModel(3, 6), max_iter=2, random_state=0).fit(data)
    spoil(solver)
    with np.errstate(all="ignore"), pytest.raises(ValueError, match="not finite"):
        solver.fit(data, max_iter=2)


@pytest.mark.parametrize("step", ["pairwise", "fw"])
@pytest.mark.parametrize("spoil", ["w", "counter", "partition"])
def test_cocoa_state_checked(step, spoil):
    from dualstruct.distributed import CoCoA

    X, y = chain()
    data = pack_sequences(X, [np.asarray(t) for t in y])
    options = {"n_partitions": 2, "tol": 0, "random_state": 0, "step": step}
    first = CoCoA(ChainModel(3, 6), 1.0, max_iter=3, **options).fit(data)
    meta, arrays = first.state_dict()
    arrays = {k: np.array(v) for k, v in arrays.items()}
    CoCoA(ChainModel(3, 6), 1.0, max_iter=1, **options).load_state(data, meta, arrays)
    if spoil == "w":
        arrays["w"][:5] = -arrays["w"][:5] - 1.0
    elif spoil == "counter":
        arrays["scalars"][1] = 50.0
    elif step == "pairwise":
        arrays["p0/atom_labels"][:] = np.random.default_rng(0).permutation(arrays["p0/atom_labels"])
    else:
        arrays["p0/block_losses"][:] = 0.0
    second = CoCoA(ChainModel(3, 6), 1.0, max_iter=1, **options)
    with pytest.raises(ValueError, match="'w'|'scalars'"):
        second.load_state(data, meta, arrays)
    assert second.data is None


def test_cutting_plane_raised_best_dual_refused(tmp_path):
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(solver="cutting_plane", **COMMON), X, y)

    def change(h, a):
        scalars = h["solver_state"]["scalars"]
        scalars["best_dual"] = 1.5 * scalars["best_primal"]

    edit(path, change)
    with pytest.raises(ValueError, match="best_dual"):
        resume(path, X, y)


def test_classic_share_above_its_corners_refused(tmp_path):
    """A block's loss share raised with the loss term: the sums agree, the share cannot be
    a mean of the block's corners."""
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(solver_options={"step": "fw"}, **COMMON), X, y)

    def change(h, a):
        a["state.block_losses"][0] += 100.0
        a["state.scalars"][0] += 100.0

    edit(path, change)
    with pytest.raises(ValueError, match="'block_losses'"):
        resume(path, X, y)


@pytest.mark.parametrize("field, value", [("centred_at", 10**6), ("stalled", -1)])
def test_proximal_counters_bounded(tmp_path, field, value):
    """A centre moved after the passes made would never move again."""
    X, y = chain()
    path = saved(tmp_path, StructuredSVM(**COMMON), X, y)
    edit(path, lambda h, a: h["solver_state"]["scalars"].__setitem__(field, value))
    with pytest.raises(ValueError, match=field):
        resume(path, X, y)
