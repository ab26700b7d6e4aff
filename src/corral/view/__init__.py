"""The results viewer: ``corral view`` serves it, ``corral view --export`` writes one file.

`create_app` needs the ``view`` extra (Starlette); the export needs nothing more
than Corral itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._export import export_html

if TYPE_CHECKING:
    from ._server import create_app

__all__ = ["create_app", "export_html"]


def __getattr__(name: str) -> Any:
    # The server's stack is an optional extra: imported only when asked for.
    if name == "create_app":
        from ._server import create_app

        return create_app
    raise AttributeError(name)
