"""What a load returns and what a save reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentledger.messages import Msg

__all__ = ["SaveReport", "SessionState"]

CONTEXT = "context"


@dataclass(slots=True)
class SessionState:
    """A session's named message lists and named values at one version.

    The lists and dicts are fresh copies owned by the caller; the messages are immutable.
    """

    version: int = 0
    lists: dict[str, list[Msg]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def context(self) -> list[Msg]:
        """The main conversation list (created empty on first access)."""
        return self.lists.setdefault(CONTEXT, [])

    @property
    def exists(self) -> bool:
        return self.version > 0


@dataclass(frozen=True, slots=True)
class SaveReport:
    """What one save did. ``noop`` saves wrote nothing and kept the version."""

    version: int
    noop: bool
    appended: int = 0
    replaced: int = 0
    truncated: int = 0
    values_changed: int = 0
    bytes_written: int = 0
