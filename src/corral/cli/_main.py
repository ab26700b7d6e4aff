"""The ``corral`` command group, and the one place that turns errors into exit codes."""

from __future__ import annotations

import contextlib
import errno
import sqlite3
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import click

from .. import __version__
from .._errors import ConfigError, CorralError, distinct_leaves
from .._terminal import clean
from ._compare import compare_command
from ._execute import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    ClosedPipe,
    silence_stdout,
)
from ._inspect import copy_command, list_command, report_command, show_command
from ._options import CliProcess
from ._run import demo_command, rescore_command, run_command
from ._view import view_command

#: What click (8.2 and later) raises for a group given no command, carrying its help.
_NoArgsIsHelp: type[click.UsageError] = getattr(
    click.exceptions, "NoArgsIsHelpError", type("NoArgsIsHelpError", (click.UsageError,), {})
)


class CorralGroup(click.Group):
    """Prints every refusal as one ``error: ...`` line (no traceback) and exits
    2 for bad input, 1 for a failure, 130 when interrupted. An exception it
    cannot name (a bug) keeps its traceback."""

    # click's own main turns EPIPE into exit 1, so a closed pipe leaves click's echo
    # (--json, --help) as `ClosedPipe`, which `main` makes exit 0 like rich's.
    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _closed_pipe():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _closed_pipe():
            return super().invoke(ctx)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        try:
            # Python hands undecodable bytes over as lone surrogates, which would
            # fail much later (printing, hashing, SQLite) with a traceback.
            _check_utf8(argv)
            # Run as the `corral` process itself (its argv: not called from a caller's
            # Python, as a test's CliRunner does), the process is Corral's to tune.
            extra.setdefault("obj", CliProcess(own=args is None))
            result = super().main(argv, prog_name, complete_var, False, **extra)
            code = result if isinstance(result, int) else 0
        except _NoArgsIsHelp as exc:  # `corral` alone: the help, laid out, as click shows it
            exc.show()
            code = exc.exit_code
        except click.ClickException as exc:
            message = exc.format_message()
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message += f" (see '{exc.ctx.command_path} --help')"
            code = _error(message, exc.exit_code)
        except (ClosedPipe, BrokenPipeError):  # `corral ... | head`: the reader has enough
            silence_stdout()
            code = EXIT_OK
        except click.Abort:
            code = _error(
                "interrupted; run again with the same benchmark id to resume", EXIT_INTERRUPTED
            )
        except BaseException as exc:
            named = _describe(exc)
            if named is None:
                raise
            message, code = named
            details = getattr(_leaf(exc), "user_traceback", None)
            if details:  # the user's own frames, when their benchmark file failed
                click.echo(clean(str(details).rstrip("\n")), err=True)
            code = _error(message, code)
        if standalone_mode:
            raise SystemExit(code)
        return code


@contextlib.contextmanager
def _closed_pipe() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        raise ClosedPipe from exc


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups, or ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _describe(exc: BaseException) -> tuple[str, int] | None:
    """(message, exit code) for an exception the CLI can name; None for a bug.

    A group names each distinct error once (the first three, then how many
    more); it is bad input only when every error in it is.
    """
    leaves = distinct_leaves(exc)
    if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
        return "interrupted; run again with the same benchmark id to resume", EXIT_INTERRUPTED
    messages: list[str] = []
    for leaf in leaves:
        message = _message(leaf)
        if message is None:
            return None
        if message not in messages:
            messages.append(message)
    shown = "; ".join(messages[:_SHOWN_ERRORS])
    if len(messages) > _SHOWN_ERRORS:
        shown += f"; and {len(messages) - _SHOWN_ERRORS} more"
    bad_input = all(isinstance(leaf, ConfigError) for leaf in leaves)
    return shown, EXIT_USAGE if bad_input else EXIT_FAILED


#: Distinct errors of a group named in full on its one line.
_SHOWN_ERRORS = 3


def _message(exc: BaseException) -> str | None:
    if isinstance(exc, CorralError):
        return str(exc) or type(exc).__name__
    if isinstance(exc, OSError):
        # A full disk, a denied permission, a vanished directory: the system's words
        # and the path, without the errno number.
        text = exc.strerror or str(exc) or type(exc).__name__
        if exc.filename is not None:
            text += f": {exc.filename!r}"
        return text
    if isinstance(exc, sqlite3.Error):  # "database or disk is full", untranslated
        return f"store: {exc}"
    return None


def _check_utf8(argv: Sequence[str]) -> None:
    for i, arg in enumerate(argv):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = repr(arg.encode("utf-8", "surrogateescape"))
            after = f" (after {argv[i - 1]})" if i > 0 and argv[i - 1].startswith("-") else ""
            raise ConfigError(
                f"argument {i + 1}, {shown}{after}, is not valid UTF-8: "
                "give paths, ids and names in UTF-8"
            ) from None


def _error(message: str, code: int) -> int:
    click.echo(f"error: {clean(' '.join(message.split()))}", err=True)
    return code


EXIT_CODES_HELP = "Exit codes: " + "; ".join(f"{code} {why}" for code, why in EXIT_CODES) + "."


@click.group(cls=CorralGroup, epilog=EXIT_CODES_HELP)
@click.version_option(__version__, prog_name="corral")
def main() -> None:
    """Corral: run benchmarks of AI agents under exact concurrency limits, durably.

    Start with `corral demo`.
    """


# The exit codes are part of what `run` and `rescore` promise, so their help says so too.
for _command in (run_command, rescore_command):
    _command.epilog = EXIT_CODES_HELP
    main.add_command(_command)
main.add_command(demo_command)  # exits 0 once it has run: its errors are on purpose
main.add_command(report_command)
main.add_command(show_command)
main.add_command(list_command)
main.add_command(copy_command)
main.add_command(view_command)
main.add_command(compare_command)
