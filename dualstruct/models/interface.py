"""The model-kernel interface (numba): the generic functions a kernel model registers
implementations of with :func:`implements`, and the defaults of the optional ones. The
compiled code written over it (:mod:`dualstruct.models.loops`, the block solvers) calls
these names; numba dispatches on the kernel's class. :mod:`dualstruct.models.base` documents
the interface and re-exports every name here.
"""

from __future__ import annotations

import inspect

import numpy as np
from numba import njit, types
from numba.extending import overload

from .._numba_cache import register_implementation


# -- the generic functions of the kernel interface (numba dispatches on the kernel's class) ----
def workspace(k):
    """Scratch arrays of kernel ``k`` for one block."""
    raise NotImplementedError


def prepare(k, i, w, ws):
    """Precompute what scoring block ``i`` at ``w`` needs, into ``ws``."""
    raise NotImplementedError


def score(k, i, w, ws, y):
    """``⟨w, φ(x_i, y)⟩``."""
    raise NotImplementedError


def loss(k, i, y):
    """``δ(ȳ_i, y)``."""
    raise NotImplementedError


def oracle(k, i, w, ws, loss_scale, y):
    """Loss-augmented maximizer of block ``i`` into ``y``; returns an upper bound on the
    maximum (y's value when exact)."""
    raise NotImplementedError


def oracle_value(k, i, w, ws, y):
    """``loss_scale·δ(ȳ_i, y) + ⟨w, φ(x_i, y)⟩`` with the last oracle call's loss scale."""
    raise NotImplementedError


def decode(k, i, w, ws, y):
    """Highest-scoring labelling of block ``i`` into ``y``; returns its score."""
    raise NotImplementedError


def add_difference(k, i, ya, yb, c, w):
    """``w += c (φ(x_i, ya) − φ(x_i, yb))``."""
    raise NotImplementedError


def difference_sq_norm(k, i, ws, ya, yb):
    """``‖φ(x_i, ya) − φ(x_i, yb)‖²``."""
    raise NotImplementedError


def status(k):
    """0, or the error code a callback left (Python models)."""
    raise NotImplementedError


def slack_oracle(k, i, w, ws, scale, search, seed, y):
    """Slack-rescaled maximizer of block ``i`` into ``y``; returns ``(bound, calls)``."""
    raise NotImplementedError


def add_oracle_difference(k, i, ws, y, c, w):
    """``w += c (φ(x_i, ȳ_i) − φ(x_i, μ̂))`` for the last oracle's point μ̂."""
    raise NotImplementedError


def oracle_loss(k, i, ws, y):
    """``δ(ȳ_i, μ̂)`` for the last oracle's point μ̂."""
    raise NotImplementedError


KERNEL_FUNCTIONS = (
    workspace,
    prepare,
    score,
    loss,
    oracle,
    oracle_value,
    decode,
    add_difference,
    difference_sq_norm,
    status,
    slack_oracle,
    add_oracle_difference,
    oracle_loss,
)

#: generic function -> the kernel classes that registered it (a default serves the others);
#: the factor interface of GDMM (:mod:`dualstruct.models.factors`) adds its functions
_REGISTERED: dict = {f: set() for f in KERNEL_FUNCTIONS}


def add_generic_functions(functions):
    """Let :func:`implements` register implementations of ``functions``: the generic
    functions of another interface over the same kernels."""
    for f in functions:
        _REGISTERED.setdefault(f, set())


#: numba options of a function compiled without reference counting: each call of a compiled
#: function that takes a kernel otherwise increments and decrements the count of every array
#: the kernel holds (atomically), which costs more than a small factor function's work; such
#: a function can read and write arrays but not create them
NO_REFCOUNT = {"_nrt": False}


def implements(generic, kernel_class, jit_options=None):
    """Register ``impl`` as ``generic``'s numba implementation for kernels of
    ``kernel_class`` (a ``NamedTuple``); use as a decorator on a plain Python function with
    the generic function's arguments. The implementation is compiled as a function of its
    own that the solvers call (numba's ``inline="always"`` for overloads gave wrong results
    with the chain kernel, numba 0.68), with ``jit_options`` (e.g. :data:`NO_REFCOUNT`)."""
    if generic not in _REGISTERED:
        raise ValueError(f"{generic!r} is not a function of the kernel interface")

    def register(impl):
        def typer(*args):
            k = args[0]
            if isinstance(k, types.BaseNamedTuple) and k.instance_class is kernel_class:
                return impl
            return None

        typer.__signature__ = inspect.signature(generic)  # numba matches the names
        overload(generic, jit_options=dict(jit_options or {}))(typer)
        register_implementation(kernel_class, impl)  # the solvers' cache key
        _REGISTERED[generic].add(kernel_class)
        return impl

    return register


def _register_default(generic, impl, jit_options=None):
    """``impl`` serves every kernel class that did not register ``generic`` itself."""

    def typer(*args):
        k = args[0]
        if isinstance(k, types.BaseNamedTuple) and k.instance_class not in _REGISTERED[generic]:
            return impl
        return None

    typer.__signature__ = inspect.signature(generic)
    overload(generic, jit_options=dict(jit_options or {}))(typer)


def _no_slack_oracle(k, i, w, ws, scale, search, seed, y):
    y[:] = k.labels[k.label_offsets[i] : k.label_offsets[i + 1]]
    return np.nan, 0  # never called: the solvers ask check_slack() first


def _labelling_difference(k, i, ws, y, c, w):
    gold = k.labels[k.label_offsets[i] : k.label_offsets[i + 1]]
    add_difference(k, i, gold, y, c, w)


def _labelling_loss(k, i, ws, y):
    return loss(k, i, y)


_register_default(slack_oracle, _no_slack_oracle)
_register_default(add_oracle_difference, _labelling_difference)
_register_default(oracle_loss, _labelling_loss)


@njit(cache=True, inline="always")
def weighted_hamming(gold, loss_weights, y):
    """``Σ_t loss_weights[ȳ_t] [y_t ≠ ȳ_t]``: the loss of the chain and graph kernels."""
    total = 0.0
    for t in range(y.shape[0]):
        if y[t] != gold[t]:
            total += loss_weights[gold[t]]
    return total
