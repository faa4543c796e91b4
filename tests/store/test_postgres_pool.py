"""The Postgres store's connection pool: one connection for a process that uses the store from
one thread, a first use that fails (no server yet) leaves the store able to recover, reads
get through when every pooled connection died at once (a server restart), and a save is not
failed for a pooled connection the server had ended while it idled."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
import uuid
from contextlib import closing
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from agentledger.errors import StoreUnavailableError
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store.postgres import PostgresStore
from tests.store import pg
from tests.store.test_postgres import pg_url, schema

pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "schema"]  # fixtures, shared with test_postgres.py


def test_one_thread_saves_and_loads_on_one_pooled_connection(pg_url: str, schema: str) -> None:
    """The pool grows only once the first use has had its first connection: asking while it
    was still being opened made the pool open another and hand the two out in turn, so every
    statement was prepared, and every server backend warmed, twice."""
    with closing(PostgresStore(pg_url, schema=schema, pool_max=3)) as store:
        ledger = Ledger(store)
        msgs: list[Msg] = []
        for i in range(6):
            msgs.append(Msg.user(f"m{i}", id=f"m{i}"))
            ledger.save("s", msgs)
            assert Ledger(store).messages("s") == msgs
        stats = store._pool.get_stats()
        assert (stats["pool_size"], stats["connections_num"], stats["pool_max"]) == (1, 1, 3)


def test_threads_that_use_a_new_store_at_once_all_get_through(pg_url: str, schema: str) -> None:
    with closing(PostgresStore(pg_url, schema=schema, pool_max=3)) as store:
        errors: list[BaseException] = []

        def save(i: int) -> None:
            try:
                Ledger(store).save(f"s{i}", [Msg.user("x", id="x")])
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=save, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert errors == []
        assert sorted(s.session_id for s in Ledger(store).list_sessions()) == [
            f"s{i}" for i in range(6)
        ]


def test_a_save_on_a_pooled_connection_that_died_while_idle_is_tried_again_on_a_fresh_one(
    pg_url: str, schema: str
) -> None:
    """The server ended the pool's only connection (a restart, an idle timeout, an
    administrator): the save failed, not committed, though it never got to use a live one."""
    with closing(PostgresStore(pg_url, schema=schema, pool_min=1, pool_max=1)) as store:
        ledger = Ledger(store)
        turn = [Msg.user("question", id="q"), Msg.assistant("answer", id="a")]
        ledger.save("s", turn[:1])
        with store._pool.connection() as conn:
            pid = conn.info.backend_pid
        pg.terminate(pg_url, pid)
        assert ledger.save("s", turn).version == 2
        assert Ledger(store).messages("s") == turn
        assert [v.version for v in Ledger(store).history("s")] == [1, 2]


class _Forward(socketserver.BaseRequestHandler):
    """Copies bytes both ways between a client and the real server (``server.target``)."""

    def handle(self) -> None:
        upstream = socket.create_connection(self.server.target)  # type: ignore[attr-defined]
        done = threading.Event()

        def pump(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                done.set()

        threading.Thread(target=pump, args=(upstream, self.request), daemon=True).start()
        pump(self.request, upstream)
        done.wait(5)
        upstream.close()


def test_a_store_whose_server_was_unreachable_at_first_use_recovers(
    pg_url: str, schema: str
) -> None:
    """A first use that finds no server fails with ``StoreUnavailableError`` and leaves the
    pool open: once the server answers, the same store works (a pool that gave up at its
    first use would refuse every call after it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free now; nothing listens on it yet
    parts = urlsplit(pg_url)
    server = (parts.hostname or "127.0.0.1", parts.port or 5432)
    user = (parts.username or "postgres") + (f":{parts.password}" if parts.password else "")
    url = urlunsplit(parts._replace(netloc=f"{user}@127.0.0.1:{port}"))
    with closing(PostgresStore(url, schema=schema, timeout=1.0)) as store:
        with pytest.raises(StoreUnavailableError):
            Ledger(store)
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        forward: Any = socketserver.ThreadingTCPServer(("127.0.0.1", port), _Forward)
        forward.daemon_threads = True
        forward.target = server
        threading.Thread(target=forward.serve_forever, daemon=True).start()
        try:
            store._pool.timeout = 30.0  # it retries in the background, backing off
            ledger = Ledger(store)
            ledger.save("s", [Msg.user("back", id="b")])
            assert [m.id for m in ledger.messages("s")] == ["b"]
        finally:
            forward.shutdown()
            forward.server_close()


def test_reads_after_every_pooled_connection_died_all_succeed(pg_url: str, schema: str) -> None:
    """A server restart (or an idle timeout) ends every pooled connection at once. A read that
    finds its connection dead is retried, and the retry must not take the next idle one, dead
    too: with four dead connections, the first two loads failed, although the server was up."""
    name = f"agentledger-test-dead-pool-{uuid.uuid4().hex[:8]}"
    msgs = [Msg.user("one", id="1"), Msg.assistant("two", id="2")]
    with closing(
        PostgresStore(pg_url, schema=schema, pool_min=4, pool_max=4, application_name=name)
    ) as store:
        ledger = Ledger(store)
        ledger.save("s", msgs)
        with pg.admin(pg_url) as conn:
            for _ in range(1000):  # the pool opens its other connections in the background
                if store._pool.get_stats().get("pool_available") == 4:
                    break
                time.sleep(0.01)
            query = "SELECT pid FROM pg_stat_activity WHERE application_name = %s"
            pids = [row[0] for row in conn.execute(query, [name]).fetchall()]
        assert len(pids) == 4
        for pid in pids:  # only this test's backends: others share the server
            pg.terminate(pg_url, pid)
        assert [Ledger(store).messages("s") for _ in range(4)] == [msgs] * 4
        assert [h.msg_id for h in ledger.search("two")] == ["2"]
        assert [i.session_id for i in ledger.list_sessions()] == ["s"]
