"""Brute-force references: enumerate every labelling of a tiny chain."""

import itertools

import numpy as np


def all_labellings(T, K):
    return (np.array(y) for y in itertools.product(range(K), repeat=T))


def brute_scores(model, w, x, gold=None):
    """(labelling, score[, loss-augmented score]) for every labelling, via joint_feature."""
    T = x.shape[0]
    out = []
    for y in all_labellings(T, model.n_labels):
        s = float(w @ model.joint_feature(x, y))
        aug = s + model.loss(gold, y) if gold is not None else None
        out.append((y, s, aug))
    return out


def brute_hinge(model, w, x, gold):
    rows = brute_scores(model, w, x, gold)
    gold_score = float(w @ model.joint_feature(x, gold))
    return max(r[2] for r in rows) - gold_score


def brute_primal(model, w, X, Y, C):
    return 0.5 * float(w @ w) + C * sum(brute_hinge(model, w, x, y) for x, y in zip(X, Y))
