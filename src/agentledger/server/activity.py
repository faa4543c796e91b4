"""AG-UI ``activity`` messages: the client's UI records, kept beside the conversation.

An activity message (AG-UI 1.0: ``id``, ``activityType``, ``content``) is not conversation: no
model ever sees it and it is not a ``Msg``. But a client holds it in its message list, and the
``MESSAGES_SNAPSHOT`` that closes a run replaces that list: a server that dropped activity
messages would erase them from the client's screen on the next run. So the server keeps each one
in the session value ``agui.activity``, with the id of the conversation message it followed,
and puts it back at that place in every snapshot and in ``GET /threads/{id}/messages``.

- An activity message is matched by id. The client owns it: a copy that differs replaces the
  stored one, and the place it was sent at becomes its place.
- One the client does not send again is kept (a client that sends only new messages).
- Its place is after the message that preceded it in the client's list (the start of the thread
  if none did). If that message has left the thread (a fork, a summary), it goes to the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentledger.messages.values import thaw
from agentledger.server.same import same_json

__all__ = ["ACTIVITY_VALUE", "Entry", "interleave", "merged", "split"]

ACTIVITY_VALUE = "agui.activity"
"""Session value holding the thread's activity messages, as a list of ``Entry`` dicts."""

Entry = dict[str, Any]
"""``{"after": <id of the message it follows, or None>, "message": <the AG-UI message>}``."""


def split(
    messages: Sequence[dict[str, Any]],
) -> tuple[list[dict[str, Any]], list[Entry], list[int]]:
    """A client's message list as its conversation messages, its activity entries, and where
    each conversation message sits in the list (for errors that name it)."""
    conversation: list[dict[str, Any]] = []
    entries: list[Entry] = []
    positions: list[int] = []
    for position, d in enumerate(messages):
        if d.get("role") == "activity":
            after = conversation[-1]["id"] if conversation else None
            entries.append({"after": after, "message": d})
        else:
            conversation.append(d)
            positions.append(position)
    return conversation, entries, positions


def merged(stored: Any, incoming: Sequence[Entry]) -> list[Entry] | None:
    """The entries to store after a client sent ``incoming``; ``None`` if nothing changed.

    ``stored`` is the session value as loaded (frozen, or absent)."""
    out: list[Entry] = [dict(e) for e in thaw(stored or ())]
    index = {e["message"]["id"]: k for k, e in enumerate(out)}
    changed = False
    for entry in incoming:
        k = index.get(entry["message"]["id"])
        if k is None:
            index[entry["message"]["id"]] = len(out)
            out.append(entry)
            changed = True
        elif not same_json(out[k], entry):
            out[k] = entry
            changed = True
    return out if changed else None


def interleave(thread: Sequence[dict[str, Any]], stored: Any) -> list[dict[str, Any]]:
    """The thread's AG-UI messages with its stored activity messages back in their places."""
    entries = thaw(stored or ())
    if not entries:
        return list(thread)
    present = {d["id"] for d in thread}
    following: dict[str | None, list[dict[str, Any]]] = {}
    orphans: list[dict[str, Any]] = []
    for e in entries:
        after = e["after"]
        if after is None or after in present:
            following.setdefault(after, []).append(e["message"])
        else:
            orphans.append(e["message"])
    out = list(following.get(None, ()))
    for d in thread:
        out.append(d)
        out.extend(following.get(d["id"], ()))
    return out + orphans
