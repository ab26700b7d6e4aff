"""Loading a benchmark from ``FILE[:OBJECT]``: a Python file, imported by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .._benchmark import Benchmark
from .._errors import ConfigError

DEFAULT_OBJECT = "benchmark"


def split_target(target: str) -> tuple[Path, str]:
    """``"bench.py:suite"`` as ``(Path("bench.py"), "suite")``; the object defaults to
    ``benchmark``. A colon only separates an object when dotted identifiers follow it."""
    path, sep, name = target.rpartition(":")
    if sep and path and all(part.isidentifier() for part in name.split(".")):
        return Path(path), name
    return Path(target), DEFAULT_OBJECT


def load_benchmark(target: str) -> tuple[Benchmark, Path]:
    """The `Benchmark` that ``target`` names, and the file it came from.

    The object may be a Benchmark or a function of no arguments returning one.
    A missing file or object, or one of the wrong type, is a `ConfigError`;
    an exception raised by the file itself propagates (it is the user's bug,
    and its traceback is what they need).
    """
    path, name = split_target(target)
    if not path.is_file():
        raise ConfigError(f"no such benchmark file: {str(path)!r}")
    module_name = f"corral_benchmark_{path.stem}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{str(path)!r} cannot be imported as a Python file")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs so that dataclasses and pickling in the file can
    # find their module; its folder is importable so it can import its siblings.
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(folder)
    obj: object = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{str(path)!r} defines no {name!r}: define `{name} = corral.Benchmark(...)` "
                "or name another object with FILE:OBJECT"
            )
        obj = getattr(obj, part)
    if not isinstance(obj, Benchmark) and callable(obj):
        obj = obj()
    if not isinstance(obj, Benchmark):
        raise ConfigError(
            f"{str(path)}:{name} is a {type(obj).__name__}, not a corral.Benchmark "
            "(or a function returning one)"
        )
    return obj, path
