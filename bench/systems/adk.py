"""Google ADK's ``DatabaseSessionService`` on SQLite (SQLAlchemy async + aiosqlite).

ADK persists a conversation as session events: the ``Runner`` calls
``session_service.append_event(session, event)`` for every event an invocation yields, so each
message of a turn is one ``append_event`` (a user ``Content``, a model ``function_call`` part, a
``function_response`` part, a model text part; the workload's id is the event id). ADK has no
call to change a stored event; the way to edit one is to delete the session, create it again and
append every event (clear and re-add). There is nothing to call for an unchanged session (the
runner only appends), so scenario C is not applicable. Reload is ``get_session``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from importlib.metadata import version
from typing import Any

from bench.systems.base import NotApplicable, System

APP, USER, SESSION = "bench", "user", "bench"


class Adk(System):
    name = "adk"
    api = {
        "grow": "await service.append_event(session, event) for each message of the turn",
        "edit": "delete_session + create_session + append_event for every event",
        "noop": "n/a: the runner only appends events",
        "reload": "await DatabaseSessionService(url).get_session(...)",
    }
    durability = "SQLite via aiosqlite, SQLAlchemy defaults (rollback journal, synchronous=FULL)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        from google.adk.events import Event
        from google.adk.sessions import DatabaseSessionService
        from google.genai import types

        self._event, self._service, self._types = Event, DatabaseSessionService, types
        self._loop = asyncio.new_event_loop()

    def versions(self) -> dict[str, str]:
        names = ["google-adk", "google-genai", "sqlalchemy", "aiosqlite"]
        return {**{n: version(n) for n in names}, "sqlite": sqlite3.sqlite_version}

    def path(self) -> str:
        return os.path.join(self.workdir, f"adk{self.generation}.db")

    def storage_path(self) -> str | None:
        return self.workdir

    def convert(self, m: dict[str, Any]) -> Any:
        t = self._types
        if m["role"] == "user":
            parts, author, role = [t.Part(text=m["content"])], "user", "user"
        elif m["role"] == "tool":
            response = t.FunctionResponse(
                id=m["tool_call_id"], name=m["name"], response={"result": m["content"]}
            )
            parts, author, role = [t.Part(function_response=response)], "agent", "user"
        elif m.get("tool_calls"):
            (call,) = m["tool_calls"]
            fn = call["function"]
            fc = t.FunctionCall(id=call["id"], name=fn["name"], args=json.loads(fn["arguments"]))
            parts, author, role = [t.Part(function_call=fc)], "agent", "model"
        else:
            parts, author, role = [t.Part(text=m["content"])], "agent", "model"
        turn = m["id"][1:]
        return self._event(
            id=m["id"],
            invocation_id=f"inv{turn}",
            author=author,
            content=t.Content(role=role, parts=parts),
        )

    def edited(self, item: Any) -> Any:
        from bench.workload import preview

        part = item.content.parts[0]
        fr = part.function_response
        text = preview(fr.response["result"])
        new_fr = fr.model_copy(update={"response": {"result": text}})
        new_part = part.model_copy(update={"function_response": new_fr})
        content = item.content.model_copy(update={"parts": [new_part]})
        return item.model_copy(update={"content": content})

    def message_bytes(self, item: Any) -> int:
        return len(item.model_dump_json(exclude_none=True))

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        service = self._service(db_url=f"sqlite+aiosqlite:///{os.path.abspath(self.path())}")

        async def get_or_create() -> Any:
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            if session is None:
                session = await service.create_session(
                    app_name=APP, user_id=USER, session_id=SESSION
                )
            return session

        return [service, self._run(get_or_create())]

    def close(self, handle: Any) -> None:
        self._run(handle[0].close())

    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> None:
        service, session = handle

        async def append() -> None:
            for event in new:
                await service.append_event(session, event)

        self._run(append())

    def _rewrite(self, handle: Any, live: list[Any]) -> None:
        service = handle[0]

        async def rewrite() -> Any:
            await service.delete_session(app_name=APP, user_id=USER, session_id=SESSION)
            session = await service.create_session(app_name=APP, user_id=USER, session_id=SESSION)
            for event in live:
                await service.append_event(session, event)
            return session

        handle[1] = self._run(rewrite())

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        self._rewrite(handle, live)

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        self._rewrite(handle, live)

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        raise NotApplicable("the runner only appends events; nothing to save")

    def load(self, handle: Any) -> Any:
        session = self._run(handle[0].get_session(app_name=APP, user_id=USER, session_id=SESSION))
        return session.events

    def ids_of(self, loaded: Any) -> list[str]:
        return [e.id for e in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position].content.parts[0].function_response.response["result"]
