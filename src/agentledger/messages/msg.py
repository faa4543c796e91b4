"""``Msg``: one message of a conversation, an immutable value.

Two messages are equal when their canonical encodings are equal: every persisted field counts
(id, role, name, content, metadata, usage, created_at) and bytes compare by value wherever they
sit. The digest of the canonical encoding is computed once per instance and cached, which is what
makes comparing a 12,000-message list against the store cheap. Editing returns a new ``Msg`` that
keeps the id; nothing in agentledger mutates a message or relies on object identity for its
meaning (the planner uses identity only as a shortcut for equality).

A message loaded from a store starts *deferred*: its id and digest are set, and its stored bytes
wait to be decoded until one of its other fields is first read (``__getattr__`` runs only for a
slot not set yet, so a decoded message pays nothing). A reload of 12,000 messages therefore
costs what fetching them costs, and comparing or re-saving them decodes nothing. Bytes that turn
out to be undecodable raise ``CorruptStoreError`` at that first read; bytes passed on undecoded
(an export, a fork) are first checked against the stored digest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, Literal

import msgspec

from agentledger.errors import UserError
from agentledger.messages.blocks import (
    Block,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    _BlockBase,
)
from agentledger.messages.ids import new_id
from agentledger.messages.values import FrozenMap, freeze_map

__all__ = ["ROLES", "Msg", "Role", "Usage", "deferred_messages"]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))


class Usage(msgspec.Struct, frozen=True, omit_defaults=True, kw_only=True, gc=False):
    """Token counts reported by the provider for one model call."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f: getattr(self, f) + getattr(other, f) for f in self.__struct_fields__})


def _now() -> datetime:
    return datetime.now(UTC)


def _content(value: str | Block | Iterable[Block]) -> tuple[Block, ...]:
    if isinstance(value, str):
        return (TextBlock(text=value),)
    if isinstance(value, _BlockBase):
        return (value,)  # type: ignore[return-value]
    blocks = tuple(value)
    for block in blocks:
        if not isinstance(block, _BlockBase):
            raise UserError(f"message content must be blocks or a string, got {block!r}")
    return blocks  # type: ignore[return-value]


