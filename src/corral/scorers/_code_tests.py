"""`code_tests`: score a program by running it with its tests in `corral.sandbox`."""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib import resources
from pathlib import PurePosixPath
from typing import Any

from .._errors import ConfigError
from .._sandbox import (
    DISK,
    FILE_SIZE,
    MIB,
    Isolation,
    _argv,
    _files,
    _no_file_in_a_file,
    checked_limits,
    hidden_paths,
    sandbox,
)
from .._types import Evaluation, TrialRecord
from ._base import Scorer

#: What a failed evaluation's ``details["stderr"]`` keeps of the error output (its end).
STDERR_TAIL = 2000

#: A fence opening a block (CommonMark): its indentation, its fence, its info string.
_OPENING = re.compile(r"([ \t]*)(`{3,}|~{3,})[ \t]*([^`]*)")
#: A fence opening a block after text on its line ("Sure! ```python"), as models write
#: it: the text holds no backtick (no inline code), the info string is one word.
_GLUED = re.compile(r"([^`]*)(`{3,})[ \t]*([\w+#.-]*)")
#: The info strings (their first word) of a block of Python code; none is a bare fence.
_PYTHON = ("", "python", "python3", "py")
#: What follows a fence in a block when it opens another (``python3``, ``c++``): one word,
#: not prose (``That's it.``, ``. Done``), which a closing fence may have after it.
_INFO_WORD = re.compile(r"[A-Za-z](?:[\w+#.-]*[\w+#])?")


def extract_code(text: object) -> str:
    """The code in a model's answer: its first fenced block of Python (```python ...
    ```, or a bare fence), else the whole text. Anything but text is an empty program.

    Fences are read line by line, as Markdown does: another language's block is skipped
    whole (its closing fence opens nothing), a fence in the code does not end it unless
    it begins its line, a block indented (in a list item: up to three spaces) is
    unindented as much, and a block never closed (a reply cut off) runs to the end.
    As models write them, a fence may also follow text on its line (``Sure! ```python``),
    end the code's last line (``return x```  ``) or be followed by prose on its own
    (``  ``` That's my answer.``: the prose is not code); a fence followed by one word
    only (``  ```python3``) opens a block inside the code (a docstring's) and ends nothing.
    """
    if not isinstance(text, str):
        return ""
    lines = text.split("\n")
    at = 0
    while at < len(lines):
        line = lines[at].rstrip("\r\t ")
        opening = _OPENING.fullmatch(line) or _GLUED.fullmatch(line)
        at += 1
        if opening is None:
            continue
        indent, fence, info = opening[1], opening[2], opening[3].split()
        # Markdown's fence in a list item is indented by at most three spaces; one
        # indented more (or after text) is a body at its function's indentation, kept.
        spaces = len(indent) if indent.strip(" ") == "" and len(indent) <= 3 else 0
        body, at, closed = _block(lines, at, fence)
        if (info[0].lower() if info else "") in _PYTHON:
            body = [_unindent(line, spaces) for line in body]
            return "\n".join(body) + ("\n" if closed and body else "")
    return text


def _block(lines: list[str], start: int, fence: str) -> tuple[list[str], int, bool]:
    """The lines of a block opened by ``fence``, the line after it and whether it was
    closed: by a fence as long or longer beginning its line, alone or followed by prose
    (not by one word, an opening's, nor by another such fence), or ending a line of code
    with no other such character (``return x```  ``); a block never closed ends with
    the text. A fence followed by prose inside a triple-quoted string of the code
    (a template's fence line) is the string's, and ends nothing."""
    quote: str | None = None  # the triple quote of the string open at this line
    for at in range(start, len(lines)):
        line = lines[at].strip()
        rest = line.lstrip(fence[0])
        if len(line) - len(rest) >= len(fence) and (
            not rest
            or (quote is None and fence not in rest and not _INFO_WORD.fullmatch(rest.strip()))
        ):
            return lines[start:at], at + 1, True
        quote = _open_quote(lines[at], quote)
        code = lines[at].rstrip("\r\t ")
        last = code.rstrip(fence[0])
        if len(code) - len(last) >= len(fence) and last.strip() and fence[0] not in last:
            return [*lines[start:at], last], at + 1, True
    return lines[start:], len(lines), False


def _open_quote(line: str, quote: str | None) -> str | None:
    """The triple quote of the string open after ``line`` (``quote``: the one open
    before it, None: none), as far as triple quotes alone tell."""
    at = 0
    while True:
        if quote is None:
            found = [(i, q) for q in ('"""', "'''") if (i := line.find(q, at)) >= 0]
            if not found:
                return None
            at, quote = min(found)
        else:
            at = line.find(quote, at)
            if at < 0:
                return quote
            quote = None
        at += 3


def _unindent(line: str, indent: int) -> str:
    return line[min(indent, len(line) - len(line.lstrip(" "))) :]


Part = str | Callable[[TrialRecord], str]


