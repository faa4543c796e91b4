"""``Msg``: one message of a conversation, an immutable value.

Two messages are equal when their canonical encodings are equal: every persisted field counts
(id, role, name, content, metadata, usage, created_at) and bytes compare by value wherever they
sit. The digest of the canonical encoding is computed once per instance and cached, which is what
makes comparing a 12,000-message list against the store cheap. Editing returns a new ``Msg`` that
keeps the id; nothing in agentledger mutates a message or relies on object identity for its
meaning (the planner uses identity only as a shortcut for equality).

Every field is checked where the message is built (``checks``, ``values.freeze``), so a message
that exists can always be encoded and read back equal, with the same types and digest; what
cannot is refused with a ``UserError`` or ``CodecError`` naming the field. A message keeps no
reference to anything mutable its caller passed in.

A message loaded from a store starts *deferred*: its id and digest are set, and its stored bytes
wait to be decoded until one of its other fields is first read (``__getattr__`` runs only for a
slot not set yet, so a decoded message pays nothing). A reload of 12,000 messages therefore
costs what fetching them costs, and comparing or re-saving them decodes nothing. At that first
read the bytes are checked against the stored digest and decoded strictly (``deferred``); bytes
that fail raise ``CorruptStoreError``. Bytes passed on undecoded (an export, a fork) are first
checked against the stored digest.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from itertools import repeat
from typing import Any, Literal

from agentledger.errors import UserError
from agentledger.messages import checks
from agentledger.messages.blocks import (
    BLOCK_TYPES,
    Block,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    as_blocks,
)
from agentledger.messages.deferred import BATCH, fill
from agentledger.messages.ids import new_id
from agentledger.messages.record import MsgRecord, encode_with_digest
from agentledger.messages.slots import (
    MsgSlots,
    get_stored,
    set_batch,
    set_content,
    set_created_at,
    set_digest,
    set_fields,
    set_id,
    set_metadata,
    set_name,
    set_role,
    set_stored,
    set_usage,
)
from agentledger.messages.usage import Usage
from agentledger.messages.values import FrozenMap, freeze_map

__all__ = ["ROLES", "Msg", "Role", "Usage", "deferred_messages", "message_list"]

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(("system", "user", "assistant", "tool"))
_ROLE_NAMES = {role: role for role in ROLES}


def _now() -> datetime:
    return datetime.now(UTC)


def _role(value: Any) -> str:
    try:
        role = _ROLE_NAMES.get(value) if isinstance(value, str) else None
    except TypeError:
        role = None
    if role is None:
        raise UserError(f"Msg.role must be one of {sorted(ROLES)}, got {value!r}")
    return role  # the plain string, also for a StrEnum member


def _content(value: Any) -> tuple[Block, ...]:
    return as_blocks(value, BLOCK_TYPES, "Msg.content", "a block")


def _created_at(value: Any) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        if value != "now":
            raise UserError(f"Msg.created_at must be a datetime, 'now' or None, got {value!r}")
        return _now()
    return checks.timestamp("Msg", "created_at", value)


class Msg(MsgSlots):
    """An immutable chat message. See the module docstring for its value semantics."""

    __slots__ = ()

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
        try:
            get_stored(self)
        except AttributeError:
            pass  # a new message: its slots are empty
        else:
            raise AttributeError("Msg is immutable; use msg.replace(...) to make an edited copy")
        if id is None:
            id = new_id()
        else:
            id = checks.text("Msg", "id", id, optional=True)
            if not id:
                raise UserError("Msg.id must be a non-empty string or None, got ''")
        if usage is not None and type(usage) is not Usage:
            raise UserError(f"Msg.usage must be a Usage or None, got {type(usage).__name__}")
        set_id(self, id)
        set_role(self, _role(role))
        set_content(self, _content(content))
        set_name(self, checks.optional_text("Msg", "name", name))
        set_metadata(self, freeze_map(metadata, "Msg.metadata"))
        set_usage(self, usage)
        set_created_at(self, _created_at(created_at))
        set_digest(self, None)
        set_stored(self, None)

    @classmethod
    def _from_record(cls, rec: MsgRecord, digest: bytes | None = None) -> Msg:
        """Build from a decoded, checked record (the codec's fast path)."""
        msg = cls.__new__(cls)
        set_id(msg, rec.id)
        set_digest(msg, digest)
        set_fields(msg, rec)
        return msg

    def __getattr__(self, name: str) -> Any:
        # Reached only when a slot is unset: a deferred message's fields before decoding.
        if name in _DEFERRED_FIELDS:
            # a no-op if another thread has just finished decoding it: the fields are set
            fill(self)
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
            digest = encode_with_digest(self)[1]
        return digest

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Msg):
            return NotImplemented
        return self.id == other.id and self.digest == other.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    def __reduce__(self) -> tuple[Any, ...]:
        body, digest = encode_with_digest(self)
        return (_unpickle, (self.id, digest, body))

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


def _unpickle(id: str, digest: bytes, body: bytes) -> Msg:
    """A pickled message comes back deferred: checked like a loaded one on first read."""
    return deferred_messages([id], [digest], [body])[0]


def deferred_messages(
    ids: Sequence[str], digests: Sequence[bytes], bodies: Sequence[bytes]
) -> list[Msg]:
    """Messages whose canonical bytes ``bodies[i]`` (whose digest should be ``digests[i]``) are
    decoded on first use, and checked then (``deferred``); see the module docstring. Each
    ``BATCH`` consecutive messages share a batch, decoded together on the first read of one.

    Built without a Python-level call per message (allocation and slot setting are all mapped
    in C): this is most of what a reload costs.
    """
    msgs = list(map(Msg.__new__, repeat(Msg, len(ids))))
    deque(map(set_id, msgs, ids), maxlen=0)
    deque(map(set_digest, msgs, digests), maxlen=0)
    deque(map(set_stored, msgs, bodies), maxlen=0)
    for start in range(0, len(msgs), BATCH):
        batch = msgs[start : start + BATCH]
        deque(map(set_batch, batch, repeat(batch)), maxlen=0)
    return msgs


#: The fields a deferred message decodes on first read.
_DEFERRED_FIELDS = frozenset(("role", "content", "name", "metadata", "usage", "created_at"))


def message_list(value: Any, where: str) -> list[Msg]:
    """``value``, a sequence of ``Msg``, as a new list; a ``UserError`` saying what ``where``
    (the call, the hook) was given instead: a string, a mapping, anything not a sequence, or an
    item that is not a ``Msg``, by its position."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise UserError(f"{where}: expected a list of Msg, got {type(value).__name__}")
    msgs = list(value)
    for position, msg in enumerate(msgs):
        if type(msg) is not Msg and not isinstance(msg, Msg):
            raise UserError(
                f"{where}: expected a list of Msg, got a {type(msg).__name__} at position "
                f"{position}"
            )
    return msgs
