"""agentledger on memory://, jsonl://, sqlite:// and postgresql://.

Every scenario is one call of the public API: ``Ledger.save(session, live_list)`` after each
turn (the diff planner appends the new turn), ``save`` again after replacing the edited message
in the list (it writes that row), ``save`` of a reloaded list (a no-op), and
``Ledger.messages(session)`` to reload. The workload is ``sample_conversation`` as ``Msg``.
"""

from __future__ import annotations

import os
from typing import Any

from bench import workload
from bench.systems.base import System
from bench.systems.pg import PgSchemas, Unavailable, base_url

SESSION = "bench"


class AgentLedger(System):
    api = {
        "grow": "Ledger.save(session, live) after each turn (the planner appends the turn)",
        "edit": "live[i] = msg.replace(...); Ledger.save(session, live) (writes that row)",
        "noop": "Ledger.save(session, reloaded) on a fresh Ledger (plans no write)",
        "reload": "Ledger(url).messages(session) on a fresh Ledger (decoded on first read)",
    }

    def __init__(self, *, backend: str, synchronous: str = "normal", **kw: Any) -> None:
        super().__init__(**kw)
        self.backend = backend
        self.full_sync = synchronous == "full"  # SQLite only: fsync on every commit
        self._memory_store: Any = None
        self._memory_gen = -1
        self._pg = PgSchemas() if backend == "postgres" else None
        self._live: dict[str, list[Any]] = {}  # by session, for concurrent appends
        self.name = f"agentledger-{backend}" + ("-full" if self.full_sync else "")
        self.durability = {
            "memory": "in process memory, nothing on disk",
            "jsonl": "append-only log per session, fsync on every commit",
            "sqlite": "WAL, synchronous=NORMAL (fsync at checkpoints, not per commit)",
            "postgres": "server defaults (synchronous_commit=on: WAL flushed per commit)",
        }[backend]
        if self.full_sync:
            self.durability = "WAL, synchronous=FULL (fsync per commit, SQLite's default)"
        self._probe()

    def _probe(self) -> None:
        module = {"memory": "memory", "jsonl": "jsonl", "sqlite": "sqlite", "postgres": "postgres"}
        try:
            __import__(f"agentledger.store.{module[self.backend]}")
        except ImportError as exc:
            raise Unavailable(f"agentledger has no {self.backend} backend yet ({exc})") from None
        if self._pg is not None:
            self._pg.probe()

    def versions(self) -> dict[str, str]:
        import msgspec

        import agentledger

        out = {"agentledger": agentledger.__version__, "msgspec": msgspec.__version__}
        if self.backend == "sqlite":
            import sqlite3

            out["sqlite"] = sqlite3.sqlite_version
        if self.backend == "postgres":
            import psycopg

            out["psycopg"] = psycopg.__version__
            out["postgresql"] = PgSchemas.server_version()
        return out

    # -- storage ---------------------------------------------------------------------------
    def url(self) -> str:
        g = self.generation
        if self.backend == "memory":
            return "memory://"
        if self.backend == "jsonl":
            return f"jsonl:///{os.path.abspath(os.path.join(self.workdir, f'jsonl{g}'))}"
        if self.backend == "sqlite":
            path = os.path.abspath(os.path.join(self.workdir, f"state{g}.db"))
            return f"sqlite:///{path}" + ("?synchronous=full" if self.full_sync else "")
        assert self._pg is not None
        sep = "&" if "?" in base_url() else "?"
        return f"{base_url()}{sep}schema={self._pg.name(g)}"

    def storage_path(self) -> str | None:
        if self.backend == "jsonl":
            return os.path.join(self.workdir, f"jsonl{self.generation}")
        if self.backend == "sqlite":
            return self.workdir  # the db and its -wal file
        return None

    def storage_bytes(self) -> int | None:
        if self._pg is None:
            return super().storage_bytes()
        return self._pg.size(self.generation)

    def counters(self) -> dict[str, int]:
        """PostgreSQL writes in the server: report its WAL growth."""
        return {} if self._pg is None else self._pg.wal()

    def open(self) -> Any:
        from agentledger import Ledger

        if self.backend == "memory":
            if self._memory_gen != self.generation:
                self._memory_store = Ledger("memory://").store
                self._memory_gen = self.generation
            return Ledger(self._memory_store)
        return Ledger(self.url())

    def close(self, handle: Any) -> None:
        handle.close()

    def cleanup(self) -> None:
        super().cleanup()
        if self._pg is not None:
            self._pg.drop(self.generation)

    # -- workload --------------------------------------------------------------------------
    def prepare(self) -> tuple[list[Any], list[str]]:
        msgs = workload.load_msgs(self.workload_msgs, self.turns)
        return msgs, [m.id for m in msgs]

    def edited(self, item: Any) -> Any:
        return workload.edited_msg(item)

    def message_bytes(self, item: Any) -> int:
        from agentledger import encode

        return len(encode(item))

    # -- scenarios -------------------------------------------------------------------------
    def append_turn(self, handle: Any, live: list[Any], new: list[Any]) -> int:
        return handle.save(SESSION, live).bytes_written

    def bulk_seed(self, handle: Any, live: list[Any]) -> None:
        handle.save(SESSION, live)

    def edit(self, handle: Any, live: list[Any], position: int) -> int:
        return handle.save(SESSION, live).bytes_written

    def persist_unchanged(self, handle: Any, loaded: Any) -> int:
        return handle.save(SESSION, loaded).bytes_written

    def load(self, handle: Any) -> Any:
        return handle.messages(SESSION)

    def ids_of(self, loaded: Any) -> list[str]:
        return [m.id for m in loaded]

    def tool_text(self, loaded: Any, position: int) -> str:
        return loaded[position].tool_results[0].output[0].text

    def read_all(self, loaded: Any) -> bool:
        for m in loaded:
            m.content  # noqa: B018 - the first read decodes the message
        return True

    # -- concurrent appends ------------------------------------------------------------------
    def concurrent_handle(self, session: str) -> Any:
        from agentledger import Ledger

        return Ledger(self.url())

    def concurrent_append(self, handle: Any, session: str, new: list[Any], mode: str) -> None:
        """``own``: the process is the session's only writer and saves its list. ``shared``:
        read the session, save it with the turn appended at the version read
        (``expected_version``), and on a ``ConflictError`` read again and retry. ``lease``: take
        the session's run lease (the agent runtime's way), read, append, save."""
        from agentledger import ConflictError

        if mode == "own":
            live = self._live.setdefault(session, [])
            live.extend(new)
            handle.save(session, live)
        elif mode == "lease":
            with handle.lease(session, wait=120.0):
                handle.save(session, [*handle.messages(session), *new])
        else:
            while True:
                state = handle.load(session)
                try:
                    handle.save(session, [*state.context, *new], expected_version=state.version)
                    return
                except ConflictError:
                    continue

    def concurrent_count(self, handle: Any, session: str) -> int:
        return len(handle.messages(session))
