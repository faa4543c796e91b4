"""Large inline media is stored once per store, by content digest, not once per message row.

A screenshot that stays in the context is otherwise copied into every replaced row, every fork
and every export. Before a message is written, each inline media block whose data is at least
``MEDIA_THRESHOLD`` bytes is swapped for a reference (a ``url`` that starts with a NUL character,
which no real URL can), and its bytes go to the store's blob table. Loading swaps them back, so
callers only ever see the message they saved. The message digest is always that of the full
message, so equality is unaffected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from agentledger.messages import Msg, ToolResultBlock, canonical_bytes, decode, digest_of
from agentledger.messages.blocks import _Media

__all__ = ["MEDIA_THRESHOLD", "externalize", "internalize"]

MEDIA_THRESHOLD = 4096
_PREFIX = "\x00blob:"
_MARKER = b"\\u0000blob:"  # how msgspec writes the prefix inside a JSON string
_REF = re.compile(rb"\\u0000blob:([0-9a-f]{32})\"")


def _swap_out(block: object, blobs: dict[bytes, bytes]) -> object:
    if isinstance(block, _Media) and block.data is not None and len(block.data) >= MEDIA_THRESHOLD:
        digest = digest_of(block.data)
        blobs[digest] = block.data
        return block.replace(data=None, url=_PREFIX + digest.hex())
    if isinstance(block, ToolResultBlock) and any(isinstance(b, _Media) for b in block.output):
        return block.replace(output=tuple(_swap_out(b, blobs) for b in block.output))
    return block


def externalize(msg: Msg, canonical: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    """The storage body of ``msg`` and the blobs it references (``canonical`` if none)."""
    if b'"data":' not in canonical:
        return canonical, {}
    blobs: dict[bytes, bytes] = {}
    content = tuple(_swap_out(b, blobs) for b in msg.content)
    if not blobs:
        return canonical, {}
    return canonical_bytes(msg.replace(content=content)), blobs


def blob_refs(body: bytes) -> list[bytes]:
    """Digests of the blobs a storage body references.

    Only the exact reference shape counts, so message text that happens to contain the prefix
    is never mistaken for a reference (at worst it keeps a blob alive a little longer).
    """
    return [bytes.fromhex(m.decode("ascii")) for m in _REF.findall(body)]


def _swap_in(block: object, blobs: dict[bytes, bytes]) -> object:
    if isinstance(block, _Media) and block.url is not None and block.url.startswith(_PREFIX):
        return block.replace(data=blobs[bytes.fromhex(block.url[len(_PREFIX) :])], url=None)
    if isinstance(block, ToolResultBlock):
        return block.replace(output=tuple(_swap_in(b, blobs) for b in block.output))
    return block


def internalize(
    body: bytes, digest: bytes, fetch: Callable[[Sequence[bytes]], dict[bytes, bytes]]
) -> Msg:
    """Decode a storage body that references blobs, putting the media bytes back."""
    msg = decode(body)
    blobs = fetch(blob_refs(body))
    restored = msg.replace(content=tuple(_swap_in(b, blobs) for b in msg.content))
    restored._set_digest(digest)
    return restored


def has_refs(body: bytes) -> bool:
    return _MARKER in body
