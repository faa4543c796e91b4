"""Options shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        "-s",
        envvar="AGENTLEDGER_STORE",
        help="Store URL: memory://, jsonl:///dir, sqlite:///file.db, postgresql://... "
        "(default: SQLite in the user data directory).",
    ),
]
TenantOption = Annotated[
    str, typer.Option("--tenant", "-t", envvar="AGENTLEDGER_TENANT", help="Tenant id.")
]
