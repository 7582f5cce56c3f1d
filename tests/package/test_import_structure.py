"""The package's import direction: models and inference never import the solvers, the
estimators or the distributed code; no two files, and no two subpackages, of the package
import each other through a cycle (imports inside functions included); an import inside a
function says why."""

import ast
import importlib.util
from pathlib import Path

ROOT = Path(importlib.util.find_spec("dualstruct").origin).parent  # not imported
#: what models and inference may not import
UPSTREAM = ("dualstruct.solvers", "dualstruct.estimators", "dualstruct.distributed")
#: optional dependencies a function may import without a comment
OPTIONAL = ("pyspark", "matplotlib")


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


def test_no_import_cycle_between_files():
    graph = _graph()
    graph = {
        name: {t for _, t in edges if t in graph and t != name} for name, edges in graph.items()
    }
    cycle = _cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def _packages(graph):
    """The import graph between the package's subpackages and top-level modules (a file
    stands for its subpackage; the package's own ``__init__``, which imports everything to
    re-export it, is left out)."""

    def top(name):
        return ".".join(name.split(".")[:2])

    out = {}
    for name, edges in graph.items():
        if name == "dualstruct":
            continue
        targets = {top(t) for _, t in edges if t.startswith("dualstruct.")}
        out.setdefault(top(name), set()).update(targets - {top(name), "dualstruct"})
    return out


def test_no_import_cycle_between_subpackages():
    """E.g. the estimators import the distributed backend, which never imports them back."""
    cycle = _cycle(_packages(_graph()))
    assert cycle is None, " -> ".join(cycle)


def test_the_package_check_finds_a_cycle_through_two_files():
    graph = {
        "dualstruct": {(1, "dualstruct.estimators")},
        "dualstruct.estimators.base": {(1, "dualstruct.distributed")},
        "dualstruct.distributed.reading": {(1, "dualstruct.estimators.base")},
        "dualstruct.io": set(),
    }
    assert _cycle(_packages(graph)) == [
        "dualstruct.distributed",
        "dualstruct.estimators",
        "dualstruct.distributed",
    ]


def _function_imports(path):
    """(line, module, source line, line above) of every import inside a function."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    module = node.names[0].name if isinstance(node, ast.Import) else node.module
                    line = node.lineno
                    above = lines[line - 2] if line > 1 else ""
                    yield line, module or ".", lines[line - 1], above


def _unexplained(path, name):
    found = set()
    for line, module, text, above in _function_imports(path):
        optional = any(module == p or module.startswith(p + ".") for p in OPTIONAL)
        if not optional and "#" not in text and not above.strip().startswith("#"):
            found.add(f"{name} (line {line}): {text.strip()}")
    return found


def test_imports_inside_functions_say_why():
    """An import inside a function (not of an optional dependency) carries a comment, on its
    line or the line above, saying why it is not at the top of the file."""
    wrong = sorted(w for name, path in _modules().items() for w in _unexplained(path, name))
    assert not wrong, "\n".join(wrong)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_comment_check_finds_an_unexplained_import(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(
        "def f():\n"
        "    import numpy\n"
        "    import matplotlib.pyplot\n"
        "    import scipy.optimize  # only where a QP is solved\n"
        "    # the sparse matrices of one reader\n"
        "    import scipy.sparse\n",
        encoding="utf-8",
    )
    assert _unexplained(path, "m") == {"m (line 2): import numpy"}
