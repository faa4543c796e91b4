"""How the command fails: one line on stderr that says what to do, and a documented exit code.

Every command runs inside ``LedgerGroup.main``, which turns what went wrong into one of these
exit codes, the same in every command (README "Command line" lists them):

    0  success
    1  failure: the store could not do it, a file could not be read or written, a history
       failed validation, a model call failed
    2  usage: a bad option, argument, id or URL (``--help`` says what is accepted)
    3  not found: no such session, version, store or input file
    4  conflict: the target already exists, the session is busy, or another writer moved it

A traceback is a bug report, not an error message: it is shown only with ``--debug`` (or
``AGENTLEDGER_DEBUG=1``). Errors raised by the library already say what went wrong; this module
adds the hint that says what to do next. Names in messages are shown shortened
(``store.ids.shown``), and a line is cut at ``MAX_LINE`` characters whatever it holds: a value
that click or the operating system echoes (a 100 KB ``--provider``, a file name too long to
open) would otherwise fill the terminal.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

import typer
from typer._click import exceptions as click  # typer vendors click from 0.29 on
from typer.core import TyperGroup

from agentledger.errors import (
    AgentLedgerError,
    ConflictError,
    CorruptStoreError,
    HistoryError,
    MissingDependencyError,
    OutcomeUnknownError,
    SessionBusyError,
    SessionNotFoundError,
    StoreUnavailableError,
    UserError,
    VersionNotFoundError,
)
from agentledger.store.ids import SHOWN_CHARS

__all__ = [
    "EXIT_CONFLICT",
    "EXIT_FAILURE",
    "EXIT_NOT_FOUND",
    "EXIT_USAGE",
    "MAX_LINE",
    "CliError",
    "LedgerGroup",
    "exit_code_for",
    "one_line",
    "state",
]

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4

#: The longest error line printed: room for any path in use and a hint, not for a megabyte.
MAX_LINE = 2000


class CliError(Exception):
    """A failure the command explains itself: ``message`` is the line shown, ``code`` the exit
    code."""

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class _State:
    """What the error handler needs to know about the run in progress."""

    debug = False
    store: str | None = None  # the store URL the command opened, for "not found" hints
    session: str | None = None  # the session it works on, for the same


state = _State()


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def exit_code_for(exc: BaseException) -> int:
    """The documented exit code for an exception (see the module docstring)."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, (SessionNotFoundError, VersionNotFoundError, FileNotFoundError)):
        return EXIT_NOT_FOUND
    if isinstance(exc, (ConflictError, SessionBusyError, FileExistsError)):
        return EXIT_CONFLICT
    if isinstance(exc, MissingDependencyError):
        return EXIT_FAILURE
    if isinstance(exc, (UserError, click.UsageError)):
        return EXIT_USAGE
    return EXIT_FAILURE


def _session() -> str:
    """The session the command works on, as a hint's command names it (``SESSION`` when there
    is none, or when it is too long to show)."""
    if state.session and len(state.session) <= SHOWN_CHARS:
        return state.session
    return "SESSION"


def _hint(exc: BaseException) -> str:
    """What to do next, for errors whose message says only what went wrong."""
    where = f" --store {state.store}" if state.store else ""
    if isinstance(exc, SessionNotFoundError):
        return f"list the sessions with: agentledger sessions{where}"
    if isinstance(exc, VersionNotFoundError):
        return f"list the versions with: agentledger history {_session()}{where}"
    if isinstance(exc, SessionBusyError):
        return "another run is using it; wait for it to finish, or use another session"
    if isinstance(exc, ConflictError):
        return "another writer changed it; run the command again"
    if isinstance(exc, StoreUnavailableError):
        return "check that the store is reachable and has space, then retry; nothing was changed"
    if isinstance(exc, OutcomeUnknownError):
        return f"see whether it was saved with: agentledger history {_session()}{where}"
    if isinstance(exc, CorruptStoreError):
        return "the stored data is damaged; nothing was changed (restore it from a backup)"
    if isinstance(exc, HistoryError):
        return f"see the findings with: agentledger check {_session()}{where}"
    return ""


def _message(exc: BaseException) -> str:
    if isinstance(exc, click.UsageError):
        where = exc.ctx.command_path if exc.ctx else "agentledger"
        return f"{exc.format_message()} (see: {where} --help)"
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if isinstance(exc, OSError) and exc.strerror:
        name = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{name}"
    if isinstance(exc, (AgentLedgerError, CliError)):
        hint = _hint(exc)
        return f"{exc} ({hint})" if hint else str(exc)
    name = type(exc).__name__
    return f"internal error {name}: {exc} (rerun with --debug and report the traceback)"


def report(exc: BaseException) -> int:
    """Print ``exc`` as one line on stderr (with ``--debug``, its traceback first); return the
    exit code."""
    if state.debug and not isinstance(exc, click.ClickException):
        traceback.print_exception(exc, file=sys.stderr)
    line = one_line(_message(exc))
    if len(line) > MAX_LINE:
        line = f"{line[:MAX_LINE]}… ({len(line):,} characters)"
    typer.echo(f"error: {line}", err=True)
    return exit_code_for(exc)


_TRUE = frozenset(("1", "true", "t", "yes", "y", "on"))


class LedgerGroup(TyperGroup):
    """The top-level command group: runs a command and reports any failure as one line."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        # as click reads a boolean: "false", "no", "off" and "0" are off, not on
        state.debug = os.environ.get("AGENTLEDGER_DEBUG", "").strip().lower() in _TRUE
        state.store = state.session = None
        try:
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
        except click.NoArgsIsHelpError:
            code = EXIT_USAGE  # the help was shown
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            code = EXIT_FAILURE
        except Exception as exc:
            code = report(exc)
        if standalone_mode:
            sys.exit(code)
        return code
