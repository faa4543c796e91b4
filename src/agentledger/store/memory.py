"""``memory://``: the reference backend. Everything lives in this process and dies with it.

It keeps every row with the versions it was live for, exactly as the persistent backends do,
so it is the executable definition of the store contract (the conformance suite runs on it
first) and the natural store for tests.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from operator import itemgetter

from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SessionInfo,
    SessionKey,
    Store,
    StoredList,
    StoredMsg,
    StoredState,
    VersionInfo,
    check_base,
    check_version,
    drop_dead_rows,
)
from agentledger.store.cursor import Keyset, newest_first
from agentledger.store.media import blob_refs
from agentledger.store.planner import splice_into
from agentledger.store.ranks import plan_ranks

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Row:
    rank: bytes  # see ``ranks``: a past version's rows are ordered by it
    version_from: int
    version_to: int | None
    item: StoredMsg


@dataclass(slots=True)
class _ValueRow:
    version_from: int
    version_to: int | None
    raw: bytes


@dataclass(slots=True)
class _Session:
    created_at: datetime
    updated_at: datetime
    incarnation: str
    version: int = 0
    oldest: int = 1
    title: str | None = None
    message_count: int = 0
    has_media: bool = False  # a commit has stored media for it (see StoredState)
    live: dict[str, list[StoredMsg]] = field(default_factory=dict)
    open_rows: dict[str, list[_Row]] = field(default_factory=dict)
    ranks: dict[str, list[bytes]] = field(default_factory=dict)  # of the live rows, in order
    floors: dict[str, bytes] = field(default_factory=dict)  # see ``ranks``
    rows: dict[str, list[_Row]] = field(default_factory=dict)
    values: dict[str, list[_ValueRow]] = field(default_factory=dict)
    versions: list[VersionInfo] = field(default_factory=list)


class MemoryStore(Store):
    """An in-process store; see the module docstring."""

    def __init__(self) -> None:
        self.location = f"memory://{id(self):x}"
        self._lock = threading.Lock()
        self._sessions: dict[SessionKey, _Session] = {}
        self._blobs: dict[tuple[str, bytes], bytes] = {}
        self._created = 0  # counts session creations: each gets a new incarnation

    def read_version(self, key: SessionKey) -> int:
        with self._lock:
            s = self._sessions.get(key)
            return s.version if s else 0

    def read_stamp(self, key: SessionKey) -> tuple[str, int]:
        with self._lock:
            s = self._sessions.get(key)
            return (s.incarnation, s.version) if s else ("", 0)

    def read_head(self, key: SessionKey) -> Head | None:
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                return None
            lists = {n: [m.digest for m in live] for n, live in s.live.items() if live}
            values = {}
            for name, rows in s.values.items():
                current = [r for r in rows if r.version_to is None]
                if current:
                    from agentledger.messages import digest_of

                    values[name] = digest_of(current[0].raw)
            return Head(s.version, lists, values, s.incarnation)

    def load(self, key: SessionKey, version: int | None = None) -> StoredState | None:
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                return None
            check_version(version, s.oldest, s.version)
            if version is None or version == s.version:
                lists = {n: StoredList.of(live) for n, live in s.live.items() if live}
                values = {
                    n: r.raw for n, rows in s.values.items() for r in rows if r.version_to is None
                }
                return StoredState(s.version, lists, values, s.incarnation, s.has_media)
            at = version

            def live_at(vf: int, vt: int | None) -> bool:
                return vf <= at and (vt is None or vt > at)

            lists = {}
            for name, rows in s.rows.items():
                alive = sorted(
                    (r for r in rows if live_at(r.version_from, r.version_to)),
                    key=lambda r: r.rank,
                )
                if alive:
                    lists[name] = StoredList.of([r.item for r in alive])
            values = {
                n: r.raw
                for n, rows in s.values.items()
                for r in rows
                if live_at(r.version_from, r.version_to)
            }
            return StoredState(at, lists, values, s.incarnation, s.has_media)

    def read_media(self, key: SessionKey, digests: Sequence[bytes]) -> dict[bytes, bytes]:
        with self._lock:
            return {
                d: self._blobs[(key.tenant, d)] for d in digests if (key.tenant, d) in self._blobs
            }

    def history(self, key: SessionKey) -> list[VersionInfo]:
        with self._lock:
            s = self._sessions.get(key)
            return [v for v in s.versions if v.version >= s.oldest] if s else []

    def list_sessions(
        self,
        tenant: str,
        *,
        limit: int | None = None,
        offset: int = 0,
        after: Keyset | None = None,
    ) -> list[SessionInfo]:
        with self._lock:
            infos = [
                SessionInfo(
                    k.tenant,
                    k.session,
                    s.title,
                    s.message_count,
                    s.version,
                    s.created_at,
                    s.updated_at,
                )
                for k, s in self._sessions.items()
                if k.tenant == tenant
            ]
        return newest_first(infos, limit=limit, offset=offset, after=after)

    def commit(self, plan: CommitPlan) -> str:
        with self._lock:
            s = self._sessions.get(plan.key)
            check_base(plan, s.version if s else 0, s.incarnation if s else "")
            if s is None:
                self._created += 1
                s = _Session(plan.committed_at, plan.committed_at, str(self._created))
                self._sessions[plan.key] = s
            v = plan.version
            for write in plan.lists:
                self._write_list(s, v, write)
            for name, raw in plan.values.items():
                rows_v = s.values.setdefault(name, [])
                for r in rows_v:
                    if r.version_to is None:
                        r.version_to = v
                if raw is not None:
                    rows_v.append(_ValueRow(v, None, raw))
            for digest, data in plan.media.items():
                self._blobs.setdefault((plan.key.tenant, digest), data)
            s.has_media = s.has_media or bool(plan.media)
            s.version = v
            s.updated_at = plan.committed_at
            if plan.title is not None:
                s.title = plan.title or None
            if plan.message_count is not None:
                s.message_count = plan.message_count
            s.versions.append(
                VersionInfo(
                    v,
                    plan.committed_at,
                    plan.appended,
                    plan.replaced,
                    plan.truncated,
                    len(plan.values),
                )
            )
            return s.incarnation

    @staticmethod
    def _write_list(s: _Session, v: int, write: ListWrite) -> None:
        """Apply one list's write at version ``v``. Rows that leave are closed here and now,
        the floor's included: only the ranks of new rows need it (see ``ranks``)."""
        name = write.name
        live = s.live.setdefault(name, [])
        open_rows = s.open_rows.setdefault(name, [])
        ranks = s.ranks.setdefault(name, [])
        runs = write.kept_runs(len(live))
        puts = sorted(write.puts, key=itemgetter(0))
        positions = [p for p, _ in puts]
        planned = plan_ranks(ranks, s.floors.get(name), runs, positions, write.length)
        for row in open_rows[: planned.dropped]:
            row.version_to = v
        for i in planned.closed:
            open_rows[i].version_to = v
        new_rows = [_Row(rank, v, None, item) for (_, item), rank in zip(puts, planned.put_ranks)]
        s.rows.setdefault(name, []).extend(new_rows)
        splice_into(open_rows, runs, list(zip(positions, new_rows)), write.length)
        splice_into(live, runs, puts, write.length)
        splice_into(ranks, runs, list(zip(positions, planned.put_ranks)), write.length)
        if planned.floor is not None:
            s.floors[name] = planned.floor

    def delete(self, key: SessionKey) -> bool:
        with self._lock:
            existed = self._sessions.pop(key, None) is not None
            self._collect_blobs(key.tenant)
            return existed

    def purge_history(self, key: SessionKey, keep_last: int) -> int:
        with self._lock:
            s = self._sessions.get(key)
            if s is None:
                return 0
            oldest = max(s.oldest, s.version - keep_last + 1)
            removed = drop_dead_rows(s.rows, oldest) + drop_dead_rows(s.values, oldest)
            s.oldest = oldest
            self._collect_blobs(key.tenant)
            return removed

    def _collect_blobs(self, tenant: str) -> None:
        referenced = {
            d
            for k, s in self._sessions.items()
            if k.tenant == tenant
            for rows in s.rows.values()
            for r in rows
            for d in blob_refs(r.item.body)
        }
        for blob_key in [bk for bk in self._blobs if bk[0] == tenant and bk[1] not in referenced]:
            del self._blobs[blob_key]
