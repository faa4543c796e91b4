"""Options shared by several commands (each reads its environment variable; see ``config``)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentledger.cli.store import default_path

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
    int | None, typer.Option(min=0, help="Show at most this many (default: all).")
]
OffsetOption = Annotated[int, typer.Option(min=0, help="Skip this many first.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Say what would change, and change nothing.")
]
