"""OpenAI Agents SDK ``SQLAlchemySession`` on PostgreSQL (asyncpg), on the benchmark's server.

The same items and calls as ``openai_agents`` (``add_items`` per turn, ``clear_session`` plus
``add_items`` for an edit, no call for an unchanged list, ``get_items`` to reload; see there),
through ``agents.extensions.memory.SQLAlchemySession`` on an async engine
(``postgresql+asyncpg``) with ``create_tables=True``. Its tables live in a schema of their own
(asyncpg's ``search_path`` server setting), dropped at the end. ``open`` makes a new engine and
connects it before any timing, as a running app would already be connected.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

from bench.systems.openai_agents import SESSION, OpenAIAgents
from bench.systems.pg import OnPostgres, PgSchemas, base_url


class OpenAIAgentsPostgres(OnPostgres, OpenAIAgents):
    name = "openai-agents-postgres"
    api = {
        **OpenAIAgents.api,
        "reload": "await SQLAlchemySession(id, engine=new engine).get_items()",
    }
    durability = "server defaults (synchronous_commit=on: WAL flushed per commit)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession

        self._cls = SQLAlchemySession
        self._pg = PgSchemas()
        self._pg.probe()
        self._created = -1

    def versions(self) -> dict[str, str]:
        names = ["openai-agents", "sqlalchemy", "asyncpg"]
        out = {n: version(n) for n in names}
        out["postgresql"] = PgSchemas.server_version()
        return out

    def engine(self) -> Any:
        from sqlalchemy.ext.asyncio import create_async_engine

        if self._created != self.generation:
            self._pg.create(self.generation)
            self._created = self.generation
        url = base_url().replace("postgresql://", "postgresql+asyncpg://", 1)
        settings = {"search_path": self._pg.name(self.generation)}
        return create_async_engine(url, connect_args={"server_settings": settings})

    def session(self, session_id: str) -> Any:
        """A connected session on a new engine (the connection made here, untimed)."""
        from sqlalchemy import text

        engine = self.engine()

        async def connect() -> None:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))

        self._run(connect())
        return self._cls(session_id, engine=engine, create_tables=True)

    def open(self) -> Any:
        return self.session(SESSION)

    def close(self, handle: Any) -> None:
        self._run(handle.engine.dispose())

    def cleanup(self) -> None:
        super().cleanup()
        self._pg.drop(self.generation)

    # -- concurrent appends ------------------------------------------------------------------
    def concurrent_handle(self, session: str) -> Any:
        return self.session(session)

    def concurrent_append(self, handle: Any, session: str, new: list[Any], mode: str) -> None:
        """``add_items(turn)``, as ``Runner`` does: it locks the session row and inserts."""
        self._run(handle.add_items(new))

    def concurrent_count(self, handle: Any, session: str) -> int:
        return len(self._run(handle.get_items()))
