"""Loading a benchmark from ``FILE[:OBJECT]``: a Python file, imported by path."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import click

from .._benchmark import Benchmark
from .._errors import ConfigError
from .._run_config import RunConfig
from .._suggest import did_you_mean

DEFAULT_OBJECT = "benchmark"
T = TypeVar("T")

#: Frames from these folders are Corral's or click's, not the user's.
_OURS = (str(Path(__file__).parents[1]), str(Path(click.__file__).parent))


class BenchmarkFileError(ConfigError):
    """The user's benchmark file raised while it was imported or its factory ran.

    ``user_traceback`` holds the exception with the user's own frames only: the
    CLI prints it above its one ``error:`` line.
    """

    def __init__(self, message: str, user_traceback: str) -> None:
        super().__init__(message)
        self.user_traceback = user_traceback


def split_target(target: str) -> tuple[Path, str]:
    """``"bench.py:suite"`` as ``(Path("bench.py"), "suite")``; the object defaults to
    ``benchmark``. A colon only separates an object when dotted identifiers follow it."""
    path, sep, name = target.rpartition(":")
    if sep and path and all(part.isidentifier() for part in name.split(".")):
        return Path(path), name
    return Path(target), DEFAULT_OBJECT


def load_benchmark(target: str, base_url: str | None = None) -> tuple[Benchmark, Path]:
    """The `Benchmark` that ``target`` names, and the file it came from.

    ``target`` is a file, or the dotted name of an importable module (a built-in
    benchmark: ``corral.benchmarks.humaneval``). The object may be a Benchmark
    or a function returning one, called with no arguments, or with
    ``base_url=`` when one is given (``--base-url``). A missing file or
    object, or one of the wrong type, is a `ConfigError`; an exception raised
    by the file itself (or by the function) is a `BenchmarkFileError` carrying
    the user's own frames of its traceback.
    """
    path, name = split_target(target)
    if not path.is_file() and _is_module_name(str(path)):
        module = _users(f"{str(path)!r} failed to import", importlib.import_module, str(path))
        return _benchmark_of(module, path, name, base_url), Path(module.__file__ or str(path))
    if not path.is_file():
        dotted = _could_be_module(str(path))
        what = "benchmark file or module" if dotted else "benchmark file"
        raise ConfigError(f"no such {what}: {str(path)!r}")
    module_name = benchmark_module(path)
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
        _users(f"{str(path)!r} failed to import", spec.loader.exec_module, module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        sys.path.remove(folder)
    return _benchmark_of(module, path, name, base_url), path


def _could_be_module(text: str) -> bool:
    """Whether ``text`` is written as a module name (dotted identifiers, no ``.py``)."""
    return not text.endswith(".py") and all(part.isidentifier() for part in text.split("."))


def _is_module_name(text: str) -> bool:
    """Whether ``text`` names an importable module (and not a file that is missing)."""
    if not _could_be_module(text):
        return False
    try:
        return importlib.util.find_spec(text) is not None
    except ImportError:  # a parent package is missing
        return False


def _benchmark_of(module: object, path: Path, name: str, base_url: str | None) -> Benchmark:
    obj: object = module
    for part in name.split("."):
        if not hasattr(obj, part):
            names = (n for n in dir(obj) if not n.startswith("_"))
            raise ConfigError(
                f"{str(path)!r} defines no {name!r}: define `{name} = corral.Benchmark(...)` "
                "or name another object with FILE:OBJECT" + did_you_mean(part, names)
            )
        obj = getattr(obj, part)
    if base_url is not None:
        obj = _with_base_url(obj, f"{str(path)}:{name}", base_url)
    if not isinstance(obj, Benchmark) and callable(obj):
        obj = _users(f"{str(path)}:{name}() raised", obj)
        if obj is None:  # a function that forgot its return
            raise ConfigError(f"{str(path)}:{name}() returned None, not a corral.Benchmark")
    if not isinstance(obj, Benchmark):
        raise ConfigError(
            f"{str(path)}:{name} is of type {type(obj).__name__}, not a corral.Benchmark "
            "(or a function returning one)"
        )
    if not isinstance(obj.run_defaults, Mapping | RunConfig):
        raise ConfigError(
            f"{str(path)}:{name}: run_defaults must be a mapping of run() arguments "
            f"or a corral.RunConfig, not {obj.run_defaults!r}"
        )
    return obj


def _with_base_url(obj: object, where: str, base_url: str) -> Callable[[], object]:
    """``obj`` called with ``base_url=``: it must be a function taking one."""
    try:
        parameters = inspect.signature(obj).parameters if callable(obj) else {}
    except (TypeError, ValueError):
        parameters = {}
    if isinstance(obj, Benchmark):
        problem = "is a corral.Benchmark (make it a function returning one)"
    elif not callable(obj):
        problem = f"is of type {type(obj).__name__}, not a function"
    elif "base_url" not in parameters:
        problem = "takes no base_url: give it a base_url=None parameter"
    else:
        return functools.partial(obj, base_url=base_url)
    raise ConfigError(f"--base-url needs a function taking base_url: {where} {problem}")


def _users(what: str, call: Callable[..., T], *args: object) -> T:
    """``call(*args)``; an exception it raises becomes a `BenchmarkFileError`."""
    try:
        return call(*args)
    except Exception as exc:
        frames = traceback.extract_tb(_user_frames(exc.__traceback__))
        shown = "".join(
            (["Traceback (most recent call last):\n"] if frames else [])
            + traceback.format_list(frames)
            + traceback.format_exception_only(exc)
        )
        message = f"{what}: {type(exc).__name__}: {exc}"
        raise BenchmarkFileError(message, shown) from None


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without Corral's, click's and importlib's frames."""
    kept: list[TracebackType] = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(("<frozen importlib", *_OURS)):
            kept.append(tb)
        tb = tb.tb_next
    # Relink the kept entries (tb_next is writable) so the chain has only them.
    if not kept:
        return None
    for this, after in zip(kept, [*kept[1:], None], strict=True):
        this.tb_next = after
    return kept[0]


def benchmark_module(path: Path) -> str:
    """The name a benchmark file is imported under."""
    return f"corral_benchmark_{path.stem}"
