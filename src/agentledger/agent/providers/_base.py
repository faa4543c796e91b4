"""What the SDK-backed models share: owning (or borrowing) a client, and the streaming loop.

Each adapter supplies the SDK call and a reader that turns one raw stream item into model
events; this loop feeds the events through a ``ResponseBuilder`` (which checks them), converts
every SDK failure into ``ModelError``, always closes the stream, and ends with the
``ModelResponse``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from agentledger.agent.events import ModelEvent, ResponseBuilder
from agentledger.agent.providers import malformed
from agentledger.errors import ModelError

__all__ = ["ProviderModel", "StreamReader"]


class StreamReader(Protocol):
    """Turns raw SDK stream items into model events; ``finish`` gives the stop reason."""

    def feed(self, item: Any) -> list[ModelEvent]: ...

    def finish(self) -> str: ...


class ProviderModel:
    """Base of the provider adapters: client lifecycle and the shared streaming loop."""

    provider: str = "provider"
    client: Any
    _owns_client: bool = False

    async def aclose(self) -> None:
        """Close the client if this model made it."""
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> ProviderModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _events(
        self,
        call: Awaitable[Any],
        reader: StreamReader,
        convert: Callable[[Exception], ModelError],
    ) -> AsyncIterator[ModelEvent]:
        try:
            stream = await call
        except Exception as exc:
            raise convert(exc) from exc
        builder = ResponseBuilder()
        try:
            items = stream.__aiter__()
            while True:
                try:
                    item = await items.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    raise convert(exc) from exc
                try:
                    events = reader.feed(item)
                except (AttributeError, TypeError, ValueError, KeyError, IndexError) as exc:
                    raise malformed(self.provider, f"unreadable stream event ({exc})") from exc
                for event in events:
                    builder.add(event)
                    yield event
            response = builder.build(reader.finish())
        finally:
            await stream.close()
        yield response
