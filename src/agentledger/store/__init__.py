"""The ledger: sessions persisted by content diff, atomically, with non-destructive history."""

from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredList,
    StoredMsg,
    StoredState,
    VersionInfo,
)
from agentledger.store.ledger import Ledger
from agentledger.store.memory import MemoryStore
from agentledger.store.state import SaveReport, SessionState
from agentledger.store.tracked import TrackedList
from agentledger.store.urls import open_store

_BACKENDS = {
    "JsonlStore": "agentledger.store.jsonl",
    "PostgresStore": "agentledger.store.postgres",
    "SqliteStore": "agentledger.store.sqlite",
}


def __getattr__(name: str) -> object:
    """Persistent backends load on first use (Postgres needs the ``postgres`` extra)."""
    if name in _BACKENDS:
        import importlib

        return getattr(importlib.import_module(_BACKENDS[name]), name)
    raise AttributeError(f"module 'agentledger.store' has no attribute {name!r}")


__all__ = [
    "CommitPlan",
    "Head",
    "JsonlStore",
    "Ledger",
    "ListWrite",
    "MemoryStore",
    "PostgresStore",
    "SaveReport",
    "SearchHit",
    "SessionInfo",
    "SessionKey",
    "SessionState",
    "SqliteStore",
    "Store",
    "StoredList",
    "StoredMsg",
    "StoredState",
    "TrackedList",
    "VersionInfo",
    "open_store",
]
