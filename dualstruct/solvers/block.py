"""BCFW and SSG, written once for every model with a kernel (:mod:`dualstruct.models.base`):
the chain, multi-label, multi-class and graph models and user-defined Python models. The
compiled passes are in :mod:`dualstruct.solvers._block_kernels`; the loop, checks, history,
checkpoints and Ctrl-C are :class:`~dualstruct.solvers.base.PassSolver`'s.

A solver is given a model and its training data in the model's own form (a
:class:`~dualstruct.sequences.PackedSequences` for a chain, a
:class:`~dualstruct.models.multilabel.MultiLabelDataset`, or the
:class:`~dualstruct.data.BlockData` of a kernel model); it trains on the model's kernel and
its block data, and measures the primal with the model's own hinge, as every solver does.
"""

from __future__ import annotations

import numpy as np

from ..data import BlockData
from . import _block_kernels as kern
from .base import AtomPool, PassSolver, SubgradientAverage, WeightedAverageDual, model_size

#: the classic step keeps n × dim(w) numbers; refuse beyond this many bytes
CLASSIC_STEP_MAX_BYTES = 8 * 2**30


def kernel_model(model):
    """The kernel model that trains ``model``: the model itself when it has a kernel, else
    what its ``kernel_model()`` returns (the chain and multi-label models)."""
    if hasattr(model, "kernel_model"):
        return model.kernel_model()
    if hasattr(model, "block_data") and hasattr(model, "hinge"):
        return model
    raise TypeError(
        f"{type(model).__name__} has no kernel; wrap a Python model in "
        "dualstruct.models.UserModel (or use dualstruct.SSVM)"
    )


