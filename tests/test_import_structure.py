"""The package's import direction: models and inference never import the solvers, the
estimators or the distributed code, and the models, inference and solvers import no cycle
(imports inside functions included)."""

import ast
import importlib.util
from pathlib import Path

ROOT = Path(importlib.util.find_spec("dualstruct").origin).parent  # not imported
#: what models and inference may not import
UPSTREAM = ("dualstruct.solvers", "dualstruct.estimators", "dualstruct.distributed")
#: the layers checked for cycles
LAYERS = ("dualstruct.models", "dualstruct.inference", "dualstruct.solvers")


def _module_name(path):
    parts = ("dualstruct", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules():
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(name, path, modules):
    """(line, imported module) of every import in the file, at any depth."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # a submodule by name, else the module itself
                sub = f"{base}.{alias.name}"
                yield node.lineno, sub if sub in modules else base


def _in(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _graph():
    modules = _modules()
    return {
        name: {(line, target) for line, target in _imports(name, path, modules)}
        for name, path in modules.items()
    }


def test_models_and_inference_never_import_upward():
    graph = _graph()
    wrong = [
        f"{name} (line {line}) imports {target}"
        for name, edges in sorted(graph.items())
        if _in(name, ("dualstruct.models", "dualstruct.inference"))
        for line, target in sorted(edges)
        if _in(target, UPSTREAM)
    ]
    assert not wrong, "\n".join(wrong)


def _cycle(graph):
    """One cycle of the directed graph (a list of nodes), or None."""
    state, stack = {}, []

    def visit(u):
        state[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if state.get(v) == 1:
                return stack[stack.index(v) :] + [v]
            if v not in state:
                found = visit(v)
                if found:
                    return found
        state[u] = 2
        stack.pop()
        return None

    for u in sorted(graph):
        if u not in state:
            found = visit(u)
            if found:
                return found
    return None


def test_no_import_cycle_among_models_inference_and_solvers():
    graph = {
        name: {t for _, t in edges if _in(t, LAYERS) and t != name}
        for name, edges in _graph().items()
        if _in(name, LAYERS)
    }
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
