"""
Handwritten words (OCR) with a linear chain
===========================================

Each word of the OCR data set is a sequence of 16 × 8 binary images, one per letter; a
linear chain labels the letters jointly, so the transition weights can correct a letter the
pixels alone get wrong. BCFW trains until its certified duality gap is below 1%; the
training curves show the primal objective falling onto the dual bound.
"""

import matplotlib.pyplot as plt
import numpy as np

import dualstruct
from dualstruct.datasets import fetch_ocr

X, y, folds = fetch_ocr()
train = np.flatnonzero(folds != 0)
test = np.flatnonzero(folds == 0)
X_train, y_train = [X[i] for i in train], [y[i] for i in train]
X_test, y_test = [X[i] for i in test], [y[i] for i in test]

svm = dualstruct.StructuredSVM(C=1.0, tol=0.01, check_every=25, max_iter=600, random_state=0)
svm.fit(X_train, y_train, validation_data=(X_test, y_test))
last = svm.history_.last_checked()
print(
    f"{svm.n_iter_} passes, certified gap {last.relative_gap:.2%}, "
    f"test letter accuracy {svm.score(X_test, y_test):.4f}"
)

# %%
# The training curves: primal and certified dual, their relative gap, and the held-out
# letter accuracy at every check.
axes = dualstruct.plot_history(svm, x="passes", label="BCFW")
axes[0].set_title("OCR, C = 1")
plt.show()

# %%
# Test words from across the test fold, drawn letter by letter with the predicted label
# above each image (red where it is wrong).
shown = np.linspace(0, len(X_test) - 1, 6).astype(int)
predicted = svm.predict([X_test[i] for i in shown])
fig, rows = plt.subplots(6, 1, figsize=(7, 6), constrained_layout=True)
for ax, i, guess in zip(rows, shown, predicted):
    x, truth = X_test[i], y_test[i]
    ax.imshow(np.hstack([letter.reshape(16, 8) for letter in x]), cmap="Greys")
    for t, (a, b) in enumerate(zip(truth, guess)):
        ax.text(8 * t + 3.5, -2, b, ha="center", color="black" if a == b else "red")
    ax.axis("off")
plt.show()