class KernelBlocks:
    """A solver's view of its problem as a kernel model and block data: ``kernel_model_`` and
    ``blocks``, made from the model and the training data by :meth:`_make_blocks`. They are
    rebuilt, not pickled, when the data is in the model's own form."""

    def _make_blocks(self, kmodel):
        data = self.data
        self.blocks = data if isinstance(data, BlockData) else kmodel.block_data(data)
        self.kernel_model_ = kmodel

    def __getstate__(self):
        state = super().__getstate__()
        if not isinstance(self.data, BlockData):
            state.pop("blocks", None)
            state.pop("kernel_model_", None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.data is not None and "blocks" not in state:
            self._make_blocks(kernel_model(self.model))
        super().__setstate__({})


class _BlockPasses(KernelBlocks, PassSolver):
    """The set-up shared by the block solvers: the model's kernel and block data (the
    rescaling and slack search were checked against the kernel at construction)."""

    def _init_blocks(self):
        self._make_blocks(kernel_model(self.model))
        self._slack = self.rescaling == "slack"


class BlockBCFW(AtomPool, WeightedAverageDual, _BlockPasses):
    """Block-coordinate Frank–Wolfe on the structural SVM dual with exact line search, weighted
    averaging and the duality gap as certificate, for every kernel model.

    The returned weights are the weighted average when ``averaging=True`` and it has the lower
    primal; the dual bound is the better of the current and the averaged dual point.

    Slack rescaling converges more slowly than margin rescaling, and not from a fault of the
    step: on tiny chains BCFW's pairwise step and the cutting plane reach the exact optimum
    of the dual QP over all labellings (solved by a generic QP solver) to 1e-7 (the classic
    step approaches it more slowly), the running
    ``w`` and loss term equal the atoms' weighted corners to 1e-13 after thousands of passes,
    and the dual stays below the optimum. The slack dual's corners are
    ``C δ(y) (φ(ȳ) − φ(y))``, longer by the loss δ (up to the sequence length) than margin
    rescaling's, so the curvature that bounds Frank–Wolfe's progress grows by about δ², as
    if C were δ times larger; larger C slows BCFW in the same way.

    Parameters
    ----------
    model : model object
        What is trained: a kernel model (:class:`~dualstruct.models.ChainModel`,
        :class:`~dualstruct.models.MultiLabelModel`, a graph CRF, …) or a
        :class:`~dualstruct.models.UserModel`.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    step : {"auto", "pairwise", "fw"}, default "auto"
        ``"pairwise"``: block-coordinate pairwise Frank–Wolfe (Osokin et al. 2016), which keeps
        each block's dual point as a few weighted labellings (atoms) and moves mass from the
        worst of them to the oracle's corner; it converges linearly, and its memory is
        O(labelling entries × atoms). ``"fw"``: the classic BCFW step (Lacoste-Julien et al.
        2013), which keeps each block's share of ``w`` (memory n × dim w) and steps to the
        oracle's point, also a relaxed oracle's fractional one. ``"auto"``: the classic step for
        models whose oracle is a relaxation with fractional solutions (the relaxed structural
        SVM is then solved and certified), the pairwise step otherwise.
    atom_steps : int, default 0
        With the pairwise step: after each oracle step, up to this many further pairwise
        steps among the block's own atoms (from the worst to the best at the current ``w``),
        which call no oracle. They pay where the oracle is dear or the problem ill-conditioned
        (slack rescaling on 300 OCR words: 0.9% certified after 340 passes with 10, 15.5%
        after 400 without); on full OCR with margin rescaling they cost more time than the
        passes they save.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`: ``max_iter``, ``tol``,
        ``check_every``, ``averaging``, ``random_state``, ``verbose``, ``callback``,
        ``validation``, ``rescaling``, ``slack_search``, ``primal_sample``.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import BCFW
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> data = pack_sequences(X, y)
    >>> solver = BCFW(ChainModel(3, 12), C=0.1, max_iter=300, tol=1e-3, random_state=0).fit(data)
    >>> solver.history.last_checked().relative_gap <= 1e-3
    True
    """

    name = "bcfw"

    def __init__(self, model, C=1.0, *, step="auto", atom_steps=0, **kwargs):
        super().__init__(model, C, **kwargs)
        if step not in ("auto", "pairwise", "fw"):
            raise ValueError(f"step must be 'auto', 'pairwise' or 'fw', got {step!r}")
        self.step = step
        if isinstance(atom_steps, bool) or not isinstance(atom_steps, int) or atom_steps < 0:
            raise ValueError(f"atom_steps must be an integer >= 0, got {atom_steps!r}")
        self.atom_steps = atom_steps

    @property
    def resolved_step(self):
        """The step in use: ``step``, with ``"auto"`` decided by the model's oracle."""
        if self.step != "auto":
            return self.step
        relaxed = getattr(kernel_model(self.model), "fractional_oracle", False)
        return "fw" if relaxed else "pairwise"

    def memory_parts(self, data):
        parts = super().memory_parts(data)
        n, entries = data.n_sequences, data.n_tokens
        if self.resolved_step == "fw":
            parts["blocks' shares of w (classic step)"] = 8 * n * model_size(self.model)
        else:  # the pool starts at 4 atoms a block and doubles when a block needs more
            parts["atoms (4 per example)"] = 4 * (4 * entries) + 8 * 4 * n
        return parts

    def _init_state(self):
        self._init_blocks()
        blocks = self.blocks
        n = blocks.n_blocks
        self.w = self.kernel_model_.init_weights()
        self.R = np.zeros_like(self.w)
        self.scalars = np.zeros(3)  # ℓ, steps, R_ℓ
        self.block_gaps = np.zeros(n)
        self.capacity = 0
        if self.resolved_step == "pairwise":
            self._init_atoms(blocks.label_offsets, blocks.labels)
        else:
            need = 8 * n * self.w.size
            if need > CLASSIC_STEP_MAX_BYTES:
                raise MemoryError(
                    f"the classic BCFW step keeps every block's share of w: {n} blocks × "
                    f"{self.w.size} weights = {need / 2**30:.1f} GiB; use step='pairwise'"
                )
            self.block_weights = np.zeros((n, self.w.size))
            self.block_losses = np.zeros(n)

    @property
    def state_arrays(self):
        common = ("w", "R", "scalars", "block_gaps")
        if self.resolved_step == "pairwise":
            return common + ("atom_labels", "atom_weights", "atom_count")
        return common + ("block_weights", "block_losses")

    carries_dual = True

    def _dual_terms(self):
        return float(self.scalars[0]), float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """w and ℓ, their averaging accumulators and the blocks' gaps scale by s; the
        atoms' convex weights mix with the gold labelling (an atom again where needed)."""
        for a in (self.w, self.R, self.block_gaps):
            a *= s
        self.scalars[[0, 2]] *= s
        if self.resolved_step == "fw":
            self.block_weights *= s
            self.block_losses *= s
        elif t < 1.0:
            from ._block_kernels import mix_in_gold

            offsets, gold = self.blocks.label_offsets, self.blocks.labels
            while not mix_in_gold(
                offsets, gold, self.atom_labels, self.atom_weights, self.atom_count,
                self.capacity, t,
            ):  # fmt: skip
                self._grow_atoms(offsets)
        self._avg_cache = None

    def _after_load(self):
        self._avg_cache = None
        if self.resolved_step == "pairwise":
            self._check_atoms(self.blocks.label_offsets)

    def _run(self, order):
        calls = np.zeros(1, dtype=np.int64)
        k = self.blocks.kernel
        if self.resolved_step == "fw":
            corner = np.zeros_like(self.w)
            kern.classic_bcfw_pass(
                k,
                order,
                self.C,
                self.w,
                self.R,
                self.averaging,
                self.block_weights,
                self.block_losses,
                corner,
                self.scalars,
                self.block_gaps,
                self._slack,
                self.search_code,
                calls,
            )
            self.blocks.raise_status()
            return int(calls[0])
        self.pairwise_pass(
            self.blocks,
            order,
            self.C,
            self.w,
            self.R,
            self.averaging,
            self.scalars,
            self.block_gaps,
            self._slack,
            self.search_code,
            calls,
            atom_steps=self.atom_steps,
        )
        return int(calls[0])


class BlockSSG(SubgradientAverage, _BlockPasses):
    """Pegasos stochastic subgradient for every kernel model (no dual; ``tol`` unused).

    Parameters
    ----------
    model : model object
        What is trained: a kernel model (:class:`~dualstruct.models.ChainModel`,
        :class:`~dualstruct.models.MultiLabelModel`, a graph CRF, …) or a
        :class:`~dualstruct.models.UserModel`.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    max_iter, tol, check_every, averaging, random_state, verbose : see PassSolver
        As :class:`~dualstruct.solvers.base.PassSolver`.
    callback, validation, out, rescaling, slack_search, primal_sample : see PassSolver
        As :class:`~dualstruct.solvers.base.PassSolver`.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import SSG
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> solver = SSG(ChainModel(3, 12), C=0.1, max_iter=20, random_state=0).fit(
    ...     pack_sequences(X, y))
    >>> solver.history.last_checked().primal > 0    # SSG reports the exact primal, no dual
    True
    """

    name = "ssg"

    def _init_state(self):
        self._init_blocks()
        self.v = self.kernel_model_.init_weights()
        self.R = np.zeros_like(self.v)
        self.scalars = np.array([0.0, self.C * self.blocks.n_blocks])  # m, C n

    state_arrays = ("v", "R", "scalars")

    def _run(self, order):
        calls = np.zeros(1, dtype=np.int64)
        kern.ssg_pass(
            self.blocks.kernel,
            order,
            self.v,
            self.R,
            self.scalars,
            self.averaging,
            self._slack,
            self.search_code,
            calls,
        )
        self.blocks.raise_status()
        return int(calls[0])
