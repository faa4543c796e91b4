"""The connection that holds a PostgreSQL store's run leases.

A run lease is a session-level advisory lock: it is exclusive across every worker on every host,
and it belongs to a database session, so it ends with its connection, and a crashed or killed
holder frees it. One dedicated connection per store holds them all (advisory locks nest within
one connection, so the store adds a per-process lock per session in front). It is opened on the
first lease, with TCP keepalives so that a vanished host's leases end when the server notices,
and with ``idle_session_timeout`` off: the connection idles by design while its runs wait on
their models, and a server or role setting that closed idle sessions would free every lease it
held. A connection found broken is replaced once: every lease it held is already gone on the
server. Once closed (with its store), it opens none again: a lease still waiting gets
``ClosedError``.

A lease can still end under its holder (an administrator's ``pg_terminate_backend``, a server
restart). ``lost`` tells, at no cost while nothing happened: a server that ends a session first
sends its client the reason, so an idle lease connection with anything to read is asked, with
one statement, whether it still lives. A lease whose connection went silently (a network cut)
looks held until the server's keepalives end it; the ledger's version check on every save
(``expected_version``) is what keeps such a holder from replacing another run's commit.
"""

from __future__ import annotations

import logging
import select
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agentledger.store.closable import closed_error

if TYPE_CHECKING:
    import psycopg

__all__ = ["LeaseConnection"]

log = logging.getLogger(__name__)

#: About 10 + 3 * 5 s until the server ends a vanished host's connection, and its leases.
_KEEPALIVES = (
    "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3"
)
#: The connection idles while its runs wait on their models: no server timeout may close it.
_NEVER_IDLE_OUT = "SET idle_session_timeout = 0"
_IDLE_TIMEOUT_SINCE = 140000  # PostgreSQL 14 added idle_session_timeout


class LeaseConnection:
    """Takes and gives back advisory locks on one connection, opened by ``connect``.

    ``operational_error`` is the driver's class for a broken connection; callers translate
    what else fails (``PostgresStore._errors``).
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        operational_error: type[Exception],
        location: str,
    ) -> None:
        self._connect = connect
        self._operational_error = operational_error
        self._location = location
        self._conn: psycopg.Connection[Any] | None = None
        self._taken: dict[int, psycopg.Connection[Any]] = {}  # each lock held: on which connection
        self._guard = threading.Lock()
        self._closed = False

    def try_lock(self, lock: int) -> bool:
        """Take ``lock`` if no other connection holds it."""
        return self._run("SELECT pg_try_advisory_lock(%s)", lock, connect=True, taking=True)

    def unlock(self, lock: int) -> bool:
        """Give ``lock`` back; False if this connection no longer held it (it was lost)."""
        return self._run("SELECT pg_advisory_unlock(%s)", lock, connect=False, taking=False)

    def lost(self, lock: int) -> bool:
        """Whether ``lock``, taken here and not given back, has ended: its connection was closed
        or replaced, or its server ended it. Costs nothing while the connection has nothing to
        read (see the module docstring); False for a lock not taken here."""
        with self._guard:
            conn = self._taken.get(lock)
            if conn is None:
                return False
            if conn is not self._conn or conn.closed:
                return True
            if not _has_input(conn):
                return False
            try:
                conn.execute("SELECT 1").fetchone()  # a notice, say, rather than an ending
            except self._operational_error:
                if not conn.broken:
                    raise
                self._drop(conn)
                return True
            return False

    def close(self) -> None:
        """Close the connection, which ends every lease it held, for good."""
        with self._guard:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(self, sql: str, lock: int, *, connect: bool, taking: bool) -> bool:
        with self._guard:
            for attempt in (1, 2):
                conn = self._conn
                if conn is None or conn.closed:
                    if not connect:
                        break
                    if self._closed:
                        raise closed_error(self._location)
                    conn = self._conn = self._open()
                elif not taking and self._taken.get(lock) is not conn:
                    break  # taken on a connection since replaced: it ended with it
                try:
                    row = conn.execute(sql, [lock]).fetchone()
                except self._operational_error:
                    if attempt == 2 or not conn.broken:
                        raise
                    self._drop(conn)
                    continue
                done = bool(row and row[0])
                if taking and done:
                    self._taken[lock] = conn
                elif not taking:
                    self._taken.pop(lock, None)
                return done
            if not taking:
                self._taken.pop(lock, None)
        return False

    def _open(self) -> psycopg.Connection[Any]:
        """A new lease connection, set up to be left idle for as long as its runs take."""
        conn = self._connect()
        conn.execute(_KEEPALIVES)
        if conn.info.server_version >= _IDLE_TIMEOUT_SINCE:
            conn.execute(_NEVER_IDLE_OUT)
        return conn

    def _drop(self, conn: psycopg.Connection[Any]) -> None:
        """Close a broken connection (every lease it held is already gone on the server side);
        the locks taken on it stay recorded, so their holders learn they were ``lost``."""
        conn.close()
        log.warning("the lease connection to %s was lost", self._location)


def _has_input(conn: psycopg.Connection[Any]) -> bool:
    """Whether the idle ``conn`` has anything to read, asked of its socket without waiting;
    True when the socket cannot be asked (then a statement is)."""
    try:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    except Exception:  # no socket any more (psycopg's own error), no poll() on this system
        return True
