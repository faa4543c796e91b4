"""Large inline media is stored once per store, by content digest, not once per message row.

A screenshot that stays in the context is otherwise copied into every replaced row, every fork
and every export. Before a message is written, each inline media block whose data is at least
``MEDIA_THRESHOLD`` bytes has its base64 ``data`` string replaced, in the *storage body*, by a
reference object ``{"$blob": "<digest hex>"}``, and its bytes go to the store's blob table.

The reference lives out of band: ``data`` is a bytes field, which the canonical encoding always
writes as a base64 string, so an object there is a shape no message can have, and a plain
``decode`` refuses it. Only this module reads it, and only at that position (a media block of
the content or of a tool result's output), after parsing the body: no user string, URL or
metadata key is ever taken for a reference. Loading swaps the bytes back in and gives back the
canonical encoding, whose digest (the message's) is checked when the message is first read, so
a wrong or missing blob can only ever be a ``CorruptStoreError``.

Bodies written by earlier builds marked a reference with a ``url`` starting with NUL +
``"blob:"``. Such a body still loads: the same position is read as a reference, and the digest
check decides. A user URL that happened to look like one in those builds cannot pass that check
(its message's digest covers the URL, not the blob's bytes), so it fails to load with
``CorruptStoreError`` rather than turning into another message's media. Media URLs can no longer
hold control characters (``messages.checks``), so the old form is never written again.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import msgspec

from agentledger.errors import CodecError
from agentledger.messages import Msg, ToolResultBlock, decode, digest_of
from agentledger.messages.blocks import _Media
from agentledger.messages.canonical import encode_struct

__all__ = [
    "MEDIA_THRESHOLD",
    "blob_refs",
    "decode_without_media",
    "externalize",
    "has_refs",
    "references",
    "restore",
]

MEDIA_THRESHOLD = 4096
_REF_KEY = "$blob"
_LEGACY_PREFIX = "\x00blob:"  # how earlier builds marked a reference (in ``url``)
_MARKERS = (b'"$blob":"', b"\\u0000blob:")  # either form, as it appears in a body
# Every digest a body (or a whole file of bodies) may reference, in either form: a superset,
# since a metadata key or a string can look the same (that only keeps a blob alive longer).
_ANY_REF = re.compile(rb'(?:"\$blob":"|\\u0000blob:)([0-9a-f]{32})')
_HEX = re.compile(r"[0-9a-f]{32}")
_MEDIA = frozenset(("image", "audio", "video", "file"))

_Fetch = Callable[[Sequence[bytes]], dict[bytes, bytes]]


def _large(block: object) -> bool:
    return (
        isinstance(block, _Media) and block.data is not None and len(block.data) >= MEDIA_THRESHOLD
    )


def _media_nodes(tree: Any) -> Iterator[tuple[tuple[int, int | None], dict[str, Any]]]:
    """The media blocks of a parsed body, with their (content, output) positions."""
    content = tree.get("content") if type(tree) is dict else None
    if type(content) is not list:
        return
    for i, node in enumerate(content):
        if type(node) is not dict:
            continue
        kind = node.get("type")
        if kind in _MEDIA:
            yield (i, None), node
        elif kind == "tool_result" and type(node.get("output")) is list:
            for j, inner in enumerate(node["output"]):
                if type(inner) is dict and inner.get("type") in _MEDIA:
                    yield (i, j), inner


def externalize(msg: Msg, canonical: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """The storage body of ``msg`` and the blobs it references (``canonical`` if none)."""
    if b'"data":' not in canonical:
        return canonical, {}
    large: dict[tuple[int, int | None], bytes] = {}
    for i, block in enumerate(msg.content):
        if _large(block):
            large[i, None] = block.data  # type: ignore[union-attr]
        elif isinstance(block, ToolResultBlock):
            for j, inner in enumerate(block.output):
                if _large(inner):
                    large[i, j] = inner.data  # type: ignore[union-attr]
    if not large:
        return canonical, {}
    tree = msgspec.json.decode(canonical)
    blobs: dict[bytes, bytes] = {}
    for position, node in _media_nodes(tree):
        data = large.get(position)
        if data is not None:
            digest = digest_of(data)
            blobs[digest] = data
            node["data"] = {_REF_KEY: digest.hex()}
    return encode_struct(tree), blobs


def has_refs(body: bytes) -> bool:
    """Whether ``body`` may reference blobs (a cheap test; ``internalize`` decides)."""
    return _MARKERS[0] in body or _MARKERS[1] in body


def blob_refs(body: bytes) -> list[bytes]:
    """Digests of the blobs a storage body may reference, for keeping blobs alive.

    A superset: text or a metadata key shaped like a reference adds a digest (which at worst
    keeps a blob alive a little longer), a real reference is never missed. Works on any bytes
    that hold bodies as they are, such as a whole JSONL session file.
    """
    if not has_refs(body):  # two substring searches: the regular expression has no literal
        return []  # prefix to look for, and took 8 µs over a 1.3 KB body
    return [bytes.fromhex(m.decode("ascii")) for m in _ANY_REF.findall(body)]


def _refs(tree: Any) -> list[tuple[dict[str, Any], bytes]]:
    """The blob references of a parsed body: (media node, digest), read only where a media
    block's ``data`` (or, from earlier builds, its ``url``) sits."""
    found = []
    for _, node in _media_nodes(tree):
        data = node.get("data")
        if type(data) is dict:
            ref = data.get(_REF_KEY)
            if len(data) != 1 or type(ref) is not str or not _HEX.fullmatch(ref):
                raise CodecError(f"malformed media reference {data!r}")
            found.append((node, bytes.fromhex(ref)))
        elif data is None:
            url = node.get("url")
            if type(url) is str and url.startswith(_LEGACY_PREFIX):
                ref = url[len(_LEGACY_PREFIX) :]
                if not _HEX.fullmatch(ref):
                    raise CodecError(f"malformed media reference {url!r}")
                del node["url"]
                found.append((node, bytes.fromhex(ref)))
    return found


def _parse(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise CodecError(f"not a stored message: {exc}") from None


def references(body: bytes) -> tuple[Any, list[tuple[dict[str, Any], bytes]]]:
    """A storage body parsed, with its blob references (none for most bodies)."""
    if not has_refs(body):
        return None, []
    tree = _parse(body)
    return tree, _refs(tree)


def restore(
    body: bytes, tree: Any, refs: list[tuple[dict[str, Any], bytes]], blobs: dict[bytes, bytes]
) -> bytes:
    """The canonical encoding of a stored message: ``body`` with the blobs of ``refs`` (from
    ``references``) put back. ``CodecError`` if one is missing."""
    if not refs:
        return body
    for node, digest in refs:
        data = blobs.get(digest)
        if data is None:
            raise CodecError(f"media blob {digest.hex()} is missing")
        node["data"] = base64.b64encode(data).decode("ascii")
    return encode_struct(tree)


def decode_without_media(body: bytes) -> Msg:
    """The message of a storage body with the media stored apart left empty (``data=b""``).

    For reading ids and text where the blobs are not at hand (search indexing). It is not the
    stored message (its digest differs): never save it. ``CodecError`` if it cannot be read.
    """
    tree, refs = references(body)
    return decode(restore(body, tree, refs, {digest: b"" for _, digest in refs}))
