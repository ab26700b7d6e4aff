"""The ``corral`` command group, and the one place that turns errors into exit codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from .. import __version__
from .._errors import ConfigError, CorralError
from ._inspect import list_command, report_command, show_command
from ._run import demo_command, run_command

#: Exit codes: bad input (usage or configuration), Corral failures, interruption.
EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130


def _leaf(exc: BaseException) -> BaseException:
    """The one exception inside (nested) exception groups, or ``exc`` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _one_line(message: str) -> str:
    return " ".join(message.split())


class CorralGroup(click.Group):
    """Prints every refusal as one ``error: ...`` line (no traceback) and exits
    2 for bad input, 1 for a Corral failure, 130 when interrupted."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
            code = result if isinstance(result, int) else 0
        except click.ClickException as exc:
            message = exc.format_message()
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message += f" (see '{exc.ctx.command_path} --help')"
            code = _error(message, exc.exit_code)
        except click.Abort:
            code = _error(
                "interrupted; run again with the same benchmark id to resume", EXIT_INTERRUPTED
            )
        except BaseException as exc:
            leaf = _leaf(exc)
            if isinstance(leaf, ConfigError):
                code = _error(str(leaf), EXIT_USAGE)
            elif isinstance(leaf, CorralError):
                code = _error(str(leaf), EXIT_FAILURE)
            else:
                raise
        if standalone_mode:
            raise SystemExit(code)
        return code


def _error(message: str, code: int) -> int:
    click.echo(f"error: {_one_line(message)}", err=True)
    return code


@click.group(cls=CorralGroup)
@click.version_option(__version__, prog_name="corral")
def main() -> None:
    """Corral: run benchmarks of AI agents under exact concurrency limits, durably.

    Start with `corral demo`.
    """


main.add_command(demo_command)
main.add_command(run_command)
main.add_command(report_command)
main.add_command(show_command)
main.add_command(list_command)
