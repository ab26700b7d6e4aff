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
    ],
    ids=["engine-not-cli", "engine-not-runner", "store-at-the-bottom"],
)
def test_no_upward_import(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> None:
    assert _offenders(importers, forbidden) == []
