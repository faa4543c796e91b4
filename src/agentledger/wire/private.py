"""Private metadata keys, and the few rules every converter shares.

A metadata key that starts with ``_`` (in ``Msg.metadata``, in any block's ``metadata``, at any
depth) is private. The codec keeps it like any other key, so it survives storage and reload, but
no converter ever writes it into a provider request or a client message: every converter that
emits metadata goes through ``public_metadata``. Callers use private keys for bookkeeping that
must stay on the server (an upstream request id, a cost, a tenant tag); agentledger uses a few for
facts a wire format cannot carry (``SOURCE_ROLE_KEY``, ``PROVIDER_FILE_KEY``).

Tool-call arguments are written here for every format: a format whose arguments are text
(OpenAI, AG-UI, Responses) gets ``arguments_text(call)``, the model's own text byte for byte when
the call came as text (``ToolUseBlock.arguments``), else ``input`` serialised; a format whose
arguments are an object (Anthropic) gets ``arguments_object(call)``, and every reader of such a
format builds the block with ``tool_use_from_object``. Text that holds no JSON
object (truncated by an interrupt, or plain invalid) is marked in ``input`` by the private key
``{"_raw_arguments": "<text>"}`` (see ``messages.arguments``); blocks stored before
``ToolUseBlock.arguments`` existed carry only that marker, and it still gives the text back.

The shared rules: which blocks may sit in which role (``block_fits``), and the deterministic
content-derived message ids (``content_id``, ``Occurrences``) that let caller-owned dicts be
stored by content.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from agentledger.errors import CodecError, UserError
from agentledger.messages.arguments import (
    RAW_ARGUMENTS_KEY,
    compact_json,
    input_of,
    is_raw,
    json_arguments,
    plain_json,
)
from agentledger.messages.blocks import (
    Block,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.messages.msg import Msg
from agentledger.messages.values import FrozenMap, freeze, from_json, json_enc_hook

__all__ = [
    "ANTHROPIC_EXTRA_KEY",
    "OPENAI_EXTRA_KEY",
    "PROVIDER_FILE_KEY",
    "RAW_ARGUMENTS_KEY",
    "REASONING_SOURCE_KEY",
    "REFUSAL_KEY",
    "RESERVED_KEYS",
    "SOURCE_ROLE_KEY",
    "Occurrences",
    "arguments_object",
    "arguments_text",
    "block_fits",
    "block_type",
    "content_id",
    "content_key",
    "dump_arguments",
    "is_private",
    "keep_unknown",
    "metadata_from_json",
    "occurrence_id",
    "parse_arguments",
    "private_keys",
    "public_metadata",
    "require_fits",
    "strip_private",
    "tool_use_from_object",
]

SOURCE_ROLE_KEY = "_source_role"
"""``Msg.metadata`` key recording a wire role we fold into ours (``developer`` → ``system``)."""

PROVIDER_FILE_KEY = "_provider_file"
"""Media-block metadata key: the block's ``url`` is a file handle issued by this provider (an
OpenAI ``file_id``), not a URL anyone can fetch."""

OPENAI_EXTRA_KEY = "_openai"
"""Metadata key (of a ``Msg`` or a block) holding the keys of an OpenAI chat object that have no
field of their own here (``audio``, ``function_call``, ``annotations`` ...), verbatim."""

REASONING_SOURCE_KEY = "_reasoning_source"
"""``ThinkingBlock.metadata`` key naming the provider that wrote unsigned reasoning (an
OpenAI-compatible server's ``reasoning_content``): only that provider is sent it again."""

REFUSAL_KEY = "refusal"
"""``TextBlock.metadata`` key (public) marking a refusal: OpenAI's ``refusal`` field, kept apart
from the answer text and written back as ``refusal``."""

ANTHROPIC_EXTRA_KEY = "_anthropic"
"""The same for Anthropic Messages objects (``cache_control``, ``citations`` ...)."""

RESPONSES_EXTRA_KEY = "_responses"
"""Private metadata key (of a ``Msg`` or a block) holding the keys of a Responses item or part
that have no field here, verbatim; unlike ``_openai`` they are written back to Responses."""

RESPONSES_ITEM_KEY = "_responses_item"
"""``Msg.metadata`` key holding a Responses item of a kind not mapped to blocks, verbatim."""

RESPONSES_FIELD_KEY = "_responses_field"
"""``ThinkingBlock.metadata`` key naming the field of a reasoning item a part was read from,
when its type does not say it."""

AGUI_FIX_KEY = "_agui"
"""Private metadata key holding an AG-UI fix (never sent to a provider, never written out)."""

PYDANTIC_AI_KEY = "_pydantic_ai"
"""Private ``Msg.metadata`` key holding, as JSON text, what the blocks of a pydantic-ai message
do not carry."""

_json_encoder = msgspec.json.Encoder(enc_hook=json_enc_hook)
_canonical = msgspec.json.Encoder(enc_hook=json_enc_hook, order="sorted")


#: The private metadata keys the converters write themselves (``_raw_arguments`` is the
#: codec's): read from a caller's dict, one would be taken for what a converter wrote (a
#: ``_responses_item`` replaced the item it sat in, a ``_source_role`` its role), so no dict
#: given to a converter may hold one.
RESERVED_KEYS = frozenset(
    (
        SOURCE_ROLE_KEY,
        PROVIDER_FILE_KEY,
        OPENAI_EXTRA_KEY,
        REASONING_SOURCE_KEY,
        ANTHROPIC_EXTRA_KEY,
        RESPONSES_EXTRA_KEY,
        RESPONSES_ITEM_KEY,
        RESPONSES_FIELD_KEY,
        AGUI_FIX_KEY,
        RAW_ARGUMENTS_KEY,
        PYDANTIC_AI_KEY,
    )
)


def is_private(key: str) -> bool:
    """Whether a metadata key is private (starts with ``_``)."""
    return key.startswith("_")


def private_keys(obj: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The private keys of a caller's ``obj`` (a message, an item, a part), which a converter
    keeps as the metadata of what it makes (never sent to a provider, not written back);
    ``UserError`` for one of ``RESERVED_KEYS``."""
    found = {k: v for k, v in obj.items() if type(k) is str and is_private(k)}
    taken = sorted(RESERVED_KEYS.intersection(found))
    if taken:
        raise UserError(
            f"{where}: {taken[0]!r} is a key agentledger's converters write themselves; a "
            "private key of your own (starting with _) must be another"
        )
    return found


def keep_unknown(
    obj: Mapping[str, Any], known: frozenset[str], key: str, metadata: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``metadata`` with the keys of ``obj`` outside ``known`` under ``key``, so a converter
    keeps what it does not map instead of dropping it. Without ``metadata`` (a part, a tool
    call, a source), a new dict that also holds ``obj``'s private keys (``private_keys``); a
    message's converter passes its ``metadata`` with them in it already. The values are frozen
    with the message, so one that JSON cannot hold is refused there, by path.
    """
    out = private_keys(obj, "a content part, tool call or source") if metadata is None else metadata
    unknown = {k: v for k, v in obj.items() if k not in known and not is_private(k)}
    if unknown:
        out[key] = unknown
    return out


def strip_private(value: Any) -> Any:
    """``value`` with every private key removed from every mapping inside it, at any depth.

    Mappings come back as plain dicts and sequences as tuples; other values are returned as is.
    """
    if isinstance(value, Mapping):
        return {k: strip_private(v) for k, v in value.items() if not is_private(k)}
    if isinstance(value, (tuple, list)):
        return tuple(strip_private(v) for v in value)
    return value


def public_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The public part of a metadata mapping as plain JSON, or ``None`` when nothing is left.

    Bytes are written in the codec's tagged form (``{"$bytes": "<base64>"}``) so that
    ``metadata_from_json`` gives them back as bytes; this is the only way metadata leaves us.
    """
    if not metadata:
        return None
    public = strip_private(metadata)
    if not public:
        return None
    out: dict[str, Any] = msgspec.json.decode(_json_encoder.encode(freeze(public)))
    return out


def metadata_from_json(obj: Any) -> FrozenMap | None:
    """Inverse of ``public_metadata``: JSON metadata from a client, with tagged bytes restored."""
    if obj is None:
        return None
    frozen = from_json(obj)
    return frozen if isinstance(frozen, FrozenMap) else None


def parse_arguments(raw: str | None) -> FrozenMap:
    """Tool-call input from a JSON arguments string; never raises (``messages.arguments``)."""
    return input_of(raw)


def dump_arguments(arguments: Mapping[str, Any]) -> str:
    """The JSON arguments string for a tool-call input (the verbatim text for raw arguments)."""
    return compact_json(arguments)


def arguments_text(call: ToolUseBlock) -> str:
    """The arguments of ``call`` as a string-arguments format writes them: the model's text,
    byte for byte (``ToolUseBlock.arguments``, or ``input``'s compact JSON when that is what
    the model wrote)."""
    if call.arguments is not None:
        return call.arguments
    return compact_json(call.input)


def arguments_object(call: ToolUseBlock) -> dict[str, Any]:
    """The arguments of ``call`` as a plain JSON object, for formats whose arguments are one.

    The object the model's text holds, exactly (an integer past 64 bits included); ``{}`` when
    the text holds no object, which no object format can carry; else ``input``, bytes tagged.
    """
    if call.arguments is not None:
        exact = json_arguments(call.arguments)
        return {} if exact is None else exact
    if is_raw(call.input):
        return {}
    out: dict[str, Any] = plain_json(call.input)
    return out


def tool_use_from_object(
    call_id: str, name: str, arguments: Mapping[str, Any], metadata: Mapping[str, Any] | None = None
) -> ToolUseBlock:
    """The ``ToolUseBlock`` for a call whose arguments came as a JSON object (Anthropic's
    ``input``, a pydantic-ai ``args`` dict), for every reader of such a format.

    The object is the block's ``input`` when that holds it exactly. An object a ``FrozenMap``
    cannot hold (an integer past 64 bits) or one shaped like the raw marker
    (``{"_raw_arguments": "<text>"}``, here a tool parameter of that name the model filled in)
    is kept as its JSON text instead, which gives the very same object back
    (``arguments_object``): built as ``input``, the marker would be read as text that holds no
    object, and every format would be sent something else.
    """
    if not is_raw(arguments):
        try:
            return ToolUseBlock(id=call_id, name=name, input=arguments, metadata=metadata)
        except CodecError:
            pass
    text = json.dumps(arguments, ensure_ascii=False)
    return ToolUseBlock(id=call_id, name=name, arguments=text, metadata=metadata)


def _public_json(message: Mapping[str, Any], where: str) -> bytes:
    """The canonical JSON (sorted keys) of a wire dict without its private keys."""
    public = {k: v for k, v in message.items() if not is_private(k)}
    try:
        return _canonical.encode(freeze(public))
    except (CodecError, TypeError, ValueError, NotImplementedError) as exc:
        raise UserError(f"{where} is not JSON-like: {exc}") from None


def content_id(prefix: str, position: str, message: Mapping[str, Any]) -> str:
    """A deterministic message id from a position and a wire dict's public content.

    ``prefix`` and the BLAKE2b-128 hex of the position and the canonical JSON (sorted keys) of
    the dict without its private keys: the same dict at the same position always gets the same
    id, and any change to it gives another.
    """
    key = position.encode() + b"\x00" + _public_json(message, f"message at {position}")
    return prefix + hashlib.blake2b(key, digest_size=16).hexdigest()


def content_key(message: Mapping[str, Any], where: str) -> bytes:
    """BLAKE2b-128 of a wire dict's public content (``content_id`` without a position): equal
    for two dicts exactly when their public keys and values are. ``where`` names the dict in
    the ``UserError`` for one that is not JSON-like."""
    return hashlib.blake2b(_public_json(message, where), digest_size=16).digest()


class Occurrences:
    """Deterministic ids for the dicts of one list that bring none: by content and occurrence.

    The ``n``-th dict (from 0) of the list whose public content is ``key`` (``content_key``)
    gets the id ``occurrence_id(prefix, key, n)``. A dict's id therefore does not depend on
    where it sits: dropping, inserting or moving other dicts leaves it unchanged, so a list
    shifted by any means converts to the messages it converted to before, and a store keeps
    their rows (only later repeats of a dropped or inserted dict's content are numbered again).
    Repeats get ids of their own, so no two dicts of a list share one. Private keys are not
    content here: a dict and its copy with a private note count as the same content.
    """

    __slots__ = ("_seen",)

    def __init__(self, seen: Mapping[bytes, int] | None = None) -> None:
        """``seen``: how many dicts of each content came before the first this will count."""
        self._seen: Counter[bytes] = Counter(seen) if seen else Counter()

    def take(self, key: bytes) -> int:
        """Which occurrence of the content ``key`` the next dict is; counts it."""
        n = self._seen.get(key, 0)
        self._seen[key] = n + 1
        return n

    @property
    def seen(self) -> Mapping[bytes, int]:
        """How many dicts of each content were counted so far (not a copy: read it, and make
        a new ``Occurrences`` from it, but do not change it)."""
        return self._seen

    def add(self, keys: Iterable[bytes]) -> None:
        """Count one more dict of each content in ``keys`` (a run taken whole; counted in C)."""
        self._seen.update(keys)

    def next_of(self, key: bytes) -> int:
        """Which occurrence of the content ``key`` the next dict would be (not counted)."""
        return self._seen.get(key, 0)

    def derive(
        self, prefix: str, message: Mapping[str, Any], where: str, key: bytes | None = None
    ) -> tuple[str, bytes, int]:
        """The id of the next dict ``message`` (counted), with its content key (``key`` when
        the caller knows it already) and which occurrence it is."""
        if key is None:
            key = content_key(message, where)
        n = self.take(key)
        return occurrence_id(prefix, key, n), key, n


def occurrence_id(prefix: str, key: bytes, occurrence: int) -> str:
    """The id of the ``occurrence``-th dict of a list whose content is ``key`` (see
    ``Occurrences``): ``prefix`` and the BLAKE2b-128 hex of both."""
    return prefix + hashlib.blake2b(b"#%d\x00" % occurrence + key, digest_size=16).hexdigest()


def block_type(block: Block) -> str:
    """A block's ``type`` tag (``"text"``, ``"image"``, ``"tool_use"`` ...)."""
    return str(block.__struct_config__.tag)


def block_fits(role: str, block: Block) -> bool:
    """Whether a block may sit in a message of ``role``: tool results only (and alone) in
    ``tool`` messages, tool calls and thinking only in ``assistant`` messages."""
    if role == "tool":
        return isinstance(block, ToolResultBlock)
    if isinstance(block, ToolResultBlock):
        return False
    if isinstance(block, (ToolUseBlock, ThinkingBlock)):
        return role == "assistant"
    return True


def require_fits(msg: Msg, block: Block) -> None:
    """Raise ``UserError`` when ``block_fits`` says no: no format can carry such a message."""
    if not block_fits(msg.role, block):
        raise UserError(
            f"message {msg.id!r}: a {msg.role} message cannot hold a {block_type(block)} block "
            "(tool results go in role='tool' messages, tool calls in assistant messages)"
        )
