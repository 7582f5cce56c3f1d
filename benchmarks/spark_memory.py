"""The memory a Spark run takes, process by process: the driver's Python, the JVM (Spark's
driver and, in local mode, its executors) and the Python workers.

Runs a command (by default ``dualstruct train`` on CoNLL-2000 chunking read on the executors)
and samples the resident memory of every process of its tree from ``/proc`` every
``--interval`` seconds. ``/usr/bin/time -v`` gives one number for the whole tree (the largest
process's peak, which in local mode is usually the JVM); this script separates them, since the
driver's Python process is what holds ``w``, the per-round sums and (while it is built
and when the model is written) the vocabulary::

    DUALSTRUCT_DATA=../shared/data python benchmarks/spark_memory.py
    DUALSTRUCT_DATA=../shared/data python benchmarks/spark_memory.py --weights observed
    DUALSTRUCT_DATA=../shared/data python benchmarks/spark_memory.py --driver-reads

``--driver-reads`` runs the same training with the file read by the driver (``--save-state``
brings the examples and the dual state to the driver), as every run did before reading on the
executors. The driver's peak is its kernel's high-water mark (``VmHWM``, the figure
``/usr/bin/time -v`` reports for a single process), exact however short the peak; "at Spark's
start" is its resident memory when its first child (the JVM) appears: what its imports take.
A second table follows the driver through the command's output: from each line it printed to
the next, its largest sampled resident memory and its ``VmHWM`` at the end (the stage where
the high-water mark grows holds the peak).

``--imports`` prints instead the driver's resident memory after each import of the train
command, in a fresh interpreter::

    python benchmarks/spark_memory.py --imports
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _rss(pid):
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0


def _high_water(pid):
    """The peak resident bytes of ``pid`` so far (``VmHWM``), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def _children(pid):
    """The children of every thread of ``pid`` (the JVM starts processes from any thread)."""
    out = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(p) for p in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def _kind(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return "gone"
    if "java" in cmd.split(" ")[0]:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark/daemon" in cmd or "pyspark.worker" in cmd:
        return "workers"
    return "other"


def sample_tree(root):
    """``{kind: [(pid, rss)]}`` over the tree of ``root``; the root is the driver."""
    out = {"driver": [(root, _rss(root))]}
    stack = _children(root)
    while stack:
        pid = stack.pop()
        out.setdefault(_kind(pid), []).append((pid, _rss(pid)))
        stack.extend(_children(pid))
    return out


def _echo(stream, lines):
    """Copy the command's output lines to ours, each with the time it came."""
    for line in stream:
        lines.append((time.perf_counter(), line.rstrip("\n")))
        print(line, end="", flush=True)


def measure(cmd, interval, env=None):
    """Peak resident bytes per kind of process (``workers``: the peak of their sum), the
    run's wall seconds and, per line the command printed, the driver's largest sampled
    resident memory until its next line and its ``VmHWM`` then (a stage's own peak where
    the high-water mark grew)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    lines = [(t0, "(start)")]
    reader = threading.Thread(target=_echo, args=(proc.stdout, lines), daemon=True)
    reader.start()
    peak = {"driver": 0, "jvm": 0, "workers": 0, "tree": 0, "driver at start": 0}
    samples = []  # (time, driver's resident bytes, its high-water mark)
    while proc.poll() is None:
        tree = sample_tree(proc.pid)
        if not peak["driver at start"] and len(tree) > 1:
            peak["driver at start"] = tree["driver"][0][1]
        for kind in ("driver", "jvm", "workers"):
            peak[kind] = max(peak[kind], sum(r for _, r in tree.get(kind, [])))
        hwm = _high_water(proc.pid)
        samples.append((time.perf_counter(), tree["driver"][0][1], hwm))
        peak["driver"] = max(peak["driver"], hwm)
        peak["tree"] = max(peak["tree"], sum(r for rows in tree.values() for _, r in rows))
        time.sleep(interval)
    reader.join()
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed with status {proc.returncode}")
    return peak, time.perf_counter() - t0, _stages(lines, samples)


def _stages(lines, samples):
    """``[(line, largest sampled RSS, VmHWM at the next line)]``: the driver's memory from
    each output line to the next (progress lines of one kind merged)."""
    out = []
    for k, (start, line) in enumerate(lines):
        stop = lines[k + 1][0] if k + 1 < len(lines) else math.inf
        inside = [(rss, hwm) for t, rss, hwm in samples if start <= t < stop]
        if not inside:
            continue
        label = line[:60]
        rss, hwm = max(r for r, _ in inside), inside[-1][1]
        if line.startswith("pass ") and out and out[-1][0].startswith("pass "):
            label, rss = "pass … (each pass)", max(rss, out.pop()[1])
        out.append((label, rss, hwm))
    return out


#: what ``dualstruct train --spark-master`` imports on the driver, in order
IMPORTS = (
    "numpy",
    "scipy.sparse",
    "pyspark.sql",
    "numba",
    "sklearn.base",
    "dualstruct",
    "dualstruct.cli",
)


def import_costs():
    """``[(module, resident bytes after importing it)]``, each import in turn in a fresh
    interpreter (the first row: the interpreter alone)."""
    script = (
        "import importlib, sys\n"
        "def rss():\n"
        "    with open('/proc/self/statm') as f:\n"
        f"        return int(f.read().split()[1]) * {PAGE}\n"
        "print('python', rss())\n"
        "for name in sys.argv[1:]:\n"
        "    importlib.import_module(name)\n"
        "    print(name, rss())\n"
    )
    out = subprocess.run([sys.executable, "-c", script, *IMPORTS], capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the imports failed:\n{out.stderr}")
    return [(name, int(rss)) for name, rss in (line.split() for line in out.stdout.splitlines())]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", help="training file (default: CoNLL-2000 chunking's train.txt.gz)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--max-iter", type=int, default=2)
    ap.add_argument("--weights", default="dense", choices=("dense", "observed"))
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument(
        "--driver-reads",
        action="store_true",
        help="read the file on the driver (--save-state)",
    )
    ap.add_argument(
        "--imports",
        action="store_true",
        help="print the driver's resident memory after each of its imports",
    )
    args = ap.parse_args(argv)
    mib = 2**20
    if args.imports:
        print("| import | resident after (MiB) | its cost (MiB) |")
        print("|---|---:|---:|")
        before = 0
        for name, rss in import_costs():
            print(f"| {name} | {rss / mib:,.0f} | {(rss - before) / mib:+,.0f} |")
            before = rss
        return
    train = args.train
    if train is None:
        root = os.environ.get("DUALSTRUCT_DATA")
        if not root:
            raise SystemExit("set DUALSTRUCT_DATA or give --train")
        train = str(Path(root) / "conll2000" / "train.txt.gz")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            sys.executable,
            "-m",
            "dualstruct",
            "train",
            train,
            "-o",
            str(Path(tmp) / "model.npz"),
            "--spark-master",
            args.master,
            "--partitions",
            str(args.partitions),
            "--max-iter",
            str(args.max_iter),
            "--weights",
            args.weights,
        ] + (["--save-state"] if args.driver_reads else [])
        peak, wall, stages = measure(cmd, args.interval)
    print(
        f"# {'driver reads' if args.driver_reads else 'executors read'}; weights "
        f"{args.weights}; {args.master}, K = {args.partitions}, {args.max_iter} passes; "
        f"{wall:.1f} s"
    )
    print("| process | peak RSS (MiB) |")
    print("|---|---:|")
    for kind, label in (
        ("driver", "driver (Python)"),
        ("driver at start", "driver at Spark's start (its imports)"),
        ("jvm", "JVM"),
        ("workers", "Python workers (sum)"),
        ("tree", "whole tree (sum)"),
    ):
        print(f"| {label} | {peak[kind] / mib:,.0f} |")
    print("\n| the driver after the line | its largest RSS (MiB) | VmHWM then (MiB) |")
    print("|---|---:|---:|")
    for label, rss, hwm in stages:
        print(f"| {label} | {rss / mib:,.0f} | {hwm / mib:,.0f} |")


if __name__ == "__main__":
    main()
