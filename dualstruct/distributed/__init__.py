"""WHERE training runs: the distributed solvers (CoCoA+ with the BCFW local solver, and
mini-batch SSG) over partitions of the examples, in process or on Apache Spark
(:mod:`dualstruct.distributed.spark`, with the ``spark`` extra). They train every model with
a kernel, with no model-specific code."""

from .cocoa import CoCoA, InProcessEngine, MiniBatchSSG

__all__ = ["CoCoA", "MiniBatchSSG", "InProcessEngine"]

BACKENDS = ("local", "spark")

#: the distributed solver of each solver name
DISTRIBUTED_SOLVERS = {"bcfw": CoCoA, "ssg": MiniBatchSSG}

#: the keys of an estimator's ``backend_options`` (the Spark engine's arguments)
BACKEND_OPTIONS = (
    "master",
    "session",
    "checkpoint_dir",
    "checkpoint_every",
    "resume",
    "spark_conf",
    "app_name",
    "keep_dual_state",
)

#: solver options that shape how a distributed run gets to the optimum, not the optimum: a
#: run continued on one machine may drop them
DISTRIBUTED_ONLY_OPTIONS = (
    "local_passes",
    "aggregation",
    "sigma",
    "acceleration",
    "batch_fraction",
)


def check_backend(backend, n_partitions, backend_options, solver):
    """Validate an estimator's ``backend``, ``n_partitions`` and ``backend_options``."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if isinstance(n_partitions, bool) or not isinstance(n_partitions, int) or n_partitions < 1:
        raise ValueError(f"n_partitions must be an integer >= 1, got {n_partitions!r}")
    if backend_options is not None and not isinstance(backend_options, dict):
        raise ValueError(f"backend_options must be a dict, got {backend_options!r}")
    unknown = sorted(set(backend_options or {}) - set(BACKEND_OPTIONS))
    if unknown:
        raise ValueError(f"backend_options: unknown {unknown}; known: {BACKEND_OPTIONS}")
    if backend == "spark" and solver not in DISTRIBUTED_SOLVERS:
        raise ValueError(
            f"solver={solver!r} does not run on Spark; the Spark backend trains "
            f"with {tuple(DISTRIBUTED_SOLVERS)} (CoCoA+ with BCFW, mini-batch SSG)"
        )


def distributed_solver(solver, model, n_partitions, backend_options, **kwargs):
    """The Spark-backed solver ``solver`` ("bcfw": CoCoA+, "ssg": mini-batch SSG)."""
    from .spark import SparkEngine  # the Spark engine: loaded by Spark runs only

    engine = SparkEngine(
        **{k: v for k, v in (backend_options or {}).items() if k != "keep_dual_state"}
    )
    return DISTRIBUTED_SOLVERS[solver](model, n_partitions=n_partitions, engine=engine, **kwargs)


def json_backend_options(options):
    """``backend_options`` as a model file stores them (without a SparkSession object)."""
    if options is None:
        return None
    return {k: v for k, v in options.items() if k != "session"}


__all__ += [
    "BACKENDS",
    "DISTRIBUTED_ONLY_OPTIONS",
    "check_backend",
    "distributed_solver",
    "json_backend_options",
]
