"""The connection that holds a PostgreSQL store's run leases.

A run lease is a session-level advisory lock: it is exclusive across every worker on every host,
and it belongs to a database session, so it ends with its connection, and a crashed or killed
holder frees it. One dedicated connection per store holds them all (advisory locks nest within
one connection, so the store adds a per-process lock per session in front). It is opened on the
first lease, with TCP keepalives so that a vanished host's leases end when the server notices.
A connection found broken is replaced once: every lease it held is already gone on the server.
Once closed (with its store), it opens none again: a lease still waiting gets ``ClosedError``.
"""

from __future__ import annotations

import logging
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
        self._guard = threading.Lock()
        self._closed = False

    def try_lock(self, lock: int) -> bool:
        """Take ``lock`` if no other connection holds it."""
        return self._run("SELECT pg_try_advisory_lock(%s)", lock, connect=True)

    def unlock(self, lock: int) -> bool:
        """Give ``lock`` back; False if this connection no longer held it (it was lost)."""
        return self._run("SELECT pg_advisory_unlock(%s)", lock, connect=False)

    def close(self) -> None:
        """Close the connection, which ends every lease it held, for good."""
        with self._guard:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _run(self, sql: str, lock: int, *, connect: bool) -> bool:
        with self._guard:
            for attempt in (1, 2):
                conn = self._conn
                if conn is None or conn.closed:
                    if not connect:
                        return False
                    if self._closed:
                        raise closed_error(self._location)
                    conn = self._conn = self._connect()
                    conn.execute(_KEEPALIVES)
                try:
                    row = conn.execute(sql, [lock]).fetchone()
                    return bool(row and row[0])
                except self._operational_error:
                    if attempt == 2 or not conn.broken:
                        raise
                    conn.close()  # every lease it held is already gone on the server side
                    log.warning("the lease connection to %s was lost", self._location)
        return False  # pragma: no cover
