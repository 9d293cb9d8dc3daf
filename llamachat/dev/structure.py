"""``python -m llamachat.dev.structure``: the package's shape, measured from its source.

The figures the structure keeps to (import cycles, files directly in ``ui/``, the longest
module and class, no two modules with one file name), read from the code's own imports and definitions without importing it,
so a test and a person see the same numbers. Type-checking imports count as edges: a cycle
that only mypy follows is still two modules that cannot be read apart.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent
NAME = PACKAGE.name

MAX_UI_FILES = 15
MAX_MODULE_LINES = 800
# A class past 400 lines is a prompt to look at what it is for and split it by
# responsibility (a part with a name of its own), never to trim lines to get under.
MAX_CLASS_LINES = 400


@dataclass(frozen=True)
class Shape:
    """What `measure` found: cycles, the files directly in ``ui/``, and the sizes."""

    cycles: list[list[str]]
    ui_files: list[str]
    module_lines: dict[str, int]
    class_lines: dict[str, int]
    shared_names: dict[str, list[str]]
    """File names that more than one module has (`store.py` in three folders), by name."""

    def problems(self) -> list[str]:
        """Each way the package is out of shape, as a sentence; empty when it keeps to the limits."""
        found = [f"import cycle among: {', '.join(cycle)}" for cycle in self.cycles]
        if len(self.ui_files) > MAX_UI_FILES:
            found.append(f"{len(self.ui_files)} files directly in ui/ (at most {MAX_UI_FILES})")
        found += [
            f"{name}: {lines} lines (at most {MAX_MODULE_LINES})"
            for name, lines in self.module_lines.items()
            if lines > MAX_MODULE_LINES
        ]
        found += [
            f"class {name}: {lines} lines (at most {MAX_CLASS_LINES})"
            for name, lines in self.class_lines.items()
            if lines > MAX_CLASS_LINES
        ]
        found += [
            f"{len(modules)} modules named {name}: {', '.join(modules)} (a file's name says what it holds)"
            for name, modules in self.shared_names.items()
        ]
        return found


def product_modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the program by dotted name, but `dev` and `tests` (it never imports them)."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[1:2] in (["dev"], ["tests"]):
            continue
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports, at any depth of its code."""
    package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    edges: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            edges.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package_parts[: len(package_parts) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                edges.add(child if child in known else module)
    return {edge for edge in edges if edge in known and edge != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root, children_of_root in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(children_of_root)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def measure(package: Path = PACKAGE) -> Shape:
    """Measure the package at `package` (its source, not the imported modules)."""
    modules = product_modules(package)
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    class_lines: dict[str, int] = {}
    module_lines: dict[str, int] = {}
    for name, path in modules.items():
        text = path.read_text(encoding="utf-8")
        module_lines[name] = text.count("\n")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                class_lines[f"{name}.{node.name}"] = node.end_lineno - node.lineno + 1
    ui_files = sorted(path.name for path in (package / "ui").glob("*.py"))
    by_file_name: dict[str, list[str]] = {}
    for name, path in modules.items():
        if path.name not in ("__init__.py", "__main__.py"):
            by_file_name.setdefault(path.name, []).append(name)
    shared = {file: names for file, names in sorted(by_file_name.items()) if len(names) > 1}
    return Shape(_cycles(graph), ui_files, module_lines, class_lines, shared)


def main() -> int:
    """Print the figures, largest first, and any problem; exit 1 when there is one."""
    shape = measure()
    print(f"modules: {len(shape.module_lines)}, files directly in ui/: {len(shape.ui_files)}")
    print(f"import cycles: {len(shape.cycles)}")
    for name, lines in sorted(shape.module_lines.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  module {name}: {lines} lines")
    for name, lines in sorted(shape.class_lines.items(), key=lambda kv: -kv[1])[:5]:
        print(f"  class {name}: {lines} lines")
    problems = shape.problems()
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
