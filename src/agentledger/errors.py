"""Every error agentledger raises, rooted in one class.

    AgentLedgerError
    ├── UserError                  misuse: the caller passed something we cannot accept
    │   ├── ClosedError            a call on a ledger, store or session after close() (RuntimeError)
    │   ├── InvalidIdError         a session or tenant id that is empty, too long or not text
    │   └── MissingDependencyError an optional extra is not installed (message says what to install)
    ├── CodecError                 not a valid encoded message, or a value JSON cannot hold
    ├── HistoryError               a history breaks a provider's strict rules (carries findings)
    ├── StoreError                 a store could not do what was asked; nothing committed was lost
    │   ├── ConflictError          another writer committed since the version the caller expected
    │   ├── CorruptStoreError      stored data cannot be read (names file/row); nothing rewritten
    │   ├── SessionNotFoundError   no such session
    │   ├── VersionNotFoundError   the version never existed or its history was purged
    │   ├── SessionBusyError       another run holds the session's run lease
    │   │   └── LeaseLostError     the lease a run held ended under it; its next save refused
    │   ├── StoreUnavailableError  unreachable, connection dropped, disk full or I/O error
    │   └── OutcomeUnknownError    a save's connection broke and the server stayed unreachable
    └── ModelError                 a model provider failed or answered with something unusable

Misuse errors also subclass ``ValueError`` so that generic handlers keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AgentLedgerError",
    "ClosedError",
    "CodecError",
    "ConflictError",
    "CorruptStoreError",
    "HistoryError",
    "InvalidIdError",
    "LeaseLostError",
    "MissingDependencyError",
    "ModelError",
    "OutcomeUnknownError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StoreError",
    "StoreUnavailableError",
    "UserError",
    "VersionNotFoundError",
]


class AgentLedgerError(Exception):
    """Root of every error raised by agentledger."""


class UserError(AgentLedgerError, ValueError):
    """The caller used the API in a way it does not support."""


class ClosedError(UserError, RuntimeError):
    """A call on something already closed: a ``Ledger``, ``AsyncLedger``, ``Store`` or
    ``LedgerSession`` after ``close()``, or a ledger whose store was closed. Not a
    ``StoreError``: retrying cannot help. Also a ``RuntimeError``, which the Agents SDK's own
    sessions raise for the same misuse."""


class InvalidIdError(UserError):
    """A session or tenant id that cannot be stored safely."""


class MissingDependencyError(UserError, ImportError):
    """An optional extra is needed; the message names the pip command that installs it."""


class CodecError(AgentLedgerError):
    """Data that is not a valid encoded message, or a value that JSON cannot represent exactly."""


class HistoryError(AgentLedgerError):
    """A history that a strict provider would reject. ``findings`` says where and why."""

    def __init__(self, message: str, findings: Sequence[Any] = ()) -> None:
        super().__init__(message)
        self.findings = tuple(findings)


class StoreError(AgentLedgerError):
    """A store operation failed. What was committed before is intact."""


class ConflictError(StoreError):
    """Another writer committed since ``expected``; the save was not applied."""

    def __init__(self, message: str, *, expected: int | None = None, actual: int | None = None):
        super().__init__(message)
        self.expected = expected
        self.actual = actual


class CorruptStoreError(StoreError):
    """Stored bytes cannot be decoded. ``location`` names the file and line or the row."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message)
        self.location = location


class SessionNotFoundError(StoreError, KeyError):
    """The session does not exist in this store."""

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


class VersionNotFoundError(StoreError):
    """The requested version does not exist or its history was purged."""


class SessionBusyError(StoreError):
    """Another run holds this session's run lease."""


class LeaseLostError(SessionBusyError):
    """The run lease this holder took ended while it held it (on PostgreSQL, its connection
    ended: killed, closed by a server timeout, a restart), so another run may hold the session
    now. Raised by the holder's next save that writes to the session, which is not applied:
    what was committed before is intact, and nothing of another run's commit was replaced."""


class StoreUnavailableError(StoreError):
    """The store could not do the work: its server could not be reached or the connection broke
    mid-operation, or its disk was full or failed (an I/O error, a file-size limit).

    A write that failed this way was not applied (rolled back, or undone with its temporary
    files); what was committed before is intact, and retrying later is safe.
    """


class OutcomeUnknownError(StoreError):
    """A save's connection broke after the commit was sent, and whether it committed could not
    be learned before the store's timeout (its server stayed unreachable).

    The save is either wholly applied or not at all, never in part. The ledger forgets what it
    cached for the session; load it (``version()``, ``load()``) to see which, before saving
    again with ``expected_version``.
    """


class ModelError(AgentLedgerError):
    """A model provider call failed or returned something that is not a valid answer."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable
