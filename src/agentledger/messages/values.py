"""Immutable JSON-like values that may hold bytes anywhere.

Metadata, tool inputs and session values are JSON-like trees supplied by callers and providers.
Inside a message they are frozen: mappings become ``FrozenMap``, lists become tuples, bytes
become ``Bytes`` (a ``bytes`` subclass the codec recognises). Freezing copies and validates the
whole tree, so a value that exists can always be stored and read back equal, with the same
types: string keys, text UTF-8 can encode, integers that fit in 64 bits, finite floats, at most
``MAX_DEPTH`` levels of nesting (so that no decoder runs out of stack on a value we wrote).
Subclasses (an ``IntEnum`` member, a ``StrEnum`` key) become their plain type. A ``FrozenMap``
is frozen all the way down whichever way it is built, so a digest cached over one never goes
stale. ``Bytes`` and a whole exact ``FrozenMap`` are passed through without copying; a
``FrozenMap`` nested inside a new value is copied, so its depth is checked again.

On the JSON wire a bytes value is written as ``{"$bytes": "<base64>"}``. A caller's mapping that
itself has that shape (a single key ``$bytes`` or ``$map``) is escaped as ``{"$map": {...}}``, so
no value is ever mistaken for another on the way back. Decoding applies the same rules as
freezing and raises ``CodecError`` for anything freezing would refuse.
"""

from __future__ import annotations

import base64
import math
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from agentledger.errors import CodecError
from agentledger.messages.checks import lone_surrogate_at

__all__ = ["EMPTY", "MAX_DEPTH", "Bytes", "FrozenMap", "freeze", "thaw"]

_BYTES_TAG = "$bytes"
_MAP_TAG = "$map"
_INT_MIN, _INT_MAX = -(2**63), 2**64 - 1
MAX_DEPTH = 100
"""Deepest nesting of mappings and lists a frozen value may have."""


