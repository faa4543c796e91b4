"""pydantic-ai's ``ConversationStore``, as shipped: ``InMemoryConversationStore``.

pydantic-ai keeps a conversation as a log of entries, one per message, and ``save`` appends the
messages the store does not have yet. The installed release ships only the in-memory backend
(no file or database one), so this compares with agentledger's ``memory://``: nothing is written
to disk by either. Messages are ``ModelRequest`` / ``ModelResponse`` with the workload's id in
``metadata``. An edit is what the docs prescribe, an edited copy in place of the message and
``save``: the store finds the first difference and stores the rest of the history again as a
branch. Persisting an unchanged, loaded conversation is ``save`` again.
"""

from __future__ import annotations

import asyncio
from importlib.metadata import version
from typing import Any

from bench.systems.base import System

CONVERSATION = "bench"


class PydanticAI(System):
    name = "pydantic-ai"
    api = {
        "grow": "conversation.messages += turn; await store.save(conversation) after each turn",
        "edit": "conversation.messages[i] = edited copy; await store.save(conversation)",
        "noop": "await store.save(reloaded conversation)",
        "reload": "await store.load(conversation_id)",
    }
    durability = "in process memory, nothing on disk (the only backend the package ships)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        from pydantic_ai import messages
        from pydantic_ai.conversation import Conversation
        from pydantic_ai.conversation_store import InMemoryConversationStore

        self._m = messages
        self._conversation = Conversation
        self._store_cls = InMemoryConversationStore
        self._store: Any = None
        self._store_gen = -1
        self._loop = asyncio.new_event_loop()

    def versions(self) -> dict[str, str]:
        return {"pydantic-ai-slim": version("pydantic-ai-slim"), "pydantic": version("pydantic")}

    def convert(self, d: dict[str, Any]) -> Any:
        m, meta = self._m, {"id": d["id"]}
        if d["role"] == "user":
            return m.ModelRequest(parts=[m.UserPromptPart(content=d["content"])], metadata=meta)
        if d["role"] == "tool":
            part = m.ToolReturnPart(
                tool_name=d["name"], content=d["content"], tool_call_id=d["tool_call_id"]
            )
            return m.ModelRequest(parts=[part], metadata=meta)
        if d.get("tool_calls"):
            (call,) = d["tool_calls"]
            fn = call["function"]
            part = m.ToolCallPart(
                tool_name=fn["name"], args=fn["arguments"], tool_call_id=call["id"]
            )
            return m.ModelResponse(parts=[part], metadata=meta)
        return m.ModelResponse(parts=[m.TextPart(content=d["content"])], metadata=meta)

    def edited(self, item: Any) -> Any:
        import dataclasses

        from bench.workload import preview

        part = item.parts[0]
        return dataclasses.replace(
            item, parts=[dataclasses.replace(part, content=preview(part.content))]
        )

    def message_bytes(self, item: Any) -> int:
        return len(self._m.ModelMessagesTypeAdapter.dump_json([item]))

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def open(self) -> Any:
        if self._store_gen != self.generation:
            self._store, self._store_gen = self._store_cls(), self.generation
        conversation = self._run(self._store.load(CONVERSATION))
        if conversation is None:
            conversation = self._conversation(conversation_id=CONVERSATION)
        return [self._store, conversation]

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> None:
        store, conversation = handle
        conversation.messages.extend(new)
        self._run(store.save(conversation))

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        store, conversation = handle
        conversation.messages.extend(live)
        self._run(store.save(conversation))

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        store, conversation = handle
        conversation.messages[position] = live[position]
        self._run(store.save(conversation))

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        self._run(handle[0].save(handle[1]))

    def load(self, handle: Any) -> Any:
        return self._run(handle[0].load(CONVERSATION)).messages

    def ids_of(self, loaded: Any) -> list[str]:
        return [(m.metadata or {}).get("id") for m in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position].parts[0].content
