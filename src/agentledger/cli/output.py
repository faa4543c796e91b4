"""How commands print data: JSON with ``--json``, rich tables on a terminal, plain text in a pipe.

A command builds its result once, as rows of plain values, and ``Output`` renders it. JSON goes
to stdout exactly as ``json.loads`` reads it back; plain text is one tab-separated line per row
under a header line, so ``cut`` and ``awk`` work on it; a terminal gets a rich table. Times are
UTC and say so (ISO 8601 with ``+00:00`` in JSON, a ``(UTC)`` column label elsewhere).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from agentledger.messages import Msg

__all__ = ["JsonOption", "Output", "describe", "message_json", "printable", "utc"]

_SHORT = 24  # a column at most this wide is never shrunk on a terminal

JsonOption = Annotated[bool, typer.Option("--json", help="Print the result as JSON.")]


def utc(moment: datetime) -> str:
    """A time as text in UTC, to the second (the column label says UTC)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def message_json(msg: Msg) -> Any:
    """A message as its lossless canonical JSON (the form export and import use)."""
    from agentledger.messages import encode

    return json.loads(encode(msg))


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``), newlines and tabs
    kept: stored text (a title, a message, a model's answer) reaches a terminal as text, never
    as commands to it (an escape sequence that sets the window title or clears the screen)."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def describe(msg: Msg, width: int = 100) -> str:
    """One readable line for a message: role, blocks, text."""
    kinds = []
    for block in msg.content:
        kind = type(block).__name__.removesuffix("Block").lower()
        if kind == "tooluse":
            kind = f"call {block.name}({block.id})"  # type: ignore[union-attr]
        elif kind == "toolresult":
            err = " error" if block.is_error else ""  # type: ignore[union-attr]
            kind = f"result{err} {block.id}"  # type: ignore[union-attr]
        kinds.append(kind)
    results = " | ".join(r.text for r in msg.tool_results)
    text = " ".join((msg.text or results or msg.thinking or "").split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    return printable(f"{msg.role:<9} [{', '.join(kinds)}] {text}")


class Output:
    """Renders one command's result for where stdout goes (see the module docstring)."""

    def __init__(self, as_json: bool = False, *, terminal: bool | None = None) -> None:
        self.as_json = as_json
        self.terminal = sys.stdout.isatty() if terminal is None else terminal
        self.console = Console(highlight=False, soft_wrap=not self.terminal)

    def json(self, data: Any) -> None:
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))

    def table(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        data: Any,
        *,
        title: str | None = None,
    ) -> None:
        """``rows`` under ``columns`` as text, or ``data`` as JSON with ``--json``."""
        if self.as_json:
            self.json(data)
        elif self.terminal:
            # one line per row: short columns keep their width, long ones share what is left
            widths = [max([len(c), *(len(str(r[i])) for r in rows)]) for i, c in enumerate(columns)]
            long = [w > _SHORT for w in widths]
            left = self.console.width - 1 - sum(w + 3 for w, x in zip(widths, long) if not x)
            share = max(8, left // max(1, sum(long)) - 3)
            table = Table(title=title, title_justify="left")
            for column, width, is_long in zip(columns, widths, long, strict=True):
                table.add_column(
                    column,
                    no_wrap=True,
                    overflow="ellipsis",
                    max_width=share if is_long else None,
                    min_width=None if is_long else width,
                )
            for row in rows:
                table.add_row(*(printable(str(cell)) for cell in row))
            self.console.print(table)
        else:
            typer.echo("\t".join(columns))
            for row in rows:
                typer.echo("\t".join(printable(" ".join(str(cell).split())) for cell in row))

    def line(self, text: str, *, data: Any = None, err: bool = False) -> None:
        """A one-line result (``data`` as JSON instead with ``--json``); ``err`` sends the text
        to stderr, for commands whose stdout carries data."""
        if self.as_json and data is not None:
            self.json(data)
        else:
            typer.echo(printable(text), err=err)

    def text(self, text: str, *, style: str | None = None) -> None:
        """Free text: styled on a terminal, plain otherwise; never interpreted as markup."""
        text = printable(text)
        if self.terminal and style:
            self.console.print(text, style=style, markup=False)
        else:
            typer.echo(text)
