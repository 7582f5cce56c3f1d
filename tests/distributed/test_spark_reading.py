"""Training input read on Spark's executors (local[2]): files, RDDs and DataFrames give the
model trained from the same sentences in memory (same vocabulary, labels and w), the driver
ships only small recipes, and bad input is a clear error naming the file and line."""

import gzip
import io
import pickle

import numpy as np
import pytest
from conftest import require_spark

from dualstruct import StructuredSVM
from dualstruct.cli import read_tagged
from dualstruct.distributed.reading import TaggedFiles, executor_path
from dualstruct.features import TokenFeatures
from dualstruct.tagger import SequenceTagger

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]

TEXT = """Confidence NN B-NP|in IN B-PP|the DT B-NP|pound NN I-NP
Rates NNS B-NP|rose VBD B-VP|. . O
He PRP B-NP|reckons VBZ B-VP|the DT B-NP|deficit NN I-NP
Chancellor NNP B-NP|of IN B-PP|the DT B-NP|Exchequer NNP I-NP
The DT B-NP|pound NN I-NP|fell VBD B-VP|sharply RB B-ADVP
Prices NNS B-NP|will MD B-VP|rise VB I-VP|. . O"""
SENTENCES = [[tuple(t.split()) for t in line.split("|")] for line in TEXT.splitlines()]


def conll_text(sentences):
    return "\n\n".join("\n".join(" ".join(tok) for tok in sent) for sent in sentences) + "\n"


