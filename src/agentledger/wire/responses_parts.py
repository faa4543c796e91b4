"""Content parts of Responses-API items ↔ content blocks.

A part of a ``message`` item's ``content`` list, or of a ``function_call_output``'s ``output``
list, becomes one block. What a block has no field for (the part's ``type``, ``annotations`` and
``logprobs`` of ``output_text``, a ``prompt_cache_breakpoint``, an unknown key) is kept verbatim
in the block's private metadata key ``_responses`` and written back as it was. A block that
carries that key came from a list part; a block without it is written in the default form of
its place, which is also how a message that came from another format is written.

Inline data is decoded to bytes only when writing the bytes back gives the very same string
(a ``data:<type>;base64,`` URL in its canonical form); any other spelling is kept as it was, so
a round trip never changes a payload.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from typing import Any

from agentledger.errors import UserError
from agentledger.messages.blocks import (
    Block,
    FileBlock,
    ImageBlock,
    MediaBlock,
    TextBlock,
)
from agentledger.messages.values import thaw
from agentledger.wire.media import (
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
from agentledger.wire.private import PROVIDER_FILE_KEY, RESPONSES_EXTRA_KEY, keep_unknown

__all__ = ["RESPONSES_EXTRA_KEY", "block_part", "extras_of", "part_block"]


_REFUSAL = "refusal"
_PAYLOAD_KEYS = {
    "input_text": frozenset(("text",)),
    "output_text": frozenset(("text",)),
    _REFUSAL: frozenset((_REFUSAL,)),
    "input_image": frozenset(("image_url", "file_id", "detail")),
    "input_file": frozenset(("file_data", "file_id", "file_url", "filename")),  # detail: kept
}


def extras_of(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The verbatim Responses keys kept in ``metadata`` (plain JSON), or None."""
    extra = metadata.get(RESPONSES_EXTRA_KEY)
    return thaw(extra) if isinstance(extra, Mapping) else None


# -- part -> block ------------------------------------------------------------------------------
def part_block(part: Any, where: str) -> Block:
    """The block for one content part (see the module docstring)."""
    kind = part.get("type") if isinstance(part, Mapping) else None
    if kind not in _PAYLOAD_KEYS:
        raise UserError(f"{where}: unsupported content part {kind!r}")
    extra = keep_unknown(part, _mapped(kind, part), RESPONSES_EXTRA_KEY)
    extra.setdefault(RESPONSES_EXTRA_KEY, {})
    if kind in ("input_text", "output_text"):
        return TextBlock(text=_str(part, "text", where), metadata=extra)
    if kind == _REFUSAL:
        return TextBlock(text=_str(part, _REFUSAL, where), metadata={**extra, _REFUSAL: True})
    if kind == "input_image":
        if part.get("detail") is not None:  # public, where the chat converter reads it too
            extra["detail"] = part["detail"]
        return _image(part, extra, where)
    return _file(part, extra, where)


def _mapped(kind: str, part: Mapping[str, Any]) -> frozenset[str]:
    """The keys of ``part`` that become block fields; any other (a second source, a null) is
    kept verbatim."""
    if kind == "input_image":
        source = "file_id" if part.get("file_id") else "image_url"
        return frozenset((source, "detail") if part.get("detail") is not None else (source,))
    if kind == "input_file":
        source = next((k for k in ("file_id", "file_url") if part.get(k)), "file_data")
        named = isinstance(part.get("filename"), str)
        return frozenset((source, "filename") if named else (source,))
    return _PAYLOAD_KEYS[kind]


