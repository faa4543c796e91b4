"""``postgresql://``: the scale-out backend, one ledger shared by many workers on many hosts.

psycopg 3 with a connection pool. A commit is one transaction that first moves the session row
from ``base_version`` to the new version (``UPDATE ... WHERE version = base``; the row lock makes
concurrent committers queue, and the loser sees the new version and gets ``ConflictError``), then
closes the rows that leave and inserts the new ones. On a session whose row the ledger knows, a
save is one statement (``Queries.save_in_one``; a save adding media, a pipeline) in which that
check fails everything when the session moved, so the ledger need not read the version first:
a save costs one round trip and O(changed rows) writes. The schema (``postgres_schema``) keeps
bodies out of line, so closing a row never copies the message.

The store is ``ranked`` (see ``ranks``): rows are ordered by rank keys the ledger assigns, so an
insert, a deletion or a moved range writes only the rows it adds and closes, and a dropped
prefix (a sliding window, a summary replacing it) is one ``list_floors`` row: the rows below
the floor stay as they are, hidden from that version on, until ``purge_history``.

A commit whose connection fails is never reported by guess: the store asks another connection
whether it landed (``commit``).

The run lease is a session-level advisory lock held on one dedicated connection per store
(``postgres_lease``): it is exclusive across every worker on every host, and it dies with its
connection, so a crashed or killed holder frees it. Search uses a GIN index over each live
message's words, which the client cuts (``search_words``: the server's own parser, run
inside every commit, was about a third of an append).
"""

from __future__ import annotations

import hashlib
import logging
import operator
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from agentledger._optional import require
from agentledger.errors import (
    ConflictError,
    CorruptStoreError,
    LeaseLostError,
    OutcomeUnknownError,
    SessionBusyError,
    StoreError,
    StoreUnavailableError,
)
from agentledger.errors import UserError as _UserError
from agentledger.messages import digest_of
from agentledger.store import postgres_schema as ddl
from agentledger.store.base import (
    CommitPlan,
    Head,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredList,
    StoredState,
    VersionInfo,
    acquire_within,
    check_base,
    check_blobs,
    check_title,
    check_version,
    lists_from_rows,
    process_lock,
    snippet_around,
)
from agentledger.store.body_text import text_of_body
from agentledger.store.cursor import Keyset
from agentledger.store.ids import shown
from agentledger.store.media import blob_refs, decode_without_media
from agentledger.store.postgres_lease import LeaseConnection
from agentledger.store.ranks import RankPlan, plan_ranks
from agentledger.store.search_words import prefix_query, query_words, tsvector_literal

if TYPE_CHECKING:
    import psycopg

