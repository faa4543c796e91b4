"""hermes-agent's ``SessionDB`` (``hermes_state.py``, SQLite), the store behind seed 004.

The agent flushes each new message with ``SessionDB.append_message`` (one transaction per
message: a row insert plus a counter update, FTS triggers on) after each step; here the four
messages of a turn are appended after the turn. The workload's id is kept in
``platform_message_id``, the column hermes has for an external message id. Edits (``/retry``,
``/undo``, ``/compress`` in hermes) go through ``replace_messages``, which deletes every row of
the session and inserts the list again. There is no call to persist an unchanged list (the flush
skips messages already marked persisted), so scenario C is not applicable. Reload is
``get_messages_as_conversation``, what the gateway uses to resume a session.

hermes-agent pins exact versions of its dependencies (``openai==2.24.0`` among them) that
conflict with openai-agents; it is installed without them (``requirements-peers-nodeps.txt``),
which ``SessionDB`` does not need.
"""

from __future__ import annotations

import os
import sqlite3
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench.systems.base import NotApplicable, System

SESSION = "bench"


class Hermes(System):
    name = "hermes"
    api = {
        "grow": "SessionDB.append_message(...) for each message of the turn",
        "edit": "SessionDB.replace_messages(session, all) (delete all rows, insert all)",
        "noop": "n/a: the flush only appends messages not yet marked persisted",
        "reload": "SessionDB(path).get_messages_as_conversation(session)",
    }
    durability = "SQLite WAL, synchronous left at SQLite's default FULL (fsync per commit)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        os.environ.setdefault("HERMES_HOME", os.path.join(self.workdir, "home"))
        from hermes_state import SessionDB

        self._cls = SessionDB

    def versions(self) -> dict[str, str]:
        return {"hermes-agent": version("hermes-agent"), "sqlite": sqlite3.sqlite_version}

    def path(self) -> Path:
        return Path(self.workdir) / f"state{self.generation}.db"

    def storage_path(self) -> str | None:
        return str(self.path().parent)

    def convert(self, m: dict[str, Any]) -> Any:
        out = {"role": m["role"], "content": m["content"], "message_id": m["id"]}
        if m.get("tool_calls"):
            out["tool_calls"] = m["tool_calls"]
        if m["role"] == "tool":
            out["tool_call_id"] = m["tool_call_id"]
            out["tool_name"] = m["name"]
        return out

    def edited(self, item: Any) -> Any:
        from bench.workload import preview

        return {**item, "content": preview(item["content"])}

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        fresh = not self.path().exists()
        db = self._cls(self.path())
        if fresh:
            db.create_session(SESSION, source="cli")
        return db

    def close(self, handle: Any) -> None:
        handle.close()

    @staticmethod
    def _append(db: Any, m: dict[str, Any]) -> None:
        db.append_message(
            SESSION,
            m["role"],
            m["content"],
            tool_name=m.get("tool_name"),
            tool_calls=m.get("tool_calls"),
            tool_call_id=m.get("tool_call_id"),
            platform_message_id=m["message_id"],
        )

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> None:
        for m in new:
            self._append(handle, m)

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        handle.replace_messages(SESSION, live)

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        handle.replace_messages(SESSION, live)

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        raise NotApplicable("append-only flush: messages already persisted are skipped")

    def load(self, handle: Any) -> Any:
        return handle.get_messages_as_conversation(SESSION)

    def ids_of(self, loaded: Any) -> list[str]:
        return [m.get("message_id") for m in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position]["content"]
