"""Linear-chain model: unigram inner-product factors and bigram indicator factors.

Parameters live in one flat vector ``w`` (so the objective, the solvers and the model file see
a single array) laid out as

    [ W_U (n_features × K, feature-major) | W_B (K × K) | start (K) | end (K) ]

``start``/``end`` are present only when ``start_end=True``. ``ChainModel.unpack`` returns named
views into ``w``. With a *support* (sparse feature–label weights) ``W_U`` keeps a weight only
for the allowed (feature, label) pairs, stored by feature as CSR (``support_indptr``,
``support_labels``), and the first block of ``w`` holds those weights in that order; φ is then
restricted to the same pairs (a feature contributes nothing to a label it may not meet).
The joint feature map is

    φ(x, y) = ( Σ_t x_t ⊗ e_{y_t},  Σ_t e_{y_t} e_{y_{t+1}}^T,  e_{y_1},  e_{y_T} )

and the loss is the (optionally per-label weighted) Hamming loss
``δ(ȳ, y) = Σ_t loss_weights[ȳ_t] · [y_t ≠ ȳ_t]``, not normalised by length.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from .._pystruct import refuse_pystruct_model_keywords
from ..data import BlockData
from ..inference.chain import sequence_gram_matrices
from ..inference.slack_search import SEARCHES, search_all
from ..sequences import PackedSequences, pack_sequences
from .base import KernelModel
from .chain_kernels import ChainKernel
from .chain_transitions import factor_state
from .support import (
    FULL_ROWS_FROM,
    check_support,
    kernel_support,
    support_from_pairs,
    support_matrix,
)


class ChainWeights(NamedTuple):
    """Named views into the flat parameter vector of a :class:`ChainModel`."""

    unigram: np.ndarray  # (n_features, K), feature-major
    transition: np.ndarray  # (K, K): transition[a, b] scores label a followed by b
    start: np.ndarray  # (K,)
    end: np.ndarray  # (K,)


class ChainModel(KernelModel):
    """Linear-chain structured model with K labels over n_features token features.

    A kernel model (:class:`~dualstruct.models.chain_kernels.ChainKernel`): every solver
    trains it, on a :class:`~dualstruct.sequences.PackedSequences` or its :meth:`block_data`.

    Parameters
    ----------
    n_labels : int
        K, the number of labels.
    n_features : int
        d, the width of a token's feature vector.
    start_end : bool, default True
        Learn a score for the first and for the last label of a sequence.
    loss_weights : array of shape (K,), optional
        Per-label Hamming loss weights: mislabelling a token whose true label is ``a`` costs
        ``loss_weights[a]``. Default 1 for every label.
    support : (indptr, labels), optional
        Sparse feature–label weights: feature f may score only the labels
        ``labels[indptr[f]:indptr[f+1]]`` (strictly increasing); see :func:`observed_support`.
        None (default): every pair, the dense d × K matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct.models import ChainModel
    >>> model = ChainModel(n_labels=3, n_features=4)
    >>> model.size                  # 4 x 3 unary, 3 x 3 transitions, start, end
    27
    >>> phi = model.joint_feature(np.eye(4)[:2], np.array([0, 2]))
    >>> float(phi.sum())                                 # 2 features, 1 transition, start, end
    5.0
    """

    kind = "chain"
    thread_safe = True  # the kernel writes only to the workspace and the block's slots

    @refuse_pystruct_model_keywords
    def __init__(
        self,
        n_labels: int,
        n_features: int,
        *,
        start_end: bool = True,
        loss_weights=None,
        support=None,
    ):
        if n_labels < 1:
            raise ValueError(f"n_labels must be >= 1, got {n_labels}")
        if n_features < 1:
            raise ValueError(f"n_features must be >= 1, got {n_features}")
        self.n_labels = int(n_labels)
        self.n_features = int(n_features)
        self.start_end = bool(start_end)
        if loss_weights is None:
            loss_weights = np.ones(self.n_labels)
        loss_weights = np.ascontiguousarray(loss_weights, dtype=np.float64)
        if loss_weights.shape != (self.n_labels,):
            raise ValueError(
                f"loss_weights must have shape ({self.n_labels},), got {loss_weights.shape}"
            )
        if np.any(loss_weights < 0) or not np.all(np.isfinite(loss_weights)):
            raise ValueError("loss_weights must be finite and non-negative")
        self.loss_weights = loss_weights
        self._zeros = np.zeros(self.n_labels)
        self.support = (
            None if support is None else check_support(support, self.n_features, self.n_labels)
        )

    # -- parameter layout ---------------------------------------------------------------------
    @property
    def n_unary(self) -> int:
        """The number of unary weights: d·K dense, the support's size sparse."""
        if self.support is None:
            return self.n_features * self.n_labels
        return len(self.support[1])

    @property
    def size(self) -> int:
        K = self.n_labels
        return self.n_unary + K * K + (2 * K if self.start_end else 0)

    def unpack(self, w: np.ndarray) -> ChainWeights:
        """Views of ``w`` (writes through). Without start/end the two are read-only zeros."""
        K, d = self.n_labels, self.n_features
        if w.shape != (self.size,):
            raise ValueError(f"weight vector must have shape ({self.size},), got {w.shape}")
        a = self.n_unary
        b = a + K * K
        unigram = w[:a].reshape(d, K) if self.support is None else w[:a]
        transition = w[a:b].reshape(K, K)
        if self.start_end:
            start, end = w[b : b + K], w[b + K : b + 2 * K]
        else:
            start = end = self._zeros
        return ChainWeights(unigram, transition, start, end)

    def params(self) -> dict:
        return {
            "n_labels": self.n_labels,
            "n_features": self.n_features,
            "start_end": self.start_end,
            "sparse": self.support is not None,
        }

    # -- oracles ------------------------------------------------------------------------------
    def _check_data(self, data: PackedSequences):
        if data.n_features != self.n_features:
            raise ValueError(
                f"data has {data.n_features} feature columns but the model expects "
                f"{self.n_features}"
            )
        labels = data.labels
        if labels is not None and len(labels) and labels.max() >= self.n_labels:
            raise ValueError(
                f"data holds the label code {labels.max()}; the model has {self.n_labels} "
                f"labels (codes 0 … {self.n_labels - 1})"
            )

    def _kernel_inputs(self, w, data, labelled):
        """Checked data arrays and weight blocks as the kernels take them."""
        self._check_data(data)
        if labelled and data.labels is None:
            raise ValueError("the hinge loss needs labelled data")
        W = self.unpack(w)
        return (
            *data.kernel_arrays(),
            np.ascontiguousarray(W.unigram),
            np.ascontiguousarray(W.transition),
            W.start,
            W.end,
        )

    def unary_matrix(self, w):
        """The unary weights as a (d, K) matrix: a dense array, or with a support a CSR
        matrix holding just the support's pairs (a dense copy could take gigabytes)."""
        W = self.unpack(w)
        if self.support is None:
            return np.array(W.unigram)
        return support_matrix(W.unigram, self.support, self.n_features, self.n_labels)

    #: the slack oracles of :mod:`dualstruct.inference.slack_search`
    slack_searches = tuple(SEARCHES)

    def block_data(self, data: PackedSequences, labelled=True) -> BlockData:
        """Block data of a :class:`~dualstruct.sequences.PackedSequences` for training
        (``labelled=False``: for decoding only, gold labels 0)."""
        return self._block_data(data, labelled, training=True)

    def _block_data(self, data, labelled, training):
        """The kernel of ``data``; without ``training`` the token Gram matrices, which only
        the training steps' difference norms read, are left empty (the hinge and decoding
        need none)."""
        self._check_data(data)
        if labelled and data.labels is None:
            raise ValueError("training needs labelled sequences")
        indptr, indices, values, offsets = data.kernel_arrays()
        sparse = self.support is not None
        if sparse or not training:  # sparse: the norms are summed by support position
            gram_offsets, gram = np.zeros(len(offsets), dtype=np.int64), np.zeros(0)
        else:
            gram_offsets, gram = sequence_gram_matrices(data)
        labels = (
            data.labels.astype(np.int32)
            if data.labels is not None
            else np.zeros(data.n_tokens, dtype=np.int32)
        )
        lengths = np.diff(offsets)
        seq_nnz = np.diff(indptr[offsets]) if len(offsets) > 1 else np.zeros(0, np.int64)
        kernel = ChainKernel(
            indptr,
            indices,
            values,
            labels,
            offsets,
            self.loss_weights,
            gram,
            gram_offsets,
            self.n_labels,
            self.n_features,
            self.start_end,
            int(lengths.max()) if len(lengths) else 0,
            sparse,
            *kernel_support(self.support, indices),
            self.n_unary,
            int(seq_nnz.max()) if len(seq_nnz) else 0,
            *factor_state(labels, offsets, self.n_labels),
        )
        return BlockData(kernel, (indptr, indices, values))

    def _blocks(self, data, labelled):
        """``data`` as block data: itself, or the kernel of packed sequences."""
        if isinstance(data, BlockData):
            return data
        return self._block_data(data, labelled, training=False)

    def predict(self, w: np.ndarray, data, n_jobs=None, return_scores=False):
        """Viterbi labels (codes) for every token of ``data`` (packed sequences or block
        data); with ``return_scores`` also each sequence's score ``⟨w, φ(x, ŷ)⟩``.
        ``n_jobs`` threads share the sequences (None: 1; −1: every core)."""
        blocks = self._blocks(data, False)
        return self.decode(w, blocks, n_jobs=n_jobs, return_scores=return_scores)

    def hinge(self, w: np.ndarray, data):
        """Per-sequence margin-rescaled hinge ``H_i(w)`` and the loss-augmented argmax labels
        (``data``: labelled packed sequences or block data)."""
        return super().hinge(w, self._blocks(data, True))

    def slack_hinge(self, w: np.ndarray, data):
        """Per-sequence slack-rescaled hinge ``max_y δ(ȳ_i, y)(1 + s(y) − s(ȳ_i))`` and its
        maximizers (exact dynamic program; needs unit loss weights)."""
        self.check_slack()
        return super().slack_hinge(w, self._blocks(data, True))

    def slack_search(
        self, w: np.ndarray, data: PackedSequences, search: str = "angular", seeds=None
    ):
        """Run one slack search (``"exact"``, ``"angular"``, ``"bisecting"``, ``"binary"``) on
        every sequence: returns (Φ found, oracle calls, labels). ``seeds`` (labels laid out
        as ``data.labels``, e.g. an earlier search's answers) warm-start the searches as a
        block's cached labelling does in training: λ₀ = h/g of the seed, and the angular
        search starts from it."""
        if search not in SEARCHES:
            raise ValueError(f"search must be one of {tuple(SEARCHES)}, got {search!r}")
        if self.support is not None:
            raise ValueError("slack_search runs on dense weights only")
        self.check_slack()
        indptr, indices, values, offsets, U, B, start, end = self._kernel_inputs(w, data, True)
        phi = np.empty(data.n_sequences)
        calls = np.empty(data.n_sequences, dtype=np.int64)
        out = np.empty(data.n_tokens, dtype=np.int32)
        warm = seeds is not None
        if warm:
            seeds = np.ascontiguousarray(seeds, dtype=np.int32)
            if seeds.shape != (data.n_tokens,):
                raise ValueError(f"seeds must have one label per token ({data.n_tokens})")
        search_all(
            SEARCHES[search],
            indptr,
            indices,
            values,
            offsets,
            data.labels,
            U,
            B,
            start,
            end,
            phi,
            calls,
            out,
            seeds if warm else data.labels,
            warm,
        )
        return phi, calls, out

    def example_cost(self, data) -> float:
        """The estimated cost of one sequence of ``data`` in a compiled pass, about a
        nanosecond a unit: its tokens times K² + K (Viterbi)."""
        n = max(1, int(getattr(data, "n_sequences", 1)))
        per = float(getattr(data, "n_tokens", n)) / n
        K = float(self.n_labels)
        return 50.0 * per * (K * K + K)

    def ssvm_model(self):
        """The kernel model :class:`~dualstruct.SSVM` trains: the same kernel, with block
        data made from lists of sequences and labellings (the protocol's format)."""
        return ChainSequencesModel(self)

    def constructor_params(self) -> dict:
        """The keyword arguments that rebuild this model (a model file's record)."""
        return {
            "n_labels": self.n_labels,
            "n_features": self.n_features,
            "start_end": self.start_end,
            "loss_weights": self.loss_weights.tolist(),
        }

    def check_slack(self):
        if not np.all(self.loss_weights == 1.0):
            raise ValueError(
                "slack rescaling supports the unit Hamming loss only (loss_weights must all be 1)"
            )

    # -- the Python protocol (loss and features: reference implementations; the oracles: the
    # kernels', on one sequence) ---------------------------------------------------------------
    def inference(self, x, w):
        """The Viterbi labelling of the sequence ``x`` (T × d, dense or sparse) at ``w``."""
        return self.predict(np.asarray(w, dtype=np.float64), _one_sequence(x)).astype(np.int64)

    def loss_augmented_inference(self, x, y, w):
        """The labelling of ``x`` maximizing ``loss(y, ·) + ⟨w, φ(x, ·)⟩`` (the kernel's
        loss-augmented Viterbi)."""
        data = _one_sequence(x, y)
        return self.hinge(np.asarray(w, dtype=np.float64), data)[1].astype(np.int64)

    def loss(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """Weighted Hamming loss δ(ȳ, y) summed over the given tokens."""
        y_true = np.asarray(y_true)
        return float(np.sum(self.loss_weights[y_true] * (y_true != np.asarray(y_pred))))

    def joint_feature(self, x, y) -> np.ndarray:
        """φ(x, y) as a flat vector in the layout of ``w`` (one sequence; x dense or sparse;
        restricted to the support when the model has one)."""
        y = np.asarray(y)
        phi = self.init_weights()
        P = self.unpack(phi)
        if self.support is None:
            x = x.toarray() if hasattr(x, "toarray") else np.asarray(x, dtype=np.float64)
            for t in range(len(y)):
                P.unigram[:, y[t]] += x[t]
        else:  # each token's features add to their pairs with its label, if supported
            x = sp.csr_matrix(x, dtype=np.float64)
            indptr, labels = self.support
            for t in range(x.shape[0]):
                for f, v in zip(
                    x.indices[x.indptr[t] : x.indptr[t + 1]], x.data[x.indptr[t] : x.indptr[t + 1]]
                ):
                    row = labels[indptr[f] : indptr[f + 1]]
                    q = np.searchsorted(row, y[t])
                    if q < len(row) and row[q] == y[t]:
                        P.unigram[indptr[f] + q] += v
        for t in range(len(y) - 1):
            P.transition[y[t], y[t + 1]] += 1.0
        if self.start_end:
            P.start[y[0]] += 1.0
            P.end[y[-1]] += 1.0
        return phi


def _one_sequence(x, y=None) -> PackedSequences:
    """One sequence (and its labelling) as packed data."""
    return pack_sequences([x], None if y is None else [np.asarray(y).ravel()])


class ChainSequencesModel(KernelModel):
    """A :class:`ChainModel` taking the protocol's format: lists of (T_i × d) sequences and
    of label arrays, as :class:`~dualstruct.SSVM` passes them (the same kernel).

    Parameters
    ----------
    chain : ChainModel
    """

    #: the slack oracles of :mod:`dualstruct.inference.slack_search`
    slack_searches = tuple(SEARCHES)
    thread_safe = True  # the chain's kernel

    def __init__(self, chain):
        self.chain = chain

    @property
    def size(self) -> int:
        return self.chain.size

    def check_slack(self):
        self.chain.check_slack()  # the unit Hamming loss

    @property
    def builtin(self):
        """The model this kernel trains (what a model file records)."""
        return self.chain

    def block_data(self, X, Y=None) -> BlockData:
        """Block data of sequences ``X`` and their labellings ``Y`` (decoding only when
        None)."""
        if isinstance(X, PackedSequences):
            return self.chain.block_data(X, labelled=X.labels is not None)
        data = pack_sequences(list(X), None if Y is None else [np.asarray(y) for y in Y])
        return self.chain.block_data(data, labelled=Y is not None)

    def predict(self, w, X) -> list:
        """The Viterbi labelling of every sequence of ``X``, a list of label arrays."""
        data = pack_sequences(list(X))
        flat = self.chain.predict(w, data)
        return np.split(flat.astype(np.int64), data.offsets[1:-1])


def observed_support(
    data: PackedSequences, n_labels: int, min_count: int = 1, full_rows_from: float = FULL_ROWS_FROM
):
    """The (feature, label) pairs met in labelled sequences, as a support
    ``(indptr, labels)``: CRFsuite's default of a weight only where a feature met a label.

    A token with feature f active and gold label a meets (f, a). A feature that met at least
    ``full_rows_from`` × K labels gets all K (a frequent feature: the bias, a common word or
    suffix): its row is then read as one contiguous block, which the unary scores and updates
    do faster than a scattered list. 1.0 keeps the pairs met only.

    Parameters
    ----------
    data : PackedSequences
        Labelled training data.
    n_labels : int
        K.
    min_count : int, default 1
        How often a pair must be met.
    full_rows_from : float, default 0.25

    Returns
    -------
    indptr : ndarray of int64
        (d + 1,) row offsets.
    labels : ndarray of int32
        The allowed labels of each feature, by row.

    Examples
    --------
    >>> import numpy as np
    >>> from dualstruct import pack_sequences
    >>> from dualstruct.models.chain import observed_support
    >>> data = pack_sequences([np.eye(3)], [np.array([0, 1, 1])])
    >>> indptr, labels = observed_support(data, n_labels=2, full_rows_from=1.0)
    >>> indptr.tolist(), labels.tolist()                 # feature f met label labels[f]
    ([0, 1, 2, 3], [0, 1, 1])
    """
    if data.labels is None:
        raise ValueError("the observed support needs labelled data")
    X = data.X.tocsr()
    token_of_entry = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    keys = X.indices.astype(np.int64) * n_labels + data.labels[token_of_entry]
    keys, counts = np.unique(keys, return_counts=True)
    features, labels = np.divmod(keys, n_labels)
    return support_from_pairs(
        features, labels, counts, X.shape[1], n_labels, min_count, full_rows_from
    )
