"""
Text chunking (CoNLL-2000)
==========================

A chunker marks the noun, verb and prepositional phrases of a sentence. The
:class:`~dualstruct.tagger.SequenceTagger` turns the words and part-of-speech tags into
sparse token features (word identity, affixes, shape, a window of neighbours and their
conjunctions) and trains a chain over IOBES chunk tags. To stay within a minute this
example trains on the first 2,000 training sentences; the full set reaches F1 94.1
(``BENCHMARKS.md``).
"""

import matplotlib.pyplot as plt

from dualstruct import StructuredSVM
from dualstruct.datasets.conll import fetch_conll2000, split_column
from dualstruct.features import TokenFeatures
from dualstruct.metrics import chunk_scores
from dualstruct.tagger import SequenceTagger

X_train, y_train = split_column(fetch_conll2000("train"), 2)  # tokens (word, POS), chunks
X_test, y_test = split_column(fetch_conll2000("test"), 2)
X_train, y_train = X_train[:2000], y_train[:2000]

tagger = SequenceTagger(
    TokenFeatures(),
    StructuredSVM(C=0.1, fit_intercept=False, tol=0.02, check_every=5, max_iter=60, random_state=0),
    tag_scheme="iobes",
)
tagger.fit(X_train, y_train)
scores = chunk_scores(y_test, tagger.predict(X_test))
print(
    f"test chunk F1 {scores['overall']['f1']:.4f} "
    f"({tagger.svm_.n_iter_} passes, {tagger.features_.n_features_:,} features)"
)

# %%
# F1 per chunk type on the test set.
types = scores["types"]
kinds = sorted((k for k in types if types[k]["support"] >= 10), key=lambda k: -types[k]["support"])
fig, ax = plt.subplots(figsize=(6, 3), constrained_layout=True)
ax.bar(kinds, [types[k]["f1"] for k in kinds])
ax.set_ylabel("F1")
ax.set_ylim(0, 1)
ax.set_title("CoNLL-2000 chunking, 2,000 training sentences")
plt.show()

# %%
# The strongest features of two chunk tags.
for tag in ("B-NP", "B-VP"):
    print(tag, [name for name, _ in tagger.top_features(5)[tag]])
