"""Step 4 of a run: AG-UI events as ``text/event-stream`` frames.

A frame is ``data: <json>\\n\\n``: LF only, one JSON object per frame, camelCase keys, and no
``null`` for an optional field. ``ag_ui.encoder.EventEncoder`` writes exactly that (the
protocol's models leave out optional fields that have no value), so it is used as is; the server
tests check every frame it sends against this shape.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from agentledger._optional import require

__all__ = ["MEDIA_TYPE", "frame", "frames"]

MEDIA_TYPE = "text/event-stream"


@functools.cache
def _encoder() -> Any:
    return require("ag_ui.encoder", "server").EventEncoder()


def frame(event: Any) -> str:
    """One SSE frame for one ``ag_ui.core`` event."""
    return _encoder().encode(event)  # type: ignore[no-any-return]


async def frames(events: AsyncIterator[Any]) -> AsyncIterator[str]:
    """The frames for a stream of events."""
    async for event in events:
        yield frame(event)
