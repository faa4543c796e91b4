"""Checking a payload against a provider SDK's own request types, with nothing dropped.

A pydantic ``TypeAdapter`` over a ``TypedDict`` ignores keys it does not know, and one over an
``Iterable[...]`` field validates lazily (it returns an iterator that checks items only when
read). So ``assert_sdk_exact`` validates, materialises every iterator (which runs the item
validators), and compares the keys of every object at every depth with what was sent: a key the
SDK type does not have, anywhere, fails the test, naming its path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter

__all__ = ["assert_sdk_exact"]


def _materialised(value: Any) -> Any:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        return value
    return list(value)


def _same_keys(sent: Any, validated: Any, path: str) -> None:
    validated = _materialised(validated)
    if isinstance(sent, Mapping):
        if hasattr(validated, "model_dump"):  # a response model chosen for a dict: refuse
            raise AssertionError(f"{path}: validated as {type(validated).__name__}, not a param")
        assert isinstance(validated, Mapping), f"{path}: {type(validated).__name__}"
        dropped = set(sent) - set(validated)
        assert not dropped, f"{path}: keys the SDK type does not have: {sorted(dropped)}"
        for key, value in sent.items():
            _same_keys(value, validated[key], f"{path}.{key}")
    elif isinstance(sent, (list, tuple)):
        assert isinstance(validated, list), f"{path}: {type(validated).__name__}"
        assert len(sent) == len(validated), f"{path}: length changed"
        for i, (a, b) in enumerate(zip(sent, validated, strict=True)):
            _same_keys(a, b, f"{path}[{i}]")


def assert_sdk_exact(adapter: TypeAdapter[Any], value: Any, path: str = "$") -> None:
    """``value`` validates against ``adapter``'s type and keeps every key (see the module)."""
    validated = adapter.validate_python(value)
    _same_keys(value, validated, path)
