"""Where a training pass spends its time, by compiled function: a ``perf`` profile of a
running training process with numba's JIT symbols resolved by ``gdb``.

Comparing two versions of the code on a shared machine by wall time is noisy; the share of
samples in a function both versions run unchanged (Viterbi on OCR, the min-cut on yeast) is
not: if it is s_old in one and s_new in the other, the new pass costs s_old / s_new of the
old. Run it in each checkout (``PYTHONPATH=<checkout>``) and compare. Needs ``perf`` and
``gdb`` (Linux).

    DUALSTRUCT_DATA=../shared/data python benchmarks/profile_shares.py ocr-bcfw
    DUALSTRUCT_DATA=../shared/data python benchmarks/profile_shares.py yeast-full
    DUALSTRUCT_DATA=../shared/data python benchmarks/profile_shares.py chunk-observed
    DUALSTRUCT_DATA=../shared/data python benchmarks/profile_shares.py bibtex-full-engine
    DUALSTRUCT_DATA=../shared/data python benchmarks/profile_shares.py czech-pooled-gdmm

``bibtex-full`` trains the multi-label model's full label graph with its own GDMM,
``bibtex-full-engine`` with GDMM over factors, both sampled after 20 passes (``--warmup``
sets the passes before sampling).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
import time

WORKLOADS = {
    "ocr-bcfw": """
from dualstruct import StructuredSVM
from dualstruct.datasets import fetch_ocr
import numpy as np
X, y, folds = fetch_ocr()
tr = np.flatnonzero(folds != 0)
est = StructuredSVM(max_iter=1, check_every=10**6, warm_start=True, tol=0, random_state=0)
est.fit([X[i] for i in tr], [y[i] for i in tr])
""",
    "yeast-full": """
from dualstruct import MultiLabelSVM
from dualstruct.datasets import fetch_multilabel
X, Y = fetch_multilabel("yeast", "train")
est = MultiLabelSVM(edges="full", max_iter=1, check_every=10**6, warm_start=True, tol=0,
                    random_state=0)
est.fit(X, Y)
""",
    "chunk-dense": """
from dualstruct import StructuredSVM
from dualstruct.datasets.conll import fetch_conll2000, split_column
from dualstruct.features import TokenFeatures
X, y = split_column(fetch_conll2000("train"), 2)
D = TokenFeatures().fit_transform(X)
est = StructuredSVM(C=0.1, fit_intercept=False, max_iter=1, check_every=10**6,
                    warm_start=True, tol=0, random_state=0, weights="dense")
est.fit(D, y)
""",
}
WORKLOADS["chunk-observed"] = WORKLOADS["chunk-dense"].replace('"dense"', '"observed"')
WORKLOADS["bibtex-full"] = """
from dualstruct import MultiLabelSVM, solvers
from dualstruct.datasets import fetch_multilabel
X, Y = fetch_multilabel("bibtex", "train")
est = MultiLabelSVM(edges="full", inference="lp", solver="gdmm", max_iter=20,
                    check_every=10**6, warm_start=True, tol=0, random_state=0)
est.fit(X, Y)
"""
#: the same with GDMM over factors (the multi-label model's own GDMM above)
WORKLOADS["bibtex-full-engine"] = WORKLOADS["bibtex-full"].replace(
    "est = ", "solvers.SOLVERS['gdmm'] = lambda model: solvers.FactorGDMM\nest = "
)
#: GDMM over factors on the pooled Czech split (K = 971, observed weights), with the C and
#: tuning of ``benchmarks/large_labels.py``
WORKLOADS["czech-pooled-gdmm"] = """
import sys
sys.path.insert(0, {benchmarks!r})
import large_labels
from dualstruct import StructuredSVM
ds = large_labels.czech_pooled_dataset(2)
D, y = ds["Xtr"], ds["ytr"]
tuning = dict(large_labels.GDMM_TUNING["czech_pooled"])
est = StructuredSVM(C=large_labels.C_DEFAULT["czech"], solver="gdmm", max_iter=5,
                    check_every=10**6, warm_start=True, tol=0, random_state=0,
                    fit_intercept=False, averaging=tuning.pop("averaging"),
                    solver_options=tuning)
est.fit(D, y)
"""
#: after the warm-up fit (compilation, first pass), the workload trains for a long time
TRAIN_ON = """
import os, warnings
warnings.simplefilter("ignore")
open({ready!r}, "w").write(str(os.getpid()))
est.max_iter = 100000
est.fit({args})
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=sorted(WORKLOADS))
    ap.add_argument("--seconds", type=float, default=8.0, help="sampling time")
    ap.add_argument(
        "--addresses",
        type=int,
        default=400,
        help="the hottest sampled addresses resolved (they cover most samples)",
    )
    ap.add_argument("--top", type=int, default=16)
    ap.add_argument(
        "--warmup", type=int, default=None, help="passes before sampling (default: the workload's)"
    )
    args = ap.parse_args(argv)

    folder = tempfile.mkdtemp()
    ready = os.path.join(folder, "ready")
    fit_args = "[X[i] for i in tr], [y[i] for i in tr]" if args.workload == "ocr-bcfw" else "D, y"
    if args.workload.startswith(("yeast", "bibtex")):
        fit_args = "X, Y"
    code = WORKLOADS[args.workload].replace(
        "{benchmarks!r}", repr(os.path.dirname(os.path.abspath(__file__)))
    )
    if args.warmup is not None:
        code = re.sub(r"max_iter=\d+", f"max_iter={args.warmup}", code, count=1)
    code += TRAIN_ON.format(ready=ready, args=fit_args)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL)
    try:
        while not os.path.exists(ready):
            if proc.poll() is not None:
                raise SystemExit("the workload ended before training (see its errors)")
            time.sleep(0.5)
        pid = str(proc.pid)
        data = os.path.join(folder, "perf.data")
        subprocess.run(
            ["perf", "record", "-q", "-p", pid, "-o", data, "--", "sleep", str(args.seconds)],
            check=True,
            stderr=subprocess.DEVNULL,
        )
        report = subprocess.run(
            ["perf", "report", "-i", data, "--sort", "symbol"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        rows = []  # (share, address or name)
        for line in report.splitlines():
            m = re.match(r"\s*([\d.]+)%\s+\[\.\]\s+(\S+)", line)
            if m:
                rows.append((float(m.group(1)), m.group(2)))
        rows = rows[: args.addresses]
        cmd = ["gdb", "-p", pid, "-batch", "-ex", "set auto-load safe-path /"]
        for _, where in rows:
            cmd += ["-ex", f"info symbol {where}" if where.startswith("0x") else "echo\n"]
        out = subprocess.run(cmd, capture_output=True, text=True).stdout
        names = [
            ln
            for ln in out.splitlines()
            if "in section" in ln or "No symbol matches" in ln or ln == ""
        ]
    finally:
        proc.kill()
    shares = collections.Counter()
    for (share, where), name in zip(rows, names + [""] * len(rows)):
        if where.startswith("0x"):
            name = re.sub(r"\[abi.*| in section.*| \+ \d+", "", name).strip() or where
        else:
            name = where
        shares[name] += share
    print(f"{args.workload}: {sum(s for s, _ in rows):.1f}% of the samples resolved")
    for name, share in shares.most_common(args.top):
        print(f"{share:6.2f}%  {name[:110]}")


if __name__ == "__main__":
    main()
