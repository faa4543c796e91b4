"""Tool-call ids as each provider accepts them, mapped back to the ids we store.

Providers constrain the ids they take back in a history: Anthropic wants ``^[a-zA-Z0-9_-]+$``
(so Kimi's ``functions.get_weather:0`` or an OpenAI-compatible server's ``call:1`` is refused),
OpenAI at most 40 characters. The stored id is never changed (it pairs a call with its result,
and the caller may hold it); instead each request maps it, and the reply's ids are mapped back.

The mapping is deterministic (the same stored id always gives the same wire id, so a request is
the same before and after a reload, and prompt caches keep hitting) and reversible through the
``ToolIds`` of the request that made it. An id the provider takes is sent as is; any other
becomes a readable prefix of it plus ``_`` and a BLAKE2b hex digest of the whole id. Two stored
ids that would map to one wire id in the same request are refused with ``UserError`` rather than
merged.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from agentledger.errors import UserError
from agentledger.messages.blocks import Block, ToolResultBlock, ToolUseBlock
from agentledger.messages.msg import Msg

__all__ = ["Provider", "ToolIds", "restore_ids", "wire_tool_id"]

Provider = Literal["anthropic", "openai"]

_ANTHROPIC_OK = re.compile(r"[a-zA-Z0-9_-]+")
_ANTHROPIC_BAD = re.compile(r"[^a-zA-Z0-9_-]")
_OPENAI_MAX = 40
_DIGEST_HEX = 16


def _digest(tool_id: str) -> str:
    return hashlib.blake2b(tool_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def wire_tool_id(provider: Provider, tool_id: str) -> str:
    """The id ``provider`` is sent for the stored id ``tool_id`` (itself when it is accepted)."""
    if provider == "anthropic":
        if _ANTHROPIC_OK.fullmatch(tool_id):
            return tool_id
        prefix = _ANTHROPIC_BAD.sub("_", tool_id)[:40]
        return f"{prefix}_{_digest(tool_id)}"
    if provider == "openai":
        if len(tool_id) <= _OPENAI_MAX:
            return tool_id
        return f"{tool_id[: _OPENAI_MAX - _DIGEST_HEX - 1]}_{_digest(tool_id)}"
    raise UserError(f"provider must be 'anthropic' or 'openai', got {provider!r}")


class ToolIds:
    """The tool-id mapping of one request: ``wire(stored)`` while building it, ``stored(wire)``
    for the ids that come back (an id never sent is its own stored id)."""

    def __init__(self, provider: Provider) -> None:
        wire_tool_id(provider, "x")  # checks the provider name
        self.provider: Provider = provider
        self._stored: dict[str, str] = {}  # wire id -> stored id

    def wire(self, tool_id: str) -> str:
        out = wire_tool_id(self.provider, tool_id)
        known = self._stored.setdefault(out, tool_id)
        if known != tool_id:
            raise UserError(
                f"tool-call ids {known!r} and {tool_id!r} would both be sent to {self.provider} "
                f"as {out!r}; rename one"
            )
        return out

    def stored(self, wire_id: str) -> str:
        return self._stored.get(wire_id, wire_id)

    @property
    def mapped(self) -> dict[str, str]:
        """Wire id -> stored id, for every id that was changed."""
        return {w: s for w, s in self._stored.items() if w != s}


def restore_ids(msgs: list[Msg], tool_ids: ToolIds | None) -> list[Msg]:
    """``msgs`` read back from a provider's format with every mapped tool-call id (of calls and
    of results) replaced by its stored id."""
    if tool_ids is None or not tool_ids.mapped:
        return msgs
    out = []
    for msg in msgs:
        content = [_restored(block, tool_ids) for block in msg.content]
        changed = any(a is not b for a, b in zip(content, msg.content, strict=True))
        out.append(msg.replace(content=content) if changed else msg)
    return out


def _restored(block: Block, tool_ids: ToolIds) -> Block:
    if isinstance(block, (ToolUseBlock, ToolResultBlock)):
        stored = tool_ids.stored(block.id)
        if stored != block.id:
            return block.replace(id=stored)  # type: ignore[no-any-return]
    return block
