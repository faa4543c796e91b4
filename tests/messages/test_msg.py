"""Messages are values: equality, hashing and digest by content (seed 000)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentledger import (
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserError,
)
from agentledger.messages import Bytes, FrozenMap

AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def build(**overrides: object) -> Msg:
    """A message with every kind of field, built from scratch each call."""
    fields: dict[str, object] = {
        "role": "assistant",
        "content": [
            TextBlock(text="hello"),
            ThinkingBlock(thinking="hmm", signature="sig"),
            ToolUseBlock(id="c1", name="f", input={"a": [1, 2]}, metadata={"sig": b"\x01\x02"}),
            ImageBlock(media_type="image/png", data=b"\x89PNG"),
        ],
        "id": "m1",
        "name": "bot",
        "metadata": {"gemini": {"thoughtSignature": bytes([7, 8, 9])}, "n": 1},
        "usage": Usage(input_tokens=3, output_tokens=4),
        "created_at": AT,
    }
    fields.update(overrides)
    role = fields.pop("role")
    content = fields.pop("content")
    return Msg(role, content, **fields)  # type: ignore[arg-type]


def test_separately_built_equal_messages_are_equal() -> None:
    a, b = build(), build()
    assert a is not b
    assert a == b and hash(a) == hash(b) and a.digest == b.digest
    assert len({a, b}) == 1


@pytest.mark.parametrize(
    "change",
    [
        {"id": "m2"},
        {"role": "user"},
        {"name": "other"},
        {"content": [TextBlock(text="hello!")]},
        {"usage": Usage(input_tokens=3, output_tokens=5)},
        {"usage": None},
        {"metadata": {"gemini": {"thoughtSignature": bytes([7, 8, 10])}, "n": 1}},
        {"metadata": {"gemini": {"thoughtSignature": bytes([7, 8, 9])}, "n": 1.0}},
        {"metadata": {"gemini": {"thoughtSignature": bytes([7, 8, 9])}, "n": True}},
        {"created_at": datetime(2026, 5, 1, 12, 0, 1, tzinfo=UTC)},
        {"created_at": None},
    ],
    ids=lambda c: next(iter(c)),
)
def test_any_changed_field_makes_messages_unequal(change: dict[str, object]) -> None:
    a, b = build(), build(**change)
    assert a != b and a.digest != b.digest


@pytest.mark.parametrize(
    "block",
    [
        ThinkingBlock(thinking="hmm", signature="sig2"),
        ToolUseBlock(id="c1", name="f", input={"a": [1, 3]}, metadata={"sig": b"\x01\x02"}),
        ToolUseBlock(id="c1", name="f", input={"a": [1, 2]}, metadata={"sig": b"\x01\x03"}),
        ImageBlock(media_type="image/png", data=b"\x89PNH"),
        ImageBlock(media_type="image/jpeg", data=b"\x89PNG"),
    ],
)
def test_a_changed_block_field_makes_messages_unequal(block: object) -> None:
    base = build()
    content = list(base.content)
    index = next(i for i, b in enumerate(content) if type(b) is type(block))
    content[index] = block  # type: ignore[call-overload]
    assert base.replace(content=content) != base


def test_bytes_compare_by_value_even_nested() -> None:
    a = Msg.user("x", id="i", metadata={"l": [{"b": bytearray(b"abc")}]}, created_at=None)
    b = Msg.user("x", id="i", metadata={"l": [{"b": b"abc"}]}, created_at=None)
    assert a == b
    assert isinstance(a.metadata["l"][0]["b"], Bytes) and a.metadata["l"][0]["b"] == b"abc"


def test_messages_are_immutable_and_do_not_alias_caller_data() -> None:
    meta = {"k": [1]}
    msg = Msg.user("x", metadata=meta)
    meta["k"].append(2)
    assert msg.metadata["k"] == (1,)
    with pytest.raises(AttributeError):
        msg.role = "assistant"  # type: ignore[misc]
    with pytest.raises(TypeError):
        msg.metadata["k"] = 3  # type: ignore[index]
    assert isinstance(msg.metadata, FrozenMap)


def test_replace_keeps_id_and_returns_new_value() -> None:
    msg = build()
    edited = msg.replace(content="new")
    assert edited.id == msg.id and edited.text == "new" and msg.text == "hello"
    assert edited != msg
    with pytest.raises(UserError):
        msg.replace(colour="red")


def test_generated_ids_are_unique_and_sortable() -> None:
    ids = [Msg.user("x").id for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("robot", "x"), {}),
        (("user", 5), {}),
        (("user", "x"), {"created_at": datetime(2026, 1, 1)}),
        (("user", "x"), {"id": ""}),
    ],
)
def test_bad_construction_is_a_user_error(args: tuple, kwargs: dict) -> None:
    with pytest.raises((UserError, TypeError)):
        Msg(*args, **kwargs)


def test_media_needs_data_or_url() -> None:
    with pytest.raises(UserError):
        ImageBlock(media_type="image/png")
    with pytest.raises(UserError):
        ImageBlock(media_type="image/png", data=b"x", url="http://x")


def test_tool_result_helpers() -> None:
    result = ToolResultBlock(id="c", name="f", output="done")
    msg = Msg.tool(result)
    assert msg.tool_results == (result,) and result.text == "done"
    assert build().tool_calls[0].input["a"] == (1, 2)


def test_pickle_round_trip() -> None:
    import pickle

    msg = build()
    assert pickle.loads(pickle.dumps(msg)) == msg