class Msg:
    """An immutable chat message. See the module docstring for its value semantics."""

    __slots__ = (
        "_digest",
        "_stored",
        "content",
        "created_at",
        "id",
        "metadata",
        "name",
        "role",
        "usage",
    )

    id: str
    role: Role
    content: tuple[Block, ...]
    name: str | None
    metadata: FrozenMap
    usage: Usage | None
    created_at: datetime | None

    def __init__(
        self,
        role: Role,
        content: str | Block | Iterable[Block] = (),
        *,
        id: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        usage: Usage | None = None,
        created_at: datetime | Literal["now"] | None = "now",
    ) -> None:
        if role not in ROLES:
            raise UserError(f"role must be one of {sorted(ROLES)}, got {role!r}")
        if id is not None and (not isinstance(id, str) or not id):
            raise UserError(f"message id must be a non-empty string, got {id!r}")
        if created_at == "now":
            created_at = _now()
        elif created_at is not None:
            if created_at.tzinfo is None:
                raise UserError("created_at must be timezone-aware (naive datetimes are refused)")
            created_at = created_at.astimezone(UTC)
        set_ = object.__setattr__
        set_(self, "id", id or new_id())
        set_(self, "role", role)
        set_(self, "content", _content(content))
        set_(self, "name", name)
        set_(self, "metadata", freeze_map(metadata))
        set_(self, "usage", usage)
        set_(self, "created_at", created_at)
        set_(self, "_digest", None)
        set_(self, "_stored", None)

    @classmethod
    def _trusted(
        cls,
        id: str,
        role: Role,
        content: tuple[Block, ...],
        name: str | None,
        metadata: FrozenMap,
        usage: Usage | None,
        created_at: datetime | None,
        digest: bytes | None = None,
    ) -> Msg:
        """Build from already-validated parts (the codec's fast path)."""
        msg = cls.__new__(cls)
        _set_id(msg, id)
        _set_role(msg, role)
        _set_content(msg, content)
        _set_name(msg, name)
        _set_metadata(msg, metadata)
        _set_usage(msg, usage)
        _set_created_at(msg, created_at)
        _set_digest(msg, digest)
        _set_stored(msg, None)
        return msg

    def __getattr__(self, name: str) -> Any:
        # Reached only when a slot is unset: a deferred message's fields before decoding.
        if name in _DEFERRED_FIELDS:
            from agentledger.messages.codec import _fill_deferred

            # a no-op if another thread has just finished decoding it: the fields are set
            _fill_deferred(self)
            return object.__getattribute__(self, name)
        raise AttributeError(f"'Msg' object has no attribute {name!r}")

    # -- constructors for the common roles ------------------------------------------------
    @classmethod
    def system(cls, content: str | Block | Iterable[Block], **kw: Any) -> Msg:
        return cls("system", content, **kw)

    @classmethod
    def user(cls, content: str | Block | Iterable[Block], **kw: Any) -> Msg:
        return cls("user", content, **kw)

    @classmethod
    def assistant(cls, content: str | Block | Iterable[Block] = (), **kw: Any) -> Msg:
        return cls("assistant", content, **kw)

    @classmethod
    def tool(cls, results: ToolResultBlock | Iterable[ToolResultBlock], **kw: Any) -> Msg:
        return cls("tool", results, **kw)

    # -- immutability and value semantics ---------------------------------------------------
    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Msg is immutable; use msg.replace(...) to make an edited copy")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Msg is immutable")

    @property
    def digest(self) -> bytes:
        """16-byte BLAKE2b digest of the canonical encoding, computed once and cached."""
        digest = self._digest
        if digest is None:
            from agentledger.messages.codec import encode_with_digest

            digest = encode_with_digest(self)[1]
        return digest

    def _set_digest(self, digest: bytes) -> None:
        object.__setattr__(self, "_digest", digest)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Msg):
            return NotImplemented
        return self.id == other.id and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __reduce__(self) -> tuple[Any, ...]:
        from agentledger.messages.codec import decode, encode

        return (decode, (encode(self),))

    def __repr__(self) -> str:
        parts = [f"{type(b).__name__}" for b in self.content]
        return f"Msg(id={self.id!r}, role={self.role!r}, content=[{', '.join(parts)}])"

    def replace(self, **changes: Any) -> Msg:
        """An edited copy. The id is kept unless ``id=`` is given explicitly."""
        fields = {
            "role": self.role,
            "content": self.content,
            "id": self.id,
            "name": self.name,
            "metadata": self.metadata,
            "usage": self.usage,
            "created_at": self.created_at,
        }
        unknown = set(changes) - set(fields)
        if unknown:
            raise UserError(f"Msg has no field(s) {sorted(unknown)}")
        fields.update(changes)
        role = fields.pop("role")
        content = fields.pop("content")
        return Msg(role, content, **fields)

    # -- reading -------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """The text blocks joined by newlines (thinking and tool blocks excluded)."""
        return "\n".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def thinking(self) -> str:
        return "\n".join(b.thinking for b in self.content if isinstance(b, ThinkingBlock))

    @property
    def tool_calls(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolUseBlock))

    @property
    def tool_results(self) -> tuple[ToolResultBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolResultBlock))


# Slot setters that bypass ``Msg.__setattr__`` (which refuses every assignment): the codec's
# fast path builds thousands of messages per load.
(
    _set_id,
    _set_role,
    _set_content,
    _set_name,
    _set_metadata,
    _set_usage,
    _set_created_at,
    _set_digest,
    _set_stored,
) = (
    Msg.__dict__[name].__set__
    for name in (
        "id",
        "role",
        "content",
        "name",
        "metadata",
        "usage",
        "created_at",
        "_digest",
        "_stored",
    )
)


def deferred_messages(
    ids: Sequence[str], digests: Sequence[bytes], bodies: Sequence[bytes]
) -> list[Msg]:
    """Messages whose canonical bytes ``bodies[i]`` (whose digest is ``digests[i]``, trusted)
    are decoded on first use; see the module docstring.

    Built without a Python-level call per message (allocation and slot setting are all mapped
    in C): this is most of what a reload costs.
    """
    msgs = list(map(Msg.__new__, repeat(Msg, len(ids))))
    deque(map(_set_id, msgs, ids), maxlen=0)
    deque(map(_set_digest, msgs, digests), maxlen=0)
    deque(map(_set_stored, msgs, bodies), maxlen=0)
    return msgs


#: The fields a deferred message decodes on first read.
_DEFERRED_FIELDS = frozenset(("role", "content", "name", "metadata", "usage", "created_at"))
