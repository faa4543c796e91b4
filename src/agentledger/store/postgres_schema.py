"""The PostgreSQL schema: an ordered list of migrations, and every statement the store runs.

Migrations are applied by ``PostgresStore.setup()``.

Each migration runs once per schema, in order, inside one transaction that also records it in
``<schema>.schema_migrations``; a transaction-level advisory lock serializes workers that start
at the same moment. Never edit a released migration: append a new one.

Layout (``{schema}`` is the store's schema):

- ``sessions``: one row per ``(tenant, session)`` with a surrogate ``sid`` that every other table
  uses, so long tenant and session ids are stored once, not in every message row and index entry.
  Text cannot hold NUL: a title that does is kept as UTF-8 in ``exact_title`` (migration 7), and a
  message id that does is read back from its body (``msg_id`` has U+FFFD in its place).
- ``messages``: the non-destructive ledger. A row is live from ``version_from`` until
  ``version_to`` (NULL while live). Bodies leave the row for TOAST (``toast_tuple_target``), so
  closing a row rewrites a ~100-byte tuple, not the message.
- ``session_values``, ``versions``: named values with the same live range, and one row per commit.
- ``blobs``, ``blob_refs``: large media stored once per tenant, and which sessions reference it.
- ``search``'s GIN index over ``words`` of live rows: the distinct words of a message's text,
  cut by the client (``search_words``), since migration 5. Before it, the index was over
  ``to_tsvector('simple', text)``, built by the server inside every commit (0.4 ms of an
  append); migration 5 gives each live row of that time the words the old parser found, and
  rows written since store ``text`` empty (a search hit's snippet comes from its body). A worker
  of an older version still writing after the migration (a rolling upgrade) stores ``text`` and
  no words: migration 6 indexes such rows by the server's parser, in an index no newer row
  enters, and ``search`` reads both indexes, so no row goes unfound.
- Since migration 4, rows are ordered by ``rank`` (byte strings, see ``ranks``), never
  renumbered, and ``list_floors`` holds each list's floor per version: the rows ranked at or
  below the floor live at a version are not in the list at that version, though their
  ``version_to`` stays NULL until ``purge_history`` (so dropping a prefix writes one row).
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "Queries", "render"]

_TABLES = """
CREATE TABLE {schema}.sessions (
    sid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant text COLLATE "C" NOT NULL,
    session text COLLATE "C" NOT NULL,
    version bigint NOT NULL,
    oldest_version bigint NOT NULL DEFAULT 1,
    title text,
    message_count integer NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    UNIQUE (tenant, session)
);
CREATE INDEX sessions_recent ON {schema}.sessions (tenant, updated_at DESC, session DESC);

CREATE TABLE {schema}.messages (
    sid bigint NOT NULL,
    list text COLLATE "C" NOT NULL,
    position integer NOT NULL,
    version_from bigint NOT NULL,
    version_to bigint,
    msg_id text NOT NULL,
    digest bytea NOT NULL,
    body bytea NOT NULL,
    text text NOT NULL,
    blobs bytea,  -- concatenated 16-byte digests of the media blobs the body references
    PRIMARY KEY (sid, list, position, version_from)
) WITH (toast_tuple_target = 256);
CREATE UNIQUE INDEX messages_live ON {schema}.messages (sid, list, position)
    WHERE version_to IS NULL;

CREATE TABLE {schema}.session_values (
    sid bigint NOT NULL,
    name text COLLATE "C" NOT NULL,
    version_from bigint NOT NULL,
    version_to bigint,
    raw bytea NOT NULL,
    PRIMARY KEY (sid, name, version_from)
);
CREATE UNIQUE INDEX session_values_live ON {schema}.session_values (sid, name)
    WHERE version_to IS NULL;

CREATE TABLE {schema}.versions (
    sid bigint NOT NULL,
    version bigint NOT NULL,
    committed_at timestamptz NOT NULL,
    appended integer NOT NULL,
    replaced integer NOT NULL,
    truncated integer NOT NULL,
    values_changed integer NOT NULL,
    PRIMARY KEY (sid, version)
);
"""

_BLOBS = """
CREATE TABLE {schema}.blobs (
    tenant text COLLATE "C" NOT NULL,
    digest bytea NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (tenant, digest)
);
-- media is usually compressed already: keep it out of line and skip the compression attempt
ALTER TABLE {schema}.blobs ALTER COLUMN data SET STORAGE EXTERNAL;

