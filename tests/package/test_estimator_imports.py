"""The estimators and the tagger import each other in one direction only."""

import ast
from pathlib import Path

import dualstruct

ROOT = Path(dualstruct.__file__).resolve().parent


def _modules(root):
    """``{dotted name: path}`` of the package at ``root``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imported(name, modules):
    """The package's modules that module ``name`` imports anywhere (in functions too), with
    the packages Python runs on the way (those ``name`` is not inside)."""
    path = modules[name]
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = node.module
            if node.level:
                module = ".".join(base + ([node.module] if node.module else []))
            targets = [module] + [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            continue
        for target in targets:
            if target not in modules:
                continue
            parts = target.split(".")
            for k in range(2, len(parts) + 1):  # the packages on the way, then the module
                step = ".".join(parts[:k])
                if step in modules and step != name and not name.startswith(step + "."):
                    found.add(step)
    return found


def _cycle(nodes, modules):
    """A cycle among ``nodes`` (following the imports between them), or None."""
    graph = {n: sorted(_imported(n, modules) & nodes) for n in nodes}
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == "open":
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        state[n] = "done"
        stack.pop()
        return None

    for n in sorted(nodes):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def _estimators_and_tagger(modules):
    return {n for n in modules if n.endswith(".tagger") or ".estimators" in n}


def test_estimators_and_the_tagger_form_no_import_cycle():
    modules = _modules(ROOT)
    nodes = _estimators_and_tagger(modules)
    assert {"dualstruct.tagger", "dualstruct.estimators", "dualstruct.estimators.base"} <= nodes
    cycle = _cycle(nodes, modules)
    assert cycle is None, " -> ".join(cycle)


def test_the_estimators_never_import_the_tagger_module():
    """``dualstruct.tagger`` re-exports the estimator; the estimators need not know it."""
    modules = _modules(ROOT)
    for n in modules:
        if n.startswith("dualstruct.estimators"):
            assert "dualstruct.tagger" not in _imported(n, modules), n


def test_the_check_finds_an_import_inside_a_function(tmp_path):
    """Two modules importing each other, one of them inside a function, are a cycle."""
    package = tmp_path / "dualstruct"
    (package / "estimators").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "tagger.py").write_text("from .estimators.base import restore_on_error\n")
    (package / "estimators" / "__init__.py").write_text(
        "def load(path):\n    from ..tagger import SequenceTagger\n"
    )
    (package / "estimators" / "base.py").write_text("import numpy\n")
    modules = _modules(package)
    cycle = _cycle(_estimators_and_tagger(modules), modules)
    assert cycle == ["dualstruct.estimators", "dualstruct.tagger", "dualstruct.estimators"]