__all__ = ["PostgresStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_DIGEST = 16  # bytes per blob digest in ``messages.blobs``
#: Matches a search reads before it looks for its hits among the latest sessions instead
#: (``PostgresStore.search``).
SEARCH_CAP = 256
#: The most bytes of rows (bodies, ids and words; blobs; values) one statement of a save
#: carries, unless one row alone holds more. A statement's parameters travel in one protocol
#: message, which PostgreSQL refuses past 1 GiB: a save holding more is written by several
#: statements in its transaction (``_batches``), as SQLite would store it.
BATCH_BYTES = 256 << 20
#: The most bytes one row may hold (a message's body and id, a media blob, a named value), so
#: that it fits, with the words of its text and the rest of its statement, in that 1 GiB
#: message (PostgreSQL stores no value of 1 GiB either). A save holding a larger row can never
#: commit: it is refused before anything is sent (``_refuse_oversized``), as a ``UserError``.
MAX_ROW_BYTES = (1 << 30) - (16 << 20)
#: The columns of the rows a save puts (``_write_args``), cut into batches together.
_ROW_COLUMNS = ("lists", "ranks", "ids", "digests", "bodies", "words", "refs")


def recent_rows(limit: int) -> int | None:
    """Live rows a search reads of the latest sessions, looking for ``limit`` hits of a word
    in more than ``SEARCH_CAP`` messages: enough for a word in one message of 100 to fill
    ``limit`` hits with rows to spare (about 2.5 ms for 2,048 short messages). None past
    ``limit`` 128: reading that many rows could cost more than reading every match."""
    return max(2048, 128 * limit) if limit <= 128 else None


def search_rows(
    q: ddl.Queries, args: dict[str, Any], execute: Callable[[str, dict[str, Any]], list[Any]]
) -> list[tuple[Any, ...]]:
    """The rows of a search (``args``: ``tenant``, ``query``, ``limit``), each statement run by
    ``execute(sql, args)``: the questions of ``PostgresStore.search``, in its order, until one
    answers (a benchmark passes an ``execute`` that also records each statement's plan)."""
    limit = args["limit"]
    rows = execute(q.search_capped, {**args, "cap": SEARCH_CAP + 1})
    if rows and rows[0][-1] <= SEARCH_CAP:
        return rows
    budget = recent_rows(limit)
    if rows and budget is not None:  # more matches than the cap
        rows = execute(q.search_recent, {**args, "rows": budget})
        if rows and (len(rows) == limit or rows[0][-1]):
            return rows
    return execute(q.search, args)


def _lock_id(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (collisions: about 2**-64)."""
    digest = hashlib.blake2b("\x00".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _text(value: str) -> str:
    """``value`` as PostgreSQL ``text``, which cannot hold NUL: U+FFFD in its place. A column
    so written is never read back as it is: an id comes back from its body (``_exact_id``), a
    title from ``exact_title`` (``_exact_title``)."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _exact_id(stored: str, body: bytes) -> str:
    """The id of the message ``body``, whose ``msg_id`` column holds ``stored``: ``stored``
    itself unless it has U+FFFD, which may stand for a NUL (``_text``)."""
    return decode_without_media(body).id if "\ufffd" in stored else stored


def _title_bytes(title: str | None) -> bytes | None:
    """What ``exact_title`` keeps of ``title``: its UTF-8 if it holds NUL, else nothing."""
    return title.encode() if title and "\x00" in title else None


def _exact_title(stored: str | None, exact: bytes | None) -> str | None:
    """A session's title from its ``title`` and ``exact_title`` columns. ``exact_title`` is
    taken only while ``title`` still reads as it (a worker older than migration 7 changes the
    title without it)."""
    if exact is not None:
        title = exact.decode()
        if _text(title) == stored:
            return title
    return stored


def _split_url(url: str) -> tuple[str, str | None]:
    """``url`` without our ``?schema=`` parameter (libpq would refuse it), and that schema."""
    if "://" not in url:
        return url, None  # a "key=value" conninfo string
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracketed host left open, say
        raise _UserError(f"not a PostgreSQL URL: {exc}") from None
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    if schema is None:
        return url, None
    rest = urlencode([(k, v) for k, v in query if k != "schema"], quote_via=quote)
    return urlunsplit(parts._replace(query=rest)), schema


def _public(info: dict[str, Any], schema: str) -> str:
    """Where the data lives, for messages and lease keys: no password, no options."""
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{info.get('host', '')}{port}/{info.get('dbname', '')}#{schema}"


@dataclass(frozen=True, slots=True)
class _NotCommitted:
    """A try at a commit that surely did not commit: why, and whether its connection broke."""

    failure: Exception
    broken: bool


class PostgresStore(Store):
    """Sessions in PostgreSQL, shared by every process that opens the same database and schema.

    ``url`` is a libpq URL; ``?schema=name`` in it (or ``schema=``) picks the schema, default
    ``agentledger``. ``pool_min``/``pool_max`` size the connection pool; ``timeout`` is how long
    an operation waits for a pooled connection before failing with ``StoreError``.
    """

    stamp_before_commit = False  # a commit checks version and incarnation (``_commit_known``)
    ranked = True  # rows are ordered by ranks, a dropped prefix is a floor (see ``ranks``)

    def __init__(
        self,
        url: str,
        *,
        schema: str | None = None,
        pool_min: int = 1,
        pool_max: int = 10,
        timeout: float = 30.0,
        application_name: str = "agentledger",
    ) -> None:
        self._pg = require("psycopg", "postgres")
        pool_module = require("psycopg_pool", "postgres")
        conninfo, url_schema = _split_url(url)
        self.schema = schema or url_schema or "agentledger"
        if not _SCHEMA_NAME.fullmatch(self.schema):
            raise _UserError(f"schema name must match [a-z_][a-z0-9_]{{0,62}}, got {self.schema!r}")
        try:
            info = self._pg.conninfo.conninfo_to_dict(conninfo)
        except self._pg.ProgrammingError as exc:
            raise _UserError(f"not a PostgreSQL URL or conninfo string: {exc}") from None
        self.location = _public(info, self.schema)
        self._conninfo = conninfo
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if "application_name" not in info:
            self._kwargs["application_name"] = application_name
        # the connection that checks a failed commit, a name apart (see ``_resolve``)
        self._checker_name = f"{info.get('application_name') or application_name} (check)"
        self._timeout = timeout
        self._q = ddl.Queries(self.schema)
        self._ready = False
        self._leases = LeaseConnection(self._connect, self._pg.OperationalError, self.location)
        self._pool_timeout = pool_module.PoolTimeout
        self._pool_closed = pool_module.PoolClosed  # an ``OperationalError``: caught first
        # The pool may grow only once ``setup`` has had its first connection: a request that
        # finds the pool empty makes it open one more, and one made while the first connection
        # is still opening would leave a process that saves from one thread with two, handed
        # out in turn (each statement prepared, each server backend warmed, twice: the first
        # seven shifts after a load took 2.4-3.0 ms against 1.4-1.9 on one connection).
        self._pool_sizes = (pool_min, max(pool_max, pool_min, 1))
        self._pool = pool_module.ConnectionPool(
            conninfo,
            kwargs=self._kwargs,
            min_size=pool_min,
            max_size=max(pool_min, 1),
            timeout=timeout,
            open=False,
            name=f"agentledger:{self.schema}",
        )
        self._pool.open(wait=False)

    # -- plumbing ------------------------------------------------------------------------
    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Turn driver and pool failures into ``StoreError`` naming what failed and where."""
        try:
            yield
        except self._pool_closed as exc:  # closed while the call was under way
            raise self._closed_error() from exc
        except self._pool_timeout as exc:
            raise StoreUnavailableError(
                f"no PostgreSQL connection for {what} within {self._timeout:g} s "
                f"({self.location}): {exc}"
            ) from exc
        except self._pg.OperationalError as exc:  # connection refused, dropped, timed out
            raise StoreUnavailableError(
                f"PostgreSQL connection failed during {what} ({self.location}): {exc}"
            ) from exc
        except self._pg.Error as exc:
            raise StoreError(f"PostgreSQL failed during {what} ({self.location}): {exc}") from exc

    def _read(self, what: str, fn: Callable[[psycopg.Connection[Any]], T]) -> T:
        """Run a read; if its pooled connection turned out dead, run it once more on one that
        answers.

        A server restart or an idle timeout ends every pooled connection at once, so the next
        idle one is dead too: before the retry, ``pool.check()`` tries each idle connection
        (one empty statement each) and replaces the dead ones. That costs a round trip per
        idle connection only after a failure; checking every connection as it leaves the pool
        would add one to every call."""
        with self._errors(what):
            for attempt in (1, 2):
                conn = None
                try:
                    with self._pool.connection() as conn:
                        return fn(conn)
                except (self._pool_timeout, self._pool_closed):
                    raise
                except self._pg.OperationalError:
                    if attempt == 2 or conn is None or not conn.broken:
                        raise
                self._pool.check()
        raise AssertionError("unreachable")  # pragma: no cover

    def setup(self) -> None:
        """Apply pending migrations (``postgres_schema.MIGRATIONS``); cheap once up to date."""
        if self._ready:
            return
        with self._errors("setup"), self._pool.connection() as conn:
            if not {version for version, _, _ in ddl.MIGRATIONS} <= self._applied(conn):
                self._migrate(conn)
        self._pool.resize(*self._pool_sizes)  # see ``__init__``
        self._ready = True

    def _applied(self, conn: psycopg.Connection[Any]) -> set[int]:
        """The migrations recorded as applied (every missing one is applied, not only newer
        ones)."""
        table = f'"{self.schema}".schema_migrations'
        row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()
        if not row or not row[0]:
            return set()
        return {r[0] for r in conn.execute(f"SELECT version FROM {table}").fetchall()}

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        schema = f'"{self.schema}"'
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_lock_id("migrate", self.schema)])
            row = conn.execute("SELECT to_regnamespace(%s) IS NULL", [schema]).fetchone()
            if row and row[0]:
                conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (version integer "
                "PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur = conn.execute(f"SELECT version FROM {schema}.schema_migrations")
            done = {r[0] for r in cur.fetchall()}
            for version, name, sql in ddl.MIGRATIONS:
                if version not in done:
                    conn.execute(ddl.render(sql, self.schema))
                    conn.execute(
                        f"INSERT INTO {schema}.schema_migrations (version, name) VALUES (%s, %s)",
                        [version, name],
                    )

    def close(self) -> None:
        """Close the pool and the lease connection (which ends every lease it held)."""
        self._pool.close()
        self._leases.close()

    def _connect(self) -> psycopg.Connection[Any]:
        """A new connection of the store's own (the lease connection, a retried commit)."""
        timeout = max(1, int(self._timeout))
        return self._pg.connect(self._conninfo, connect_timeout=timeout, **self._kwargs)

    # -- reading -------------------------------------------------------------------------
    @staticmethod
    def _begin_read(conn: psycopg.Connection[Any]) -> None:
        """Open a snapshot for a multi-statement read, without JIT: the planner counts on
        about 100 lists per session in a load (``postgres_schema._above_floors``), which puts
        a large session past ``jit_above_cost``, and compiling the plan then took longer (0.4 s)
        than running it."""
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute("SET LOCAL jit = off")

    def read_version(self, key: SessionKey) -> int:
        def run(conn: psycopg.Connection[Any]) -> int:
            row = conn.execute(self._q.version, (key.tenant, key.session)).fetchone()
            return int(row[0]) if row else 0

        return self._read("read_version", run)

    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        """The incarnation is the session row's id, which PostgreSQL never hands out twice."""

        def run(conn: psycopg.Connection[Any]) -> tuple[str, int]:
            row = conn.execute(self._q.stamp, (key.tenant, key.session)).fetchone()
            return (str(row[0]), int(row[1])) if row else ("", 0)

        return self._read("read_stamp", run)

    def read_head(self, key: SessionKey) -> Head | None:
        args = (key.tenant, key.session)
        named = {"tenant": key.tenant, "session": key.session}

        def run(conn: psycopg.Connection[Any]) -> Head | None:
            with conn.pipeline():
                self._begin_read(conn)
                session = conn.execute(self._q.session, args)
                digests = conn.cursor(binary=True).execute(self._q.live_digests, named)
                floors = conn.cursor(binary=True).execute(self._q.live_floors, args)
                values = conn.cursor(binary=True).execute(self._q.live_values, args)
                conn.execute("COMMIT")
            row = session.fetchone()
            if row is None:
                return None
            lists: dict[str, list[bytes]] = {}
            ranks: dict[str, list[bytes]] = {}
            for name, rank, digest in _in_order(digests.fetchall()):
                if name not in lists:
                    lists[name], ranks[name] = [], []
                lists[name].append(digest)
                ranks[name].append(rank)
            values_by_name = {n: digest_of(raw) for n, raw in values.fetchall()}
            floors_by_list = dict(floors.fetchall())
            return Head(
                row[1], lists, values_by_name, str(row[0]), ranks=ranks, floors=floors_by_list
            )

        return self._read("read_head", run)

    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        key_args = (key.tenant, key.session)

        def run(conn: psycopg.Connection[Any]) -> StoredState | None:
            with conn.pipeline() as pipe:
                self._begin_read(conn)
                found = conn.execute(self._q.session, key_args)
                pipe.sync()
                row = found.fetchone()
                try:
                    if row is None:
                        return None
                    sid, latest, oldest = row
                    check_version(version, oldest, latest)
                    at = latest if version is None else version
                    cur = conn.cursor
                    media = cur().execute(self._q.has_media, [sid])
                    if at == latest:
                        rows = cur(binary=True).execute(self._q.live_rows, {"sid": sid})
                        floors = cur(binary=True).execute(self._q.live_floors, key_args)
                        values = cur(binary=True).execute(self._q.live_values, key_args)
                    else:
                        at_args = {"sid": sid, "v": at}
                        rows = cur(binary=True).execute(self._q.rows_at, at_args)
                        floors = cur(binary=True).execute(self._q.floors_at, at_args)
                        values = cur(binary=True).execute(self._q.values_at, at_args)
                finally:
                    conn.execute("COMMIT")
            lists = self._lists(key, _in_order(rows.fetchall()))
            may_have_media = bool(media.fetchone()[0])  # type: ignore[index]
            values_by_name = dict(values.fetchall())
            state = StoredState(at, lists, values_by_name, str(sid), may_have_media)
            state.floors = dict(floors.fetchall())
            return state

        return self._read("load", run)

    def _lists(self, key: SessionKey, rows: list[tuple[Any, ...]]) -> dict[str, StoredList]:
        """Rows ``(list, rank, msg_id, digest, body)``, each list's together in rank order, as one
        ``StoredList`` per list (see ``lists_from_rows``), with the exact id of any row whose
        id held a NUL, which ``_text`` stored as U+FFFD (``_exact_id``)."""
        lists = lists_from_rows(rows, f"{self.location} {key.tenant}/{key.session}")
        for name, loaded in lists.items():
            if "\ufffd" in "".join(loaded.ids):
                exact = list(map(_exact_id, loaded.ids, loaded.bodies))
                lists[name] = StoredList(exact, loaded.digests, loaded.bodies, loaded.ranks)
        return lists

    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        if not digests:
            return {}

        def run(conn: psycopg.Connection[Any]) -> dict[bytes, bytes]:
            cur = conn.cursor(binary=True).execute(self._q.media, (key.tenant, list(digests)))
            return dict(cur.fetchall())

        found = self._read("read_media", run)
        return check_blobs(found, f"{self.location} {key.tenant} blobs")

    def history(self, key: SessionKey) -> list[VersionInfo]:
        def run(conn: psycopg.Connection[Any]) -> list[VersionInfo]:
            cur = conn.execute(self._q.history, (key.tenant, key.session))
            return [VersionInfo(*row) for row in cur.fetchall()]

        return self._read("history", run)

    def list_sessions(
        self,
        tenant: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        after: Keyset | None = None,
    ) -> list[SessionInfo]:
        args: dict[str, Any] = {"tenant": tenant, "limit": limit, "offset": offset}
        if after is not None:
            args.update(updated_at=after.updated_at, session=after.session_id)
        sql = self._q.list_sessions if after is None else self._q.list_sessions_after

        def run(conn: psycopg.Connection[Any]) -> list[SessionInfo]:
            return [
                SessionInfo(tenant, session, _exact_title(title, exact), *rest)
                for tenant, session, title, *rest, exact in conn.execute(sql, args).fetchall()
            ]

        return self._read("list_sessions", run)

    def search(self, tenant: str, query: str, *, limit: int = 20) -> list[SearchHit]:
        """Live messages whose text has every word of ``query`` as a word prefix, any case.

        Words are runs of letters and digits, compared without case or Latin accents, as on
        SQLite (``search_words``), so punctuation and operators in ``query`` are plain text.
        Hits come in ``list_sessions`` order, then by list and position, as in the generic
        scan. Only the first 100,000 characters of a message are indexed.

        The full search (``postgres_schema.search_sql``) reads every match from the words index
        before it can order them by session, so a word held by many messages costs their number
        (about 50-100 ms for 15,000 of a million). It is asked only when two cheaper questions
        leave the answer open, and each of their answers, when taken, is the full search's:

        1. the search over at most ``SEARCH_CAP`` matches: when it found no more, it saw them
           all, and its answer is the full one (a word in few messages costs what it did);
        2. else the search of the live rows of the most recently updated sessions, in
           ``list_sessions`` order, at most ``recent_rows(limit)`` of them (cut before a
           session read in part): ``limit`` hits there are the first ``limit`` of all, since
           every other hit is in a session after them; fewer are the answer when those rows were
           all the tenant's. A word in many messages is found among the first sessions, at the
           cost of reading those rows, whatever the store holds. Not asked for a ``limit``
           over 128, whose rows to read could cost more than every match.

        The first question counts every tenant's matches (the index holds them all), so a
        word common in another tenant goes on to the second; answered with no rows, it leaves
        the answer open too (no match, or none of this tenant's above their lists' floors).
        Each question is one statement, in a snapshot of its own.
        """
        match = prefix_query(query)
        if match is None or limit <= 0:
            return []
        first = query_words(query)[0]  # a word the match holds: the snippet centres on it
        args = {"tenant": tenant, "query": match, "limit": limit}

        def run(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            return search_rows(self._q, args, lambda sql, a: conn.execute(sql, a).fetchall())

        return [
            SearchHit(
                tenant, session, name, position, _exact_id(msg_id, body), _snippet(body, first)
            )
            for session, name, position, msg_id, body, _ in self._read("search", run)
        ]

    # -- writing -------------------------------------------------------------------------
    def commit(self, plan: CommitPlan) -> str | None:
        """Apply ``plan`` in one transaction; report exactly what became durable.

        A failure whose outcome is certain is raised as is: ``ConflictError`` and ``UserError``
        (decided before COMMIT was sent), or an error the server reported on a connection that
        is still sound (its transaction is aborted). Any other failure (a connection that broke,
        a pipeline left busy, anything unexpected) can strike before or after the server
        committed, so the store asks on another connection, once the first one's transaction
        can no longer change (``_resolve``): committed is a success; not committed is
        ``StoreUnavailableError``, after one more try on a connection of its own when the
        pooled one had broken (most likely ended by the server while it idled in the pool: a
        restart, a timeout, an administrator), so a caller is not failed for a connection it
        never got to use. A save to a session whose run lease this store took and lost
        raises ``LeaseLostError`` instead, before anything is sent (see ``lease``).
        """
        title = check_title(plan)
        self._check_lease(plan.key)
        outcome = self._attempt(plan, title, self._pool.connection())
        if isinstance(outcome, _NotCommitted) and outcome.broken:
            outcome = self._attempt(plan, title, self._own_connection())
        if isinstance(outcome, _NotCommitted):
            failure = outcome.failure
            raise StoreUnavailableError(
                f"the connection to PostgreSQL ({self.location}) failed while saving session "
                f"{plan.key.session!r} as version {plan.version}, and the save was not "
                f"committed: it was rolled back; retrying later is safe ({failure})"
            ) from failure
        return outcome

    def _attempt(
        self,
        plan: CommitPlan,
        title: str | None,
        connection: AbstractContextManager[psycopg.Connection[Any]],
    ) -> str | _NotCommitted:
        """One try of ``commit`` on ``connection``: the incarnation if it committed (the store
        asks when a failure leaves that open), ``_NotCommitted`` if it surely did not for a
        reason a later try may not meet; raises what a retry would meet again."""
        failure: Exception | None = None
        pid, broken = 0, False
        with self._errors("save"), connection as conn:
            pid = conn.info.backend_pid
            try:
                return self._commit(conn, plan, title)
            except (ConflictError, _UserError):
                self._roll_back(conn)
                raise
            except self._pg.errors.DataCorrupted as exc:  # a check of ``_write`` failed
                self._roll_back(conn)
                raise CorruptStoreError(
                    f"session {plan.key.session!r} at version {plan.base_version} does not "
                    f"hold the rows the save was planned against: {exc.diag.message_primary}",
                    location=f"{self.location} {plan.key.tenant}/{plan.key.session}",
                ) from None
            except self._pg.Error as exc:
                if exc.sqlstate is not None and not conn.broken and self._roll_back(conn):
                    raise  # the server refused a statement: nothing was committed
                failure, broken = exc, conn.broken
                conn.close()  # the pool discards it; the server ends its transaction
            except Exception as exc:
                failure = exc
                conn.close()
            except BaseException:
                conn.close()
                raise
        assert failure is not None
        incarnation = self._resolve(plan, pid, failure)
        return _NotCommitted(failure, broken) if incarnation is None else incarnation

    @contextmanager
    def _own_connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A new connection outside the pool, closed after use."""
        with self._connect() as conn:
            yield conn

    def _roll_back(self, conn: psycopg.Connection[Any]) -> bool:
        """End the connection's transaction; False (and the connection closed) if it cannot."""
        try:
            conn.rollback()
            return True
        except self._pg.Error:
            conn.close()
            return False

    def _resolve(self, plan: CommitPlan, pid: int, failure: Exception) -> str | None:
        """The incarnation if ``plan`` committed, None if it did not, asked on another
        connection. The answer is final once the version row is there, or once backend ``pid``
        (which ran the commit, and whose client has closed) can no longer commit: gone, or
        waiting outside a transaction. Raises ``OutcomeUnknownError`` if that cannot be known
        within the store's timeout."""
        deadline = time.monotonic() + self._timeout
        args = (plan.key.tenant, plan.key.session, plan.version)

        def ask() -> tuple[bool, str | None]:
            # A connection of its own, not the pool's: pooled ones may have died with the first.
            kwargs = {**self._kwargs, "application_name": self._checker_name}
            connect_timeout = max(1, int(deadline - time.monotonic()))
            with self._pg.connect(self._conninfo, connect_timeout=connect_timeout, **kwargs) as c:
                settled = c.execute(self._q.backend_settled, [pid]).fetchone()
                row = c.execute(self._q.committed, args).fetchone()  # after: sees the outcome
            if row is not None and row[0] == plan.committed_at:
                return True, str(row[1])
            return bool(settled and settled[0]), None

        pause = 0.005
        while True:
            try:
                final, incarnation = ask()
            except self._pg.Error as exc:  # asked again until the deadline
                final, incarnation, problem = False, None, f"the check failed: {exc}"
            else:
                problem = f"its server session was still open after {self._timeout:g} s"
            if final:
                return incarnation
            if time.monotonic() >= deadline:
                raise OutcomeUnknownError(
                    f"saving session {plan.key.session!r} as version {plan.version} failed "
                    f"({failure}), and whether it committed is unknown ({problem}); load the "
                    "session to see"
                ) from failure
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def _commit(self, conn: psycopg.Connection[Any], plan: CommitPlan, title: str | None) -> str:
        key, q = plan.key, self._q
        session = {
            "tenant": key.tenant,
            "session": key.session,
            "version": plan.version,
            "base": plan.base_version,
            "incarnation": plan.base_incarnation,
            "at": plan.committed_at,
            "title": None if title is None else _text(title),
            "exact_title": _title_bytes(title),
            "count": plan.message_count,
        }
        _refuse_oversized(plan)
        if plan.base_version and plan.base_incarnation.isdigit():
            return self._commit_known(conn, plan, session)
        with conn.pipeline() as pipe:
            conn.execute("BEGIN")
            moved = conn.execute(q.create if plan.base_version == 0 else q.bump, session)
            pipe.sync()
            row = moved.fetchone()
            if row is None:
                raise self._conflict(conn, plan)
            self._write(conn, row[0], plan, self._ranks(conn, pipe, row[0], plan))
            conn.execute("COMMIT")
        return str(row[0])

    def _commit_known(
        self, conn: psycopg.Connection[Any], plan: CommitPlan, session: dict[str, Any]
    ) -> str:
        """The common save, on a session whose row (``sid``, the incarnation) is known: one
        round trip. The guarded bump fails the pipeline if the session moved; the writes behind
        it never run then, and the stored stamp says why. A save the ledger planned that adds
        no media and fits one statement (nearly every save) is one statement instead
        (``_save_in_one``)."""
        sid = int(plan.base_incarnation)
        try:
            ranks = [w.ranks for w in plan.lists if w.ranks is not None]
            if len(ranks) == len(plan.lists) and not plan.media:
                args = _write_args(plan, ranks)
                if _fits_one_statement(args):
                    self._save_in_one(conn, sid, plan, args, session)
                    return plan.base_incarnation
            with conn.pipeline() as pipe:
                conn.execute("BEGIN")
                conn.execute(self._q.bump_or_fail, session)
                self._write(conn, sid, plan, self._ranks(conn, pipe, sid, plan))
                conn.execute("COMMIT")
        except self._pg.errors.DivisionByZero:
            conn.rollback()
            raise self._conflict(conn, plan) from None
        return plan.base_incarnation

    def _save_in_one(
        self,
        conn: psycopg.Connection[Any],
        sid: int,
        plan: CommitPlan,
        args: dict[str, Any],
        session: dict[str, Any],
    ) -> None:
        """Apply ``plan`` (ranked by the ledger, no media; ``args``, its ``_write_args``) as
        one statement, its own transaction (``Queries.save_in_one``): about half the client and
        server work of the pipeline of a statement per write between BEGIN and COMMIT."""
        args.update(session, **self._version_row(sid, plan))
        closes, floors = bool(args["close_ranks"]), bool(args["floor_lists"])
        sql = self._q.save_in_one(closes, floors, bool(plan.values))
        # prepared at once, not after psycopg's 5 runs: planning it took longer than running
        # it (0.34 ms against 0.21 for an edit), and a save of each shape is made again
        conn.execute(sql, args, prepare=True)

    def _conflict(self, conn: psycopg.Connection[Any], plan: CommitPlan) -> ConflictError:
        """Why the session row did not move from ``plan``'s base: read after the failed bump."""
        key = plan.key
        found = conn.execute(self._q.stamp, (key.tenant, key.session)).fetchone()
        stored, incarnation = (int(found[1]), str(found[0])) if found else (0, "")
        check_base(plan, stored, incarnation)  # raises, naming a newer version or a new life
        return ConflictError(  # the row moved between the update and this read
            f"session {key.session!r} changed while the save was being applied",
            expected=plan.base_version,
            actual=stored,
        )

    def _ranks(
        self, conn: psycopg.Connection[Any], pipe: psycopg.Pipeline, sid: int, plan: CommitPlan
    ) -> list[RankPlan]:
        """The ``RankPlan`` of each list write: the ledger's, or, for a plan made without one
        (by hand), planned here from the live ranks and floor read in the transaction, after
        the bump (a round trip the ledger's saves never take)."""
        given = [w.ranks for w in plan.lists if w.ranks is not None]
        if len(given) == len(plan.lists):
            return given
        missing = [w.name for w in plan.lists if w.ranks is None]
        pipe.sync()  # the bump (and its refusal) first
        args = {"sid": sid, "lists": missing}
        live = conn.cursor(binary=True).execute(self._q.list_ranks, args)
        found = conn.cursor(binary=True).execute(self._q.list_floors, args)
        pipe.sync()
        ranks: dict[str, list[bytes]] = {}
        for name, rank in _in_order(live.fetchall()):
            ranks.setdefault(name, []).append(rank)
        floors = dict(found.fetchall())
        plans = []
        for write in plan.lists:
            if write.ranks is None:
                old = ranks.get(write.name, [])
                runs = write.kept_runs(len(old))
                puts = sorted(position for position, _ in write.puts)
                plans.append(plan_ranks(old, floors.get(write.name), runs, puts, write.length))
            else:
                plans.append(write.ranks)
        return plans

    def _write(
        self, conn: psycopg.Connection[Any], sid: int, plan: CommitPlan, ranks: list[RankPlan]
    ) -> None:
        """Queue every write of ``plan`` in the open transaction (pipelined, not yet synced):
        close the rows whose ranks ``ranks`` closes (all of them live, else the statement fails
        with ``data_corrupted``), set the new floors, insert the puts at their ranks. Rows,
        values and blobs are inserted ``BATCH_BYTES`` at a time (``_batches``)."""
        q, v = self._q, plan.version
        if plan.media:
            conn.execute("SELECT pg_advisory_xact_lock_shared(%s)", [self._blob_lock(plan.key)])
        args = _write_args(plan, ranks)
        args.update(version=v, sid=sid)
        if args["close_ranks"]:
            conn.execute(q.close_rows, args)
        if args["floor_lists"]:
            conn.execute(q.close_floors, args)
            conn.execute(q.insert_floors, args)
        for rows in _batches(args, _ROW_COLUMNS, _row_bytes(args)):
            conn.execute(q.insert_rows, {**args, **rows})
        if plan.values:
            conn.execute(q.close_values, args)
            raws = ("value_names", "raws")
            for values in _batches(args, raws, list(map(len, args["raws"]))):
                conn.execute(q.insert_values, {**args, **values})
        if plan.media:
            self._insert_media(conn, sid, plan)
        conn.execute(q.insert_version, self._version_row(sid, plan))

    def _insert_media(self, conn: psycopg.Connection[Any], sid: int, plan: CommitPlan) -> None:
        """Queue the inserts of ``plan``'s media blobs, ``BATCH_BYTES`` at a time, and of the
        session's references to them."""
        datas = list(plan.media.values())
        media = {"tenant": plan.key.tenant, "digests": list(plan.media), "datas": datas}
        for batch in _batches(media, ("digests", "datas"), list(map(len, datas))):
            conn.execute(self._q.insert_blobs, {**media, **batch})
        conn.execute(self._q.insert_refs, {**media, "sid": sid})

    @staticmethod
    def _version_row(sid: int, plan: CommitPlan) -> dict[str, Any]:
        """The parameters of the ``versions`` row that records ``plan``."""
        return {
            "sid": sid,
            "version": plan.version,
            "at": plan.committed_at,
            "appended": plan.appended,
            "replaced": plan.replaced,
            "truncated": plan.truncated,
            "values_changed": len(plan.values),
        }

    def _blob_lock(self, key: SessionKey) -> int:
        """Commits adding media hold it shared, blob collection exclusive (per tenant)."""
        return _lock_id("blobs", self.schema, key.tenant)

    def _collect(self, conn: psycopg.Connection[Any], key: SessionKey, digests: set[bytes]) -> None:
        """Delete the blobs among ``digests`` that no session references any more."""
        if digests:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [self._blob_lock(key)])
            conn.execute(self._q.collect_blobs, (key.tenant, list(digests)))

    def delete(self, key: SessionKey) -> bool:
        with self._errors("delete"), self._pool.connection() as conn, conn.transaction():
            row = conn.execute(self._q.delete_session, (key.tenant, key.session)).fetchone()
            if row is None:
                return False
            sid = row[0]
            for sql in self._q.delete_rows:
                conn.execute(sql, [sid])
            refs = conn.execute(self._q.delete_refs, [sid]).fetchall()
            self._collect(conn, key, {r[0] for r in refs})
            return True

    def purge_history(self, key: SessionKey, keep_last: int) -> int:
        with self._errors("purge_history"), self._pool.connection() as conn, conn.transaction():
            args = (keep_last, key.tenant, key.session)
            row = conn.execute(self._q.purge_start, args).fetchone()
            if row is None:
                return 0
            at = {"sid": row[0], "oldest": row[1]}
            found = conn.execute(self._q.purge_rows, at).fetchone()
            removed_rows, dropped_refs = (found[0], found[1]) if found else (0, None)
            found = conn.execute(self._q.purge_values, at).fetchone()
            removed = removed_rows + (found[0] if found else 0)
            conn.execute(self._q.purge_floors, at)
            conn.execute(self._q.purge_versions, at)
            if dropped_refs:
                gone = _split_refs(dropped_refs)
                remaining = conn.execute(self._q.remaining_refs, [at["sid"]]).fetchall()
                gone -= _split_refs(r[0] for r in remaining)
                if gone:
                    conn.execute(self._q.drop_refs, (at["sid"], key.tenant, list(gone)))
                    self._collect(conn, key, gone)
            return int(removed)

    # -- the run lease -------------------------------------------------------------------
    @contextmanager
    def lease(self, key: SessionKey, *, wait: float = 0.0) -> Iterator[None]:
        """Hold the session's run lease across every process on every host.

        A session-level advisory lock on this store's lease connection; it is released on exit,
        or by the server when the holder's connection ends (crash, SIGKILL, lost host).
        Raises ``SessionBusyError`` if another run holds it for longer than ``wait`` seconds.

        A lease can end under its holder: an administrator or a proxy ends its connection, the
        server restarts. The holder then learns it at its next save to the session that writes
        anything, through this store: ``LeaseLostError``, and the save is not applied (see
        ``postgres_lease``; the connection is set never to time out for being idle). A
        connection cut silently (a network failure) is noticed only once the server's
        keepalives end it; saves made with ``expected_version``, as the agent's are, never
        replace a commit another run made meanwhile in any case.
        """
        deadline = time.monotonic() + wait
        local = process_lock(self.location, key)  # advisory locks nest within one connection
        if not acquire_within(local, wait):
            raise self._busy(key)
        try:
            lock = self._lease_lock(key)
            pause = 0.01
            while not self._try_lock(lock):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._busy(key)
                time.sleep(min(pause, left))
                pause = min(pause * 2, 0.25)
            try:
                yield
            finally:
                self._release(key, lock)
        finally:
            local.release()

    def _lease_lock(self, key: SessionKey) -> int:
        return _lock_id("lease", self.schema, key.tenant, key.session)

    def _check_lease(self, key: SessionKey) -> None:
        """``LeaseLostError`` if this store took the session's lease and it has ended since."""
        with self._errors("lease"):
            lost = self._leases.lost(self._lease_lock(key))
        if lost:
            raise LeaseLostError(
                f"the run lease of session {key.session!r} (tenant {key.tenant!r}) ended while "
                f"held: its connection to PostgreSQL ({self.location}) closed, so another run "
                "may hold the session now; this save was not applied"
            )

    def _try_lock(self, lock: int) -> bool:
        with self._errors("lease"):
            return self._leases.try_lock(lock)

    @staticmethod
    def _busy(key: SessionKey) -> SessionBusyError:
        return SessionBusyError(
            f"session {key.session!r} (tenant {key.tenant!r}) is busy: another run holds its lease"
        )

    def _release(self, key: SessionKey, lock: int) -> None:
        try:
            with self._errors("lease"):
                held = self._leases.unlock(lock)
        except StoreError:
            held = False  # the connection is gone, and the lock with it
        if not held and not self.closed:  # closing the store ended it, as it says
            log.warning(
                "the run lease of session %r (tenant %r) was lost while held (connection ended)",
                key.session,
                key.tenant,
            )


def _write_args(plan: CommitPlan, ranks: Sequence[RankPlan]) -> dict[str, Any]:
    """The parameters of ``plan``'s writes at its ``ranks``, each an array whatever the number
    of rows or lists: a column each of the rows closed (list and rank) and of the rows put, the
    lists whose floor rises and their floors, the named values closed and those set. A list's
    puts and its ranks must pair up one to one."""
    args: dict[str, Any] = {k: [] for k in ("lists", "ranks", "ids", "digests")}
    args.update(bodies=[], words=[], refs=[], floor_lists=[], floors=[])
    args.update(close_lists=[], close_ranks=[])
    for write, planned in zip(plan.lists, ranks, strict=True):
        if len(planned.put_ranks) != len(write.puts):
            raise _UserError(
                f"list {write.name!r}: {len(write.puts)} puts but {len(planned.put_ranks)} ranks"
            )
        args["close_lists"] += [write.name] * len(planned.closed_ranks)
        args["close_ranks"] += planned.closed_ranks
        if planned.floor is not None:
            args["floor_lists"].append(write.name)
            args["floors"].append(planned.floor)
        puts = sorted(write.puts, key=operator.itemgetter(0))  # put_ranks ascend with them
        for (_, msg), rank in zip(puts, planned.put_ranks, strict=True):
            refs = blob_refs(msg.body)
            args["lists"].append(write.name)
            args["ranks"].append(rank)
            args["ids"].append(_text(msg.msg_id))
            args["digests"].append(msg.digest)
            args["bodies"].append(msg.body)
            args["words"].append(tsvector_literal(msg.text))
            args["refs"].append(b"".join(refs) if refs else None)
    kept = [(name, raw) for name, raw in plan.values.items() if raw is not None]
    args.update(
        names=list(plan.values), value_names=[n for n, _ in kept], raws=[r for _, r in kept]
    )
    args["close_count"] = len(args["close_ranks"])
    return args


def _row_bytes(args: dict[str, Any]) -> list[int]:
    """The bytes of each row ``args`` (``_write_args``) puts: body, id and words. Counted at
    four bytes a character, the most UTF-8 takes, unless that comes to more than ``BATCH_BYTES``
    in all: only then are the strings encoded to count their bytes."""
    rows = list(zip(args["bodies"], args["ids"], args["words"], strict=True))
    bound = [len(body) + 4 * (len(i) + len(w or "")) for body, i, w in rows]
    if sum(bound) <= BATCH_BYTES:
        return bound
    return [len(body) + len(i.encode()) + len((w or "").encode()) for body, i, w in rows]


def _fits_one_statement(args: dict[str, Any]) -> bool:
    """Whether the rows and values ``args`` (``_write_args``) puts fit one statement."""
    return sum(_row_bytes(args)) + sum(map(len, args["raws"])) <= BATCH_BYTES


def _batches(
    args: dict[str, Any], columns: Sequence[str], sizes: list[int]
) -> Iterator[dict[str, list[Any]]]:
    """The parallel arrays ``columns`` of ``args`` cut, in order, into batches of rows holding
    at most ``BATCH_BYTES`` together (``sizes``: each row's bytes), or of one row that alone
    holds more (no row holds more than ``MAX_ROW_BYTES``: ``_refuse_oversized``)."""
    start, held = 0, 0
    for end, size in enumerate(sizes):
        if held and held + size > BATCH_BYTES:
            yield {name: args[name][start:end] for name in columns}
            start, held = end, 0
        held += size
    if start < len(sizes):
        yield {name: args[name][start:] for name in columns}


def _refuse_oversized(plan: CommitPlan) -> None:
    """Raise ``UserError`` if ``plan`` puts a row of more than ``MAX_ROW_BYTES`` (a message's
    body and id, a blob, a value), which no statement can carry: such a save fails the same
    way every time, so it is refused before anything is sent, never reported as a store that
    might take it later."""
    for write in plan.lists:
        for _, msg in write.puts:
            size = len(msg.body) + 4 * len(msg.msg_id)  # at most; its bytes only if too many
            if size > MAX_ROW_BYTES:
                size = len(msg.body) + len(msg.msg_id.encode())
                if size > MAX_ROW_BYTES:
                    what = f"message {shown(msg.msg_id)} of list {write.name!r}"
                    raise _too_large(plan, what, size)
    for name, raw in plan.values.items():
        if raw is not None and len(raw) > MAX_ROW_BYTES:
            raise _too_large(plan, f"the value {name!r}", len(raw))
    for digest, data in plan.media.items():
        if len(data) > MAX_ROW_BYTES:
            raise _too_large(plan, f"the media blob {digest.hex()}", len(data))


def _too_large(plan: CommitPlan, what: str, size: int) -> _UserError:
    return _UserError(
        f"session {shown(plan.key.session)}: {what} takes {size:,} bytes; PostgreSQL stores at "
        f"most {MAX_ROW_BYTES:,} in one row (1 GiB, its limit for a value and for a statement, "
        "less room for the rest of the statement)"
    )


def _snippet(body: bytes, word: str) -> str:
    """A search hit's snippet (``snippet_around``), from its body: the table keeps no copy of
    the text since migration 5."""
    return snippet_around(text_of_body(body), word)


def _in_order(rows: list[Any]) -> list[Any]:
    """``rows`` (``(list, rank, ...)``, as a query of ``_above_floors`` returns them) sorted by
    list and rank, in place: each list's rows together and in rank order."""
    rows.sort(key=operator.itemgetter(0, 1))
    return rows


def _split_refs(values: Iterator[bytes | None] | Sequence[bytes | None]) -> set[bytes]:
    """The set of digests in concatenated ``messages.blobs`` values."""
    out: set[bytes] = set()
    for value in values:
        if value:
            out.update(value[i : i + _DIGEST] for i in range(0, len(value), _DIGEST))
    return out