CREATE TABLE {schema}.blob_refs (
    tenant text COLLATE "C" NOT NULL,
    digest bytea NOT NULL,
    sid bigint NOT NULL,
    PRIMARY KEY (tenant, digest, sid)
);
CREATE INDEX blob_refs_sid ON {schema}.blob_refs (sid);
"""

_SEARCH = """
CREATE INDEX messages_search ON {schema}.messages
    USING gin (to_tsvector('simple'::regconfig, left(text, 100000)))
    WHERE version_to IS NULL;
"""

# Positions become the ranks ``ranks.position_rank`` gives them (2**62 + position, 8 bytes
# big-endian), every row's, live or dead, so every past version keeps its order. Changing the
# column's type rewrites the table once and rebuilds the indexes on it (now on rank).
_RANKS = """
ALTER TABLE {schema}.messages ALTER COLUMN position TYPE bytea
    USING int8send(position::bigint + 4611686018427387904);
ALTER TABLE {schema}.messages RENAME COLUMN position TO rank;
CREATE TABLE {schema}.list_floors (
    sid bigint NOT NULL,
    list text COLLATE "C" NOT NULL,
    version_from bigint NOT NULL,
    version_to bigint,
    floor bytea NOT NULL,
    PRIMARY KEY (sid, list, version_from)
);
CREATE UNIQUE INDEX list_floors_live ON {schema}.list_floors (sid, list)
    WHERE version_to IS NULL;
-- fails a statement with SQLSTATE XX001 (data_corrupted): a commit's checks, in the pipeline
CREATE FUNCTION {schema}.corrupt(message text) RETURNS integer LANGUAGE plpgsql AS
    'BEGIN RAISE EXCEPTION USING ERRCODE = ''data_corrupted'', MESSAGE = message; END';
"""

# The index of migration 3 goes first, so the backfill does not maintain it. A live row of
# that time keeps the words PostgreSQL's parser found in it (as lexemes, which a prefix query
# matches as before); ``search_words`` cuts the words of every row written since.
_WORDS = """
DROP INDEX {schema}.messages_search;
ALTER TABLE {schema}.messages ADD COLUMN words tsvector;
UPDATE {schema}.messages SET words = NULLIF(to_tsvector('simple'::regconfig, left(text, 100000)),
    ''::tsvector) WHERE version_to IS NULL AND text <> '';
CREATE INDEX messages_words ON {schema}.messages USING gin (words)
    WHERE version_to IS NULL AND words IS NOT NULL;
"""

# Rows an older worker writes after migration 5 (text, no words); empty otherwise, and a
# newer worker's insert does not enter it (its text is empty): it costs only the older
# workers, which built the same entries in migration 3's index before.
_UNWORDED = """
CREATE INDEX messages_unworded ON {schema}.messages
    USING gin (to_tsvector('simple'::regconfig, left(text, 100000)))
    WHERE version_to IS NULL AND words IS NULL AND text <> '';
