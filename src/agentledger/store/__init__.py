"""The ledger: sessions persisted by content diff, atomically, with non-destructive history."""

from agentledger.store.base import (
    CommitPlan,
    Head,
    ListWrite,
    SearchHit,
    SessionInfo,
    SessionKey,
    Store,
    StoredMsg,
    StoredState,
    VersionInfo,
)
from agentledger.store.ledger import Ledger
from agentledger.store.memory import MemoryStore
from agentledger.store.state import SaveReport, SessionState
from agentledger.store.urls import open_store

__all__ = [
    "CommitPlan",
    "Head",
    "Ledger",
    "ListWrite",
    "MemoryStore",
    "SaveReport",
    "SearchHit",
    "SessionInfo",
    "SessionKey",
    "SessionState",
    "Store",
    "StoredMsg",
    "StoredState",
    "VersionInfo",
    "open_store",
]
