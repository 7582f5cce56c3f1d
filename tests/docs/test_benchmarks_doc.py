"""BENCHMARKS.md is a reference: bounded size, no lab-notebook wording, runnable commands."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "BENCHMARKS.md"
OPTION = re.compile(r"(?<![\w-])--[A-Za-z][\w-]*")


def _text():
    return BENCHMARKS.read_text(encoding="utf-8")


def _commands(text):
    """The commands of the fenced and indented code blocks, continuation lines joined."""
    lines, in_fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence or line.startswith("    "):
            lines.append(line.strip())
    commands, pending = [], ""
    for line in lines:
        if line.startswith("#"):
            continue
        pending += line
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        commands.append(pending)
        pending = ""
    if pending:
        commands.append(pending)
    return commands


def _script_defines(source, option):
    if f'"{option}"' in source:
        return True
    # argparse.BooleanOptionalAction adds --no-NAME for --NAME
    return (
        option.startswith("--no-")
        and f'"--{option[5:]}"' in source
        and "BooleanOptionalAction" in source
    )


def test_size_at_most_40_kb():
    size = BENCHMARKS.stat().st_size
    assert size <= 40_000, f"BENCHMARKS.md is {size} bytes, more than 40,000"


@pytest.mark.parametrize("word", ["tried", "faster day", "same day", "another day"])
def test_no_notebook_wording(word):
    hits = [
        f"line {n}: {line.strip()}"
        for n, line in enumerate(_text().splitlines(), 1)
        if word in line.lower()
    ]
    assert not hits, f"BENCHMARKS.md says {word!r}:\n" + "\n".join(hits)


def test_benchmark_commands_name_existing_scripts_and_options():
    commands = [c for c in _commands(_text()) if "benchmarks/" in c]
    assert len(commands) > 20, "no benchmark commands found in BENCHMARKS.md"
    errors = []
    for command in commands:
        scripts = re.findall(r"python\s+(benchmarks/[\w./-]+\.py)", command)
        if not scripts:
            errors.append(f"names no benchmarks/*.py script to run: {command}")
            continue
        path = ROOT / scripts[0]
        if not path.is_file():
            errors.append(f"{scripts[0]} does not exist: {command}")
            continue
        source = path.read_text(encoding="utf-8")
        tail = command.split(scripts[0], 1)[1]
        for option in OPTION.findall(tail):
            if not _script_defines(source, option):
                errors.append(f"{scripts[0]} has no option {option}: {command}")
    assert not errors, "\n".join(errors)


def test_cli_commands_use_existing_options():
    from dualstruct.cli import build_parser

    subparsers = build_parser()._subparsers._group_actions[0].choices
    errors = []
    for command in _commands(_text()):
        match = re.search(r"(?:^|\s)dualstruct\s+(\w+)(.*)", command)
        if match is None:
            continue
        name, tail = match.groups()
        if name not in subparsers:
            errors.append(f"dualstruct has no command {name!r}: {command}")
            continue
        known = subparsers[name]._option_string_actions
        errors += [
            f"dualstruct {name} has no option {option}: {command}"
            for option in OPTION.findall(tail)
            if option not in known
        ]
    assert not errors, "\n".join(errors)


def test_section_pointers_in_the_package_name_existing_sections():
    headings = {line.lstrip("#").strip() for line in _text().splitlines() if line.startswith("#")}
    pointer = re.compile(r'BENCHMARKS\.md, ((?:"[^"]+"(?:, | and )?)+)')
    errors, found = [], 0
    for path in sorted((ROOT / "dualstruct").rglob("*.py")):
        text = re.sub(r"\s*\n\s*(?:#:?\s*)?", " ", path.read_text(encoding="utf-8"))
        for match in pointer.finditer(text):
            for name in re.findall(r'"([^"]+)"', match.group(1)):
                found += 1
                if not any(h == name or h.startswith(name + " (") for h in headings):
                    errors.append(f"{path.relative_to(ROOT)}: no section {name!r} in BENCHMARKS.md")
    assert found > 5, "no section pointers found in the package"
    assert not errors, "\n".join(errors)
