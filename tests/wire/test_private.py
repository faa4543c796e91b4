"""Private (``_``) metadata keys: kept by our codec, never written into any other format."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentledger.wire as wire
from agentledger import (
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    decode,
    encode,
)
from agentledger.wire import (
    from_openai,
    is_private,
    public_metadata,
    strip_private,
    to_agui,
    to_anthropic,
    to_openai,
)
from agentledger.wire.private import (
    dump_arguments,
    metadata_from_json,
    parse_arguments,
)

SECRET = "s3cr3t-value"


def _secret(**public: Any) -> dict[str, Any]:
    return {"_secret": SECRET, "_nested": {"deep": SECRET}, **public}


def _history_with_private_keys() -> list[Msg]:
    image = ImageBlock(
        media_type="image/png",
        data=b"\x89PNG",
        metadata=_secret(alt="a cat", extra={"_hidden": SECRET, "shown": [{"_x": SECRET}]}),
    )
    return [
        Msg.system("sys", metadata=_secret(v=1)),
        Msg.user(
            [TextBlock(text="hi", metadata=_secret()), image, FileBlock(media_type="a/b", url="u")],
            metadata=_secret(lang="en"),
        ),
        Msg.assistant(
            [
                ThinkingBlock(thinking="t", signature="sig", metadata=_secret()),
                TextBlock(text="calling"),
                ToolUseBlock(id="c1", name="f", input={"a": 1}, metadata=_secret(ui="card")),
            ],
            metadata=_secret(model="m"),
        ),
        Msg.tool(
            ToolResultBlock(
                id="c1",
                output=[TextBlock(text="r", metadata=_secret()), image],
                metadata=_secret(ms=12),
            ),
            metadata=_secret(),
        ),
        *from_openai([{"role": "user", "content": "from a dict", "_secret": SECRET}]),
    ]


def _keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_private_keys_never_reach_any_wire_format() -> None:
    msgs = _history_with_private_keys()
    outputs = {
        "openai": to_openai(msgs, include_ids=True),
        "anthropic": to_anthropic(msgs),
        "agui": to_agui(msgs),
    }
    for name, output in outputs.items():
        text = json.dumps(output)
        assert SECRET not in text, name
        assert not any(is_private(k) for k in _keys(json.loads(text))), name
    agui = json.dumps(outputs["agui"])  # the one format that carries metadata: public keys do
    for public in ("alt", "lang", "model", "ui", "ms", "shown"):
        assert f'"{public}"' in agui


def test_private_keys_survive_our_own_codec() -> None:
    for msg in _history_with_private_keys():
        back = decode(encode(msg))
        assert back == msg and back.digest == msg.digest
        assert back.metadata["_secret"] == SECRET
    tool = decode(encode(_history_with_private_keys()[3]))
    result = tool.tool_results[0]
    assert result.metadata["_nested"] == {"deep": SECRET}
    assert result.output[0].metadata["_secret"] == SECRET


def test_strip_private_works_at_every_depth() -> None:
    tree = {"a": 1, "_b": 2, "c": [{"_d": 3, "e": 4}], "f": {"_g": {"h": 5}, "i": 6}}
    assert strip_private(tree) == {"a": 1, "c": ({"e": 4},), "f": {"i": 6}}
    assert public_metadata({"_only": 1}) is None
    assert public_metadata(None) is None


def test_public_metadata_round_trips_bytes() -> None:
    meta = {"sig": b"\x00\xff", "_p": b"x", "list": [b"\x01"]}
    out = public_metadata(meta)
    assert out == {"sig": {"$bytes": "AP8="}, "list": [{"$bytes": "AQ=="}]}
    json.dumps(out)
    assert metadata_from_json(out) == {"sig": b"\x00\xff", "list": (b"\x01",)}
    lookalike = {"k": {"$bytes": "not bytes"}, "$map": {"$map": 1}}  # a caller's own shapes
    assert metadata_from_json(public_metadata(lookalike)) == lookalike


def test_arguments_helpers() -> None:
    assert parse_arguments('{"a": [1, 2]}') == {"a": (1, 2)}
    assert parse_arguments("") == {} and parse_arguments(None) == {}
    assert parse_arguments("nope") == {"_raw_arguments": "nope"}
    colliding = '{"_raw_arguments": "x"}'  # valid JSON that looks like our marker
    assert dump_arguments(parse_arguments(colliding)) == colliding
    assert dump_arguments({"b": b"\x00"}) == '{"b":{"$bytes":"AA=="}}'
    assert dump_arguments({"$map": {"$bytes": 1}}) == '{"$map":{"$bytes":1}}'  # never escaped


def test_wire_all_lists_exactly_the_public_names() -> None:
    assert len(set(wire.__all__)) == len(wire.__all__)
    public = {n for n in vars(wire) if not n.startswith("_")}
    submodules = {
        "agui",
        "anthropic",
        "live",
        "media",
        "openai",
        "private",
        "responses",
        "responses_parts",
        "tool_ids",
    }  # ``validate`` is the function
    assert public - submodules == set(wire.__all__)
    assert callable(wire.validate)


_key = st.one_of(st.text(max_size=4), st.text(max_size=4).map(lambda k: "_" + k))
_leaf = st.none() | st.booleans() | st.integers(-100, 100) | st.text(max_size=5)
_tree = st.recursive(
    _leaf | st.binary(max_size=4),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_key, children, max_size=3),
    max_leaves=12,
)


@given(st.dictionaries(_key, _tree, max_size=4))
def test_no_private_key_survives_public_metadata(meta: dict[str, Any]) -> None:
    out = public_metadata(meta)
    if out is None:
        assert not strip_private(meta)
        return
    assert not any(is_private(k) for k in _keys(out))
    assert metadata_from_json(out) == strip_private(meta)