class Bytes(bytes):
    """A bytes value inside a frozen tree; equal to, and usable as, plain ``bytes``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Bytes({bytes(self)!r})"


class FrozenMap(Mapping[str, Any]):
    """A read-only mapping with string keys whose values are frozen JSON-like values.

    ``FrozenMap(mapping)`` freezes a copy of ``mapping`` all the way down (``freeze``), so no
    caller's list or dict is ever kept inside one.
    """

    __slots__ = ("_data", "_hash")

    _data: dict[str, Any]
    _hash: int | None

    def __new__(cls, data: Mapping[str, Any] | None = None) -> FrozenMap:
        if data is not None and not isinstance(data, Mapping):
            raise CodecError(f"FrozenMap needs a mapping, got {type(data).__name__}")
        frozen = _freeze_items(data, "$", 1) if data else {}
        if not frozen and cls is FrozenMap:
            # the one empty map: the encoder leaves out a field whose value *is* its default
            # (``EMPTY``), so another empty map would encode differently and change the digest
            return EMPTY
        return _trusted_map(frozen, cls)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        """Built in ``__new__``: calling ``__init__`` again cannot change a frozen map."""

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("FrozenMap is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    # The ``Mapping`` mixins, answered by the dict itself (the mixins run Python code per call;
    # these run on every message a converter reads). The views are read-only.
    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def values(self) -> ValuesView[Any]:
        return self._data.values()

    def items(self) -> ItemsView[str, Any]:
        return self._data.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            _set_hash(self, hash(frozenset(self._data.items())))
        return self._hash  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def to_json_obj(self) -> dict[str, Any]:
        """This mapping as the codec writes it (bytes tagged, colliding shapes escaped)."""
        out = self._data
        if len(out) == 1 and (_BYTES_TAG in out or _MAP_TAG in out):
            return {_MAP_TAG: out}
        return out


_set_data = FrozenMap.__dict__["_data"].__set__
_set_hash = FrozenMap.__dict__["_hash"].__set__


def _trusted_map(data: dict[str, Any], cls: type[FrozenMap] = FrozenMap) -> FrozenMap:
    """A FrozenMap over ``data``, whose keys and values are already frozen (not copied)."""
    frozen = object.__new__(cls)
    _set_data(frozen, data)
    _set_hash(frozen, None)
    return frozen


EMPTY = _trusted_map({})


def freeze(value: Any) -> Any:
    """Return an immutable copy of a JSON-like tree, validating that JSON can hold it exactly.

    Accepts str, int (64-bit), finite float, bool, None, bytes-like values, mappings with string
    keys, lists and tuples, nested at most ``MAX_DEPTH`` levels. Raises ``CodecError`` naming
    the path of the first value it cannot hold.
    """
    return _freeze(value, "$", 0)


def _freeze(value: Any, path: str, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        if value.isascii():
            return value
        at = lone_surrogate_at(value)
        if at is None:
            return value
        raise CodecError(f"text at {path} holds a lone surrogate at index {at}")
    if kind is int:
        if _INT_MIN <= value <= _INT_MAX:
            return value
        raise CodecError(f"integer at {path} does not fit in 64 bits")
    if kind is float:
        if math.isfinite(value):
            return value
        raise CodecError(f"non-finite float at {path} cannot be stored as JSON")
    if value is None or kind is bool or kind is Bytes:
        return value
    if kind is FrozenMap and depth == 0:  # frozen and within MAX_DEPTH by construction
        return value
    if kind is bytes:
        return Bytes(value)
    if isinstance(value, (Mapping, list, tuple)):
        if depth >= MAX_DEPTH:
            raise CodecError(f"value at {path} is nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, Mapping):
            frozen = _freeze_items(value, path, depth + 1)
            return _trusted_map(frozen) if frozen else EMPTY
        return tuple(_freeze(item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))
    # Subclasses of the plain types become the plain type (an IntEnum member its number).
    if isinstance(value, str):
        return _freeze(str.__str__(value), path, depth)
    if isinstance(value, int):
        return _freeze(int.__int__(value), path, depth)  # bool, its only final subclass, is above
    if isinstance(value, float):
        return _freeze(float.__float__(value), path, depth)
    try:
        return Bytes(memoryview(value))  # bytes-like: a Bytes copy
    except TypeError:
        pass
    raise CodecError(f"value of type {kind.__name__} at {path} is not JSON-like")


def _freeze_items(value: Mapping[Any, Any], path: str, depth: int) -> dict[str, Any]:
    frozen: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str):
                raise CodecError(f"mapping key {key!r} at {path} is not a string")
            key = str.__str__(key)
        at = lone_surrogate_at(key)
        if at is not None:
            raise CodecError(f"mapping key {key!r} at {path} holds a lone surrogate")
        frozen[key] = _freeze(item, f"{path}.{key}", depth)
    return frozen


def freeze_map(value: Any, where: str = "$") -> FrozenMap:
    """Freeze a mapping argument (``None`` and empty give the shared empty map).

    ``where`` names the field in errors (``"ToolUseBlock.input"``).
    """
    if type(value) is FrozenMap:
        return value
    if value is None:
        return EMPTY
    if not isinstance(value, Mapping):
        raise CodecError(f"{where} must be a mapping, got {type(value).__name__}")
    return _freeze(value, where, 0)  # type: ignore[no-any-return]


_FLAT = frozenset((str, float, bool, type(None)))
_SCALARS = _FLAT | {int}


def thaw(value: Any) -> Any:
    """A plain, mutable copy of a frozen tree: dicts, lists and ``bytes``."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is FrozenMap:
        return {key: thaw(item) for key, item in value._data.items()}
    if kind is tuple:
        return [thaw(item) for item in value]
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


def json_dec_hook(type_: type, obj: Any) -> Any:
    """msgspec ``dec_hook``: rebuild a ``FrozenMap`` field from decoded JSON.

    Given only to msgspec's decoders, whose output is JSON: valid text (msgspec refuses lone
    surrogates and bad UTF-8), finite floats, string keys. That lets it keep text, floats,
    booleans and nulls as decoded, with no call per value, where ``from_json`` checks each:
    most of what a loaded message's nested metadata cost (a Responses item's, a map inside a
    map on every message). Integers are still checked, tags still undone and depth still
    limited by ``from_json``'s rules, so the result is ``from_json``'s.
    """
    if type_ is FrozenMap:
        if type(obj) is not dict:
            raise CodecError(f"expected a JSON object, got {type(obj).__name__}")
        frozen = _decoded_map(obj, 0)
        if type(frozen) is not FrozenMap:  # a top-level {"$bytes": ...} is not a mapping
            raise CodecError("a metadata object decoded to a non-mapping value")
        return frozen
    raise NotImplementedError(f"cannot decode {type_.__name__}")


