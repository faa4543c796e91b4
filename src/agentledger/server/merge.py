"""Step 2 of a run: merge the client's messages with the stored thread, by message id.

AG-UI clients resend the whole thread on every run, with the ids the server emitted. Appending
what arrives would duplicate the history; keeping only the last user message loses tool results
and system messages (seed 001). The rule here, applied in ``on_state_loaded`` once the stored
thread is loaded under the run lease:

- **Anchor (fast path).** The last stored message's id found in the input, with everything
  before it equal to the stored thread: all of that is skipped, the rest is the new input.
- **Known ids are skipped.** The stored copy is authoritative. A client's copy of an assistant,
  reasoning or tool message may differ (the part it streamed before an abort, a copy older than
  the server's own edit); it never replaces the stored one. A tool result whose call already has
  a stored result is known too, whatever message id the client minted for it.
- **Unknown messages are the new input**, in order; results for calls waiting for the client go
  first, right after their call. A client that lags behind (missing the server's last messages)
  or sends only new messages therefore adds exactly the new ones.
- **An edit forks the thread.** A user, system or developer message with a known id and
  different content, which the server never held in that form, is the user editing it: the
  thread continues from the edited message (the stored messages before it are kept, the client's
  messages from it onwards follow), and the previous branch stays readable at the version before
  the run (``GET /threads/{id}/messages?version=``, ``Ledger.messages(..., version=)``).
- Ids the server removed itself (a rewind, a summary replacing old turns) are recognised in the
  thread's history and skipped, so a lagging client cannot bring them back. The history is read
  only when the input holds an unknown message before a known one, or a changed user message.
- **Nothing new:** the run hydrates the client (snapshots only, no model call).

Comparisons are made in AG-UI form (``to_agui`` of the stored message against the client's
canonical dict, as JSON values: ``server.same``), which ``wire.agui`` makes exact for every
message a client can send.

A client message that is a form the server holds or held is taken as it is: that form came from
a valid message. Every other one is validated (``normalize_agui``: the request's parse leaves
resent messages as sent) and checked as the run's input (``from_agui``), a ``UserError`` naming
it by position if it is not valid, and only what the run appends is converted to ``Msg``s. So a
resent thread costs its comparison, not its validation and conversion.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

from agentledger.agent.lifecycle import unanswered_calls
from agentledger.errors import UserError
from agentledger.messages import Msg
from agentledger.server.forms import AguiForms
from agentledger.server.same import same_json
from agentledger.wire.agui import from_agui, normalize_agui

__all__ = ["Merge", "Merger"]

_CLIENT_ROLES = frozenset(("user", "system", "developer"))
_KNOWN, _NEW, _EDIT = "known", "new", "edit"


@dataclass(slots=True)
class Merge:
    """What a run does with the client's messages."""

    keep: int
    """How many stored messages stay in the live thread (all of them unless it forks)."""
    input: list[Msg] = field(default_factory=list)
    """What the run appends, in order."""
    fork_at: str | None = None
    """The id of the edited message the thread forks at, if any."""
    skipped: int = 0
    """How many client messages were already stored."""

    @property
    def nothing_new(self) -> bool:
        return not self.input and self.fork_at is None


