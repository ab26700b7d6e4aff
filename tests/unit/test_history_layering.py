"""The commit schema has one owner: outside ``corral.history`` (and the store's row
checks, ``store/_decode.py``) no module reads a stored payload by a string key.

Read from the source with ``ast``: a subscript or ``.get`` with a string key on a
``.payload`` attribute, or on a name assigned from one in the same function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import corral

SRC = Path(corral.__file__).parent
OWNERS = ("history/", "store/_decode.py")


def _is_payload(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "payload"


def _payload_names(scope: ast.AST) -> set[str]:
    """Names a scope binds to a commit's payload (``p = commit.payload``, or one of two)."""
    names = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(_is_payload(n) for n in ast.walk(node.value)):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _string_key_reads(tree: ast.Module) -> list[int]:
    """Lines where a payload is read by a string key."""
    lines = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    for scope in scopes:
        names = _payload_names(scope)

        def payload(node: ast.AST, names: set[str] = names) -> bool:
            return _is_payload(node) or (isinstance(node, ast.Name) and node.id in names)

        for node in ast.walk(scope):
            if (
                isinstance(node, ast.Subscript)
                and payload(node.value)
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                lines.append(node.lineno)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and payload(node.func.value)
            ):
                lines.append(node.lineno)
    return sorted(set(lines))


def test_the_check_sees_a_string_key_read() -> None:
    code = "def f(c):\n    p = c.payload\n    return p['status'], c.payload.get('x')\n"
    assert _string_key_reads(ast.parse(code)) == [3]
    assert _string_key_reads(ast.parse("def f(c):\n    return c.status\n")) == []


def test_no_module_outside_history_reads_a_payload_by_a_string_key() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        name = path.relative_to(SRC).as_posix()
        if name.startswith(OWNERS):
            continue
        tree = ast.parse(path.read_text(), str(path))
        found += [f"{name}:{line}" for line in _string_key_reads(tree)]
    assert found == []
