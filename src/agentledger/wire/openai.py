"""OpenAI chat-completions messages ↔ ``Msg``.

``to_openai`` writes the dicts the chat-completions API (and the many servers that copy it: vLLM,
llama.cpp, Ollama, DeepSeek) accepts; ``from_openai`` reads them, including the dicts a caller
keeps as its own history, which is how ``Ledger.sync`` persists them.

Mapping, and where the format cannot carry something:

- One ``Msg`` per OpenAI message, except that a ``Msg(role="tool")`` holding several results
  becomes one ``tool`` message per result, consecutive assistant messages are merged where
  Chat Completions needs one (calls before the last of them; a message of thinking alone goes
  with the next one), and an assistant message that sends nothing (thinking alone not written
  back as reasoning, blank text) is left out: strict servers refuse an assistant message with
  nothing in it. ``from_openai`` never regroups, so position ``i`` of the input is always
  message ``i`` of the output.
- Ids: OpenAI messages have none. ``include_ids=True`` writes ``Msg.id`` as a non-standard
  top-level ``"id"`` (the second and later results of a tool message get ``f"{id}:{n}"``); leave
  it off for strict providers, which reject unknown keys. ``from_openai`` reads ``"id"`` when
  present. Otherwise ``ids="given"`` makes a fresh id and ``ids="derived"`` derives one from the
  content and its occurrence (the first dict of that content, the second ...), so the same dicts
  always give the same messages, wherever other dicts were dropped or inserted around them.
- Reasoning is read from ``reasoning_content`` (vLLM, DeepSeek, llama.cpp) or ``reasoning``. It is
  written back only when asked (``reasoning=``): OpenAI and strict compatible servers reject the
  key, and a server should get back only the reasoning it wrote itself. Signed and redacted
  reasoning (Anthropic's) is never written.
- A refusal (``refusal``, streamed or a ``refusal`` content part) is a text block marked
  ``{"refusal": True}`` and is written back as ``refusal``, never as ``content``.
- Tool-call arguments are a JSON string; arguments that are not a JSON object are kept verbatim
  (see ``private``). ``is_error`` and tool-result names are not part of the format: names are
  recovered from the matching call, ``is_error`` is lost.
- Media: user messages carry images (``image_url``: png, jpeg, gif, webp as data URLs, or
  links), audio (``input_audio``: inline wav or mp3) and files (``file``: inline PDF
  ``file_data``, named ``file.pdf`` when the block has no name, or an OpenAI ``file_id``).
  Anything the API refuses at a given place (other media types, video, audio by URL, an image
  by file id, another provider's file handle, media in system/assistant/tool messages) becomes
  the media note of ``wire.media``, so the request stays valid; the stored message keeps the
  media.
- ``developer`` messages read as ``system`` and are written back as ``developer``. Top-level keys
  starting with ``_`` go into ``Msg.metadata`` (private) and are never written back; metadata is
  never written at all.
- Nothing read is dropped: a key that has no field here (``audio``, ``function_call``,
  ``annotations`` on a message, ``cache_control`` on a part, an unknown key inside
  ``image_url`` ...) is kept verbatim in the private metadata key ``_openai`` of the message,
  block or tool call it came with (``{"image_url": {...}}`` for a nested one). Being private, it
  never reaches a provider; a value JSON cannot hold is refused, naming its path.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any, Literal

from agentledger.errors import UserError
from agentledger.messages.blocks import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    MediaBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from agentledger.messages.ids import new_id
from agentledger.messages.msg import Msg
from agentledger.messages.values import thaw
from agentledger.wire.media import (
    OPENAI_AUDIO_FORMATS,
    b64decode,
    data_url,
    default_filename,
    handle_issuer,
    media_note,
    normal_media_type,
    openai_refused_type,
    parse_data_url,
    refused_handle,
)
from agentledger.wire.private import (
    OPENAI_EXTRA_KEY,
    PROVIDER_FILE_KEY,
    REASONING_SOURCE_KEY,
    REFUSAL_KEY,
    SOURCE_ROLE_KEY,
    Occurrences,
    arguments_text,
    content_key,
    keep_unknown,
    occurrence_id,
    private_keys,
    require_fits,
)
from agentledger.wire.tool_ids import ToolIds, restore_ids
from agentledger.wire.validate import is_empty_assistant

__all__ = [
    "OPENAI_ID_PREFIX",
    "IdMode",
    "derived_id",
    "from_dict",
    "from_live_list",
    "from_openai",
    "to_openai",
]

IdMode = Literal["given", "derived"]
#: How the ids ``from_openai(ids="derived")`` makes begin.
OPENAI_ID_PREFIX = "oai-"
_REFUSAL = "refusal"
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}
# The keys of each chat message that have a field here; any other is kept (see ``keep_unknown``).
_COMMON = frozenset(("role", "content", "name", "id"))
_KNOWN_KEYS = {
    "system": _COMMON,
    "user": _COMMON,
    "assistant": _COMMON | {_REFUSAL, "tool_calls", "reasoning_content"},
    "tool": _COMMON | {"tool_call_id"},
}
_PART_KEYS = {
    "text": ("text", None),
    _REFUSAL: (_REFUSAL, None),
    "image_url": ("image_url", frozenset(("url", "detail"))),
    "input_audio": ("input_audio", frozenset(("data", "format"))),
    "file": ("file", frozenset(("file_data", "file_id", "filename"))),
    "video_url": ("video_url", frozenset(("url",))),
}


# -- Msg -> OpenAI ------------------------------------------------------------------------------
def to_openai(
    msgs: Iterable[Msg],
    *,
    include_ids: bool = False,
    reasoning: bool | str = False,
    tool_ids: ToolIds | None = None,
) -> list[dict[str, Any]]:
    """Chat-completions message dicts for ``msgs`` (new dicts; nothing private is written).

    ``reasoning`` says which thinking is written as ``reasoning_content``: none (``False``, the
    default: OpenAI and strict compatible servers reject the key), every unsigned thinking block
    (``True``), or only the blocks a given server wrote (its source tag, see
    ``REASONING_SOURCE_KEY``). Tool-call ids longer than OpenAI takes are mapped (``tool_ids``,
    see ``wire.tool_ids``; pass one to map the reply's ids back).
    """
    if not isinstance(reasoning, (bool, str)):
        raise UserError(f"reasoning must be a bool or a source tag, got {reasoning!r}")
    ids = ToolIds("openai") if tool_ids is None else tool_ids
    out: list[dict[str, Any]] = []
    for msg in _turns(msgs):
        if msg.role == "tool":
            out.extend(_tool_dicts(msg, include_ids, ids))
        elif msg.role != "assistant" or not _sends_nothing(msg, reasoning):
            out.append(_message_dict(msg, include_ids, reasoning, ids))
        else:  # strict servers refuse an assistant message with nothing in it
            for block in msg.content:
                require_fits(msg, block)
    return out


def _sends_nothing(msg: Msg, reasoning: bool | str) -> bool:
    """Whether the assistant ``msg`` would be written with nothing in it: no block it sends
    (``validate.sends``: thinking alone, blank text) and no reasoning written back."""
    return is_empty_assistant(msg, "openai") and not any(
        _sent_reasoning(b, reasoning) for b in msg.content
    )


def _turns(msgs: Iterable[Msg]) -> list[Msg]:
    """``msgs`` with each run of consecutive assistant messages made into what Chat Completions
    takes. A message that sends nothing (``validate.sends``: its thinking is not sent) is folded
    into the next one of its run, so its thinking goes with the answer or the calls it led to;
    then a run that calls tools before its last message is merged into one (the first one's id
    and fields): Chat Completions wants a call's results right after the message that calls it,
    and a Responses-API history holds one call per item (and its reasoning in an item of its
    own). Other runs stay as they are, so a plain history converts message for message; a
    message that still sends nothing is left out by ``to_openai``."""
    out: list[Msg] = []
    run: list[Msg] = []
    for msg in [*msgs, None]:
        if msg is not None and msg.role == "assistant":
            if run and is_empty_assistant(run[-1], "openai"):
                run[-1] = _joined(run[-1], msg)
            else:
                run.append(msg)
            continue
        if len(run) > 1 and any(m.tool_calls for m in run[:-1]):
            run = [_joined(*run)]
        out.extend(run)
        run = []
        if msg is not None:
            out.append(msg)
    return out


def _joined(first: Msg, *rest: Msg) -> Msg:
    """One assistant message holding the blocks of ``first`` and ``rest`` in order, with the
    id and fields of ``first``."""
    return first.replace(content=tuple(b for m in (first, *rest) for b in m.content))


def _sent_reasoning(block: Block, reasoning: bool | str) -> bool:
    if not isinstance(block, ThinkingBlock) or block.redacted or block.signature or not reasoning:
        return False
    return reasoning is True or block.metadata.get(REASONING_SOURCE_KEY) == reasoning


def _message_dict(
    msg: Msg, include_ids: bool, reasoning: bool | str, ids: ToolIds
) -> dict[str, Any]:
    role: str = msg.role
    if role == "system" and msg.metadata.get(SOURCE_ROLE_KEY) == "developer":
        role = "developer"
    d: dict[str, Any] = {"role": role}
    if include_ids:
        d["id"] = msg.id
    if msg.name:
        d["name"] = msg.name
    for block in msg.content:
        require_fits(msg, block)
    if msg.role != "assistant":
        d["content"] = _content(msg.content, media=msg.role == "user")
        return d
    parts, refusals = [], []
    for block in msg.content:
        if isinstance(block, TextBlock) and block.metadata.get(REFUSAL_KEY) is True:
            refusals.append(block)
        elif not isinstance(block, (ThinkingBlock, ToolUseBlock)):
            parts.append(block)
    calls = msg.tool_calls
    if parts:
        d["content"] = _content(parts, media=False)
    else:  # null is the API's "nothing said" next to calls or a refusal; "" otherwise
        d["content"] = None if calls or refusals else ""
    if refusals:
        d[_REFUSAL] = "\n".join(b.text for b in refusals)
    thinking = [b.thinking for b in msg.content if _sent_reasoning(b, reasoning)]
    if thinking:
        d["reasoning_content"] = "\n".join(thinking)
    if calls:
        d["tool_calls"] = [
            {
                "id": ids.wire(c.id),
                "type": "function",
                "function": {"name": c.name, "arguments": arguments_text(c)},
            }
            for c in calls
        ]
    return d


def _tool_dicts(msg: Msg, include_ids: bool, ids: ToolIds) -> list[dict[str, Any]]:
    out = []
    for n, block in enumerate(msg.content):
        require_fits(msg, block)
        assert isinstance(block, ToolResultBlock)
        d: dict[str, Any] = {"role": "tool", "tool_call_id": ids.wire(block.id)}
        if include_ids:
            d["id"] = msg.id if n == 0 else f"{msg.id}:{n}"
        d["content"] = _content(block.output, media=False)
        out.append(d)
    return out


def _content(blocks: Iterable[Block], *, media: bool) -> str | list[dict[str, Any]]:
    """A plain string for zero or one text block, else a list of content parts."""
    blocks = tuple(blocks)
    if not blocks:
        return ""
    if len(blocks) == 1 and isinstance(blocks[0], TextBlock):
        return blocks[0].text
    parts = []
    for block in blocks:
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif media:
            parts.append(_media_part(block))  # type: ignore[arg-type]
        else:
            parts.append(_note(block, "OpenAI accepts media only in user messages"))  # type: ignore[arg-type]
    return parts


def _media_part(block: MediaBlock) -> dict[str, Any]:
    media_type = normal_media_type(block.media_type)
    why = refused_handle(block, "openai")
    if why is not None:
        return _note(block, why)
    refused = openai_refused_type(block)
    if isinstance(block, ImageBlock):
        if refused is not None:
            return _note(block, refused)
        image: dict[str, Any] = {"url": block.url or data_url(media_type, block.data)}
        if "detail" in block.metadata:
            image["detail"] = thaw(block.metadata["detail"])  # as given, which may be any JSON
        return {"type": "image_url", "image_url": image}
    if isinstance(block, AudioBlock):
        fmt = OPENAI_AUDIO_FORMATS.get(media_type)
        if block.data is None or fmt is None:
            return _note(block, "OpenAI takes only inline wav and mp3 audio")
        data = base64.b64encode(block.data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": data, "format": fmt}}
    if isinstance(block, FileBlock):
        if handle_issuer(block) is not None:  # OpenAI's own: refused_handle let it through
            file: dict[str, Any] = {"file_id": block.url}
            if block.filename:
                file["filename"] = block.filename
        elif block.data is not None and refused is None:  # a PDF
            filename = block.filename or default_filename(block)
            file = {"file_data": data_url(media_type, block.data), "filename": filename}
        else:
            return _note(block, "OpenAI takes only inline PDF files and its own file ids")
        return {"type": "file", "file": file}
    return _note(block, "not supported in OpenAI chat messages")


def _note(block: MediaBlock, why: str) -> dict[str, Any]:
    return {"type": "text", "text": media_note(block, why)}


# -- OpenAI -> Msg ------------------------------------------------------------------------------
def from_openai(
    dicts: Iterable[Mapping[str, Any]], *, ids: IdMode = "given", tool_ids: ToolIds | None = None
) -> list[Msg]:
    """One ``Msg`` per chat-completions dict, in order. The dicts are only read, never changed.

    ``ids="derived"`` gives a dict without an ``"id"`` an id derived from its content and how
    many dicts of the same content come before it (``derived_id``), so converting the same
    dicts twice gives equal messages with equal digests (``created_at`` is ``None`` in both
    modes, for the same reason), and so does converting them after other dicts were dropped,
    inserted or moved around them. ``tool_ids``: the mapping ``to_openai`` used, to read mapped
    tool-call ids back as the stored ones.
    """
    if ids not in ("given", "derived"):
        raise UserError(f'ids must be "given" or "derived", got {ids!r}')
    return restore_ids(_convert(dicts, ids, msgs_allowed=False), tool_ids)


def from_live_list(items: Iterable[Msg | Mapping[str, Any]]) -> list[Msg]:
    """A caller's live list of ``Msg`` and chat dicts, converted as one list (for ``sync``).

    Dicts convert exactly as ``from_openai(ids="derived")`` converts them in an all-dict list:
    a tool result's name comes from the matching call whether that call is a dict or a ``Msg``,
    so a list converts to the same messages however it mixes the two.
    """
    return _convert(items, "derived", msgs_allowed=True)


def _convert(items: Iterable[Any], ids: IdMode, *, msgs_allowed: bool) -> list[Msg]:
    names: dict[str, str] = {}  # tool call id -> tool name, to name the results
    occurrences = Occurrences()
    out = []
    for index, d in enumerate(items):
        if msgs_allowed and isinstance(d, Msg):
            names.update((call.id, call.name) for call in d.tool_calls)
            out.append(d)
            continue
        if not isinstance(d, Mapping):
            allowed = "a Msg or a mapping" if msgs_allowed else "a mapping"
            raise UserError(f"message {index} is a {type(d).__name__}, not {allowed}")
        derive = partial(_occurrence_id, occurrences, d, index)
        out.append(from_dict(d, index, names, derive if ids == "derived" else new_id))
    return out


def _occurrence_id(occurrences: Occurrences, d: Mapping[str, Any], index: int) -> str:
    return occurrences.derive(OPENAI_ID_PREFIX, d, f"message {index}")[0]


def derived_id(d: Mapping[str, Any], occurrence: int = 0) -> str:
    """The id ``from_openai(ids="derived")`` gives a dict without one: the
    ``occurrence``-th dict (from 0) of a list with ``d``'s public content gets ``"oai-"`` and
    the BLAKE2b-128 hex of ``occurrence`` and that content's key (``private.Occurrences``)."""
    return occurrence_id(OPENAI_ID_PREFIX, content_key(d, "the message"), occurrence)


def from_dict(
    d: Mapping[str, Any], index: int, names: dict[str, str], fallback_id: Callable[[], str]
) -> Msg:
    """The message of chat dict ``d``, message ``index`` of its list (for errors); a dict
    without an ``"id"`` gets ``fallback_id()``. ``names`` maps the tool-call ids of the list so
    far to their tools' names: a tool result is named from it, and the calls ``d`` makes are
    added to it."""
    try:
        return _from_dict(d, index, names, fallback_id)
    except (KeyError, TypeError, AttributeError) as exc:
        raise UserError(f"message {index} is malformed: {exc!r}") from None


def _from_dict(
    d: Mapping[str, Any], index: int, names: dict[str, str], fallback_id: Callable[[], str]
) -> Msg:
    role = d.get("role")
    metadata = private_keys(d, f"message {index}")
    given = d.get("id")
    if given is not None and (not isinstance(given, str) or not given):
        raise UserError(f"message {index}: id must be a non-empty string, got {given!r}")
    msg_id = given or fallback_id()
    content: list[Block] = []
    if role == "developer":
        role = "system"
        metadata[SOURCE_ROLE_KEY] = "developer"
    if role not in _KNOWN_KEYS:
        raise UserError(f"message {index}: unsupported role {role!r}")
    known = _KNOWN_KEYS[role]
    if role in ("system", "user"):
        content.extend(_blocks(d.get("content"), index))
    elif role == "assistant":
        reasoning = d.get("reasoning_content")
        if not reasoning:  # servers that call it "reasoning" (only one of the two is read)
            reasoning, known = d.get("reasoning"), known | {"reasoning"}
        if reasoning:
            content.append(ThinkingBlock(thinking=reasoning))
        content.extend(_blocks(d.get("content"), index))
        if d.get(_REFUSAL):
            content.append(TextBlock(text=d[_REFUSAL], metadata={REFUSAL_KEY: True}))
        for call in d.get("tool_calls") or ():
            content.append(_tool_use(call, index, names))
    else:
        call_id = d.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise UserError(f"message {index}: a tool message needs a tool_call_id")
        output = _blocks(d.get("content"), index)
        name = d.get("name") or names.get(call_id, "")
        content.append(ToolResultBlock(id=call_id, name=name, output=output))  # type: ignore[arg-type]
        keep_unknown(d, known, OPENAI_EXTRA_KEY, metadata)
        return Msg("tool", content, id=msg_id, metadata=metadata, created_at=None)
    keep_unknown(d, known, OPENAI_EXTRA_KEY, metadata)
    name = d.get("name") or None
    return Msg(role, content, id=msg_id, name=name, metadata=metadata, created_at=None)  # type: ignore[arg-type]


def _tool_use(call: Any, index: int, names: dict[str, str]) -> ToolUseBlock:
    function = call.get("function") if isinstance(call, Mapping) else None
    call_id = call.get("id") if isinstance(call, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(call_id, str) or not call_id:
        raise UserError(f"message {index}: a tool call needs an id and a function")
    name = function.get("name") or ""
    names[call_id] = name
    # "type" is always "function" for the calls read here; any other value is kept
    known = frozenset(("id", "function", "type")) if call.get("type") == "function" else None
    metadata = keep_unknown(call, known or frozenset(("id", "function")), OPENAI_EXTRA_KEY)
    _keep_nested(function, "function", frozenset(("name", "arguments")), metadata)
    text = function.get("arguments")
    if text is not None and not isinstance(text, str):
        raise UserError(f"message {index}: tool call {call_id!r} has arguments that are not text")
    return ToolUseBlock(id=call_id, name=name, arguments=text, metadata=metadata)


def _keep_nested(
    obj: Mapping[str, Any], field: str, known: frozenset[str], metadata: dict[str, Any]
) -> None:
    """Keep the unknown keys of a nested object ``field`` as ``{field: {...}}`` in the extras."""
    unknown = keep_unknown(obj, known, field)
    if unknown:
        metadata[OPENAI_EXTRA_KEY] = {**metadata.get(OPENAI_EXTRA_KEY, {}), **unknown}


def _blocks(content: Any, index: int) -> list[Block]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    if not isinstance(content, (list, tuple)):
        raise UserError(f"message {index}: content must be a string or a list of parts")
    return [_part(part, index) for part in content]


def _part(part: Any, index: int) -> Block:
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind not in _PART_KEYS:
        raise UserError(f"message {index}: unsupported content part {kind!r}")
    field, nested = _PART_KEYS[kind]
    extra = keep_unknown(part, frozenset(("type", field)), OPENAI_EXTRA_KEY)
    inner = part.get(field)
    if nested is not None and isinstance(inner, Mapping):
        _keep_nested(inner, field, nested, extra)
    block = _part_block(kind, part, index)
    if extra:
        block = block.replace(metadata={**block.metadata, **extra})
    return block


def _part_block(kind: str, part: Mapping[str, Any], index: int) -> Block:
    if kind == "text":
        return TextBlock(text=part.get("text", ""))
    if kind == _REFUSAL:
        return TextBlock(text=part.get(_REFUSAL, ""), metadata={REFUSAL_KEY: True})
    if kind == "image_url":
        image = part["image_url"]
        image = image if isinstance(image, Mapping) else {"url": image}
        extra = {"detail": image["detail"]} if image.get("detail") else None
        parsed = parse_data_url(image["url"])
        if parsed:
            return ImageBlock(media_type=parsed[0], data=parsed[1], metadata=extra)
        guessed = mimetypes.guess_type(image["url"])[0] or "image/*"
        return ImageBlock(media_type=guessed, url=image["url"], metadata=extra)
    if kind == "input_audio":
        audio = part["input_audio"]
        fmt = audio.get("format", "wav")
        media_type = _AUDIO_TYPES.get(fmt, f"audio/{fmt}")
        return AudioBlock(media_type=media_type, data=b64decode(audio["data"]))
    if kind == "file":
        return _file(part["file"], index)
    # video_url: not OpenAI's, but some compatible servers take it
    return VideoBlock(media_type="video/*", url=part["video_url"]["url"])


def _file(file: Mapping[str, Any], index: int) -> FileBlock:
    filename = file.get("filename")
    guessed = (filename and mimetypes.guess_type(filename)[0]) or "application/octet-stream"
    if file.get("file_id"):
        return FileBlock(
            media_type=guessed,
            url=file["file_id"],
            filename=filename,
            metadata={PROVIDER_FILE_KEY: "openai"},
        )
    raw = file.get("file_data")
    if not isinstance(raw, str):
        raise UserError(f"message {index}: a file part needs file_data or file_id")
    parsed = parse_data_url(raw)
    if parsed is None:
        parsed = (guessed, b64decode(raw))
    return FileBlock(media_type=parsed[0], data=parsed[1], filename=filename)