class Merger:
    """Classifies the client's messages against the stored thread (see the module docstring).

    ``incoming`` holds the client's conversation messages (``server.activity.split`` takes its
    activity messages apart first), as ``parse`` left them: each canonical, or a JSON object with
    a string id and role that is validated here (``normalize_agui``, a ``UserError`` naming its
    ``positions`` entry) unless it equals a stored form. The stored messages' forms come from
    ``forms`` (a server keeps one from run to run). ``questions()`` names the ids whose earlier
    stored forms are needed to decide; the caller reads them from the ledger's history and passes
    them to ``result``.
    """

    def __init__(
        self,
        stored: Sequence[Msg],
        incoming: Sequence[dict[str, Any]],
        positions: Sequence[int] | None = None,
        forms: AguiForms | None = None,
    ) -> None:
        self.stored = list(stored)
        self.incoming = list(incoming)
        # where each incoming message sat in the client's list, for the errors that name it
        self.positions = list(range(len(self.incoming)) if positions is None else positions)
        stored_forms = list(map((AguiForms() if forms is None else forms).of, self.stored))
        # the stored thread in AG-UI form, the stored message each view is of, views by id
        # (indices rather than pairs: a resent thread of 12,000 would make 24,000 tuples, and
        # each new container of a run makes the collector's passes over it longer)
        self.views: list[dict[str, Any]] = list(chain.from_iterable(stored_forms))
        self.owner: list[int] = [i for i, form in enumerate(stored_forms) for _ in form]
        self.by_id: dict[str, int] = {d["id"]: v for v, d in enumerate(self.views)}
        self.held: set[int] = set()  # incoming messages that are a stored form exactly
        self.kinds: list[tuple[str, int]] = self._classify()

    # -- classification ----------------------------------------------------------------------
    def _classify(self) -> list[tuple[str, int]]:
        anchored = self._anchored_prefix()
        self.held.update(range(anchored))
        kinds = [(_KNOWN, i) for i in self.owner[:anchored]]
        for k in range(anchored, len(self.incoming)):
            kinds.append(self._kind(k))
        return kinds

    def _anchored_prefix(self) -> int:
        """How many input messages the seed's anchor rule skips at once: the input up to the
        last stored id, when it is exactly the stored thread (the common, full resend)."""
        n = len(self.views)
        if not n or len(self.incoming) < n or self.incoming[n - 1]["id"] != self.views[-1]["id"]:
            return 0
        if all(map(same_json, self.incoming, self.views)):
            return n
        return 0

    def _kind(self, k: int) -> tuple[str, int]:
        v = self.by_id.get(self.incoming[k]["id"])
        if v is not None and same_json(self.incoming[k], self.views[v]):
            self.held.add(k)
            return _KNOWN, self.owner[v]
        # not a form the server holds: validated, and compared again in canonical form
        d = self.incoming[k] = normalize_agui(self.incoming[k], self.positions[k])
        v = self.by_id.get(d["id"])
        if v is not None:
            view, i = self.views[v], self.owner[v]
            if same_json(d, view):
                self.held.add(k)
                return _KNOWN, i
            if d["role"] == view["role"] and view["role"] in _CLIENT_ROLES:
                return _EDIT, i  # until the history says it is only an old copy
            return _KNOWN, i  # the server's copy is authoritative
        if d["role"] == "tool" and d.get("toolCallId") in self._answered:
            return _KNOWN, self._answered[d["toolCallId"]]
        return _NEW, -1

    @functools.cached_property
    def _answered(self) -> dict[str, int]:
        """Tool call id -> the stored message holding its result (read only for a client tool
        message the stored thread does not hold under its id)."""
        return {r.id: i for i, m in enumerate(self.stored) for r in m.tool_results}

    def questions(self) -> set[str]:
        """Ids to look up in the thread's history: changed client messages (an edit, or a copy
        of a form the server replaced?) and unknown messages before a known one (new, or
        removed by the server?)."""
        known = [k for k, (kind, _) in enumerate(self.kinds) if kind == _KNOWN]
        last_known = known[-1] if known else -1
        ids = set()
        for k, (kind, _) in enumerate(self.kinds):
            if kind == _EDIT or (kind == _NEW and k < last_known):
                ids.add(self.incoming[k]["id"])
        return ids

    # -- the result --------------------------------------------------------------------------
    def result(self, earlier: Mapping[str, Sequence[dict[str, Any]]] | None = None) -> Merge:
        """The merge, given the earlier stored forms of the ids ``questions()`` named."""
        earlier = earlier or {}
        kinds = list(self.kinds)
        held = set(self.held)
        for k, (kind, i) in enumerate(kinds):
            d = self.incoming[k]
            if kind in (_EDIT, _NEW) and any(same_json(d, e) for e in earlier.get(d["id"], ())):
                kinds[k] = (_KNOWN, i)  # a form the server held once: an old copy
                held.add(k)
            elif kind == _NEW and d["id"] in earlier:
                kinds[k] = (_KNOWN, i)  # a message the server removed itself
        skipped = sum(kind == _KNOWN for kind, _ in kinds)
        edits = [(i, k) for k, (kind, i) in enumerate(kinds) if kind == _EDIT]
        fork = min(edits) if edits else None
        taken = [
            k
            for k, (kind, _) in enumerate(kinds)
            if kind == _NEW or (fork is not None and k >= fork[1] and kind == _EDIT)
        ]
        self._check(sorted(set(range(len(kinds))) - held - set(taken)))
        if fork is not None:
            return self._fork(kinds, fork, skipped, set(taken))
        msgs = self._convert(taken)
        return Merge(len(self.stored), self._answers_first(msgs), None, skipped)

    def _check(self, ks: list[int]) -> None:
        """Check the client messages the run neither takes nor finds in a stored form (a
        changed copy of a server message, say): valid AG-UI, or a ``UserError`` naming one."""
        from_agui(
            [self.incoming[k] for k in ks],
            normalized=True,
            positions=[self.positions[k] for k in ks],
        )

    def _fork(
        self, kinds: list[tuple[str, int]], first: tuple[int, int], skipped: int, taken: set[int]
    ) -> Merge:
        keep, start = first
        items: list[Msg | int] = []  # stored messages and the client's (by index) in order
        kept: set[int] = set()
        for k, (kind, i) in enumerate(kinds):
            if k in taken:
                items.append(k)
            elif k >= start and kind == _KNOWN and i >= keep and i not in kept:
                kept.add(i)
                items.append(self.stored[i])
        msgs: list[Msg] = []
        run: list[int] = []
        for item in [*items, None]:
            if isinstance(item, int):
                run.append(item)
                continue
            msgs.extend(self._convert(run, allow=self.stored[keep:]))
            run = []
            if item is not None:
                msgs.append(item)
        return Merge(keep, msgs, self.stored[keep].id, skipped)

    def _convert(self, ks: list[int], allow: Sequence[Msg] = ()) -> list[Msg]:
        """The client's messages ``ks`` as ``Msg``s, stamped now; a message whose id the stored
        thread already holds is dropped (the stored copy wins), except the edited ones in
        ``allow``."""
        if not ks:
            return []
        allowed = {m.id for m in allow}
        stored_ids = {m.id for m in self.stored} - allowed
        out: list[Msg] = []
        seen: set[str] = set()
        dicts = [self.incoming[k] for k in ks]
        for msg in from_agui(dicts, normalized=True, positions=[self.positions[k] for k in ks]):
            if msg.id in stored_ids:
                continue
            if msg.id in seen:
                raise UserError(f"message id {msg.id!r} appears twice among the new messages")
            seen.add(msg.id)
            out.append(msg.replace(created_at="now"))
        return out

    def _answers_first(self, msgs: list[Msg]) -> list[Msg]:
        """Results for calls waiting in the stored thread go right after their call."""
        waiting = {c.id for c in unanswered_calls(self.stored)}
        first = [m for m in msgs if m.role == "tool" and {r.id for r in m.tool_results} <= waiting]
        return first + [m for m in msgs if not any(m is f for f in first)]