@pytest.fixture(scope="module")
def spark():
    """One local[2] session for the module."""
    require_spark()
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("dualstruct-reading-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.executorEnv.NUMBA_NUM_THREADS", "1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def files(tmp_path):
    """The sentences in two files (the second gzipped), six copies with varied words."""
    many = [
        [(w + str(k % 3) if k % 2 else w, p, c) for w, p, c in sent]
        for k in range(6)
        for sent in SENTENCES
    ]
    a, b = tmp_path / "a.txt", tmp_path / "b.txt.gz"
    a.write_text(conll_text(many[:20]))
    with gzip.open(b, "wt") as fh:
        fh.write(conll_text(many[20:]))
    return [a, b]


def tagger(**svm):
    options = dict(
        C=0.1,
        fit_intercept=False,
        backend="spark",
        n_partitions=3,
        max_iter=4,
        tol=0,
        check_every=2,
        random_state=0,
    )
    options.update(svm)
    return SequenceTagger(TokenFeatures(min_count=2), StructuredSVM(**options), tag_scheme="iobes")


def in_memory(paths):
    sentences, labels = [], []
    for p in paths:
        s, lab, _ = read_tagged(p, "conll", -1)
        sentences += s
        labels += lab
    return sentences, labels


def assert_same_model(a, b):
    assert a.features_.vocabulary_ == b.features_.vocabulary_
    assert a.features_.n_columns_ == b.features_.n_columns_
    assert a.svm_.classes_.tolist() == b.svm_.classes_.tolist()
    np.testing.assert_allclose(a.svm_.coef_, b.svm_.coef_, rtol=0, atol=1e-9)
    assert np.abs(a.svm_.coef_).max() > 0


@pytest.fixture
def in_process(monkeypatch):
    """The estimators' distributed solver on the in-process engine (the reading stays on
    Spark)."""
    import dualstruct.distributed as distributed

    def solver(name, model, n_partitions, backend_options, **kwargs):
        engine = distributed.InProcessEngine()
        return distributed.DISTRIBUTED_SOLVERS[name](
            model, n_partitions=n_partitions, engine=engine, **kwargs
        )

    monkeypatch.setattr(distributed, "distributed_solver", solver)


@pytest.mark.parametrize("engine", ["in-process", "spark"])
def test_files_read_on_the_executors_give_the_in_memory_model(spark, files, engine, request):
    if engine == "in-process":
        request.getfixturevalue("in_process")
    local = tagger().fit(*in_memory(files))
    remote = tagger().fit(TaggedFiles(files))
    assert_same_model(remote, local)
    some = in_memory(files)[0][:3]
    assert [p.tolist() for p in remote.predict(some)] == [p.tolist() for p in local.predict(some)]


def test_observed_weights_counted_on_the_executors(spark, files, in_process):
    """weights='observed': the (feature, label) pairs are counted by reduceByKey and give
    the support found in memory (the intercept column's pairs too)."""
    opts = dict(weights="observed", fit_intercept=True, weights_min_count=2)
    local = tagger(**opts).fit(*in_memory(files))
    remote = tagger(**opts).fit(TaggedFiles(files))
    for a, b in zip(remote.svm_.model_.support, local.svm_.model_.support):
        np.testing.assert_array_equal(a, b)
    dense = (local.svm_.n_features_in_ + 1) * len(local.svm_.classes_)
    assert len(local.svm_.model_.support[1]) < dense
    assert_same_model(remote, local)


def test_conllu_and_hashing_read_on_the_executors(spark, tmp_path, in_process):
    rows = []
    for sent in SENTENCES * 3:
        rows.append(
            "\n".join(
                f"{i}\t{w}\t{w.lower()}\t{p[0]}\t{p}\t_\t0\tdep\t_\t_"
                for i, (w, p, _) in enumerate(sent, 1)
            )
        )
    path = tmp_path / "t.conllu"
    path.write_text("# c\n" + "\n\n".join(rows) + "\n")
    sentences, labels, _ = read_tagged(path, "conllu", label="xpos")

    def make():
        svm = StructuredSVM(
            C=0.1, fit_intercept=True, backend="spark", n_partitions=2, max_iter=3, random_state=0
        )
        return SequenceTagger(TokenFeatures(hashing=64), svm)

    local = make().fit(sentences, labels)
    remote = make().fit(TaggedFiles(path, format="conllu", label="xpos"))
    assert remote.features_.vocabulary_ is None
    assert_same_model(remote, local)


def test_the_driver_ships_recipes_not_sentences(spark, files, monkeypatch):
    """What the driver sends per partition is a few kB whatever the data's size: the paths,
    the vocabulary's file name, the example numbers and the kernel model, or (when it is
    large: a support) the name of a file shipped once per executor."""
    from dualstruct.distributed import reading
    from dualstruct.distributed.partition import split_sources
    from dualstruct.distributed.reading import ExecutorData, SharedRef, fit_tagger

    monkeypatch.setattr(reading, "SHARE_FROM_BYTES", 0)

    seen = {}

    class Spy(StructuredSVM):
        def fit(self, X, y=None, **kw):
            data = X.prepare(self)
            assert isinstance(data, ExecutorData)
            with pytest.raises(TypeError, match="read on the Spark executors"):
                data.take([0])
            kmodel = self.model_
            sources = split_sources(kmodel, data, [np.arange(0, data.n_sequences, 2)])
            assert isinstance(sources[0][1][0].kmodel, SharedRef)
            seen["bytes"] = len(pickle.dumps(sources[0][1][:2]))
            reading._SHARED.clear()  # read back from the shipped file
            blocks = sources[0][0](*sources[0][1])
            seen["blocks"] = blocks.n_blocks
            return self

    svm = Spy(fit_intercept=False, backend="spark", weights="observed")
    fit_tagger(SequenceTagger(TokenFeatures(), svm), TaggedFiles(files))
    assert seen["blocks"] == 18
    assert seen["bytes"] < 2000


def test_command_line_reads_the_training_file_on_the_executors(spark, files, tmp_path):
    """`dualstruct train --spark-master` reads on the executors; the model equals the one
    trained from the file read here (--save-state reads it on this machine)."""
    from dualstruct import load
    from dualstruct.cli import main

    def cli(*argv):
        out = io.StringIO()
        return main([str(a) for a in argv], out=out), out.getvalue()

    common = ("--spark-master", "local[2]", "--partitions", 2, "--max-iter", 3, "--min-count", 2)
    code, out = cli("train", files[1], "-o", tmp_path / "m.npz", *common)
    assert code == 0, out
    assert "on the Spark executors" in out
    code, out = cli("train", files[1], "-o", tmp_path / "here.npz", *common, "--save-state")
    assert code == 0, out
    assert "on the Spark executors" not in out
    assert_same_model(load(tmp_path / "m.npz"), load(tmp_path / "here.npz"))


def test_a_run_read_on_the_executors_resumes_from_its_checkpoint(spark, files, tmp_path):
    from dualstruct import load
    from dualstruct.cli import main

    def cli(*argv):
        out = io.StringIO()
        return main([str(a) for a in argv], out=out), out.getvalue()

    common = ("--spark-master", "local[2]", "--partitions", 2, "--check-every", 2)
    code, out = cli("train", files[0], "-o", tmp_path / "whole.npz", *common, "--max-iter", 4)
    assert code == 0, out
    ckpt = ("--spark-checkpoint-dir", tmp_path / "ckpt", "--spark-checkpoint-every", 2)
    code, out = cli("train", files[0], "-o", tmp_path / "a.npz", *common, *ckpt, "--max-iter", 2)
    assert code == 0, out
    code, out = cli(
        "train", files[0], "-o", tmp_path / "b.npz", *common, *ckpt, "--max-iter", 4,
        "--spark-resume",
    )  # fmt: skip
    assert code == 0, out
    assert_same_model(load(tmp_path / "b.npz"), load(tmp_path / "whole.npz"))


def test_rdd_and_dataframe_input(spark, files, in_process):
    sentences, labels = in_memory(files)
    local = tagger().fit(sentences, labels)
    pairs = [([list(t) for t in s], lab.tolist()) for s, lab in zip(sentences, labels)]
    rdd = spark.sparkContext.parallelize(pairs, 3)
    assert_same_model(tagger().fit(rdd), local)
    frame = spark.createDataFrame(pairs, "tokens array<array<string>>, tags array<string>")
    assert_same_model(tagger().fit(frame), local)
    bad = spark.sparkContext.parallelize(pairs[:4] + [(pairs[4][0], pairs[4][1][:-1])], 2)
    with pytest.raises(ValueError, match=r"example \d of the RDD: 4 tokens but 3 tags"):
        tagger().fit(bad)


# -- bad input ----------------------------------------------------------------------------------
def test_a_missing_or_unreadable_file_is_named(spark, files, tmp_path):
    missing = tmp_path / "nowhere.txt"
    with pytest.raises(ValueError, match=f"{missing}: no such file on the executor"):
        tagger().fit(TaggedFiles([files[0], missing]))
    broken = tmp_path / "broken.txt.gz"
    broken.write_bytes(b"not gzip at all\n")
    with pytest.raises(ValueError, match=f"{broken}: cannot be read on the executor"):
        tagger().fit(TaggedFiles(broken))
    with pytest.raises(ValueError, match=f"{tmp_path}: is a directory"):
        tagger().fit(TaggedFiles(tmp_path))
    with pytest.raises(ValueError, match="hdfs:// paths are not read on the executors"):
        TaggedFiles("hdfs://namenode/corpus/train.txt")
    assert executor_path("file:///data/x.txt") == "/data/x.txt"


def test_a_malformed_line_is_named_with_its_file_and_line(spark, files, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text(conll_text(SENTENCES[:2]) + "\nHe PRP\n")
    with pytest.raises(ValueError, match=f"{bad}:10: expected 3 columns like the first"):
        tagger().fit(TaggedFiles([files[0], bad]))


def test_mixed_label_sets_and_column_layouts_are_refused(spark, files, tmp_path):
    pos = tmp_path / "pos.txt"  # the POS tag as the label: no chunk tag in common
    pos.write_text(conll_text([[(w, c, p) for w, p, c in s] for s in SENTENCES]))
    with pytest.raises(ValueError, match=f"{pos}: its labels .* mixed label sets"):
        tagger().fit(TaggedFiles([files[0], pos]))
    wide = tmp_path / "wide.txt"
    wide.write_text(conll_text([[(w, p, p, c) for w, p, c in s] for s in SENTENCES]))
    with pytest.raises(ValueError, match=f"{wide}:1: tokens of 3 feature columns, but"):
        tagger().fit(TaggedFiles([files[0], wide]))


def test_a_vocabulary_too_large_for_the_driver_is_refused_up_front(spark, files, monkeypatch):
    monkeypatch.setenv("DUALSTRUCT_MEMORY_LIMIT", "20K")
    with pytest.raises(MemoryError, match=r"feature vocabulary of [\d,]+ features .* would need"):
        tagger().fit(TaggedFiles(files))


def test_executor_input_needs_the_spark_backend(spark, files):
    with pytest.raises(ValueError, match="backend='spark'"):
        SequenceTagger(svm=StructuredSVM()).fit(TaggedFiles(files))
    with pytest.raises(ValueError, match="labels must be None"):
        tagger().fit(TaggedFiles(files), [["B-NP"]])
    with pytest.raises(TypeError, match="train a SequenceTagger"):
        StructuredSVM(backend="spark").fit(spark.sparkContext.parallelize([1]))
    with pytest.raises(ValueError, match="keep_dual_state"):
        tagger(backend_options={"keep_dual_state": True}).fit(TaggedFiles(files))


# -- multi-label files ----------------------------------------------------------------------------
def libsvm_lines(n, seed):
    rng = np.random.default_rng(seed)
    lines = []
    for _ in range(n):
        labels = sorted(rng.choice(4, size=rng.integers(1, 3), replace=False).tolist())
        feats = sorted(rng.choice(9, size=4, replace=False).tolist())
        values = " ".join(f"{j + 1}:{rng.normal():.3f}" for j in feats)
        lines.append(",".join(map(str, labels)) + " " + values)
    return "\n".join(lines) + "\n"


@pytest.fixture
def ml_files(tmp_path):
    a, b = tmp_path / "a.svm", tmp_path / "b.svm.gz"
    a.write_text(libsvm_lines(30, 1))
    with gzip.open(b, "wt") as fh:
        fh.write(libsvm_lines(25, 2))
    return [a, b]


def multilabel(**kw):
    from dualstruct import MultiLabelSVM

    options = dict(
        edges="chain", backend="spark", n_partitions=3, max_iter=4, tol=0, random_state=0
    )
    options.update(kw)
    return MultiLabelSVM(**options)


@pytest.mark.parametrize("engine", ["in-process", "spark"])
def test_multilabel_files_read_on_the_executors_give_the_in_memory_model(
    spark, ml_files, engine, request
):
    import scipy.sparse as sp

    from dualstruct.datasets import load_libsvm_multilabel
    from dualstruct.distributed.reading import MultiLabelFiles

    if engine == "in-process":
        request.getfixturevalue("in_process")
    parts = [load_libsvm_multilabel(p, 9, 4) for p in ml_files]
    X = sp.vstack([x for x, _ in parts], format="csr")
    Y = np.vstack([y for _, y in parts])
    local = multilabel().fit(X, Y)
    remote = multilabel().fit(MultiLabelFiles(ml_files))
    assert (remote.n_features_in_, remote.n_labels_) == (9, 4)
    np.testing.assert_allclose(remote.coef_, local.coef_, rtol=0, atol=1e-9)
    assert np.abs(local.coef_).max() > 0
    np.testing.assert_array_equal(remote.predict(X), local.predict(X))


def test_multilabel_command_line_reads_on_the_executors(spark, ml_files, tmp_path):
    from dualstruct import load
    from dualstruct.cli import main

    def cli(*argv):
        out = io.StringIO()
        return main([str(a) for a in argv], out=out), out.getvalue()

    common = ("--spark-master", "local[2]", "--max-iter", 3, "--edges", "chain")
    code, out = cli("multilabel", "train", ml_files[0], "-o", tmp_path / "m.npz", *common)
    assert code == 0, out
    assert "on the Spark executors" in out and "30 examples, 9 features, 4 labels" in out
    code, out = cli(
        "multilabel", "train", ml_files[0], "-o", tmp_path / "h.npz", *common, "--save-state"
    )
    assert code == 0, out
    a, b = load(tmp_path / "m.npz"), load(tmp_path / "h.npz")
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=0, atol=1e-9)


def test_multilabel_bad_input_is_named(spark, ml_files, tmp_path):
    from dualstruct.distributed.reading import MultiLabelFiles

    bad = tmp_path / "bad.svm"
    bad.write_text("0,1 1:0.5\n2 3:x\n")
    with pytest.raises(ValueError, match=f"{bad}:2: 'x' is not a number"):
        multilabel().fit(MultiLabelFiles([ml_files[0], bad]))
    with pytest.raises(ValueError, match="no such file on the executor"):
        multilabel().fit(MultiLabelFiles(tmp_path / "none.svm"))
    header = "@relation r\n@attribute x numeric\n@attribute {} {{0,1}}\n@attribute b {{0,1}}\n"
    one, two = tmp_path / "one.arff", tmp_path / "two.arff"
    one.write_text(header.format("a") + "@data\n0.5,1,0\n1.5,0,1\n")
    two.write_text(header.format("c") + "@data\n0.5,1,0\n")
    with pytest.raises(ValueError, match=f"{two}: label attributes .* mixed label sets"):
        multilabel().fit(MultiLabelFiles([one, two], labels=2))
    with pytest.raises(ValueError, match="edges='tree'"):
        multilabel(edges="tree").fit(MultiLabelFiles(ml_files))


def test_command_line_refuses_urls_before_starting_spark(tmp_path, capsys):
    from dualstruct.cli import main

    for argv in (["train"], ["multilabel", "train"]):
        code = main([*argv, "s3://bucket/train.txt", "-o", str(tmp_path / "m.npz"),
                     "--spark-master", "local[2]"])  # fmt: skip
        assert code == 2
        assert "s3:// paths are not read on the executors" in capsys.readouterr().err
