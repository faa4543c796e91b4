"""The ``agentledger`` command. One module per command group; ``main`` is the entry point.

Failures are reported by ``errors.LedgerGroup``: one line on stderr and a documented exit code.
"""

from __future__ import annotations

from typing import Annotated

import typer

from agentledger.cli import chat, demo, manage, migrate, serve, sessions, tools, transfer
from agentledger.cli.errors import LedgerGroup, state

__all__ = ["app", "main"]

app = typer.Typer(
    name="agentledger",
    cls=LedgerGroup,
    help="Conversation state for LLM agents that is never silently lost, duplicated or corrupted."
    " Exit codes: 0 ok, 1 failure, 2 usage, 3 not found, 4 conflict (exists or busy).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _options(
    debug: Annotated[
        bool,
        typer.Option("--debug", envvar="AGENTLEDGER_DEBUG", help="Show the traceback of errors."),
    ] = False,
) -> None:
    state.debug = state.debug or debug


sessions.register(app)
transfer.register(app)
manage.register(app)
tools.register(app)
migrate.register(app)
demo.register(app)
chat.register(app)
serve.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
