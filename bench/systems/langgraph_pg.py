"""LangGraph with its PostgreSQL checkpointer (``PostgresSaver``), on the benchmark's server.

The same graph and calls as ``langgraph_`` (one ``graph.invoke`` per turn, three checkpoints,
``update_state`` for an edit, ``get_state`` to reload; see there), with the checkpointer its
documentation sets up: ``PostgresSaver`` on one psycopg connection opened with
``autocommit=True``, ``prepare_threshold=0`` and ``row_factory=dict_row``, ``setup()`` run once.
Its tables live in a schema of their own (``search_path``), dropped at the end.
"""

# No ``from __future__ import annotations``: the base class builds LangGraph state types.
from importlib.metadata import version
from typing import Any

from bench.systems.langgraph_ import LangGraph
from bench.systems.pg import OnPostgres, PgSchemas, base_url


class LangGraphPostgres(OnPostgres, LangGraph):
    api = {
        **LangGraph.api,
        "reload": "graph.get_state(config).values['messages'] on a fresh PostgresSaver",
    }
    durability = "server defaults (synchronous_commit=on: WAL flushed per commit)"

    def __init__(self, **kw: Any) -> None:
        super().__init__(delta=False, **kw)
        from langgraph.checkpoint.postgres import PostgresSaver

        self.name = "langgraph-postgres"
        self._saver = PostgresSaver
        self._pg = PgSchemas()
        self._pg.probe()
        self._ready = -1  # the generation whose schema exists and is set up

    def versions(self) -> dict[str, str]:
        names = ["langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres"]
        names += ["langchain-core", "psycopg"]
        out = {n: version(n) for n in names}
        out["postgresql"] = PgSchemas.server_version()
        return out

    def connect(self) -> Any:
        """A connection as PostgresSaver's documentation opens it, on this run's schema."""
        import psycopg
        from psycopg.rows import dict_row

        schema = self._pg.name(self.generation)
        if self._ready != self.generation:
            self._pg.create(self.generation)
        conn = psycopg.connect(
            base_url(),
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={schema}",
        )
        if self._ready != self.generation:
            self._saver(conn).setup()
            self._ready = self.generation
        return conn

    def open(self) -> Any:
        conn = self.connect()
        return self._builder.compile(checkpointer=self._saver(conn)), conn

    def cleanup(self) -> None:
        super().cleanup()
        self._pg.drop(self.generation)

    # -- concurrent appends ------------------------------------------------------------------
    def concurrent_handle(self, session: str) -> Any:
        return self.open()

    def concurrent_append(self, handle: Any, session: str, new: list[Any], mode: str) -> None:
        """One ``graph.invoke`` per turn, on the thread ``session``, as for one writer: LangGraph
        has no lock for a thread, so concurrent runs on one thread may overwrite each other."""
        handle[0].invoke({"messages": new}, {"configurable": {"thread_id": session}})

    def concurrent_count(self, handle: Any, session: str) -> int:
        state = handle[0].get_state({"configurable": {"thread_id": session}})
        return len(state.values.get("messages", []))
