"""``agentledger serve``: the AG-UI server (``agentledger.server``) under uvicorn.

Each setting has an option and an environment variable; the app is built once here first, so a
bad model spec, store URL, tools module or auth file is reported before any worker starts.
"""

from __future__ import annotations

import os
from typing import Annotated

import typer
from rich.console import Console

from agentledger._optional import require
from agentledger.cli.chat import HOW_TO_CONFIGURE, resolve_model
from agentledger.cli.errors import EXIT_USAGE, CliError
from agentledger.cli.options import StoreOption, TenantOption
from agentledger.cli.store import chosen_tenant, resolve_store
from agentledger.server.app import DEFAULT_MAX_BODY
from agentledger.server.config import ENV_VAR, ServeConfig

__all__ = ["MAX_WORKERS", "register"]

#: The most worker processes ``--workers`` starts: an async worker serves many runs at once, so
#: more than this is a typo, and each is a process with its own store connections.
MAX_WORKERS = 128


def serve(
    model: Annotated[
        str | None, typer.Option(help="Model spec, e.g. openai:gpt-4o-mini (or AGENTLEDGER_MODEL).")
    ] = None,
    store: StoreOption = None,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
    workers: Annotated[
        int,
        typer.Option(min=1, max=MAX_WORKERS, help=f"Worker processes (at most {MAX_WORKERS})."),
    ] = 1,
    tools: Annotated[
        str | None,
        typer.Option(help="Server-side tools as module:attribute (a tool or a list of them)."),
    ] = None,
    auth_file: Annotated[
        str | None,
        typer.Option(
            envvar="AGENTLEDGER_AUTH_FILE",
            help='JSON file {"<bearer token>": "<tenant>"}; without it no token is needed.',
        ),
    ] = None,
    tenant: TenantOption = None,
    system: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    max_body: Annotated[
        int, typer.Option(min=1, help="Largest request body accepted, in bytes (else HTTP 413).")
    ] = DEFAULT_MAX_BODY,
    lease_wait: Annotated[
        float,
        typer.Option(min=0, help="Seconds a run waits for a busy thread before HTTP 409."),
    ] = 2.0,
) -> None:
    """Serve the agent to AG-UI frontends (POST / streams a run; GET /threads/ID/messages)."""
    console = Console(stderr=True)
    spec = resolve_model(model)
    if spec is None:
        console.print(
            HOW_TO_CONFIGURE.replace("agentledger chat", "agentledger serve"), markup=False
        )
        raise typer.Exit(EXIT_USAGE)
    if workers > 1 and resolve_store(store).startswith("memory:"):
        raise CliError(
            "memory:// cannot be shared by several workers; use sqlite or postgresql", EXIT_USAGE
        )
    config = ServeConfig(
        model=spec,
        store=resolve_store(store),
        tools=tools,
        auth_file=auth_file,
        tenant=chosen_tenant(tenant),
        system_prompt=system,
        max_body=max_body,
        lease_wait=lease_wait,
    )
    uvicorn = require("uvicorn", "server")
    app = config.build()  # a bad model, store, tools or auth file fails here, as one line
    console.print(f"agentledger AG-UI server on http://{host}:{port}/ (model {spec})")
    if workers == 1:
        uvicorn.run(app, host=host, port=port, log_level="warning")
        return
    os.environ[ENV_VAR] = config.to_env()
    uvicorn.run(
        "agentledger.server.config:app_from_env",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
    )


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
