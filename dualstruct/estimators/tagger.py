"""``SequenceTagger``: token features + a chain structural SVM, saved together in one safe file.

This is what the command line trains: text in, labels out. In Python::

    tagger = SequenceTagger(TokenFeatures(), StructuredSVM(C=0.1), tag_scheme="iobes")
    tagger.fit(sentences, labels)          # sentences: lists of token tuples (word, pos, ...)
    tagger.predict(sentences)
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import NotFittedError

from .. import io
from .._pystruct import refuse_pystruct_keywords
from ..distributed.reading import fit_tagger, is_spark_input
from ..features import TokenFeatures
from ..metrics import chunk_scores, token_accuracy
from ..tags import SCHEMES, is_chunk_tagset, to_bio, to_iobes
from .base import restore_on_error
from .structured import StructuredSVM


class SequenceTagger(BaseEstimator):
    """A tagger: ``features`` (a :class:`TokenFeatures`) feeding ``svm`` (a chain
    :class:`StructuredSVM`).

    Parameters
    ----------
    features : TokenFeatures, optional (default ``TokenFeatures()``)
    svm : StructuredSVM, optional (default ``StructuredSVM(C=0.1, fit_intercept=False)``;
        the features include a bias)
    tag_scheme : {None, "iobes"}
        Train on IOBES re-tagged chunk labels and return BIO tags.
    input_format : dict, optional
        How the input files were read (kept in the model file for the command line).

    Examples
    --------
    >>> from dualstruct import StructuredSVM
    >>> from dualstruct.features import TokenFeatures
    >>> from dualstruct.tagger import SequenceTagger
    >>> sentences = [[("the",), ("cat",), ("sat",)], [("a",), ("dog",), ("ran",)]] * 5
    >>> tags = [["DT", "NN", "VB"], ["DT", "NN", "VB"]] * 5
    >>> tagger = SequenceTagger(TokenFeatures(), StructuredSVM(max_iter=20, random_state=0))
    >>> tagger.fit(sentences, tags).predict([[("the",), ("dog",), ("sat",)]])[0].tolist()
    ['DT', 'NN', 'VB']
    """

    @refuse_pystruct_keywords
    def __init__(self, features=None, svm=None, tag_scheme=None, input_format=None):
        self.features = features
        self.svm = svm
        self.tag_scheme = tag_scheme
        self.input_format = input_format

    def _encode(self, labels):
        if self.tag_scheme is None:
            return [np.asarray(lab) for lab in labels]
        return [to_iobes(lab) for lab in labels]

    def _decode(self, labels):
        if self.tag_scheme is None:
            return labels
        return [to_bio(lab) for lab in labels]

    @restore_on_error
    def fit(self, sentences, labels=None, validation_data=None, resume=False, on_stage=None):
        """Fit the features and the SVM. With ``resume=True`` (a tagger loaded from a
        checkpoint) the fitted features are kept and the SVM continues from its saved state.
        ``on_stage(name, seconds)``, if given, is told when each stage starts (``"features"``,
        ``"training"``) with the seconds the previous one took.

        ``validation_data=(sentences, labels)`` reports a held-out score at every check: the
        chunk F1 (conlleval) for chunk tag sets, else the token accuracy, both on the tags in
        the output scheme.

        With an SVM on ``backend="spark"``, ``sentences`` may also be data the driver never
        holds (``labels`` then None): :class:`~dualstruct.distributed.reading.TaggedFiles`
        (CoNLL/CoNLL-U files read on the executors), a PySpark RDD of ``(tokens, tags)``
        pairs (tokens as for in-memory sentences, tags a list of str), or a DataFrame whose
        first two columns are those (array of arrays of str, array of str). The vocabulary
        and label set are counted on the executors (:mod:`dualstruct.distributed.reading`);
        ``validation_data`` stays in memory here.
        """
        if self.tag_scheme is not None and self.tag_scheme not in SCHEMES:
            raise ValueError(
                f"tag_scheme must be None or one of {SCHEMES}, got {self.tag_scheme!r}"
            )
        if is_spark_input(sentences):  # read on the Spark executors, never held here
            if resume:
                raise ValueError(
                    "resume does not apply to sentences read on the Spark executors: resume "
                    "the run from its checkpoint_dir (backend_options={'resume': True})"
                )
            return fit_tagger(self, sentences, labels, validation_data, on_stage)
        if labels is None or len(sentences) != len(labels):
            n_labels = "no" if labels is None else len(labels)
            raise ValueError(f"{len(sentences)} sentences but {n_labels} label sequences")
        if len(sentences) == 0:
            raise ValueError("no sentences to train on")
        if self.tag_scheme is not None and not is_chunk_tagset(
            np.concatenate([np.asarray(lab) for lab in labels]).tolist()
        ):
            raise ValueError(
                f"tag_scheme={self.tag_scheme!r} needs chunk tags (B-/I-/O); these labels are not"
            )
        clock = time.perf_counter()

        def stage(name):
            nonlocal clock
            if on_stage is not None:
                now = time.perf_counter()
                on_stage(name, now - clock)
                clock = now

        stage("features")
        if resume:
            if not hasattr(self, "svm_"):
                raise ValueError("resume needs a tagger loaded from a checkpoint")
            svm = self.svm_
            svm.set_params(warm_start=True)
        else:
            self.features_ = clone(self.features) if self.features is not None else TokenFeatures()
            if self.svm is None:
                svm = StructuredSVM(C=0.1, fit_intercept=False)
            else:  # the callback (which may hold open files) is shared, not deep-copied
                callback = self.svm.callback
                svm = clone(self.svm.set_params(callback=None)).set_params(callback=callback)
                self.svm.set_params(callback=callback)
            data = self.features_.fit_transform(sentences)
        if resume:
            data = self.features_.transform(sentences)
        val = scorer = None
        if validation_data is not None:
            vs, vl = validation_data
            val = (self.features_.transform(vs), self._encode(vl))
            scorer = self._make_scorer(vl)
        self.svm_ = svm
        stage("training")
        svm.fit(data, self._encode(labels), validation_data=val, validation_scorer=scorer)
        return self

    def _make_scorer(self, gold):
        gold = [np.asarray(g) for g in gold]
        chunked = is_chunk_tagset(np.concatenate(gold).tolist())

        def score(_, pred):
            pred = self._decode(pred)
            if chunked:
                return chunk_scores(gold, pred)["overall"]["f1"]
            return token_accuracy(gold, pred)

        return score

    def predict(self, sentences):
        if not hasattr(self, "svm_"):
            raise NotFittedError("this SequenceTagger is not fitted yet; call fit first")
        if len(sentences) == 0:
            return []
        return self._decode(self.svm_.predict(self.features_.transform(sentences)))

    def decision_function(self, sentences) -> np.ndarray:
        """The score of each sentence's predicted tags (:meth:`StructuredSVM.decision_function
        <dualstruct.StructuredSVM.decision_function>`)."""
        if not hasattr(self, "svm_"):
            raise NotFittedError("this SequenceTagger is not fitted yet; call fit first")
        if len(sentences) == 0:
            return np.empty(0)
        return self.svm_.decision_function(self.features_.transform(sentences))

    def top_features(self, n=10) -> dict:
        """The ``n`` strongest token features of every tag, by name: ``{tag: [(feature,
        weight), …]}`` (tags as trained, e.g. IOBES); the tag-to-tag weights are
        ``svm_.transition_weights_``."""
        if not hasattr(self, "svm_"):
            raise NotFittedError("this SequenceTagger is not fitted yet; call fit first")
        return self.svm_.top_features(n, self.features_.get_feature_names_out().tolist())

    def score(self, sentences, labels):
        """Token accuracy."""
        return token_accuracy(labels, self.predict(sentences))

    # -- persistence --------------------------------------------------------------------------
    def to_arrays(self, include_solver_state=False):
        fh, fa = self.features_.to_arrays()
        sh, sa = self.svm_.to_arrays(include_solver_state)
        header = {
            "model_type": "tagger",
            "tag_scheme": self.tag_scheme,
            "input_format": self.input_format,
            "features": fh,
            "svm": sh,
        }
        arrays = {
            **{"features." + k: v for k, v in fa.items()},
            **{"svm." + k: v for k, v in sa.items()},
        }
        return header, arrays

    def save(self, path, include_solver_state=False, compress=True):
        return io.save_arrays(path, *self.to_arrays(include_solver_state), compress=compress)

    @classmethod
    def from_arrays(cls, header, arrays, path="model file"):
        def part(prefix):
            return {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}

        try:
            features = TokenFeatures.from_arrays(header["features"], part("features."))
            svm = StructuredSVM.from_arrays(header["svm"], part("svm."), path)
            tagger = cls(
                features=clone(features),
                svm=clone(svm),
                tag_scheme=header["tag_scheme"],
                input_format=header["input_format"],
            )
            if svm.n_features_in_ != features.n_features_:
                raise ValueError("the SVM and the feature extractor disagree on the width")
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"{path}: tagger file is missing fields ({exc})") from None
        except ValueError as exc:
            msg = str(exc)
            raise ValueError(msg if msg.startswith(str(path)) else f"{path}: {msg}") from None
        tagger.features_, tagger.svm_ = features, svm
        return tagger

    @classmethod
    def load(cls, path):
        header, arrays = io.load_arrays(path)
        if header.get("model_type") != "tagger":
            raise ValueError(f"{path}: not a tagger model file")
        return cls.from_arrays(header, arrays, path)