def _decoded_map(obj: dict[str, Any], depth: int) -> Any:
    """``from_json(obj, depth)`` for a JSON object msgspec decoded (see ``json_dec_hook``)."""
    if len(obj) == 1 and (_BYTES_TAG in obj or _MAP_TAG in obj):
        return from_json(obj, depth)  # a tag: rare, and from_json undoes it
    if depth >= MAX_DEPTH:
        raise CodecError(f"a value is nested deeper than {MAX_DEPTH} levels")
    if not obj:
        return EMPTY
    kinds = set(map(type, obj.values()))
    if kinds <= _FLAT or (kinds <= _SCALARS and _ints_fit(obj.values())):
        return _trusted_map(obj)  # the common case, a flat map: kept as decoded
    depth += 1
    return _trusted_map({k: v if type(v) in _FLAT else _decoded(v, depth) for k, v in obj.items()})


def _decoded(value: Any, depth: int) -> Any:
    """``from_json(value, depth)`` for a value msgspec decoded that is not text, a float, a
    bool or null."""
    kind = type(value)
    if kind is dict:
        return _decoded_map(value, depth)
    if kind is list or kind is tuple:
        if depth >= MAX_DEPTH:
            raise CodecError(f"a value is nested deeper than {MAX_DEPTH} levels")
        depth += 1
        return tuple([v if type(v) in _FLAT else _decoded(v, depth) for v in value])
    if kind is int and _INT_MIN <= value <= _INT_MAX:
        return value
    return from_json(value, depth)  # refused, with from_json's reason


def _ints_fit(values: Any) -> bool:
    return all(_INT_MIN <= v <= _INT_MAX for v in values if type(v) is int)


def from_json(obj: Any, depth: int = 0) -> Any:
    """The frozen value of JSON parsed into Python (tags undone); ``CodecError`` for anything
    ``freeze`` would refuse, and for anything a JSON parser does not give (bytes, sets, an
    ``int`` subclass, a mapping that is not a ``dict``): what it returns is frozen all the way
    down, whoever parsed the JSON. A tuple is read as an array (``wire.private.strip_private``
    gives tuples)."""
    kind = type(obj)
    if kind is str:
        return obj if obj.isascii() else _text(obj)
    if kind is dict:
        items = obj
        if len(obj) == 1:
            if _BYTES_TAG in obj:
                return _bytes_from(obj[_BYTES_TAG])
            if _MAP_TAG in obj:
                items = obj[_MAP_TAG]
                if type(items) is not dict:
                    raise CodecError(f"a {_MAP_TAG} value must be an object")
        if depth >= MAX_DEPTH:
            raise CodecError(f"a value is nested deeper than {MAX_DEPTH} levels")
        if not items:
            return EMPTY
        depth += 1
        return _trusted_map(
            {
                k if type(k) is str and k.isascii() else _key(k): from_json(v, depth)
                for k, v in items.items()
            }
        )
    if kind is list or kind is tuple:
        if depth >= MAX_DEPTH:
            raise CodecError(f"a value is nested deeper than {MAX_DEPTH} levels")
        return tuple([from_json(item, depth + 1) for item in obj])
    if kind is int:
        if _INT_MIN <= obj <= _INT_MAX:
            return obj
        raise CodecError("an integer does not fit in 64 bits")
    if kind is float:
        if math.isfinite(obj):
            return obj
        raise CodecError("a non-finite float cannot be stored as JSON")
    if obj is None or kind is bool:
        return obj
    raise CodecError(f"a value of type {kind.__name__} is not JSON")


def _text(value: str) -> str:
    at = lone_surrogate_at(value)
    if at is None:
        return value
    raise CodecError(f"text holds a lone surrogate at index {at}")


def _key(key: Any) -> str:
    if type(key) is str:
        return key if key.isascii() else _text(key)
    raise CodecError(f"mapping key {key!r} is not a string")


def _bytes_from(text: Any) -> Bytes:
    if type(text) is not str:
        raise CodecError(f"a {_BYTES_TAG} value must be a base64 string")
    try:
        return Bytes(base64.b64decode(text, validate=True))
    except ValueError as exc:
        raise CodecError(f"bad base64 in {_BYTES_TAG} value: {exc}") from None
