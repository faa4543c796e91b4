"""A session's derived title: the first user text of its context, found at the cost of a change.

``list_sessions`` shows a title for every session. Unless the caller sets a ``title`` value, it is
the text of the first user message of ``context`` that has any, cut to 80 characters. Finding it
must not read the whole list on every save: loaded messages are decoded on first read, so a
context with no user text (an agent driven by system and tool messages) would otherwise decode
all 12,000 messages on each save to learn, again, that there is none.

So the ledger remembers *where* the title came from (``Head.title_at``: the position of its
source message, or the list's length when there is none). Saves compare by position, so after a
save only two kinds of position can hold the first user text: a position that changed, or the
remembered source if it did not. A save that changed nothing at or before the source keeps the
title without reading a message. When the position is not known (a head read back from the
store), one scan finds it, and that scan decodes only messages whose stored bytes hold a user
role.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentledger.messages import Msg
from agentledger.messages.deferred import fill_one

__all__ = ["TITLE_LENGTH", "UNKNOWN", "find_title", "title_after_change", "title_text"]

TITLE_LENGTH = 80
#: ``Head.title_at`` when the position of the title's source is not known.
UNKNOWN = -1
_USER_ROLE = b'"role":"user"'


def title_text(msg: Msg) -> str | None:
    """The title ``msg`` gives, or None if it is not a user message with text."""
    if msg.role != "user":
        return None
    text = " ".join(msg.text.split())
    if not text:
        return None
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"


def _may_be_user(msg: Msg) -> bool:
    """False only for a still-encoded message whose bytes cannot hold a user role.

    Canonical JSON escapes every quote inside a string, so ``"role":"user"`` appears in the bytes
    of any user message; it may also appear inside metadata, which costs one decode, no more.
    """
    stored = msg._stored
    return stored is None or _USER_ROLE in stored


def _first_title(msgs: Sequence[Msg], positions: Iterable[int]) -> tuple[int, str] | None:
    for position in positions:
        msg = msgs[position]
        if _may_be_user(msg):
            fill_one(msg)  # this message only: a title search reads no further than its source
            text = title_text(msg)
            if text is not None:
                return position, text
    return None


def find_title(msgs: Sequence[Msg]) -> tuple[int, str]:
    """``(position, title)`` of the first user message with text; ``(len(msgs), "")`` if none."""
    found = _first_title(msgs, range(len(msgs)))
    return found if found is not None else (len(msgs), "")


def title_after_change(
    msgs: Sequence[Msg], title_at: int, changed: Sequence[int]
) -> tuple[int, str | None]:
    """The title of ``msgs`` after a save that wrote the positions ``changed`` (ascending).

    ``title_at`` is the committed source position (``UNKNOWN`` if not known). Returns the new
    source position and the title, or None as the title when it is the committed one.
    """
    if title_at == UNKNOWN:
        return find_title(msgs)
    # Unchanged positions before the source held no user text: of those, only changed ones can.
    found = _first_title(msgs, (p for p in changed if p < title_at))
    if found is not None:
        return found
    if title_at < len(msgs) and title_at not in changed:
        return title_at, None
    # The source is gone or edited: the next user text may sit anywhere after it.
    found = _first_title(msgs, range(title_at, len(msgs)))
    return found if found is not None else (len(msgs), "")