class CodeTests(Scorer):
    """The scorer `code_tests` returns: ``await scorer(trial)`` is an `Evaluation`,
    its score under ``scores[name]`` too (so it goes in `combine` like the others)."""

    def __init__(
        self,
        name: str,
        tests: Part | None,
        program: Callable[[TrialRecord], str] | None,
        command: Sequence[str] | str | None,
        file_name: str,
        files: Mapping[str, str | bytes],
        limits: Mapping[str, Any],
        entry_point: str | Callable[[TrialRecord], str] | None = None,
        prelude: Part = "",
        hidden: Sequence[str | os.PathLike[str]] = (),
    ) -> None:
        super().__init__(name)
        if entry_point is not None:
            if not callable(entry_point):
                _function_name(entry_point, "entry_point must be")
            if command is not None:
                raise ConfigError(
                    "entry_point runs the tests apart from the program with this Python: "
                    f"give no command (not {command!r})"
                )
        if prelude != "" and entry_point is None:
            raise ConfigError("prelude runs before tests apart from the program: give entry_point")
        if not isinstance(prelude, str) and not callable(prelude):
            raise ConfigError(f"prelude must be text or a function of the trial, not {prelude!r}")
        for part, value in (("tests", tests), ("program", program)):
            if value is not None and not isinstance(value, str) and not callable(value):
                raise ConfigError(f"{part} must be text or a function of the trial, not {value!r}")
        if (
            not isinstance(file_name, str)
            or file_name in ("", ".", "..")
            or "/" in file_name
            or "\0" in file_name
        ):
            raise ConfigError(f"file_name must be a plain file name, not {file_name!r}")
        checked = _files(files)  # a mapping of names, before its names are compared
        for name in files:
            if isinstance(name, str) and PurePosixPath(name) == PurePosixPath(file_name):
                raise ConfigError(
                    f"files has {name!r}, the file_name the program and its tests are "
                    "written to: it would be replaced (give another file_name)"
                )
        # Refused now, not at the first trial's scoring (after every trial's model calls).
        checked_limits(**limits, file_size=FILE_SIZE, disk=DISK)
        _no_file_in_a_file(checked, {file_name: ""})
        self.tests = tests
        self.program = program
        self.file_name = file_name
        # A string is a line for the shell, as `corral.sandbox` takes it (not its letters).
        self.command = (sys.executable, file_name) if command is None else _argv(command)
        #: The function the tests call, run in a process apart from them (`apart`), and
        #: the code run before the tests in theirs.
        self.entry_point = entry_point
        self.prelude = prelude
        # Python of our own choosing: a line before the tests can say they began (apart,
        # the tests' own process says whether they ran to their end).
        self.marks = command is None and entry_point is None
        self.files = dict(files)
        self.limits = dict(limits)
        #: What the sandbox hides of the folders its command sees (`corral.sandbox`).
        self.hidden = hidden_paths(hidden, limits["isolation"])

    def __repr__(self) -> str:
        if isinstance(self.entry_point, str):
            return f"code_tests(name={self.name!r}, entry_point={self.entry_point!r})"
        if self.entry_point is not None:
            return f"code_tests(name={self.name!r}, entry_point=<a function of the trial>)"
        return f"code_tests(name={self.name!r}, command={list(self.command)!r})"

    def source(self, trial: TrialRecord, mark: str | None = None) -> tuple[str, bytes | None]:
        """The file that runs and its standard input: the program, then its tests; with
        ``mark``, a line between them writing it to the standard and error outputs (the
        tests began). With an ``entry_point``, the two run apart (`apart`)."""
        program = extract_code(trial.output) if self.program is None else self.program(trial)
        tests = self._tests(trial)
        entry_point = self.entry_point
        if entry_point is not None:
            if callable(entry_point):
                task = trial.task or trial.task_id
                entry_point = _function_name(entry_point(trial), f"task {task!r} entry point is")
            prelude = self.prelude if isinstance(self.prelude, str) else self.prelude(trial)
            return apart(prelude, program, tests, entry_point)
        began = "" if mark is None or not tests.strip() else f"{_began(mark)}\n"
        return f"{program}\n\n{began}{tests}\n", None

    def _tests(self, trial: TrialRecord) -> str:
        tests: Any = self.tests
        if tests is None:  # the task's target
            if not isinstance(trial.target, str):
                raise ConfigError(
                    f"code_tests() was given no tests and task {trial.task or trial.task_id!r} "
                    f"has no target holding them (its target is {trial.target!r}, not text)"
                )
            return trial.target
        return tests if isinstance(tests, str) else str(tests(trial))

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        # A program exiting 0 before its tests (`unittest.main()` of its own, `sys.exit`)
        # would pass them unrun: it must reach them, a mark it cannot know says so.
        mark = secrets.token_hex(16) if self.marks else None
        source, given = self.source(trial, mark)
        # As written, a lone surrogate too (half an emoji): the command refuses it, a
        # failed score, where UTF-8 proper would raise here.
        text = source.encode("utf-8", "surrogatepass")
        result = await sandbox(
            self.command,
            files={**self.files, self.file_name: text},
            input=given,
            hidden=self.hidden,
            **self.limits,
        )
        began = mark is not None and (mark in result.stdout or mark in result.stderr)
        unrun = mark is not None and mark in source and not began
        if result.success and result.reason is None and not unrun:
            return self.verdict(1.0, True, {"returncode": 0})
        reason = result.reason or "tests_failed"
        stderr = _unmarked(result.stderr, mark)[-STDERR_TAIL:]
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        message = result.describe if result.reason else f"the tests failed: {last or 'no output'}"
        if result.success and result.reason is None:
            message = "the program ended before its tests ran"
        return self.verdict(
            0.0,
            False,
            {
                "reason": reason,
                "message": message,
                "returncode": result.returncode,
                "stderr": stderr,
            },
        )


