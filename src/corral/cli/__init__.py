"""The ``corral`` command line: demo, run, report, show, list."""

from ._main import main

__all__ = ["main"]
