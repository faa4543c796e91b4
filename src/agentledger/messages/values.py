"""Immutable JSON-like values that may hold bytes anywhere.

Metadata, tool inputs and tool-result details are JSON-like trees supplied by callers and
providers. Inside a message they are frozen: mappings become ``FrozenMap``, lists become tuples,
bytes become ``Bytes`` (a ``bytes`` subclass the codec recognises). Freezing validates that the
tree can be encoded exactly, so a message that exists can always be stored and read back equal.

On the JSON wire a bytes value is written as ``{"$bytes": "<base64>"}``. A caller's mapping that
itself has that shape (a single key ``$bytes`` or ``$map``) is escaped as ``{"$map": {...}}``, so
no value is ever mistaken for another on the way back.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterator, Mapping
from typing import Any

from agentledger.errors import CodecError

__all__ = ["EMPTY", "Bytes", "FrozenMap", "freeze", "thaw"]

_BYTES_TAG = "$bytes"
_MAP_TAG = "$map"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1


class Bytes(bytes):
    """A bytes value inside a frozen tree; equal to, and usable as, plain ``bytes``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Bytes({bytes(self)!r})"


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping with string keys whose values are frozen JSON-like values."""

    __slots__ = ("_data", "_hash")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(data) if data else {}
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def to_json_obj(self) -> dict[str, Any]:
        """This mapping as the codec writes it (bytes tagged, colliding shapes escaped)."""
        out = self._data
        if len(out) == 1 and (_BYTES_TAG in out or _MAP_TAG in out):
            return {_MAP_TAG: out}
        return out


EMPTY = FrozenMap()


def freeze(value: Any, *, _path: str = "$") -> Any:
    """Return an immutable copy of a JSON-like tree, validating that JSON can hold it exactly.

    Accepts str, int (64-bit), finite float, bool, None, bytes, mappings with string keys, lists
    and tuples. Raises ``CodecError`` naming the path of the first value it cannot hold.
    """
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, int):
        if not _INT_MIN <= value <= _INT_MAX:
            raise CodecError(f"integer at {_path} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CodecError(f"non-finite float at {_path} cannot be stored as JSON")
        return value
    if isinstance(value, FrozenMap):
        return value
    if isinstance(value, Bytes):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return Bytes(value)
    if isinstance(value, Mapping):
        frozen = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodecError(f"mapping key {key!r} at {_path} is not a string")
            frozen[key] = freeze(item, _path=f"{_path}.{key}")
        return FrozenMap(frozen) if frozen else EMPTY
    if isinstance(value, (list, tuple)):
        return tuple(freeze(item, _path=f"{_path}[{i}]") for i, item in enumerate(value))
    raise CodecError(f"value of type {type(value).__name__} at {_path} is not JSON-like")


def freeze_map(value: Mapping[str, Any] | None) -> FrozenMap:
    """Freeze a mapping argument (``None`` and empty give the shared empty map)."""
    if value is None:
        return EMPTY
    if isinstance(value, FrozenMap):
        return value
    if not isinstance(value, Mapping):
        raise CodecError(f"expected a mapping, got {type(value).__name__}")
    frozen = freeze(value)
    return frozen if isinstance(frozen, FrozenMap) else EMPTY


def thaw(value: Any) -> Any:
    """A plain, mutable copy of a frozen tree: dicts, lists and ``bytes``."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    if isinstance(value, Bytes):
        return bytes(value)
    return value


def json_enc_hook(obj: Any) -> Any:
    """msgspec ``enc_hook``: how frozen values are written to JSON."""
    if isinstance(obj, Bytes):
        return {_BYTES_TAG: base64.b64encode(obj).decode("ascii")}
    if isinstance(obj, FrozenMap):
        return obj.to_json_obj()
    raise NotImplementedError(f"cannot encode {type(obj).__name__}")


_SCALARS = frozenset((str, int, float, bool, type(None)))


def json_dec_hook(type_: type, obj: Any) -> Any:
    """msgspec ``dec_hook``: rebuild a ``FrozenMap`` field from decoded JSON."""
    if type_ is FrozenMap:
        if not isinstance(obj, dict):
            raise CodecError(f"expected a JSON object, got {type(obj).__name__}")
        if not obj:
            return EMPTY
        if all(type(v) in _SCALARS for v in obj.values()):  # the common, flat case
            frozen = FrozenMap.__new__(FrozenMap)
            frozen._data, frozen._hash = obj, None
            return frozen
        return _from_json_map(obj)
    raise NotImplementedError(f"cannot decode {type_.__name__}")


def _from_json(obj: Any) -> Any:
    if isinstance(obj, dict):
        if len(obj) == 1:
            if _BYTES_TAG in obj:
                try:
                    return Bytes(base64.b64decode(obj[_BYTES_TAG], validate=True))
                except (ValueError, TypeError) as exc:
                    raise CodecError(f"bad base64 in {_BYTES_TAG} value: {exc}") from None
            if _MAP_TAG in obj:
                return FrozenMap({k: _from_json(v) for k, v in obj[_MAP_TAG].items()})
        return FrozenMap({k: _from_json(v) for k, v in obj.items()}) if obj else EMPTY
    if isinstance(obj, list):
        return tuple(_from_json(item) for item in obj)
    return obj


def _from_json_map(obj: dict[str, Any]) -> FrozenMap:
    frozen = _from_json(obj)
    if not isinstance(frozen, FrozenMap):  # a top-level {"$bytes": ...} is not a mapping
        raise CodecError("a metadata object decoded to a non-mapping value")
    return frozen
