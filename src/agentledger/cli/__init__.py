"""The ``agentledger`` command. One module per command group; ``main`` is the entry point."""

from __future__ import annotations

import typer

from agentledger.cli import chat, demo, serve, sessions

__all__ = ["app", "main"]

app = typer.Typer(
    name="agentledger",
    help="Conversation state for LLM agents that is never silently lost, duplicated or corrupted.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
sessions.register(app)
demo.register(app)
chat.register(app)
serve.register(app)


def main() -> None:
    """Console-script entry point."""
    app()
