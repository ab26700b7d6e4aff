"""``corral view`` opens its store before it serves: a store that cannot be opened is
one ``error:`` line and exit 2, never a server that dies with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..contract.test_open_store import _invoke
from ..support import pg

pytest.importorskip("uvicorn")


def _foreign(tmp_path: Path) -> str:
    path = tmp_path / "passwd"
    path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    return str(path)


@pytest.mark.parametrize(
    ("store", "named"),
    [
        (_foreign, "passwd"),
        (lambda _: f"{pg.SERVER}/postgres?sslmode=bogus", 'sslmode value: "bogus"'),
        (lambda _: "postgresql://no-such-host.invalid/db", "no-such-host.invalid"),
    ],
    ids=["foreign-file", "bad-option", "unresolvable-host"],
)
def test_a_store_that_cannot_be_opened_is_one_error_line(
    tmp_path: Path, store: object, named: str
) -> None:
    where = store(tmp_path)  # type: ignore[operator]
    result = _invoke("view", "--store", where, "--port", "0")
    assert result.exit_code == 2, result.output
    assert "serving" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert named in lines[0]
