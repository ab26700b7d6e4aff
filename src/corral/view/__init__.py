"""The results viewer: ``corral view`` serves it, ``corral view --export`` writes one file.

`create_app` needs the ``view`` extra (Starlette); the export needs nothing more
than Corral itself, so the server is imported only when asked for.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

from ._export import export_html

if _TYPE_CHECKING:
    from ._server import create_app

__all__ = ["create_app", "export_html"]


def __getattr__(name: str) -> _Any:
    if name == "create_app":
        from ._server import create_app

        globals()[name] = create_app  # as an import would: looked up once
        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
