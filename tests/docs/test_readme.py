"""The README starts a newcomer: short, its commands install what the tests need, and its
main-job command and Python example run on a fresh machine without data."""

import ast
import io
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

from dualstruct import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def _commands():
    """The commands of the README's first shell block (comments removed)."""
    lines = _blocks("bash")[0].splitlines()
    return [line.split("#")[0].strip() for line in lines if line.strip()]


def test_readme_is_short():
    assert len(README.splitlines()) <= 150


def test_the_first_commands_set_up_test_and_run_the_main_job():
    setup, tests, main_job = _commands()
    assert setup == 'pip install -e ".[dev]"'
    # CI runs the README's test command as it stands
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert tests in [line.split("#")[0].strip() for line in ci]
    assert main_job.split()[0] == "dualstruct"
    scripts = {e.name: e.value for e in metadata.entry_points(group="console_scripts")}
    assert scripts.get("dualstruct") == "dualstruct.cli:main"


def _imported_modules(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_the_set_up_installs_what_the_tests_import():
    """Every third-party module the tests import comes with the package or its dev extra."""
    installed = set()
    for requirement in metadata.requires("dualstruct") or []:
        name, _, marker = requirement.partition(";")
        if not marker or 'extra == "dev"' in marker:
            installed.add(re.split(r"[<>=!~\[ ]", name.strip())[0].lower())
    distribution = {"sklearn": "scikit-learn"}
    local = {p.stem for p in (ROOT / "tests").rglob("*.py")} | {"dualstruct"}
    missing = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for module in _imported_modules(path):
            if module in sys.stdlib_module_names or module in local:
                continue
            if distribution.get(module, module).lower() not in installed:
                missing.add(f"{module} ({path.name})")
    assert not missing, f"imported by the tests but not installed by the set-up: {missing}"


def test_the_main_job_command_trains_evaluates_saves_and_reloads():
    argv = _commands()[2].split()[1:]
    out = io.StringIO()
    assert cli.main(argv, out=out) == 0
    text = out.getvalue()
    checks = re.findall(r"^pass +\d+/\d+ .* gap +(\d+\.\d+)% +dev +(\d\.\d+)", text, re.M)
    assert len(checks) >= 2, text  # per-check lines: the certified gap and the dev score
    assert float(checks[-1][0]) <= 1.0 and float(checks[-1][1]) > 0.9, text
    assert "model saved to" in text and "stop: tol" in text, text
    accuracy = float(re.search(r"token accuracy: ([\d.]+)%", text).group(1))
    assert accuracy > 90, text
    assert re.search(r"reloaded .*\n  the/DET ", text), text
    folder = Path(re.search(r" in (\S+)\n", text).group(1))
    assert not folder.exists()  # the temporary folder is removed


def test_the_python_example_runs(tmp_path, monkeypatch, capsys):
    (example,) = _blocks("python")
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert float(out.strip().splitlines()[-1]) > 0.8, out
    assert (tmp_path / "chain.npz").is_file()


@pytest.mark.parametrize(
    "link", sorted(set(re.findall(r"\]\(((?:docs|examples)/[^)]*)\)", README)))
)
def test_the_links_to_the_documentation_exist(link):
    assert (ROOT / link).exists(), link