def _str(part: Mapping[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise UserError(f"{where}: a {part.get('type')} part needs a string {key!r}")
    return value


def _image(part: Mapping[str, Any], extra: dict[str, Any], where: str) -> ImageBlock:
    if part.get("file_id"):
        return ImageBlock(
            media_type="image/*",
            url=part["file_id"],
            metadata={**extra, PROVIDER_FILE_KEY: "openai"},
        )
    url = part.get("image_url")
    if not isinstance(url, str) or not url:
        raise UserError(f"{where}: an input_image part needs image_url or file_id")
    inline = _canonical_data_url(url)
    if inline:
        return ImageBlock(media_type=inline[0], data=inline[1], metadata=extra)
    guessed = mimetypes.guess_type(url)[0] if not url.startswith("data:") else None
    return ImageBlock(media_type=guessed or "image/*", url=url, metadata=extra)


def _file(part: Mapping[str, Any], extra: dict[str, Any], where: str) -> FileBlock:
    filename = part.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise UserError(f"{where}: an input_file filename must be a string")
    guessed = (filename and mimetypes.guess_type(filename)[0]) or "application/octet-stream"
    if part.get("file_id"):
        meta = {**extra, PROVIDER_FILE_KEY: "openai"}
        return FileBlock(media_type=guessed, url=part["file_id"], filename=filename, metadata=meta)
    if part.get("file_url"):
        return FileBlock(
            media_type=guessed, url=part["file_url"], filename=filename, metadata=extra
        )
    raw = part.get("file_data")
    if not isinstance(raw, str):
        raise UserError(f"{where}: an input_file part needs file_data, file_id or file_url")
    inline = _canonical_data_url(raw)
    if inline is None:  # raw base64 or another spelling: decode, and keep the text as given
        parsed = parse_data_url(raw) if raw.startswith("data:") else (guessed, _b64(raw, where))
        assert parsed is not None
        extra[RESPONSES_EXTRA_KEY] = {**extra[RESPONSES_EXTRA_KEY], "file_data": raw}
        inline = parsed
    return FileBlock(media_type=inline[0], data=inline[1], filename=filename, metadata=extra)


def _canonical_data_url(url: str) -> tuple[str, bytes] | None:
    """``(media_type, bytes)`` of a data URL that ``data_url`` writes back identically."""
    if not url.startswith("data:"):
        return None
    try:
        parsed = parse_data_url(url)
    except UserError:
        return None
    if parsed is None or data_url(*parsed) != url:
        return None
    return parsed


def _b64(text: str, where: str) -> bytes:
    try:
        return b64decode(text)
    except UserError as exc:
        raise UserError(f"{where}: file_data: {exc}") from None


# -- block -> part ------------------------------------------------------------------------------
def block_part(block: Block, text_type: str, *, image_detail: bool) -> dict[str, Any]:
    """The content part for ``block``; ``text_type`` is the default type of a text part there
    (``input_text`` or ``output_text``), ``image_detail`` whether the place requires ``detail``.

    Media a Responses input cannot hold (audio, video, another provider's file handle) becomes
    the media note of ``wire.media``, and so does a block from another format that OpenAI
    refuses for its media type (a bmp image, a csv file: ``openai_refused_type``, the rule
    ``to_openai`` follows); a part read from Responses goes back as it was.
    """
    extra = extras_of(block.metadata)
    if isinstance(block, TextBlock):
        if block.metadata.get(_REFUSAL) is True:
            return {**(extra or {}), "type": _REFUSAL, _REFUSAL: block.text}
        kind = (extra or {}).get("type", text_type)
        if kind not in ("input_text", "output_text"):
            kind = text_type
        part = {**(extra or {}), "type": kind, "text": block.text}
        if kind == "output_text" and (extra or {}).get("type") != kind:
            part.setdefault("annotations", [])  # required; a part read as one has what it had
        return part
    if not isinstance(block, (ImageBlock, FileBlock)):
        return _note(block, "not supported in Responses input")
    why = refused_handle(block, "responses")
    if why is None and extra is None:  # a part read from Responses goes back as it was
        why = openai_refused_type(block)
    if why is not None:
        return _note(block, why)
    if isinstance(block, FileBlock):
        return _file_part(block, extra)
    part = {**(extra or {}), "type": "input_image"}
    if handle_issuer(block) is not None:  # OpenAI's own: refused_handle let it through
        part["file_id"] = block.url
    else:
        part["image_url"] = block.url or _data_url(block, extra)
    _detail(part, block, default="auto" if image_detail and extra is None else None)
    return part


def _detail(part: dict[str, Any], block: Block, default: str | None) -> None:
    detail = block.metadata.get("detail", default)
    if detail is not None:
        part["detail"] = thaw(detail)  # kept as the item gave it, which may be any JSON


def _file_part(block: FileBlock, extra: dict[str, Any] | None) -> dict[str, Any]:
    part = {**(extra or {}), "type": "input_file"}
    if handle_issuer(block) is not None:  # OpenAI's own: refused_handle let it through
        part["file_id"] = block.url
    elif block.url:
        part["file_url"] = block.url
    else:
        kept = part.get("file_data")
        if not (isinstance(kept, str) and _decodes_to(kept, block)):
            part["file_data"] = _data_url(block, extra)
    filename = block.filename
    if filename is None and extra is None:  # the API wants a name with inline data
        filename = default_filename(block)
    if filename is not None:
        part["filename"] = filename
    return part


def _data_url(block: MediaBlock, extra: dict[str, Any] | None) -> str:
    """The data URL of ``block``: a part read from Responses in the media type it had, any
    other in the type's registered spelling (``image/jpg`` is sent as ``image/jpeg``)."""
    media_type = block.media_type if extra is not None else normal_media_type(block.media_type)
    return data_url(media_type, block.data)


def _decodes_to(kept: str, block: FileBlock) -> bool:
    try:
        parsed = parse_data_url(kept) if kept.startswith("data:") else ("", _b64(kept, ""))
    except UserError:
        return False
    return parsed is not None and parsed[1] == block.data


def _note(block: Block, why: str) -> dict[str, Any]:
    return {"type": "input_text", "text": media_note(block, why)}
