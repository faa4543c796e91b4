"""Which media each provider takes, the text note that stands in for the rest, and data URLs.

A request a provider refuses helps no one, and dropping a media block silently would make the
model answer as if it had never been shown anything. So each converter sends a media block only
where and in the form its API documents, and replaces any other with one text part, the
*media note*:

    [<kind> (<media type>)[ at <url>] omitted: <why>]

for example ``[audio (audio/ogg) omitted: OpenAI takes only wav and mp3 audio]``. The stored
message keeps the media; only the request carries the note. What is accepted:

- OpenAI chat: images (png, jpeg, gif, webp inline; any URL) and audio (``input_audio``, inline
  wav or mp3 only) and PDF files (inline ``file_data``, which must carry a ``filename``, or a
  ``file_id``), in user messages only.
- OpenAI Responses: images (png, jpeg, gif, webp inline; any URL; a ``file_id``) and files
  (inline PDF, a ``file_url``, a ``file_id``); a part read from Responses goes back as it was.
- Anthropic: images (jpeg, png, gif, webp inline; any URL), documents (PDF inline or by URL,
  plain text inline), Files-API handles; in user turns and tool results. ``image/jpg``, which
  some clients write, is sent as ``image/jpeg``.

A block whose ``url`` is a provider's file handle (``PROVIDER_FILE_KEY``: an OpenAI ``file_id``,
an Anthropic Files-API id, an AG-UI client's ``file`` source) is not a URL: it means something
only to the provider that issued it, and only for the media that provider takes by handle.
``refused_handle`` makes that decision for every writer and every media kind, so a handle is
never sent as an image URL (the API takes the request's types, then refuses the request, and
every later one carrying the same history).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import urllib.parse
from typing import Literal

from agentledger.errors import UserError
from agentledger.messages.blocks import Block, FileBlock, ImageBlock, MediaBlock
from agentledger.wire.private import PROVIDER_FILE_KEY, block_type

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "OPENAI_AUDIO_FORMATS",
    "OPENAI_IMAGE_TYPES",
    "MediaTarget",
    "b64decode",
    "data_url",
    "default_filename",
    "handle_issuer",
    "media_note",
    "normal_media_type",
    "openai_refused_type",
    "parse_data_url",
    "refused_handle",
]

OPENAI_IMAGE_TYPES = frozenset(("image/png", "image/jpeg", "image/gif", "image/webp"))
OPENAI_AUDIO_FORMATS = {
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/vnd.wave": "wav",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
}
"""Media type -> ``input_audio.format``; the API takes only ``wav`` and ``mp3``."""

ANTHROPIC_IMAGE_TYPES = frozenset(("image/jpeg", "image/png", "image/gif", "image/webp"))

_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}

MediaTarget = Literal["openai", "responses", "anthropic"]
"""A format that sends media to a provider: OpenAI chat, OpenAI Responses, Anthropic."""

_TARGET_NAMES = {"openai": "OpenAI chat", "responses": "OpenAI Responses", "anthropic": "Anthropic"}
_ISSUERS = {"openai": "openai", "responses": "openai", "anthropic": "anthropic"}
#: The media kinds (``block_type``) each target takes by a file handle of its provider's.
_BY_HANDLE = {
    "openai": frozenset(("file",)),  # a file part's file_id; images only by URL or inline
    "responses": frozenset(("image", "file")),  # input_image / input_file file_id
    "anthropic": frozenset(("image", "file")),  # a Files-API source of an image or document
}


def openai_refused_type(block: MediaBlock) -> str | None:
    """Why OpenAI (chat and Responses alike) refuses ``block``'s inline data for its media type
    (the media note's reason), or ``None``: images must be png, jpeg, gif or webp, files PDF."""
    if block.data is None:
        return None
    media_type = normal_media_type(block.media_type)
    if isinstance(block, ImageBlock) and media_type not in OPENAI_IMAGE_TYPES:
        return "OpenAI takes png, jpeg, gif and webp images"
    if isinstance(block, FileBlock) and media_type != "application/pdf":
        return "OpenAI takes only inline PDF files and its own file ids"
    return None


def handle_issuer(block: MediaBlock) -> str | None:
    """Who issued the file handle ``block.url`` is (``PROVIDER_FILE_KEY``: ``"openai"``,
    ``"anthropic"``, ``""`` when unknown), or ``None`` when the block holds inline data or a
    URL anyone can fetch."""
    if block.data is not None or PROVIDER_FILE_KEY not in block.metadata:
        return None
    issuer = block.metadata[PROVIDER_FILE_KEY]
    return issuer if isinstance(issuer, str) else ""


def refused_handle(block: MediaBlock, target: MediaTarget) -> str | None:
    """Why ``target`` cannot take ``block`` by its file handle (the media note's reason), or
    ``None``: the block holds no handle, or its handle is one ``target`` takes for that kind."""
    issuer = handle_issuer(block)
    if issuer is None:
        return None
    name = _TARGET_NAMES[target]
    if issuer != _ISSUERS[target]:
        return f"a file handle issued by {issuer or 'an unknown provider'} means nothing to {name}"
    kind = block_type(block)
    if kind not in _BY_HANDLE[target]:
        return f"{name} takes no {kind} by file id"
    return None


def normal_media_type(media_type: str) -> str:
    """The registered spelling of a media type: lower case, parameters dropped, common aliases
    (``image/jpg``) resolved."""
    base = media_type.split(";", 1)[0].strip().lower()
    return _ALIASES.get(base, base)


def default_filename(block: MediaBlock) -> str:
    """A file name for a file sent without one (OpenAI refuses inline files without a name)."""
    extension = mimetypes.guess_extension(normal_media_type(block.media_type)) or ".bin"
    return f"{block_type(block)}{extension}"


def media_note(block: Block, why: str) -> str:
    """The text that stands in for a media block a provider does not take here."""
    media_type = getattr(block, "media_type", "")
    url = getattr(block, "url", None)
    handle = PROVIDER_FILE_KEY in getattr(block, "metadata", {})
    where = f" at {url}" if url and not handle else ""
    return f"[{block_type(block)} ({media_type}){where} omitted: {why}]"


def data_url(media_type: str, data: bytes | None) -> str:
    """A base64 ``data:`` URL."""
    return f"data:{media_type};base64,{base64.b64encode(data or b'').decode('ascii')}"


def parse_data_url(url: str) -> tuple[str, bytes] | None:
    """``(media_type, bytes)`` of a ``data:`` URL, ``None`` for any other URL."""
    if not url.startswith("data:"):
        return None
    header, sep, payload = url[5:].partition(",")
    if not sep:
        raise UserError("malformed data: URL (no comma)")
    params = header.split(";")
    media_type = params[0] or "text/plain"
    if "base64" not in params[1:]:
        return media_type, urllib.parse.unquote_to_bytes(payload)
    return media_type, b64decode(payload)


def b64decode(text: str) -> bytes:
    """Strict base64 (``UserError`` for anything else)."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise UserError(f"invalid base64 data: {exc}") from None
