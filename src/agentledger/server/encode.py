"""Step 4 of a run: AG-UI events as ``text/event-stream`` frames.

A frame is ``data: <json>\\n\\n``: LF only, one JSON object per frame, camelCase keys, and no
``null`` for an optional field. ``ag_ui.encoder.EventEncoder`` writes exactly that (the
protocol's models leave out optional fields that have no value), so it is used as is for every
event but one: the ``MESSAGES_SNAPSHOT`` that closes a run, the whole thread (15 MB at 12,000
messages), took the models about 20 us a message to build and as much to write, a third of a
run's time. Its messages are ``to_agui``'s dicts, already in the protocol's JSON form (the
``wire.agui`` tests check them against the models, and the server tests every frame it sends),
so ``MessagesSnapshot`` carries them and ``msgspec`` writes the frame.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import msgspec

from agentledger._optional import require

__all__ = ["MEDIA_TYPE", "MessagesSnapshot", "frame", "frames"]

MEDIA_TYPE = "text/event-stream"

_json = msgspec.json.Encoder()


@dataclass(frozen=True, slots=True)
class MessagesSnapshot:
    """A ``MESSAGES_SNAPSHOT`` event of ``to_agui`` message dicts."""

    messages: list[dict[str, Any]]


@functools.cache
def _encoder() -> Any:
    return require("ag_ui.encoder", "server").EventEncoder()


def frame(event: Any) -> str:
    """One SSE frame for one ``ag_ui.core`` event or ``MessagesSnapshot``."""
    if isinstance(event, MessagesSnapshot):
        body = _json.encode({"type": "MESSAGES_SNAPSHOT", "messages": event.messages})
        return f"data: {body.decode()}\n\n"
    return _encoder().encode(event)  # type: ignore[no-any-return]


async def frames(events: AsyncIterator[Any]) -> AsyncIterator[str]:
    """The frames for a stream of events."""
    async for event in events:
        yield frame(event)
