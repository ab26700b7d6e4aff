"""Imports go one way: the CLI and the runner sit on top, nothing below reaches up.

Read from the source with ``ast`` (imports under ``TYPE_CHECKING`` count too: a
type an engine module needs from the CLI is a concept in the wrong place).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import corral

SRC = Path(corral.__file__).parent


def _imports() -> dict[str, set[str]]:
    """Each module of ``corral`` (dotted name) and the ``corral`` modules it imports."""
    found: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = ["corral", *path.relative_to(SRC).with_suffix("").parts]
        package = parts[:-1]
        if parts[-1] == "__init__":
            parts = package
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                # ``from . import x`` may name a submodule: count both readings.
                names |= {module, *(f"{module}.{a.name}" for a in node.names)}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        found[".".join(parts)] = {n for n in names if n == "corral" or n.startswith("corral.")}
    return found


IMPORTS = _imports()


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _offenders(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} imports {name}"
        for module, names in IMPORTS.items()
        if any(_within(module, p) for p in importers)
        for name in names
        if any(_within(name, f) for f in forbidden)
    )


def test_the_walk_sees_the_tree() -> None:
    # The check below means something only if it reads the modules it names.
    assert "corral.cli._main" in IMPORTS
    assert "corral._runner" in IMPORTS["corral"]


ENGINE = (
    "corral.agents",
    "corral.executor",
    "corral.history",
    "corral.models",
    "corral.progress",
    "corral.report",
    "corral.runtime",
    "corral.scheduler",
    "corral.store",
    "corral.testing",
    "corral.view",
)


@pytest.mark.parametrize(
    ("importers", "forbidden"),
    [
        # The CLI renders and parses; nothing it owns is needed below it.
        (ENGINE, ("corral.cli",)),
        # The runner assembles a run: watchers and the viewer learn of it through
        # the types it hands them, never by importing it.
        (ENGINE, ("corral._runner",)),
        # Stores keep commits: they know nothing of who runs, schedules or reports.
        (
            ("corral.store",),
            (
                "corral.executor",
                "corral.progress",
                "corral.report",
                "corral.runtime",
                "corral.scheduler",
                "corral.view",
            ),
        ),
        # The commit schema sits below everything that reads or writes commits.
        (
            ("corral.history",),
            (*(p for p in ENGINE if p != "corral.history"), "corral._records", "corral._history"),
        ),
    ],
    ids=["engine-not-cli", "engine-not-runner", "store-at-the-bottom", "history-below-all"],
)
def test_no_upward_import(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert _offenders(importers, forbidden) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules() -> None:
    # Module to module (a package's __init__ is a module of its own; imports under
    # TYPE_CHECKING count): two modules that import each other are one concept split.
    graph = {m: {n for n in names if n in IMPORTS and n != m} for m, names in IMPORTS.items()}
    packages = {m for m in IMPORTS if (SRC / Path(*m.split(".")[1:]) / "__init__.py").exists()}
    # A package's own __init__ re-exports its modules: only edges *into* a package's
    # modules from elsewhere matter, not the facade's.
    graph = {m: set() if m in packages else names - packages for m, names in graph.items()}
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
