import os
import sys
from pathlib import Path

import pytest


def _require_data() -> bool:
    return os.environ.get("DUALSTRUCT_REQUIRE_DATA", "") not in ("", "0")


def require_spark():
    """pyspark and Java, with the workers on this interpreter: else skip the test, or fail it
    where data is required (CI)."""
    try:
        from dualstruct.distributed.spark import require_pyspark

        require_pyspark()
    except (ImportError, RuntimeError) as exc:
        if _require_data():
            pytest.fail(f"Spark tests cannot run: {exc}")
        pytest.skip(str(exc))
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The benchmark data folder ($DUALSTRUCT_DATA). Missing data skips the test, unless
    DUALSTRUCT_REQUIRE_DATA=1 (as in CI), where it fails."""
    env = os.environ.get("DUALSTRUCT_DATA")
    path = Path(env) if env else None
    if path is None or not path.is_dir():
        msg = f"benchmark data folder not found (DUALSTRUCT_DATA={env!r})"
        if _require_data():
            pytest.fail(msg + " and DUALSTRUCT_REQUIRE_DATA is set")
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def ocr_data(data_dir):
    from dualstruct.datasets import load_ocr

    path = data_dir / "ocr" / "letter.data.gz"
    if not path.is_file():
        if _require_data():
            pytest.fail(f"{path} is missing and DUALSTRUCT_REQUIRE_DATA is set")
        pytest.skip(f"{path} is missing")
    return load_ocr(path)


def tiny_chain_problem():
    """Five sequences of 2-3 tokens, 4 dense features, 3 labels (small enough to enumerate
    every labelling)."""
    import numpy as np

    rng = np.random.default_rng(1)
    X, Y = [], []
    for _ in range(5):
        T = int(rng.integers(2, 4))
        X.append(rng.normal(size=(T, 4)))
        Y.append(rng.integers(0, 3, T).astype(np.int32))
    return X, Y


class PlainMultiClass:
    """A multi-class model written in plain Python against the StructuredModel protocol."""

    def __init__(self, n_classes, n_features):
        self.n_classes, self.n_features = n_classes, n_features
        self.size_joint_feature = n_classes * n_features

    def joint_feature(self, x, y):
        import numpy as np

        phi = np.zeros((self.n_features, self.n_classes))
        phi[:, y] = x
        return phi.ravel()

    def loss(self, y, y_hat):
        return float(y != y_hat)

    def _scores(self, x, w):
        return x @ w.reshape(self.n_features, self.n_classes)

    def inference(self, x, w):
        import numpy as np

        return int(np.argmax(self._scores(x, w)))

    def loss_augmented_inference(self, x, y, w):
        import numpy as np

        s = self._scores(x, w) + 1.0
        s[y] -= 1.0
        return int(np.argmax(s))


def blobs(seed=0, n=60, K=3, d=4):
    """``n`` points of ``d`` features in ``K`` classes, each class shifted along one axis."""
    import numpy as np

    rng = np.random.default_rng(seed)
    y = rng.integers(0, K, n)
    X = rng.normal(size=(n, d))
    X[np.arange(n), y % d] += 1.0
    return X, y


def random_chain_problem(rng, n, K, d, max_len=5, sparse=False, density=0.5):
    """Random sequences with random labels (features dense or sparse)."""
    import scipy.sparse as sp

    X, Y = [], []
    for _ in range(n):
        T = int(rng.integers(1, max_len + 1))
        x = rng.normal(size=(T, d))
        if sparse:
            x = x * (rng.random((T, d)) < density)
            x = sp.csr_matrix(x)
        X.append(x)
        Y.append(rng.integers(0, K, size=T))
    return X, Y
