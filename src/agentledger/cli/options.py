"""Options shared by several commands (each reads its environment variable; see ``config``).

Every number an option takes has bounds, checked as it is parsed so the error names the
option: counts and versions run from 0 to ``MAX_COUNT``, what every store holds (a negative
version was "not found", a limit past it was refused under the library's name for it).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from agentledger.cli.store import default_path
from agentledger.messages.checks import MAX_COUNT

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        envvar="AGENTLEDGER_STORE",
        help="Store URL: memory://, jsonl:///dir, sqlite:///file.db, postgresql://... "
        f"(default: the config file's store, else sqlite:///{default_path()}).",
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        "-t",
        envvar="AGENTLEDGER_TENANT",
        help="Tenant id (default: the config file's tenant, else 'default').",
    ),
]
SessionArg = Annotated[str, typer.Argument(help="Session id.")]
LimitOption = Annotated[
    int | None, typer.Option(min=0, max=MAX_COUNT, help="Show at most this many (default: all).")
]
OffsetOption = Annotated[int, typer.Option(min=0, max=MAX_COUNT, help="Skip this many first.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Say what would change, and change nothing.")
]


def version_option(help: str) -> Any:
    """An option naming a version: a number from 0 to ``MAX_COUNT`` (0 is refused by the
    command, saying why)."""
    return typer.Option(min=0, max=MAX_COUNT, help=help)


def version_argument(help: str) -> Any:
    """``version_option`` as an argument."""
    return typer.Argument(min=0, max=MAX_COUNT, help=help)
