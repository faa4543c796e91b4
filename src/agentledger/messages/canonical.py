"""The canonical encoding and the digest: the bytes that define what a value is.

Compact JSON with every object's keys (and every struct's fields, the ``type`` tag included)
sorted, bytes tagged (see ``values``), on one line. Blocks compare by these bytes; a message's
digest is BLAKE2b-128 of them. Everything that encodes or checks a digest uses this one encoder,
which is why it sits below blocks, messages and the codec.
"""

from __future__ import annotations

import hashlib
from functools import partial
from typing import Any

import msgspec

from agentledger.errors import CodecError
from agentledger.messages.values import json_enc_hook

__all__ = ["DIGEST_SIZE", "ENCODE_ERRORS", "digest_of", "encode_raw", "encode_struct", "hasher"]

DIGEST_SIZE = 16

_encoder = msgspec.json.Encoder(enc_hook=json_enc_hook, order="sorted")

#: What the encoder may raise for a value it cannot write.
ENCODE_ERRORS = (TypeError, ValueError, NotImplementedError, OverflowError, RecursionError)

#: ``encode_struct`` without its error translation, for a loop that catches ``ENCODE_ERRORS``
#: itself (a C method: no Python call per message).
encode_raw = _encoder.encode

#: A new BLAKE2b-128 hash object (``hasher(data).digest()`` is ``digest_of(data)``, from C).
hasher = partial(hashlib.blake2b, digest_size=DIGEST_SIZE)


def encode_struct(obj: Any) -> bytes:
    """Canonical JSON for a block, a message record or a frozen value."""
    try:
        return _encoder.encode(obj)
    except ENCODE_ERRORS as exc:
        raise CodecError(f"cannot encode {type(obj).__name__}: {exc}") from None


def digest_of(data: bytes) -> bytes:
    """The digest agentledger uses for canonical bytes."""
    return hasher(data).digest()
