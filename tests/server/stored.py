"""What a server test reads back from the store to show that nothing committed was lost or
changed: each thread's committed version as digests, and strict validity of every thread.

The ledger keeps every version: a run adds to a thread (known message ids are skipped, the
server copy is authoritative), and a user message resent with a known id and new content forks
the thread, the previous branch staying readable at its version. So after any request, hostile
or not, a thread committed at version ``v`` must still exist and load at ``v`` exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentledger.agent.lifecycle import PENDING_VALUE, client_calls
from agentledger.store import Ledger
from agentledger.wire import validate


@dataclass(frozen=True)
class Committed:
    """One thread as committed: its version, message digests and values."""

    version: int
    digests: tuple[bytes, ...]
    values: dict[str, Any]


def committed(ledger: Ledger, tenant: str) -> dict[str, Committed]:
    """Every thread of ``tenant`` as it stands now."""
    out = {}
    for info in ledger.list_sessions(tenant=tenant, limit=1_000_000):
        state = ledger.load(info.session_id, tenant=tenant)
        digests = tuple(m.digest for m in state.context)
        out[info.session_id] = Committed(state.version, digests, dict(state.values))
    return out


def changes(ledger: Ledger, tenant: str, before: dict[str, Committed]) -> list[str]:
    """How ``tenant``'s threads lost what ``before`` committed: a thread gone, or a committed
    version that no longer loads exactly as it was."""
    problems = []
    for thread, was in before.items():
        if not ledger.exists(thread, tenant=tenant):
            problems.append(f"{tenant}/{thread!r}: gone")
            continue
        then = ledger.load(thread, tenant=tenant, version=was.version)
        if tuple(m.digest for m in then.context) != was.digests or then.values != was.values:
            problems.append(f"{tenant}/{thread!r}: version {was.version} changed")
    return problems


def invalid(ledger: Ledger, tenant: str) -> list[str]:
    """Threads of ``tenant`` that fail strict validation, other than by the client tool calls
    they are waiting for (a frontend tool's call is pending until the next run)."""
    problems = []
    for info in ledger.list_sessions(tenant=tenant, limit=1_000_000):
        state = ledger.load(info.session_id, tenant=tenant)
        waiting = {c.id for c in client_calls(state.context, state.values.get(PENDING_VALUE) or {})}
        for finding in validate(state.context, target="strict"):
            if not (finding.kind == "unanswered_call" and finding.tool_call_id in waiting):
                problems.append(f"{tenant}/{info.session_id!r}: {finding}")
    return problems
