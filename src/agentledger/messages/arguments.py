"""Tool-call arguments: the model's text, kept verbatim, and the object read from it.

Models write tool-call arguments as JSON text (OpenAI chat and Responses, AG-UI, and Anthropic's
streamed ``input_json_delta``). That text is what a provider expects to see again in the history,
byte for byte: re-serialising it changes spacing, escapes (``\\u00fc``), number spelling
(``1.0e2``), key order and duplicate keys, so the same conversation would be sent differently
before and after a reload. ``ToolUseBlock.arguments`` keeps the text; ``ToolUseBlock.input`` is
always ``input_of(arguments)``, derived here, so the two can never disagree. When the text is
exactly ``compact_json(input)`` (what most servers send, and what a block built from ``input``
is sent as) it is not kept twice: ``arguments`` is ``None`` and the text is rebuilt from
``input``, byte for byte; so converting a block to text and back gives the same block. Its keys
are sorted, as a stored map reads back: text whose keys are in another order is kept.

``input_of`` gives the JSON object the text holds when a ``FrozenMap`` can hold it exactly.
Otherwise (invalid or truncated JSON, not an object, integers past 64 bits, ``NaN``, nesting past
``MAX_DEPTH``) it gives ``{RAW_ARGUMENTS_KEY: text}``: a tool runner that validates its input then
refuses the call loudly instead of running it with ``{}``, and the text is still there to send
back. Code that needs the exact values (a big integer) reads ``json_arguments``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from agentledger.errors import CodecError
from agentledger.messages.values import FrozenMap, freeze_map, json_enc_hook

__all__ = [
    "RAW_ARGUMENTS_KEY",
    "compact_json",
    "input_of",
    "is_raw",
    "json_arguments",
    "kept_text",
    "plain_json",
]

RAW_ARGUMENTS_KEY = "_raw_arguments"
"""Key of ``ToolUseBlock.input`` holding argument text that is not a storable JSON object."""


def json_arguments(text: str | None) -> dict[str, Any] | None:
    """The JSON object ``text`` holds, exactly as Python's ``json`` reads it (integers of any
    size), ``{}`` for empty text, or ``None`` when it holds no JSON object."""
    if text is None or not text.strip():
        return {}
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def input_of(text: str | None) -> FrozenMap:
    """The ``ToolUseBlock.input`` for argument text (see the module docstring); never raises.

    Read with msgspec (this runs for every stored tool call a load decodes): where it and
    Python's ``json`` differ (``NaN``, lone surrogates), neither gives a storable object.
    """
    value = _object(text)
    if value is not None and not _looks_raw(value):
        try:
            return freeze_map(value)
        except (CodecError, RecursionError):
            pass
    return freeze_map({RAW_ARGUMENTS_KEY: text})


_decoder = msgspec.json.Decoder()


def _object(text: str | None) -> dict[str, Any] | None:
    if text is None or not text.strip():
        return {}
    try:
        value = _decoder.decode(text)
    except (msgspec.DecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def is_raw(arguments: Any) -> bool:
    """Whether a tool input is the ``{RAW_ARGUMENTS_KEY: text}`` marker."""
    return _looks_raw(arguments)


def _looks_raw(value: Any) -> bool:
    return (
        len(value) == 1 and RAW_ARGUMENTS_KEY in value and isinstance(value[RAW_ARGUMENTS_KEY], str)
    )


def kept_text(text: str, derived: FrozenMap) -> str | None:
    """What ``ToolUseBlock.arguments`` keeps of ``text``: ``None`` when ``input`` already gives
    it back exactly (its ``compact_json`` is the text, or it is the raw marker of text that
    holds no JSON object), else the text."""
    if is_raw(derived):
        return text if json_arguments(text) is not None else None
    return None if compact_json(derived) == text else text


# Keys sorted: the order a stored map reads back in, so the text is the same after a reload.
_encoder = msgspec.json.Encoder(order="sorted")
_frozen_encoder = msgspec.json.Encoder(enc_hook=json_enc_hook, order="sorted")


def compact_json(arguments: Mapping[str, Any]) -> str:
    """Compact JSON text for a tool input (keys sorted, UTF-8 unescaped): the same text before
    and after a reload, which reads a map back with its keys sorted; the verbatim text for the
    raw marker."""
    if is_raw(arguments):
        raw: str = arguments[RAW_ARGUMENTS_KEY]
        return raw
    if type(arguments) is FrozenMap:  # fast path; the codec's tags would differ from plain JSON
        fast = _frozen_encoder.encode(arguments)
        if b'"$' not in fast:
            return fast.decode()
    return _encoder.encode(plain_json(arguments)).decode()


def plain_json(value: Any) -> Any:
    """Plain JSON for a model's own data (tool input): exactly its keys, with none of the codec's
    escaping (a ``$map`` key stays a ``$map`` key); bytes, which no model writes, are tagged."""
    if isinstance(value, Mapping):
        return {k: plain_json(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [plain_json(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(value).decode("ascii")}
    return value
