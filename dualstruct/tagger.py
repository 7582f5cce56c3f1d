"""``SequenceTagger``: token features + a chain structural SVM, saved together in one safe file
(:mod:`dualstruct.estimators.tagger`, where it is defined with the other estimators)."""

from .estimators.tagger import SequenceTagger

__all__ = ["SequenceTagger"]
