"""The viewer's page, script and style (package data), for the server and for the export."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any

from .._json import finite

_MEDIA = {
    "charts.js": "text/javascript; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
}
#: The scripts, in the order they run (app.js draws with charts.js's functions).
SCRIPTS = ("charts.js", "app.js")

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<link rel="icon" href="data:,">
{head}
<title>Corral viewer</title>
</head>
<body>
<header><a href="#/" id="home">Corral</a> <span id="where"></span> <span id="status"></span>
<span class="keys">j/k: next/previous trial · Enter: open · u: up</span></header>
<main id="main"></main>
{body}
</body>
</html>
"""


@cache
def asset(name: str) -> tuple[bytes, str]:
    """A static file's bytes and media type (only the viewer's own names exist)."""
    return (files(__package__) / "static" / name).read_bytes(), _MEDIA[name]


def shell() -> str:
    """The page every served URL starts from: the script renders the route in its hash."""
    return _PAGE.format(
        head='<link rel="stylesheet" href="/static/app.css">',
        body="\n".join(f'<script src="/static/{name}"></script>' for name in SCRIPTS),
    )


def standalone(data: Any) -> str:
    """One self-contained page: style, script and ``data`` inline, opened from disk.

    Its policy allows exactly the inline script and style it carries (by hash);
    the data is JSON in a non-executed script element, with ``<`` escaped so no
    value can close that element.
    """
    script = "\n".join(asset(name)[0].decode() for name in SCRIPTS)
    style = asset("app.css")[0].decode()
    policy = (
        f"default-src 'none'; script-src '{_sha256(script)}'; style-src '{_sha256(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'"
    )
    head = f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n<style>{style}</style>'
    body = (
        f'<script type="application/json" id="corral-data">{inline_json(data)}</script>\n'
        f"<script>{script}</script>"
    )
    return _PAGE.format(head=head, body=body)


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def to_json(value: Any) -> bytes:
    """JSON a browser parses: NaN and infinities (which ``JSON.parse`` refuses) as strings."""
    try:
        text = json.dumps(value, allow_nan=False, separators=(",", ":"), default=str)
    except ValueError:
        text = json.dumps(finite(value), separators=(",", ":"), default=str)
    return text.encode()


def by_k(values: Mapping[int, float]) -> dict[str, float]:
    """Values by k as JSON keys them (strings)."""
    return {str(k): v for k, v in values.items()}


def inline_json(value: Any) -> str:
    """JSON safe inside a ``<script>`` element: no ``<`` (so no ``</script>`` nor
    ``<!--``), and no line or paragraph separators."""
    text = to_json(value).decode()
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
