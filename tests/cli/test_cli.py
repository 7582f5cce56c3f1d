"""The command line's parser and progress lines."""

import argparse
import io
import re
from types import SimpleNamespace

import pytest

from dualstruct.cli import Progress, build_parser


def _parsers(parser, name="dualstruct"):
    """Every parser and subparser with its command name."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_option_and_argument_has_help():
    missing = []
    for name, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):  # each command's own help
                helps = {a.dest: a.help for a in action._choices_actions}
                missing += [f"{name} {c}" for c in action.choices if not helps.get(c)]
            elif not action.help:
                missing.append(f"{name}: {'/'.join(action.option_strings) or action.dest}")
    assert not missing, f"without help text: {missing}"


def _record(passes, gap=float("nan"), seconds_per_pass=1.0):
    return SimpleNamespace(
        passes=passes,
        time=passes * seconds_per_pass,
        eval_time=0.0,
        primal=float("nan") if gap != gap else 1.0,
        dual=float("nan"),
        relative_gap=gap,
        validation_score=float("nan"),
    )


def _eta_printed(progress, estimator, record):
    """The progress line printed for ``record`` and its ETA field."""
    progress(estimator, record)
    line = progress.out.getvalue().splitlines()[-1]
    return line, re.search(r"eta +(\S+?)s?$", line).group(1)


def test_the_eta_counts_to_the_next_check_that_can_stop_training():
    """At pass 75 with checks every 25 passes, a gap that the 1 / passes rate brings under
    ``tol`` within a pass still leaves 25 passes to make: training stops at a check."""
    estimator = SimpleNamespace(check_every=25)
    progress = Progress(max_iter=200, tol=0.01, out=io.StringIO())
    progress._first = (0.0, 70)  # 5 passes timed at 1 s each
    record = _record(75, gap=0.0101)
    progress.checks.append((75, 0.0101))
    # were every pass checked, the 1 / passes rate would stop training at pass 76
    assert progress.eta(record, now=5.0) == pytest.approx(1.0)
    progress.check_every = estimator.check_every
    assert progress.eta(record, now=5.0) == pytest.approx(25.0)
    # between checks: the passes to the next check; the gap reached at a check: none left
    assert progress.eta(_record(80), now=10.0) == pytest.approx(20.0)
    assert progress.eta(_record(100, gap=0.009), now=30.0) == 0.0
    # the last pass is always checked: max_iter caps the count
    progress.max_iter = 90
    assert progress.eta(_record(80), now=10.0) == pytest.approx(10.0)


def test_the_progress_line_reads_the_check_schedule_from_the_estimator():
    for estimator, left in (
        (SimpleNamespace(check_every=25), 25.0),
        # check_every="auto": the solver's next scheduled check
        (SimpleNamespace(check_every="auto", solver_=SimpleNamespace(_next_check=90)), 15.0),
    ):
        progress = Progress(max_iter=200, tol=0.01, out=io.StringIO())
        progress._first = (0.0, 70)
        record = _record(75, gap=0.0101)
        line, _ = _eta_printed(progress, estimator, record)
        assert line.startswith("pass   75/200"), line
        assert progress.eta(record, now=5.0) == pytest.approx(left)


def test_the_first_line_shows_no_eta():
    """A first pass includes the kernels' compilation on a first run: its time says nothing
    of the passes to come."""
    progress = Progress(max_iter=200, tol=0.01, out=io.StringIO())
    line, eta = _eta_printed(progress, SimpleNamespace(check_every=5), _record(1, 0.5, 40.0))
    assert eta == "—", line