def _began(mark: str) -> str:
    """The line before the tests: the mark, on the standard output's descriptor (the
    program may have replaced `sys.stdout`) and on the error output's (it may have sent
    its standard output to /dev/null, or closed it), one that cannot be written skipped."""
    code = f'import os\nfor fd in 1, 2:\n    try: os.write(fd, b"\\n{mark}\\n")\n'
    code += "    except OSError: pass"
    return f'__import__("builtins").exec({code!r}, {{}})'  # the program may name an `exec`


def _unmarked(stderr: str, mark: str | None) -> str:
    """The error output without the mark's lines (a process of `multiprocessing`
    running the file anew writes one too), each taken with the line end before it."""
    if not mark:
        return stderr
    return re.sub(rf"(?:^|(?<=\n))\n{mark}\n|\n{mark}(?=\n)", "", stderr)


def code_tests(
    tests: Part | None = None,
    *,
    program: Callable[[TrialRecord], str] | None = None,
    command: Sequence[str] | str | None = None,
    file_name: str = "main.py",
    files: Mapping[str, str | bytes] | None = None,
    timeout: float = 10.0,
    memory: int | None = 1024 * MIB,
    cpu_seconds: float | None = None,
    processes: int | None = 64,
    max_output: int = 64 * 1024,
    isolation: Isolation = "bubblewrap",
    name: str = "tests",
    entry_point: str | Callable[[TrialRecord], str] | None = None,
    prelude: Part = "",
    hidden: Sequence[str | os.PathLike[str]] = (),
) -> CodeTests:
    """A scorer that runs the trial's program with its tests in `corral.sandbox`.

    The program is ``program(trial)``, by default the code in the trial's output
    (its first fenced block, else all of it); ``tests`` (text, a function of the
    trial, or by default the trial's target) follow it in ``file_name``, which
    ``command`` (a program and its arguments, or a line for the shell) runs (default:
    this Python) in the sandbox's work folder beside
    ``files``. It passes (score 1.0) when the command exits 0 within its
    limits (and, run by the default command, reached its tests: a line before
    them writes a random mark to the standard and error outputs); otherwise ``details``
    holds the ``reason`` (``tests_failed``, or the sandbox's: ``timeout``,
    ``memory``, ``processes``, ...), a ``message``, the exit status and the end
    of the error output. Its score is under
    ``scores[name]`` too. Use it as an environment's ``evaluate`` (``return await
    self.scorer(trial)``), call it from one, or put it in `combine`.

    With ``entry_point`` (the name of the function the tests call, as MBPP's
    ``assert add(2, 3) == 5`` calls ``add``; or a function of the trial giving it), the
    tests run in a process of their own and call that function in the program's, and
    only plain values come back (see `corral.scorers._apart`): a program cannot pass
    them with an object equal to anything, by forcing its exit status, or by reading
    them. The tests then see the program's function only, not its other names;
    ``prelude`` (text, or a function of the trial) runs before them in their process,
    as trusted as they are (HumanEval's prompt, whose helpers its tests call).
    ``hidden`` names host paths the program must not read among those the sandbox
    shows it (a dataset's answers installed with its package; see `corral.sandbox`).
    """
    return CodeTests(
        name,
        tests,
        program,
        command,
        file_name,
        files or {},
        {
            "timeout": timeout,
            "memory": memory,
            "cpu_seconds": cpu_seconds,
            "processes": processes,
            "max_output": max_output,
            "isolation": isolation,
        },
        entry_point,
        prelude,
        hidden,
    )


def apart(prelude: str, program: str, tests: str, entry_point: str) -> tuple[str, bytes]:
    """The file that runs ``tests`` apart from ``program`` (`corral.scorers._apart`), and
    what it is given on its standard input (not in the file, which the program may
    read): ``prelude`` (code as trusted as the tests), then the tests, in one process,
    their calls of ``entry_point`` answered by ``program``'s in another."""
    given = {"prompt": prelude, "program": program, "tests": tests, "entry": entry_point}
    # A lone surrogate too (half an emoji): JSON escapes it, and the program's compile
    # fails on it, a failed score.
    return f"{_apart_text()}\n\nmain()\n", json.dumps(given).encode()


def _function_name(name: object, saying: str) -> str:
    """``name`` if it names a function; else a ConfigError ``saying`` what it is."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(f"{saying} the name of the function the tests call, not {name!r}")
    return name


@functools.cache
def _apart_text() -> str:
    return resources.files(__package__).joinpath("_apart.py").read_text(encoding="utf-8")
