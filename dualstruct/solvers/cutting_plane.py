"""The 1-slack cutting-plane method (Joachims, Finley, Yu 2009), C-form.

    min_w ½‖w‖² + C ξ   s.t.  Σ_i [δ_i(y_i) − <w, ψ_i(y_i)>] ≤ ξ   for every (y_1 … y_n)

has the same optimum as the n-slack primal ``½‖w‖² + C Σ_i H_i(w)``. Each iteration calls the
loss-augmented oracle once per example at the current ``w`` — which also gives the exact
primal ``P(w)`` — and adds the aggregated constraint ``(ψ_c, δ_c) = (Σ_i ψ_i(ŷ_i), Σ_i δ_i(ŷ_i))``
when it is violated by more than ``epsilon`` beyond the working set's slack. The dual over the
working set,

    max_α Σ_c α_c δ_c − ½ ‖Σ_c α_c ψ_c‖²,   α ≥ 0,  Σ_c α_c ≤ C,    w = Σ_c α_c ψ_c,

is re-solved warm-started (:func:`simplex_qp`); its value is a lower bound on the optimum
(a relaxation of the 1-slack problem), so ``P(w) − D`` is a duality gap as for BCFW.
Constraints whose multiplier stayed zero for ``prune_after`` iterations are dropped.
The working set stores each ψ_c densely, so memory is (constraints × parameters).

One aggregated constraint per oracle pass ties all examples to one multiplier, so the plain
method needs many passes (and, with slack rescaling, whose constraints are loss-weighted, far
more). Two remedies:

* a cache of each example's last ``cache_size`` maximizers (SVM^struct's constraint cache):
  after the QP, up to ``inner_cuts`` further constraints are built from it at the new ``w``
  (each example's best cached labelling, or its gold one), without oracle calls;
* the oracle is called at ``w_best + query_step (w − w_best)`` between the best weights so
  far and the QP's solution (an in-out stabilization), not at the QP's solution itself.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from ..data.blocks import labelling_bound
from ..models.interface import add_difference, loss, prepare, score, status, workspace
from ..models.loops import aggregate_constraint_all
from .base import PassSolver, kernel_model
from .block import STATE_ROUNDING, KernelBlocks, check_agrees
from .history import Record
from .objective import (
    ORACLE_ROUNDING,
    CertificateError,
    block_oracle_fault,
    check_hinges,
    duality_gap,
    oracle_name,
    oracle_sample,
)


class CuttingPlane(KernelBlocks, PassSolver):
    """1-slack cutting plane (Joachims, Finley and Yu 2009) for every model; one "pass" is one
    iteration (n oracle calls, one aggregated constraint, one working-set QP). Its oracle calls
    are split into kernel calls as a pass's are: a Ctrl-C or SIGTERM that stops a long one
    part-way adds the constraint of the examples reached (a valid one: the others at their
    gold labellings) and re-solves the QP.

    Parameters
    ----------
    model : model object
        What is trained: a kernel model (:class:`~dualstruct.models.ChainModel`,
        :class:`~dualstruct.models.MultiLabelModel`, a graph CRF, …) or a
        :class:`~dualstruct.models.UserModel`.
    C : float, default 1.0
        Regularization constant of ``½‖w‖² + C Σ_i H_i(w)``.
    epsilon : float, optional
        Minimum violation of a new constraint, in C-form units (default 1e-6 × n).
    prune_after : int, default 50
        Iterations after which an inactive constraint leaves the working set.
    max_constraints : int, default 1000
        Largest working set.
    qp_tol : float, default 1e-10
        Relative tolerance of the working-set QP.
    cache_size : int, default 10
        Maximizers kept per example (the last oracle passes'), from which constraints are
        built without oracle calls.
    inner_cuts : int, default 5
        Constraints built from the cache (and QPs solved) after each oracle pass, while one
        is violated; 0 gives the plain 1-slack method.
    query_step : float, default 0.5
        The oracle is called at ``w_best + query_step (w − w_best)``, in (0, 1]; 1 calls it
        at the QP's solution ``w``.
    **kwargs
        The parameters of :class:`~dualstruct.solvers.base.PassSolver`: ``max_iter``, ``tol``,
        ``check_every``, ``averaging``, ``random_state``, ``verbose``, ``callback``,
        ``validation``, ``rescaling``, ``slack_search``, ``primal_sample``.

    Examples
    --------
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.datasets import make_chain
    >>> from dualstruct.models import ChainModel
    >>> from dualstruct.solvers import CuttingPlane
    >>> X, y = make_chain(30, 5, 3, 12, random_state=0)
    >>> solver = CuttingPlane(ChainModel(3, 12), C=0.1, max_iter=500, tol=1e-3).fit(
    ...     pack_sequences(X, y))
    >>> solver.history.stop_reason
    'tol'
    """

    name = "cutting_plane"

    def __init__(
        self,
        model,
        C=1.0,
        *,
        epsilon=None,
        prune_after=50,
        max_constraints=1000,
        qp_tol=1e-10,
        cache_size=10,
        inner_cuts=5,
        query_step=0.5,
        **kwargs,
    ):
        kwargs["averaging"] = False
        super().__init__(model, C, **kwargs)
        if epsilon is not None and not float(epsilon) >= 0:
            raise ValueError(f"epsilon must be >= 0, got {epsilon}")
        if int(prune_after) < 0:
            raise ValueError(f"prune_after must be >= 0, got {prune_after}")
        if int(max_constraints) < 1:
            raise ValueError(f"max_constraints must be >= 1, got {max_constraints}")
        if not float(qp_tol) > 0:
            raise ValueError(f"qp_tol must be positive, got {qp_tol}")
        if int(cache_size) < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        if int(inner_cuts) < 0:
            raise ValueError(f"inner_cuts must be >= 0, got {inner_cuts}")
        if not 0 < float(query_step) <= 1:
            raise ValueError(f"query_step must lie in (0, 1], got {query_step}")
        self.cache_size = int(cache_size)
        self.inner_cuts = int(inner_cuts)
        self.query_step = float(query_step)
        self.epsilon = epsilon
        self.prune_after = int(prune_after)
        self.max_constraints = int(max_constraints)
        self.qp_tol = float(qp_tol)

    def memory_parts(self, data):
        parts = super().memory_parts(data)
        size = kernel_model(self.model).size
        parts["working set (max_constraints × weights)"] = 8 * size * (self.max_constraints + 1)
        labels = getattr(data, "labels", None)
        count = len(labels) if labels is not None else getattr(getattr(data, "Y", None), "size", 0)
        if count:
            parts["maximizer cache (cache_size × labels)"] = 4 * self.cache_size * int(count)
        return parts

    def _init_state(self):
        model, data = self.model, self.data
        kmodel = kernel_model(model)
        size = kmodel.size
        bytes_needed = 8 * size * (self.max_constraints + 1)
        if bytes_needed > 4 * 2**30:
            raise MemoryError(
                f"the cutting-plane working set would need up to {bytes_needed / 2**30:.1f} GiB "
                f"({self.max_constraints} constraints × {size} parameters); lower "
                "max_constraints or use solver='bcfw'"
            )
        self._make_blocks(kmodel)
        self.w = kmodel.init_weights()
        self.psi = np.zeros((0, size))  # working set directions ψ_c
        self.delta = np.zeros(0)  # their losses δ_c
        self.alpha = np.zeros(0)
        self.idle = np.zeros(0, dtype=np.int64)  # iterations with α_c = 0
        self.gram = np.zeros((0, 0))
        self.best_w = self.w.copy()
        self.best_primal = math.inf
        self.best_dual = 0.0
        self.eps = 1e-6 * data.n_sequences if self.epsilon is None else float(self.epsilon)
        # every slot starts at the gold labellings (loss 0: they add nothing to a constraint)
        self.cache = np.tile(self.blocks.kernel.labels, (self.cache_size, 1))
        self.cache_slot = 0

    state_arrays = ("w", "psi", "delta", "alpha", "idle", "gram", "best_w", "cache")
    optional_state_arrays = ("cache",)
    state_scalars = ("best_primal", "best_dual", "eps", "cache_slot")
    growable_arrays = ("psi", "delta", "alpha", "idle", "gram")

    carries_dual = True

    def _dual_terms(self):
        return float(self.alpha @ self.delta), float(self.w @ self.w)

    def _scale_dual(self, s, t, ratio):
        """α and w = Σ α_c ψ_c scale by s (the rest of C goes to the slack of Σ α <= C);
        the working set's constraints do not depend on C. The best primal and dual so far
        belong to the old C and are forgotten."""
        self.alpha *= s
        self.w *= s
        self.best_w = self.w.copy()
        self.best_primal, self.best_dual = math.inf, 0.0

    def _after_load(self):
        m = len(self.delta)
        if (
            self.psi.shape != (m, self.w.size)
            or self.alpha.shape != (m,)
            or self.idle.shape != (m,)
            or self.gram.shape != (m, m)
        ):
            shapes = {k: getattr(self, k).shape for k in ("psi", "delta", "alpha", "idle", "gram")}
            raise ValueError(
                f"saved cutting-plane working set is inconsistent: {m} constraints of "
                f"{self.w.size} weights, array shapes {shapes}"
            )
        if m and (self.alpha.min() < 0 or self.idle.min() < 0):
            raise ValueError("saved cutting-plane working set: 'alpha' or 'idle' is negative")
        if not np.array_equal(self.gram, self.gram.T):
            raise ValueError("saved cutting-plane working set: 'gram' is not symmetric")
        # the kernels index with the cached labellings unchecked
        kernel = self.blocks.kernel
        if self.cache.shape != (self.cache_size, len(kernel.labels)):
            raise ValueError(
                f"saved solver array 'cache' has shape {self.cache.shape}, expected "
                f"{(self.cache_size, len(kernel.labels))} (cache_size × labelling entries)"
            )
        bound = labelling_bound(kernel)
        if bound is not None and self.cache.size:
            bad = (self.cache < 0) | (self.cache >= bound)
            if bad.any():
                raise ValueError(
                    f"saved solver array 'cache' holds the label {self.cache[bad][0]}, "
                    f"outside 0 … {bound - 1}"
                )
        slot = self.cache_slot
        if isinstance(slot, (bool, np.bool_)) or not 0 <= slot < self.cache_size:
            raise ValueError(
                f"the saved solver field 'cache_slot' must lie in 0 … {self.cache_size - 1}, "
                f"got {slot!r}"
            )
        self.cache_slot = int(slot)

    def load_state(self, data, meta, arrays):
        """Restore a :meth:`state_dict` (:meth:`PassSolver.load_state
        <dualstruct.solvers.base.PassSolver.load_state>` checks shapes, dtypes and finite
        values). Recomputed once and checked to a relative 1e-6: ``w = α Ψ`` from ``alpha``
        and ``psi``, ``Σ α <= C``, ``gram = Ψ Ψᵀ`` (along a random direction), and the
        primal of ``best_w`` (one oracle pass), which must equal ``best_primal``; no
        constraint of the working set may exceed the hinge sum at ``best_w``, and
        ``best_dual`` may not exceed ``best_primal``.

        Not verifiable beyond that, and trusted as saved: that each constraint
        ``(psi[c], delta[c])`` is an aggregate of labellings (checked at ``best_w`` here and
        at every iterate in training), and ``best_dual`` below ``best_primal`` (the best dual
        of earlier working sets: above the current one is legitimate)."""
        super().load_state(data, meta, arrays)
        try:
            self._check_restored()
        except BaseException:
            self.data = None
            raise

    def _check_restored(self):
        C = self.C
        check_agrees("'w' and 'alpha', 'psi'", self.w, self.alpha @ self.psi, C)
        total = float(self.alpha.sum())
        if total > C * (1.0 + STATE_ROUNDING):
            raise ValueError(
                f"saved solver array 'alpha' sums to {total!r}, above C = {C!r} (the "
                "1-slack dual has Σ α <= C)"
            )
        if not self.eps >= 0:
            raise ValueError(f"the saved solver field 'eps' must be >= 0, got {self.eps!r}")
        if len(self.delta):
            r = np.random.default_rng(0).standard_normal(len(self.delta))
            check_agrees("'gram' and 'psi'", self.gram @ r, self.psi @ (self.psi.T @ r), 0.0)
        if math.isinf(self.best_primal):
            if self.best_primal < 0:
                raise ValueError("the saved solver field 'best_primal' is -inf")
            return  # no whole iteration at this C yet: no primal is claimed
        primal = self._primal(self.best_w)
        check_agrees("'best_primal' and 'best_w'", self.best_primal, primal, 0.0)
        if len(self.delta):
            w = self.best_w
            hinge_sum = (primal - 0.5 * float(w @ w)) / C
            values = self.delta - self.psi @ w
            c = int(np.argmax(values))
            scale = 1.0 + abs(hinge_sum) + abs(float(self.delta[c]))
            if float(values[c]) > hinge_sum + STATE_ROUNDING * scale:
                raise ValueError(
                    f"saved solver arrays 'psi' and 'delta': constraint {c} has the value "
                    f"{float(values[c]):.6g} at 'best_w', above the hinge sum {hinge_sum:.6g} "
                    "there (an aggregate of labellings never exceeds it)"
                )
        if self.best_dual > primal + STATE_ROUNDING * max(abs(primal), 1.0):
            raise ValueError(
                f"the saved solver field 'best_dual' ({self.best_dual!r}) exceeds the primal "
                f"{primal!r} of 'best_w': no dual value is above a primal"
            )

    def _one_pass(self, order, chunks):
        return self._iterate(chunks)

    def _aggregate(self, w, chunks):
        """The oracle on the examples at ``w`` in kernel calls (:meth:`_pass_parts`, in the
        examples' own order and summed in place, so the result does not depend on how the
        calls are cut): the per-example hinge, ``(ψ_c, δ_c)`` and how many examples it
        covers, fewer than all when a pending Ctrl-C or SIGTERM stopped it; the maximizers
        enter the cache (the gold labellings of the examples not reached)."""
        kmodel, blocks = self.kernel_model_, self.blocks
        slack = self.rescaling != "margin"
        if slack:
            kmodel.check_slack()
        k = blocks.kernel
        n = blocks.n_blocks
        w = np.ascontiguousarray(w, dtype=np.float64)
        hinge = np.zeros(n)
        out = k.labels.copy()
        psi = kmodel.init_weights()
        total = np.zeros(1)
        done = 0
        for part in self._pass_parts(np.arange(n, dtype=np.int64), chunks):
            aggregate_constraint_all(k, w, slack, part, hinge, out, psi, total)
            blocks.raise_status()
            done += len(part)
        self.cache[self.cache_slot] = out
        self.cache_slot = (self.cache_slot + 1) % self.cache_size
        return hinge[:done], psi, float(total[0]), done

    def _query_point(self):
        """Where the oracle is called: ``w_best + query_step (w − w_best)``."""
        if self.query_step == 1.0 or math.isinf(self.best_primal):
            return self.w
        return self.best_w + self.query_step * (self.w - self.best_w)

    def _cache_cuts(self):
        """Up to ``inner_cuts`` constraints from the cached maximizers, each at the QP's new
        ``w`` and followed by the QP, while one is violated by more than ``epsilon`` and a
        ``CACHE_VIOLATION`` share of its value beyond the working set's slack. Returns how
        many entered."""
        kmodel, k = self.kernel_model_, self.blocks.kernel
        slack = self.rescaling != "margin"
        for added in range(self.inner_cuts):
            psi = kmodel.init_weights()
            total = np.zeros(1)
            w = np.ascontiguousarray(self.w, dtype=np.float64)
            value = cache_constraint(k, w, slack, self.cache, True, psi, total, self._values())
            self.blocks.raise_status()
            xi = max(0.0, float(np.max(self.delta - self.psi @ w))) if len(self.delta) else 0.0
            if value - xi <= max(self.eps / self.C, CACHE_VIOLATION * abs(value)):
                return added
            self._add_constraint(psi, float(total[0]))
            self._solve()
        return self.inner_cuts

    def _iterate(self, chunks=1):
        """One iteration. Stopped part-way by a Ctrl-C or SIGTERM (:meth:`_pass_parts`), it
        adds the constraint of the examples it reached (the others at their gold labellings,
        δ = 0 and ψ = 0: a constraint of the 1-slack problem all the same), so the working
        set, ``w`` and the dual stay consistent; only the primal of that ``w`` is unknown."""
        w, best = self.w, self.best_primal
        q = self._query_point()
        done, added = self._cut_at(q, chunks)
        whole = done == self.blocks.n_blocks
        if whole and not added and q is not self.w:
            # the working set is exact at q, which certifies nothing about w: call it at w
            more, added = self._cut_at(self.w, chunks)
            done += more
            whole = more == self.blocks.n_blocks
        self._solve()
        cuts = self._cache_cuts() if whole else 0
        # nothing violated by more than epsilon at q and at w, and neither w nor the best
        # weights moved: the next iteration queries the same point and repeats this one
        self._resolution = (
            whole
            and not added
            and not cuts
            and self.best_primal == best
            and np.array_equal(self.w, w)
        )
        return done

    _resolution = False

    def _at_resolution(self):
        return self._resolution

    def _cut_at(self, q, chunks):
        """The oracle at ``q`` gives the exact primal ``P(q)`` and the aggregated constraint at
        once (with slack rescaling the exact slack oracle, whatever the search of the BCFW
        steps); the constraint enters the working set when violated. Returns the examples
        reached and whether it entered."""
        C = self.C
        hinge, psi, delta, done = self._aggregate(q, chunks)
        whole = done == self.blocks.n_blocks
        check_hinges(self.model, hinge, self.rescaling)
        # ξ of the working set at q; the new constraint's violation is Σ_i H_i(q)
        xi = 0.0
        if len(self.delta):
            values = self.delta - self.psi @ q
            xi = max(0.0, float(np.max(values)))
        if whole:
            self._check_cache(q, hinge)  # names the example at fault, so first
            if len(self.delta):
                self._check_oracle(hinge, values)
            primal = 0.5 * float(q @ q) + C * float(hinge.sum())
            if primal < self.best_primal:
                self.best_primal, self.best_w = primal, np.array(q, dtype=np.float64)
        if float(hinge.sum()) > xi + self.eps / C:
            self._add_constraint(psi, delta)
            return done, True
        return done, False

    def _check_oracles(self):
        """After an iteration: the oracle on a few examples (its value against the gold
        labelling's, whose loss must be 0)."""
        sample = oracle_sample(self.blocks.n_blocks, self.passes)
        slack = self.rescaling == "slack"
        fault = block_oracle_fault(self.model, self.blocks, self.w, sample, slack)
        if fault is not None:
            raise CertificateError(fault)

    def _check_oracle(self, hinge, values):
        """Σ_i H_i(w) is the largest value of any aggregated constraint at w: never below
        the working set's, made of labellings the oracle returned earlier."""
        c = int(np.argmax(values))
        total = float(hinge.sum())
        scale = (
            1.0
            + float(np.abs(hinge).sum())
            + abs(float(self.delta[c]))
            + abs(float(values[c] - self.delta[c]))
        )
        if total < float(values[c]) - ORACLE_ROUNDING * scale:
            raise CertificateError(
                f"{oracle_name(self.model)} at {self.name} iteration {self.passes + 1}: the "
                f"maxima over the examples sum to {total:.6g}, below {float(values[c]):.6g}, "
                "the value of labellings it returned earlier (a maximum is never lower)"
            )

    def _values(self):
        """Scratch for :func:`cache_constraint`'s values per example, allocated once."""
        n = self.blocks.n_blocks
        if self.__dict__.get("_cache_values") is None or len(self._cache_values) != n:
            self._cache_values = np.empty((n, 2))
        return self._cache_values

    def _check_cache(self, q, hinge):
        """Each example's maximum at ``q`` (``hinge``, above the gold labelling's value) is
        never below the values of its cached labellings there, which the oracle returned
        earlier: an oracle that returns less (an approximate one) gives no certified gap, and
        the first example where it does is named. The cached constraint is only evaluated,
        not built."""
        q = np.ascontiguousarray(q, dtype=np.float64)
        slack = self.rescaling != "margin"
        values = self._values()
        k = self.blocks.kernel
        cache_constraint(k, q, slack, self.cache, False, NO_WEIGHTS, np.zeros(1), values)
        self.blocks.raise_status()
        cached = values[:, 0]
        tol = ORACLE_ROUNDING * (1.0 + np.abs(hinge) + values[:, 1])
        bad = np.flatnonzero(hinge < cached - tol)
        if len(bad):
            i = int(bad[0])
            raise CertificateError(
                f"{oracle_name(self.model)} on example {i} at {self.name} iteration "
                f"{self.passes + 1}: its maximum is {hinge[i]:.6g} above the gold labelling's "
                f"value, below the {cached[i]:.6g} of a labelling it returned earlier for "
                "that example (a maximum is never lower: an approximate oracle gives no "
                "certified gap)"
            )

    def _add_constraint(self, psi, delta):
        if len(self.delta) >= self.max_constraints:  # drop the longest-idle constraint
            drop = int(np.argmax(self.idle))
            self._remove(np.array([drop]))
        row = self.psi @ psi
        m = len(self.delta) + 1
        gram = np.zeros((m, m))
        gram[: m - 1, : m - 1] = self.gram
        gram[m - 1, : m - 1] = gram[: m - 1, m - 1] = row
        gram[m - 1, m - 1] = psi @ psi
        # the working set changes in one C-level update, so a Ctrl-C cannot leave it torn
        self.__dict__.update(
            psi=np.vstack([self.psi, psi]),
            delta=np.append(self.delta, delta),
            alpha=np.append(self.alpha, 0.0),
            idle=np.append(self.idle, 0),
            gram=gram,
        )

    def _remove(self, drop):
        keep = np.setdiff1d(np.arange(len(self.delta)), drop)
        self.__dict__.update(
            psi=self.psi[keep],
            delta=self.delta[keep],
            alpha=self.alpha[keep],
            idle=self.idle[keep],
            gram=self.gram[np.ix_(keep, keep)],
        )

    def _solve(self):
        m = len(self.delta)
        if m == 0:
            return
        # coordinate 0 is the zero constraint that absorbs the slack of Σ α ≤ C
        G = np.zeros((m + 1, m + 1))
        G[1:, 1:] = self.gram
        b = np.concatenate([[0.0], self.delta])
        alpha = np.concatenate([[max(0.0, self.C - self.alpha.sum())], self.alpha])
        scale = max(1.0, float(np.max(np.abs(b))), float(np.max(np.abs(G))) * self.C)
        simplex_qp(G, b, alpha, self.C, self.qp_tol * scale, 100_000)
        self.alpha = alpha[1:]
        self.w = self.alpha @ self.psi
        dual = float(self.alpha @ self.delta) - 0.5 * float(self.w @ self.w)
        self.best_dual = max(self.best_dual, dual)
        self.idle = np.where(self.alpha > 0, 0, self.idle + 1)
        stale = np.flatnonzero(self.idle > self.prune_after)
        if len(stale):
            self._remove(stale)

    # -- what the shared loop reports ---------------------------------------------------------
    def _record(self, check, final=False):
        rec = Record(passes=self.passes, time=self.train_time, oracle_calls=self.oracle_calls)
        # the primal of the best weights seen comes free with the oracle calls
        rec.primal, rec.dual = self.best_primal, self.best_dual
        rec.gap, rec.relative_gap = duality_gap(rec.primal, rec.dual)
        if self.validation is not None and (check or final):
            t0 = time.perf_counter()
            rec.validation_score = float(self.validation(self.best_w))
            self.eval_time += time.perf_counter() - t0
        if self.partial_pass is not None:  # a Ctrl-C or SIGTERM stopped the iteration part-way
            rec.extra["partial_pass"] = self.partial_pass
        rec.eval_time = self.eval_time
        self.history.append(rec)
        return rec

    def candidates(self):
        return [self.best_w]

    def current_dual(self):
        return self.best_dual

    def dual(self):
        return self.best_dual


#: a constraint from the cache enters the working set when it is violated by this share of
#: its value (smaller violations cost a QP each for little)
CACHE_VIOLATION = 1e-3
#: the ``psi`` of :func:`cache_constraint` when the constraint is not built
NO_WEIGHTS = np.zeros(0)


@njit(cache=True)
def cache_constraint(k, w, slack, cache, build, psi, total, values):
    """The aggregated constraint of the best cached labelling of every example at ``w``
    (``cache``: labellings laid out as ``k.labels``, one row a slot), the gold labelling when
    none has a positive value. With ``build``: ``psi += Σ_i g_i (φ(x_i, ȳ_i) − φ(x_i, y_i))``,
    ``total[0] += Σ_i δ_i`` (``g_i = δ_i`` for slack, else 1); without, ``psi`` is not
    touched. ``values[i]``: example i's margin ``δ + s(y) − s(ȳ)`` or slack
    ``δ (1 + s(y) − s(ȳ))`` value (0 for the gold labelling) and the size of the terms it sums
    (its rounding scale). Returns the constraint's value, their sum; stops at a Python
    model's failed callback."""
    ws = workspace(k)
    offs = k.label_offsets
    value = 0.0
    for i in range(offs.shape[0] - 1):
        gold = k.labels[offs[i] : offs[i + 1]]
        prepare(k, i, w, ws)
        gold_score = score(k, i, w, ws, gold)
        best, pick, pick_loss, size = 0.0, -1, 0.0, 0.0
        for j in range(cache.shape[0]):
            y = cache[j, offs[i] : offs[i + 1]]
            d = loss(k, i, y)
            if d <= 0.0:
                continue
            s = score(k, i, w, ws, y)
            margin = s - gold_score
            v = d * (1.0 + margin) if slack else d + margin
            if v > best:
                terms = abs(s) + abs(gold_score)
                best, pick, pick_loss = v, j, d
                size = d * (1.0 + terms) if slack else d + terms
        if status(k) != 0:
            break
        values[i, 0] = best
        values[i, 1] = size
        if pick >= 0:
            if build:
                y = cache[pick, offs[i] : offs[i + 1]]
                add_difference(k, i, gold, y, pick_loss if slack else 1.0, psi)
                total[0] += pick_loss
            value += best
    return value


@njit(cache=True)
def simplex_qp(G, b, alpha, total, tol, max_steps):
    """Minimize ½ αᵀGα − bᵀα over {α ≥ 0, Σ α = total} by pairwise coordinate steps with exact
    line search (SMO on the simplex), warm-started from ``alpha`` (updated in place).

    The 1-slack dual ``max Σ α_c δ_c − ½‖Σ α_c ψ_c‖², α ≥ 0, Σ α ≤ C`` is this problem with an
    extra coordinate for the zero constraint (ψ = 0, δ = 0) that takes up the slack of Σ α ≤ C.
    Stops when the largest pairwise gap ``max_{α_j>0} ∇_j − min_i ∇_i`` is below ``tol``.
    Returns the number of steps.
    """
    m = alpha.shape[0]
    grad = G @ alpha - b
    steps = 0
    while steps < max_steps:
        i_best = 0
        for i in range(1, m):
            if grad[i] < grad[i_best]:
                i_best = i
        j_away = -1
        for j in range(m):
            if alpha[j] > 0.0 and (j_away < 0 or grad[j] > grad[j_away]):
                j_away = j
        if j_away < 0 or grad[j_away] - grad[i_best] <= tol or j_away == i_best:
            break
        i, j = i_best, j_away
        curv = G[i, i] + G[j, j] - 2.0 * G[i, j]
        step = alpha[j]
        if curv > 0.0:
            step = min(step, (grad[j] - grad[i]) / curv)
        alpha[i] += step
        alpha[j] -= step
        if alpha[j] < 1e-15 * total:
            alpha[j] = 0.0
        for k in range(m):
            grad[k] += step * (G[k, i] - G[k, j])
        steps += 1
    return steps
