"""The multi-class model's factors for GDMM: one node per example (its K classes), no edges.

θ(a) = ⟨W[:, a], x⟩, φ(a) = x ⊗ e_a, δ(a) = loss_weights[ȳ]·[a ≠ ȳ], and
‖φ(a) − φ(b)‖² = 2‖x‖² for a ≠ b (:mod:`dualstruct.models.factors`).
"""

from __future__ import annotations

from . import factors
from .multiclass import MultiClassModel
from .multiclass.kernels import MultiClassKernel


@factors.implements(factors.factor_counts, MultiClassKernel)
def _factor_counts(k, i):
    return 1, 0


@factors.implements(factors.node_info, MultiClassKernel)
def _node_info(k, i, j):
    return k.n_classes, k.labels[i]


@factors.implements(factors.node_score, MultiClassKernel)
def _node_score(k, i, w, j, a):
    K = k.n_classes
    s = 0.0
    for p in range(k.indptr[i], k.indptr[i + 1]):
        s += k.values[p] * w[k.indices[p] * K + a]
    return s


@factors.implements(factors.node_loss, MultiClassKernel)
def _node_loss(k, i, j, a):
    gold = k.labels[i]
    return 0.0 if a == gold else k.loss_weights[gold]


@factors.implements(factors.add_node, MultiClassKernel)
def _add_node(k, i, j, a, c, w):
    K = k.n_classes
    for p in range(k.indptr[i], k.indptr[i + 1]):
        w[k.indices[p] * K + a] += c * k.values[p]


@factors.implements(factors.node_sq_distance, MultiClassKernel)
def _node_sq_distance(k, i, j, a, b):
    return 0.0 if a == b else 2.0 * k.sq_norms[i]


factors.register_model(MultiClassModel, MultiClassKernel)
