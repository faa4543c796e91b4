"""OpenAI Agents SDK ``SQLiteSession`` (a file database), driven as ``Runner`` drives it.

The workload is converted to the Responses-API input items ``Runner`` stores, in the shapes it
builds them (agents 0.24: ``ItemHelpers.input_to_new_input_list`` for the user's input,
``RunItem.to_input_item`` for what the run produced): a user message ``{"content", "role"}``,
a ``function_call`` and an assistant ``message`` that carry the model's item id (here the
workload's id), and a ``function_call_output`` ``{"call_id", "output", "type"}``. The user
message and the tool output have no id field, so half of a conversation's ids do not survive a
reload, and the report says so. ``Runner.run(..., session=session)`` calls
``session.add_items(new_items)`` after each turn; the session has no call to replace an item,
so an edit is ``clear_session()`` plus ``add_items(every item)``. It has nothing to call for an
unchanged list (the runner only ever adds new items), so scenario C is not applicable.
"""

from __future__ import annotations

import asyncio
import json
import os
from importlib.metadata import version
from typing import Any

from bench.systems.base import NotApplicable, System

SESSION = "bench"


class OpenAIAgents(System):
    name = "openai-agents"
    api = {
        "grow": "await session.add_items(turn_items) after each turn (what Runner does)",
        "edit": "await session.clear_session(); await session.add_items(all_items)",
        "noop": "n/a: append-only API, a caller never re-saves the list",
        "reload": "await SQLiteSession(id, path).get_items()",
    }
    durability = "SQLite WAL, synchronous left at SQLite's default FULL (fsync per commit)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        from agents import Agent
        from agents.memory import SQLiteSession

        self._cls = SQLiteSession
        self._agent = Agent(name="bench")  # the agent a run item names; never run
        self._calls: dict[str, Any] = {}  # call_id -> the function call its output answers
        self._loop = asyncio.new_event_loop()

    def versions(self) -> dict[str, str]:
        import sqlite3

        return {"openai-agents": version("openai-agents"), "sqlite": sqlite3.sqlite_version}

    def path(self) -> str:
        return os.path.join(self.workdir, f"agents{self.generation}.db")

    def storage_path(self) -> str | None:
        return self.workdir

    def convert(self, m: dict[str, Any]) -> Any:
        """The input item ``Runner`` would store for ``m``, built by the SDK's own helpers."""
        from agents import ItemHelpers
        from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        if m["role"] == "user":
            return ItemHelpers.input_to_new_input_list(m["content"])[0]
        if m["role"] == "tool":
            call = self._calls[m["tool_call_id"]]
            raw = ItemHelpers.tool_call_output_item(call, m["content"])
            item = ToolCallOutputItem(agent=self._agent, raw_item=raw, output=m["content"])
            return item.to_input_item()
        if m.get("tool_calls"):
            (c,) = m["tool_calls"]
            call = ResponseFunctionToolCall(
                id=m["id"],
                call_id=c["id"],
                name=c["function"]["name"],
                arguments=c["function"]["arguments"],
                type="function_call",
                status="completed",
            )
            self._calls[c["id"]] = call
            return ToolCallItem(agent=self._agent, raw_item=call).to_input_item()
        text = ResponseOutputText(text=m["content"], type="output_text", annotations=[])
        message = ResponseOutputMessage(
            id=m["id"], content=[text], role="assistant", status="completed", type="message"
        )
        return MessageOutputItem(agent=self._agent, raw_item=message).to_input_item()

    def edited(self, item: Any) -> Any:
        from bench.workload import preview

        return {**item, "output": preview(item["output"])}

    def message_bytes(self, item: Any) -> int:
        return len(json.dumps(item))

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        return self._cls(SESSION, self.path())

    def close(self, handle: Any) -> None:
        handle.close()

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> None:
        self._run(handle.add_items(new))

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        self._run(handle.add_items(live))

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        async def clear_and_readd() -> None:
            await handle.clear_session()
            await handle.add_items(live)

        self._run(clear_and_readd())

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        raise NotApplicable("append-only API: Runner only adds new items, nothing to save")

    def load(self, handle: Any) -> Any:
        return self._run(handle.get_items())

    def ids_of(self, loaded: Any) -> list[str]:
        return [i.get("id") for i in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position]["output"]
