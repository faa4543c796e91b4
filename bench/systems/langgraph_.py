"""LangGraph with its SQLite checkpointer (``SqliteSaver`` on a file), as its users persist state.

A LangGraph app does not call the checkpointer itself: it invokes a compiled graph with a
``thread_id`` and the checkpointer saves a checkpoint after every super-step. Each turn here is
one ``graph.invoke({"messages": turn}, config)`` on a one-node graph whose state is
``messages: Annotated[list, add_messages]`` (LangChain ``HumanMessage`` / ``AIMessage`` with a
tool call / ``ToolMessage`` / ``AIMessage``, ids kept). That writes three checkpoints per turn
(counted: the input, the first step, the node's step); a real ReAct graph runs a model, a tools
and a model step per turn, so it writes more: this is a lower bound of LangGraph's cost.

Two channel types: the default (``BinaryOperatorAggregate``: every checkpoint holds the whole
message list) and, when the installed LangGraph has it, ``DeltaChannel`` (beta: checkpoints hold
only the new writes, with a full snapshot every ``snapshot_frequency`` updates, default 100).

Edits use LangGraph's own API: ``graph.update_state(config, {"messages": [edited]})`` (the
reducer replaces the message with the same id). Persisting an unchanged reloaded list is
``update_state`` with that list. Reload is ``graph.get_state(config)`` on a fresh saver.
"""

# No ``from __future__ import annotations``: LangGraph reads the state's annotations at run time,
# and the TypedDicts below are local to ``__init__``.
import os
import sqlite3
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

from bench.systems.base import System

THREAD = {"configurable": {"thread_id": "bench"}}


class LangGraph(System):
    api = {
        "grow": "graph.invoke({'messages': turn}, config) after each turn (3 checkpoints)",
        "edit": "graph.update_state(config, {'messages': [edited]}) (same id: replaced)",
        "noop": "graph.update_state(config, {'messages': reloaded})",
        "reload": "graph.get_state(config).values['messages'] on a fresh SqliteSaver",
    }
    durability = "SQLite WAL, synchronous left at SQLite's default FULL (fsync per commit)"

    def __init__(self, *, delta: bool, **kw: Any) -> None:
        super().__init__(**kw)
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import END, START, StateGraph
        from langgraph.graph.message import add_messages

        self.delta = delta
        self.name = "langgraph-delta" if delta else "langgraph"
        self._msg = (HumanMessage, AIMessage, ToolMessage)
        self._saver = SqliteSaver
        if delta:
            from langgraph.channels.delta import DeltaChannel

            def fold(state: list[Any], writes: list[Any]) -> list[Any]:
                for w in writes:
                    state = add_messages(state, w)
                return state

            class State(TypedDict):
                messages: Annotated[list, DeltaChannel(fold)]

        else:

            class State(TypedDict):  # type: ignore[no-redef]
                messages: Annotated[list, add_messages]

        builder = StateGraph(State)
        builder.add_node("agent", lambda state: {})
        builder.add_edge(START, "agent")
        builder.add_edge("agent", END)
        self._builder = builder
        self._graphs: dict[int, Any] = {}

    def versions(self) -> dict[str, str]:
        names = ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"]
        names += ["langchain-core", "ormsgpack"]
        out = {n: version(n) for n in names}
        out["sqlite"] = sqlite3.sqlite_version
        return out

    def path(self) -> str:
        return os.path.join(self.workdir, f"checkpoints{self.generation}.db")

    def storage_path(self) -> str | None:
        return self.workdir

    def convert(self, m: dict[str, Any]) -> Any:
        import json

        human, ai, tool = self._msg
        if m["role"] == "user":
            return human(content=m["content"], id=m["id"])
        if m["role"] == "tool":
            return tool(
                content=m["content"], tool_call_id=m["tool_call_id"], name=m["name"], id=m["id"]
            )
        if m.get("tool_calls"):
            (call,) = m["tool_calls"]
            fn = call["function"]
            return ai(
                content="",
                id=m["id"],
                tool_calls=[
                    {"name": fn["name"], "args": json.loads(fn["arguments"]), "id": call["id"]}
                ],
            )
        return ai(content=m["content"], id=m["id"])

    def edited(self, item: Any) -> Any:
        from bench.workload import preview

        return item.model_copy(update={"content": preview(item.content)})

    def message_bytes(self, item: Any) -> int:
        return len(item.model_dump_json())

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        conn = sqlite3.connect(self.path(), check_same_thread=False)
        saver = self._saver(conn)
        return self._builder.compile(checkpointer=saver), conn

    def close(self, handle: Any) -> None:
        handle[1].close()

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> None:
        handle[0].invoke({"messages": new}, THREAD)

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        handle[0].invoke({"messages": live}, THREAD)

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        handle[0].update_state(THREAD, {"messages": [live[position]]})

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        handle[0].update_state(THREAD, {"messages": loaded})

    def load(self, handle: Any) -> Any:
        return handle[0].get_state(THREAD).values["messages"]

    def ids_of(self, loaded: Any) -> list[str]:
        return [m.id for m in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position].content