"""

# PostgreSQL text holds no NUL: ``title`` keeps such a title with U+FFFD in its place, which a
# title with U+FFFD itself also reads as, and ``exact_title`` its UTF-8 (NULL for every other
# title). Titles saved before keep their U+FFFD until they change. ``IF NOT EXISTS``: a schema
# whose record of migrations was cut back (as tests make an older one) still has the column.
_EXACT_TITLES = """
ALTER TABLE {schema}.sessions ADD COLUMN IF NOT EXISTS exact_title bytea;
"""

#: ``(version, name, sql)``, applied in order. Append only.
MIGRATIONS: list[tuple[int, str, str]] = [
    (1, "sessions, messages, values, versions", _TABLES),
    (2, "media blobs", _BLOBS),
    (3, "full-text search index", _SEARCH),
    (4, "rank keys and list floors", _RANKS),
    (5, "search words cut by the client", _WORDS),
    (6, "search index of rows older workers write", _UNWORDED),
    (7, "exact titles that hold NUL", _EXACT_TITLES),
]


def _live_at(table: str, version: str) -> str:
    """The rows of ``table`` live at ``version``."""
    return (
        f"{table}.version_from <= {version} "
        f"AND ({table}.version_to IS NULL OR {table}.version_to > {version})"
    )


def _list_names(s: str, table: str, sid: str, live: str = "") -> str:
    """``WITH RECURSIVE names(list)``: the names of the lists session ``sid`` has rows of in
    ``table`` (rows matching ``live``, e.g. `` AND version_to IS NULL``), found one index probe
    per list (a loose index scan), then a NULL; ``DISTINCT`` would read every row, and so did
    ``min(list)`` where a planner without statistics took it for an aggregate over the rows."""
    rows = f"SELECT x.list FROM {s}.{table} x WHERE x.sid = {sid}{live}"
    return (
        f"WITH RECURSIVE names(list) AS (SELECT ({rows} ORDER BY x.list LIMIT 1) UNION ALL "
        f"SELECT ({rows} AND x.list > n.list ORDER BY x.list LIMIT 1) FROM names n "
        "WHERE n.list IS NOT NULL)"
    )


def _floor_at(s: str, sid: str, version: str) -> str:
    """The floor of list ``n.list`` live at ``version``, if any: one backward index probe."""
    return (
        f"SELECT f.floor FROM {s}.list_floors f WHERE f.sid = {sid} AND f.list = n.list "
        f"AND {_live_at('f', version)} ORDER BY f.version_from DESC LIMIT 1"
    )


def _above_floors(
    s: str, sid: str, columns: str, *, at: str | None = None, names: str | None = None
) -> str:
    """``columns`` of the rows of session ``sid``'s lists (``names``, an SQL source of
    ``n.list``; default: every list it holds) live at version ``at`` (default: now) and ranked
    above the list's floor then, in no particular order.

    Each list is one range of an index that starts ``(sid, list, rank)`` (``messages_live``
    for live rows, the primary key for a past version), read from its floor up in a lateral
    subquery that ``OFFSET 0`` keeps from being flattened into a join, so it runs once per list
    whatever the statistics. A sliding window never purged leaves thousands of rows below a
    floor; joined to the floors, they were read and filtered out on every load.

    The rows come in no particular order (the reader sorts them by list and rank): with
    statistics the planner reads a large list through a bitmap, in heap order, and an ORDER BY
    made it sort the list's bodies, spilling to disk past ``work_mem``.
    """
    if at is None:
        live = " AND x.version_to IS NULL"
        floor = (
            f"LEFT JOIN {s}.list_floors f ON f.sid = {sid} AND f.list = n.list "
            "AND f.version_to IS NULL"
        )
        rows = "m.version_to IS NULL"
    else:
        live = ""
        floor = f"LEFT JOIN LATERAL ({_floor_at(s, sid, at)}) f ON true"
        rows = _live_at("m", at)
    source = f"{_list_names(s, 'messages', sid, live)} SELECT r.* FROM names n"
    if names is not None:
        source = f"SELECT r.* FROM {names}"
    return (
        f"{source} {floor} CROSS JOIN LATERAL (SELECT {columns} FROM {s}.messages m "
        f"WHERE m.sid = {sid} AND m.list = n.list AND {rows} "
        "AND m.rank > COALESCE(f.floor, ''::bytea) OFFSET 0) r"
        + ("" if names is not None else " WHERE n.list IS NOT NULL")
    )


# -- the writes of a save, each written once: the pipeline runs them as statements of their
# own, ``Queries.save_in_one`` as sub-statements of one, behind a ``gate`` (see there).
def _close_rows(s: str, gate: str = "") -> str:
    """Close the live rows of lists ``%(close_lists)s`` at ranks ``%(close_ranks)s`` (parallel
    arrays, an element per row, however many lists the save closes rows of): matched as whole
    keys, an index lookup on ``messages_live`` each, with or without statistics, in the plan
    made with the parameters and in the one kept without them (written as ``rank = ANY(...)``,
    a planner without statistics scanned the session's rows). Parameters for each list (three)
    made a save closing rows of more than about 21,800 lists pass the protocol's limit of
    65,535, and it could never commit.

    ``LIMIT %(close_count)s`` (the number of rows: it cuts nothing) tells the plan PostgreSQL
    keeps for a prepared statement how few rows the unnest gives; without it that plan counted
    ten, looked dearer than planning each save with its parameters, and every save that closes
    rows was planned anew (0.3-0.6 ms, more than running it)."""
    return (
        f"UPDATE {s}.messages SET version_to = %(version)s WHERE version_to IS NULL "
        "AND (sid, list, rank) IN (SELECT %(sid)s::bigint, u.l, u.r "
        "FROM unnest(%(close_lists)b::text[], %(close_ranks)b::bytea[]) AS u(l, r) "
        f"LIMIT %(close_count)s){gate} RETURNING 1"
    )


def _unless_all_live(s: str, found: str) -> str:
    """A ``CASE`` branch that fails with ``data_corrupted`` unless ``found`` (the rows
    ``_close_rows`` closed) is ``%(close_count)s``: fewer means the plan was made from ranks
    the store does not hold."""
    lists = "(SELECT string_agg(DISTINCT l, ', ') FROM unnest(%(close_lists)b::text[]) AS l)"
    return (
        f"WHEN {found} <> %(close_count)s THEN {s}.corrupt({found} || ' of the ' "
        f"|| %(close_count)s || ' rows the save closes are live (lists ' || {lists} || ')')"
    )


def _close_floors(s: str, gate: str = "") -> str:
    return (
        f"UPDATE {s}.list_floors SET version_to = %(version)s WHERE sid = %(sid)s "
        f"AND version_to IS NULL AND list = ANY(%(floor_lists)b::text[]){gate} RETURNING 1"
    )


def _insert_floors(s: str, gate: str = "") -> str:
    return (
        f"INSERT INTO {s}.list_floors (sid, list, version_from, floor) "
        "SELECT %(sid)s, u.l, %(version)s, u.f "
        f"FROM unnest(%(floor_lists)b::text[], %(floors)b::bytea[]) AS u(l, f){gate}"
    )


# Array parameters travel in binary (``%(x)b``): as text, psycopg escaped every element with a
# regular expression and sent each body as hex for the server to decode, a tenth of an append.
def _insert_rows(s: str, gate: str = "") -> str:
    return (
        f"INSERT INTO {s}.messages (sid, list, rank, version_from, msg_id, digest, body, "
        "text, words, blobs) SELECT %(sid)s, u.l, u.k, %(version)s, u.i, u.d, u.b, '', "
        "u.w::tsvector, u.r FROM unnest(%(lists)b::text[], %(ranks)b::bytea[], "
        "%(ids)b::text[], %(digests)b::bytea[], %(bodies)b::bytea[], %(words)b::text[], "
        f"%(refs)b::bytea[]) AS u(l, k, i, d, b, w, r){gate}"
    )


def _close_values(s: str, gate: str = "") -> str:
    return (
        f"UPDATE {s}.session_values SET version_to = %(version)s WHERE sid = %(sid)s "
        f"AND version_to IS NULL AND name = ANY(%(names)b::text[]){gate} RETURNING 1"
    )


def _insert_values(s: str, gate: str = "") -> str:
    return (
        f"INSERT INTO {s}.session_values (sid, name, version_from, raw) "
        "SELECT %(sid)s, u.n, %(version)s, u.r "
        f"FROM unnest(%(value_names)b::text[], %(raws)b::bytea[]) AS u(n, r){gate}"
    )


def _insert_version(s: str, source: str = "") -> str:
    return (
        f"INSERT INTO {s}.versions (sid, version, committed_at, appended, replaced, "
        "truncated, values_changed) SELECT %(sid)s, %(version)s, %(at)s, %(appended)s, "
        f"%(replaced)s, %(truncated)s, %(values_changed)s{source}"
    )


def render(sql: str, schema: str) -> str:
    """``sql`` with ``{schema}`` replaced by the quoted schema name (already validated)."""
    return sql.replace("{schema}", f'"{schema}"')


class Queries:
    """Every statement, rendered once for the store's schema."""

    def __init__(self, schema: str) -> None:
        s = self._s = f'"{schema}"'
        self._in_one: dict[tuple[bool, bool, bool], str] = {}
        self.version = f"SELECT version FROM {s}.sessions WHERE tenant = %s AND session = %s"
        self.stamp = f"SELECT sid, version FROM {s}.sessions WHERE tenant = %s AND session = %s"
        self.session = (
            f"SELECT sid, version, oldest_version FROM {s}.sessions "
            "WHERE tenant = %s AND session = %s"
        )
        sid = f"(SELECT sid FROM {s}.sessions WHERE tenant = %s AND session = %s)"
        self.live_floors = (
            f"SELECT list, floor FROM {s}.list_floors WHERE sid = {sid} AND version_to IS NULL"
        )
        self.live_values = (
            f"SELECT name, raw FROM {s}.session_values WHERE sid = {sid} AND version_to IS NULL"
        )
        columns = "m.list, m.rank, m.msg_id, m.digest, m.body"  # text is for search, not loads
        self.has_media = f"SELECT EXISTS (SELECT 1 FROM {s}.blob_refs WHERE sid = %s)"
        # A list at a version is its rows live then and ranked above the floor live then, read
        # as one index range per list (``_above_floors``): the rows a floor hides are never read.
        key = f"(SELECT sid FROM {s}.sessions WHERE tenant = %(tenant)s AND session = %(session)s)"
        self.live_digests = _above_floors(s, key, "m.list, m.rank, m.digest")
        self.live_rows = _above_floors(s, "%(sid)s", columns)
        self.rows_at = _above_floors(s, "%(sid)s", columns, at="%(v)s")
        self.floors_at = (
            f"{_list_names(s, 'list_floors', '%(sid)s')} SELECT n.list, f.floor FROM names n "
            f"CROSS JOIN LATERAL ({_floor_at(s, '%(sid)s', '%(v)s')}) f WHERE n.list IS NOT NULL"
        )
        self.values_at = (
            f"SELECT v.name, v.raw FROM {s}.session_values v WHERE v.sid = %(sid)s "
            f"AND {_live_at('v', '%(v)s')}"
        )
        self.media = f"SELECT digest, data FROM {s}.blobs WHERE tenant = %s AND digest = ANY(%s)"
        self.history = (
            "SELECT v.version, v.committed_at, v.appended, v.replaced, v.truncated, "
            f"v.values_changed FROM {s}.versions v JOIN {s}.sessions x ON x.sid = v.sid "
            "WHERE x.tenant = %s AND x.session = %s AND v.version >= x.oldest_version "
            "ORDER BY v.version"
        )
        listed = (
            "SELECT tenant, session, title, message_count, version, created_at, updated_at, "
            f"exact_title FROM {s}.sessions WHERE tenant = %(tenant)s"
        )
        newest_first = "ORDER BY updated_at DESC, session DESC LIMIT %(limit)s OFFSET %(offset)s"
        self.list_sessions = f"{listed} {newest_first}"
        # a range of sessions_recent: a deep page does not walk (and skip) the rows before it
        self.list_sessions_after = (
            f"{listed} AND (updated_at, session) < (%(updated_at)s, %(session)s) {newest_first}"
        )
        self.create = (
            f"INSERT INTO {s}.sessions (tenant, session, version, title, exact_title, "
            "message_count, created_at, updated_at) VALUES (%(tenant)s, %(session)s, 1, "
            "NULLIF(%(title)s::text, ''), %(exact_title)s::bytea, COALESCE(%(count)s::int, 0), "
            "%(at)s, %(at)s) "
            "ON CONFLICT (tenant, session) DO NOTHING RETURNING sid"
        )
        self.bump = (
            f"UPDATE {s}.sessions SET version = %(version)s, updated_at = %(at)s, "
            "title = CASE WHEN %(title)s::text IS NULL THEN title "
            "ELSE NULLIF(%(title)s::text, '') END, "
            "exact_title = CASE WHEN %(title)s::text IS NULL THEN exact_title "
            "ELSE %(exact_title)s::bytea END, "
            "message_count = COALESCE(%(count)s::int, message_count) "
            "WHERE tenant = %(tenant)s AND session = %(session)s AND version = %(base)s "
            "AND (%(incarnation)s::text = '' OR sid::text = %(incarnation)s::text) "
            "RETURNING sid"
        )
        # The bump of a save whose session row is known (its sid), as one statement that fails
        # with division_by_zero when the row did not move: the rest of the save is pipelined
        # behind it without waiting for its answer, and an error aborts the whole pipeline.
        self.bump_or_fail = (
            f"WITH moved AS ({self.bump}) SELECT 1 / (SELECT count(*)::int FROM moved)"
        )
        self.close_rows = (
            f"WITH closed AS ({_close_rows(s)}) "
            f"SELECT CASE {_unless_all_live(s, 'count(*)')} ELSE 0 END FROM closed"
        )
        self.list_ranks = _above_floors(
            s, "%(sid)s", "m.list, m.rank", names="unnest(%(lists)b::text[]) AS n(list)"
        )
        self.list_floors = (
            f"SELECT list, floor FROM {s}.list_floors WHERE sid = %(sid)s "
            "AND list = ANY(%(lists)b::text[]) AND version_to IS NULL"
        )
        self.close_floors = _close_floors(s)
        self.insert_floors = _insert_floors(s)
        self.insert_rows = _insert_rows(s)
        self.close_values = _close_values(s)
        self.insert_values = _insert_values(s)
        self.insert_blobs = (
            f"INSERT INTO {s}.blobs (tenant, digest, data) SELECT %(tenant)s, u.d, u.b "
            "FROM unnest(%(digests)b::bytea[], %(datas)b::bytea[]) AS u(d, b) "
            "ON CONFLICT DO NOTHING"
        )
        self.insert_refs = (
            f"INSERT INTO {s}.blob_refs (tenant, digest, sid) SELECT %(tenant)s, d, %(sid)s "
            "FROM unnest(%(digests)b::bytea[]) AS d ON CONFLICT DO NOTHING"
        )
        self.insert_version = _insert_version(s)
        self.committed = (
            f"SELECT v.committed_at, x.sid FROM {s}.versions v "
            f"JOIN {s}.sessions x ON x.sid = v.sid "
            "WHERE x.tenant = %s AND x.session = %s AND v.version = %s"
        )
        # Whether a backend can no longer commit: gone, or idle outside a transaction (or in
        # an aborted one). Running a statement (COMMIT?) or idle in a transaction, it still can.
        self.backend_settled = (
            "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s "
            "AND state IN ('active', 'idle in transaction', 'fastpath function call'))"
        )
        self.delete_session = (
            f"DELETE FROM {s}.sessions WHERE tenant = %s AND session = %s RETURNING sid"
        )
        self.delete_rows = [
            f"DELETE FROM {s}.messages WHERE sid = %s",
            f"DELETE FROM {s}.session_values WHERE sid = %s",
            f"DELETE FROM {s}.list_floors WHERE sid = %s",
            f"DELETE FROM {s}.versions WHERE sid = %s",
        ]
        self.delete_refs = f"DELETE FROM {s}.blob_refs WHERE sid = %s RETURNING digest"
        self.purge_start = (
            f"UPDATE {s}.sessions SET oldest_version = "
            "GREATEST(oldest_version, version - %s + 1) "
            "WHERE tenant = %s AND session = %s RETURNING sid, oldest_version"
        )
        # Dead before the oldest kept version, or hidden by its floor (floors only rise, so
        # every later version hides the row too).
        floor_then = (
            f"(SELECT f.floor FROM {s}.list_floors f WHERE f.sid = m.sid AND f.list = m.list "
            "AND f.version_from <= %(oldest)s "
            "AND (f.version_to IS NULL OR f.version_to > %(oldest)s))"
        )
        self.purge_rows = (
            f"WITH d AS (DELETE FROM {s}.messages m WHERE m.sid = %(sid)s "
            f"AND (m.version_to <= %(oldest)s OR m.rank <= {floor_then}) RETURNING blobs) "
            "SELECT count(*), array_agg(blobs) FILTER (WHERE blobs IS NOT NULL) FROM d"
        )
        self.purge_floors = (
            f"DELETE FROM {s}.list_floors WHERE sid = %(sid)s AND version_to <= %(oldest)s"
        )
        self.purge_values = (
            f"WITH d AS (DELETE FROM {s}.session_values WHERE sid = %(sid)s "
            "AND version_to <= %(oldest)s RETURNING 1) SELECT count(*) FROM d"
        )
        self.purge_versions = (
            f"DELETE FROM {s}.versions WHERE sid = %(sid)s AND version < %(oldest)s"
        )
        self.remaining_refs = f"SELECT blobs FROM {s}.messages WHERE sid = %s AND blobs IS NOT NULL"
        self.drop_refs = (
            f"DELETE FROM {s}.blob_refs WHERE sid = %s AND tenant = %s AND digest = ANY(%s)"
        )
        self.collect_blobs = (
            f"DELETE FROM {s}.blobs b WHERE b.tenant = %s AND b.digest = ANY(%s) AND NOT EXISTS "
            f"(SELECT 1 FROM {s}.blob_refs r WHERE r.tenant = b.tenant AND r.digest = b.digest)"
        )
        # ``search`` is a store's full search (see ``search_sql``); ``search_capped`` the same
        # over at most ``%(cap)s`` matches, each row telling how many it found; and
        # ``search_recent`` the search of the messages of the most recently updated sessions,
        # ``%(rows)s`` of them at most, each row telling how many it read (``Postgres.search``
        # says when each is asked and why its answer is the full search's).
        self.search = search_sql(s)
        self.search_capped = search_sql(s, cap=True)
        self.search_recent = search_recent_sql(s)

    def save_in_one(self, closes: bool, floors: bool, values: bool) -> str:
        """A save of a known session as one statement, its own transaction: the guarded bump,
        the rows at ``close_ranks`` of ``close_lists`` closed (if ``closes``), the floors of
        ``floor_lists`` replaced, the named values ``names`` closed and ``value_names`` set,
        the puts inserted and the version row written.

        The sub-statements of one ``WITH`` share a snapshot and run in no promised order, so
        the order that matters is made by data: every write waits for the bump (an uncorrelated
        sub-select of ``ok``, run once before the write's first row), so a session that moved
        fails the statement (division by zero) before any row is locked; and an insert that
        takes a live key of a row the save closes (a rank put back, a list's floor, a value)
        waits for that close, so the unique index sees the old row already closed. The check
        that every closed row was live (else ``corrupt()``) is read by the final select, so it
        always runs.
        """
        shape = (closes, floors, values)
        if shape not in self._in_one:
            self._in_one[shape] = self._build_in_one(closes, floors, values)
        return self._in_one[shape]

    def _build_in_one(self, closes: bool, floors: bool, values: bool) -> str:
        s = self._s
        bumped = " AND (SELECT ok FROM ok) = 1"
        parts = [
            f"moved AS ({self.bump})",
            "ok AS (SELECT 1 / (SELECT count(*)::int FROM moved) AS ok)",
        ]
        done = "1"
        if closes:
            parts.append(f"closed_rows AS ({_close_rows(s, bumped)})")
            check = _unless_all_live(s, "(SELECT count(*) FROM closed_rows)")
            done = f"CASE {check} ELSE 1 END"
        parts.append(f"closed AS (SELECT {done} AS done)")
        if floors:
            parts += [
                f"floors_closed AS ({_close_floors(s, bumped)})",
                "floors_set AS ("
                + _insert_floors(s, f" WHERE (SELECT count(*) FROM floors_closed) >= 0{bumped}")
                + ")",
            ]
        if values:
            parts += [
                f"values_closed AS ({_close_values(s, bumped)})",
                "values_set AS ("
                + _insert_values(s, f" WHERE (SELECT count(*) FROM values_closed) >= 0{bumped}")
                + ")",
            ]
        parts += [
            f"put AS ({_insert_rows(s, f' WHERE (SELECT done FROM closed) = 1{bumped}')})",
            f"logged AS ({_insert_version(s, ' FROM ok')})",
        ]
        return f"WITH {', '.join(parts)} SELECT ok, done FROM ok, closed"


#: A live row whose words hold every word of the query (``%(query)s``, a
#: ``search_words.prefix_query``); rows an older worker wrote without words are matched by their
#: text (migration 6).
_MATCHES = (
    "((m.words IS NOT NULL AND m.words @@ %(query)s::tsquery) "
    "OR (m.words IS NULL AND m.text <> '' AND to_tsvector('simple'::regconfig, "
    "left(m.text, 100000)) @@ %(query)s::tsquery))"
)


def _search_tail(s: str, top: str, counted: str) -> str:
    """The end of a search: ``top``, a CTE of the hits kept (``session``, ``updated_at``,
    ``sid``, ``list``, ``rank``, ``floor``), already ordered and cut to ``%(limit)s``; each hit's
    position counted (the live rows above its list's floor ranked below it, on
    ``messages_live``) and its id and body read, and ``counted``, a count the caller asks for,
    on every row."""
    return (
        f"{top} "
        f"SELECT t.session, t.list, (SELECT count(*) FROM {s}.messages p WHERE p.sid = t.sid "
        "AND p.list = t.list AND p.version_to IS NULL AND p.rank < t.rank "
        f"AND (t.floor IS NULL OR p.rank > t.floor)), m.msg_id, m.body, {counted} "
        f"FROM top t JOIN {s}.messages m ON m.sid = t.sid AND m.list = t.list "
        "AND m.rank = t.rank AND m.version_to IS NULL "
        "ORDER BY t.updated_at DESC, t.session DESC, t.list, t.rank"
    )


def search_sql(s: str, *, cap: bool = False) -> str:
    """A tenant's hits in ``list_sessions`` order, then by list and rank, from the words index.

    The matches come from the GIN index first (a MATERIALIZED CTE is planned on its own), each
    finds its session by key (``OFFSET 0`` keeps that a per-match lookup: a join there was
    hashed over every session) and its list's floor (rows at or below it are not in the list),
    then they are ordered and cut, and only then is their text read and their position counted:
    the cost follows the matches, not the store. As one join, the planner walked the sessions in
    ``updated_at`` order hoping to fill the LIMIT early and matched the words of every message
    of every session: 13 s for a word in 30 messages of 1,000,000 (100,000 sessions). With
    ``cap``, at most ``%(cap)s`` matches are read, and each row ends with how many were.
    """
    limit = " LIMIT %(cap)s" if cap else ""
    return _search_tail(
        s,
        "WITH hits AS MATERIALIZED ("
        f"SELECT m.sid, m.list, m.rank FROM {s}.messages m WHERE m.version_to IS NULL "
        f"AND {_MATCHES}{limit}), "
        "top AS (SELECT x.session, x.updated_at, h.sid, h.list, h.rank, f.floor "
        "FROM hits h CROSS JOIN LATERAL (SELECT session, updated_at "
        f"FROM {s}.sessions WHERE sid = h.sid AND tenant = %(tenant)s OFFSET 0) x "
        f"LEFT JOIN {s}.list_floors f "
        "ON f.sid = h.sid AND f.list = h.list AND f.version_to IS NULL "
        "WHERE f.floor IS NULL OR h.rank > f.floor "
        "ORDER BY x.updated_at DESC, x.session DESC, h.list, h.rank LIMIT %(limit)s)",
        "(SELECT count(*) FROM hits)" if cap else "0",
    )


def search_recent_sql(s: str) -> str:
    """The hits among the live rows of a tenant's most recently updated sessions, read in
    ``list_sessions`` order, ``%(rows)s`` rows at most; each row ends with whether they were all
    the tenant's live rows.

    The sessions come from ``sessions_recent`` and each one's rows from ``messages_live``, cut
    at ``%(rows)s`` (a nested loop in the order of the sessions: no sort), so the cost is those
    rows, whatever the store holds and however many messages hold the words. When the rows ran
    out, the last session read may have been read in part, and in no promised order: its hits
    are left out, so every hit given is one of a session read in full, and the first
    ``%(limit)s`` of them are the first of all.
    """
    return _search_tail(
        s,
        "WITH scanned AS MATERIALIZED (SELECT r.session, r.updated_at, m.sid, m.list, m.rank, "
        f"{_MATCHES} AS hit FROM (SELECT sid, session, updated_at FROM {s}.sessions "
        "WHERE tenant = %(tenant)s ORDER BY updated_at DESC, session DESC LIMIT %(rows)s) r "
        f"CROSS JOIN LATERAL (SELECT m.sid, m.list, m.rank, m.words, m.text FROM {s}.messages m "
        "WHERE m.sid = r.sid AND m.version_to IS NULL) m "
        "ORDER BY r.updated_at DESC, r.session DESC LIMIT %(rows)s), "
        "top AS (SELECT h.session, h.updated_at, h.sid, h.list, h.rank, f.floor FROM scanned h "
        f"LEFT JOIN {s}.list_floors f "
        "ON f.sid = h.sid AND f.list = h.list AND f.version_to IS NULL "
        "WHERE h.hit AND (f.floor IS NULL OR h.rank > f.floor) "
        "AND ((SELECT count(*) FROM scanned) < %(rows)s OR h.session <> "
        "(SELECT session FROM scanned ORDER BY updated_at, session LIMIT 1)) "
        "ORDER BY h.updated_at DESC, h.session DESC, h.list, h.rank LIMIT %(limit)s)",
        # every session's every row read: fewer rows than the cut, of all the tenant's sessions
        "((SELECT count(*) FROM scanned) < %(rows)s AND (SELECT count(*) FROM (SELECT 1 "
        f"FROM {s}.sessions WHERE tenant = %(tenant)s LIMIT %(rows)s) n) < %(rows)s)",
    )
