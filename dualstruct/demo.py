"""The corpus of ``dualstruct demo``: a small part-of-speech corpus generated on the spot.

Made-up words whose endings and neighbours give their tags away (some words have two tags),
written as CoNLL files (word and tag per line), so that the library's main job runs end to
end with no network and no data folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the tags and how a sentence moves between them (row: this tag, column: the next one;
#: "." ends the sentence)
TAGS = ("DET", "ADJ", "NOUN", "VERB", "ADV", "ADP", "PRON", ".")
_TRANSITIONS = np.array(
    [
        # DET  ADJ  NOUN VERB ADV  ADP  PRON  .
        [0.00, 0.35, 0.65, 0.00, 0.00, 0.00, 0.00, 0.00],  # DET
        [0.00, 0.15, 0.85, 0.00, 0.00, 0.00, 0.00, 0.00],  # ADJ
        [0.00, 0.00, 0.05, 0.50, 0.00, 0.25, 0.00, 0.20],  # NOUN
        [0.45, 0.05, 0.00, 0.00, 0.20, 0.15, 0.10, 0.05],  # VERB
        [0.20, 0.00, 0.00, 0.00, 0.00, 0.30, 0.00, 0.50],  # ADV
        [0.70, 0.10, 0.00, 0.00, 0.00, 0.00, 0.20, 0.00],  # ADP
        [0.00, 0.00, 0.00, 0.80, 0.00, 0.10, 0.00, 0.10],  # PRON
    ]
)
_FIRST = np.array([0.55, 0.00, 0.10, 0.00, 0.00, 0.05, 0.30])  # the tag of the first word
#: closed word classes, and the endings of the open ones
_CLOSED = {
    "DET": ("the", "a", "this", "every", "no"),
    "ADP": ("in", "on", "under", "with", "near", "of"),
    "PRON": ("she", "he", "they", "we", "it"),
}
_ENDINGS = {"ADJ": ("ous", "ive", "ful"), "NOUN": ("", "s"), "VERB": ("ed", "s"), "ADV": ("ly",)}


def _stems(rng, n):
    """``n`` distinct pronounceable stems."""
    consonants, vowels = list("bdfgklmnprstvz"), list("aeiou")
    stems = set()
    while len(stems) < n:
        k = int(rng.integers(2, 4))
        stems.add("".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(k)))
    return sorted(stems)


def _lexicon(rng, n_stems=300):
    """Per open tag, its stems; a tenth of the noun stems are verbs as well."""
    stems = _stems(rng, n_stems)
    rng.shuffle(stems)
    quarter = n_stems // 4
    lexicon = {tag: stems[i * quarter : (i + 1) * quarter] for i, tag in enumerate(_ENDINGS)}
    lexicon["VERB"] = lexicon["VERB"] + lexicon["NOUN"][: quarter // 10]
    return lexicon


def _sentences(rng, lexicon, n):
    """``n`` sentences: lists of (word, tag)."""
    out = []
    for _ in range(n):
        tag = int(rng.choice(len(_FIRST), p=_FIRST))
        sentence = []
        while TAGS[tag] != "." and len(sentence) < 25:
            name = TAGS[tag]
            if name in _CLOSED:
                word = str(rng.choice(_CLOSED[name]))
            else:
                word = str(rng.choice(lexicon[name])) + str(rng.choice(_ENDINGS[name]))
            sentence.append((word, name))
            tag = int(rng.choice(len(TAGS), p=_TRANSITIONS[tag]))
        sentence.append((".", "."))
        out.append(sentence)
    return out


def write_corpus(folder, n_train=400, n_test=200, seed=0):
    """Write ``train.txt``, ``dev.txt`` and ``test.txt`` (CoNLL: word and tag per line,
    sentences separated by a blank line) into ``folder``; the test sentences use new words
    (stems never seen in training). Returns the three paths."""
    rng = np.random.default_rng(seed)
    seen, unseen = _lexicon(rng), _lexicon(np.random.default_rng(seed + 1))
    parts = {
        "train.txt": _sentences(rng, seen, n_train),
        "dev.txt": _sentences(rng, seen, n_test),
        "test.txt": _sentences(rng, unseen, n_test),
    }
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, sentences in parts.items():
        text = "\n\n".join("\n".join(f"{w}\t{t}" for w, t in s) for s in sentences)
        (folder / name).write_text(text + "\n", encoding="utf-8")
        paths.append(folder / name)
    return paths


#: a sentence of unseen words that the demo tags with the reloaded model
SENTENCE = ("the", "tizaful", "pukos", "ranoted", "under", "a", "mebe", ".")
