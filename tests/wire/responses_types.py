"""Strict validation of Responses-API items against the openai SDK's own types.

A TypedDict ``TypeAdapter`` ignores unknown keys and validates ``Iterable`` fields lazily, so
``validate_python`` alone passes an item with a misspelled key or a bad list element. Here every
lazy iterable is consumed (which validates it) and the validated value must equal the item,
so a key the type does not know, or one the union member dropped, fails.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("openai")

from openai.types.responses import ResponseInputItemParam
from pydantic import TypeAdapter

_items: TypeAdapter[Any] = TypeAdapter(ResponseInputItemParam)


def _materialised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _materialised(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, Iterator)) or type(value).__name__ == "ValidatorIterator":
        return [_materialised(v) for v in value]
    return value


def assert_valid_item(item: dict[str, Any]) -> None:
    """``item`` is a ``ResponseInputItemParam`` with nothing dropped and nothing extra."""
    validated = _materialised(_items.validate_python(item))
    assert validated == _materialised(item), f"keys dropped or changed by validation: {item!r}"
