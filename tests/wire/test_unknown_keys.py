"""The wire boundary keeps or refuses, never drops: keys a converter does not map are kept.

Before, ``sync()`` dropped top-level OpenAI keys it did not know (``function_call``, ``audio``,
``annotations``) and reported success, and a list mixing dicts with one ``Msg`` converted its
dicts differently from an all-dict list (a tool result's name ``'f'`` became ``''``), so the
next save rewrote a row.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger import Ledger
from agentledger.errors import CodecError, UserError
from agentledger.messages import thaw
from agentledger.wire import from_anthropic, from_openai, to_anthropic, to_openai
from agentledger.wire.openai import from_live_list
from agentledger.wire.private import ANTHROPIC_EXTRA_KEY, OPENAI_EXTRA_KEY

AUDIO = {"id": "audio_abc"}
LEGACY_CALL = {"name": "f", "arguments": "{}"}
ANNOTATIONS = [{"type": "url_citation", "url_citation": {"url": "https://x.test"}}]


def test_unknown_openai_keys_are_kept_through_sync_and_a_reload() -> None:
    live = [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"t": 1}}]},
        {
            "role": "assistant",
            "content": "hello",
            "audio": AUDIO,
            "function_call": LEGACY_CALL,
            "annotations": ANNOTATIONS,
        },
    ]
    ledger = Ledger("memory://")
    ledger.sync("s", live)
    user, answer = Ledger(ledger.store).messages("s")
    assert user.content[0].metadata[OPENAI_EXTRA_KEY] == {"cache_control": {"t": 1}}
    assert thaw(answer.metadata[OPENAI_EXTRA_KEY]) == {
        "audio": AUDIO,
        "function_call": LEGACY_CALL,
        "annotations": ANNOTATIONS,
    }
    assert ledger.sync("s", live).noop  # converted the same way every time
    sent = to_openai([user, answer])
    assert "audio" not in sent[1] and "cache_control" not in str(sent)  # private: never sent


def test_unknown_keys_of_tool_calls_and_nested_parts_are_kept() -> None:
    (msg,) = from_openai(
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "index": 0,
                        "function": {"name": "f", "arguments": "{}", "strict": True},
                    }
                ],
            }
        ]
    )
    assert msg.tool_calls[0].metadata[OPENAI_EXTRA_KEY] == {
        "index": 0,
        "function": {"strict": True},
    }
    (user,) = from_openai(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": "https://x.test/a.png", "x": 1}}
                ],
            }
        ]
    )
    assert user.content[0].metadata[OPENAI_EXTRA_KEY] == {"image_url": {"x": 1}}


def test_both_reasoning_keys_are_kept() -> None:
    (msg,) = from_openai([{"role": "assistant", "reasoning_content": "a", "reasoning": "b"}])
    assert msg.thinking == "a" and msg.metadata[OPENAI_EXTRA_KEY] == {"reasoning": "b"}


def test_an_unknown_value_json_cannot_hold_is_refused_by_path() -> None:
    with pytest.raises(CodecError, match="audio"):
        from_openai([{"role": "assistant", "content": "x", "audio": object()}])


def test_unknown_anthropic_keys_are_kept() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}},
                {
                    "type": "document",
                    "source": {"type": "url", "url": "https://x.test/a.pdf", "extra": 1},
                    "title": "A",
                    "context": "ctx",
                    "citations": {"enabled": True},
                },
            ],
            "turn_note": "kept",
        }
    ]
    (msg,) = from_anthropic(messages)
    text, document = msg.content
    assert text.metadata[ANTHROPIC_EXTRA_KEY] == {"cache_control": {"type": "ephemeral"}}
    assert document.metadata[ANTHROPIC_EXTRA_KEY] == {
        "context": "ctx",
        "citations": {"enabled": True},
        "source": {"extra": 1},
    }
    assert msg.metadata[ANTHROPIC_EXTRA_KEY] == {"turn_note": "kept"}
    assert "cache_control" not in str(to_anthropic([msg]))


def _conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "It is sunny."},
    ]


@given(st.lists(st.booleans(), min_size=4, max_size=4))
def test_a_mixed_list_converts_like_an_all_dict_list(as_msg: list[bool]) -> None:
    dicts = _conversation()
    expected = from_openai(dicts, ids="derived")
    mixed = [m if use else d for m, d, use in zip(expected, dicts, as_msg)]
    assert from_live_list(mixed) == expected
    ledger = Ledger("memory://")
    ledger.sync("s", dicts)
    assert ledger.sync("s", mixed).noop
    assert ledger.messages("s")[2].tool_results[0].name == "f"


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=6,
)
_extra_keys = st.dictionaries(
    st.text(min_size=1, max_size=8).filter(lambda k: not k.startswith("_")), _json, max_size=3
)
_base = st.sampled_from([*_conversation(), {"role": "developer", "content": "rules"}])


@given(_base, _extra_keys)
def test_any_unknown_key_of_an_openai_message_is_kept(base: dict[str, Any], extra: dict) -> None:
    d = {**extra, **base}  # the mapped keys win where a drawn key collides with one
    msgs = (
        from_live_list([d]) if base["role"] != "tool" else from_live_list([*_conversation()[:2], d])
    )
    kept = thaw(msgs[-1].metadata.get(OPENAI_EXTRA_KEY, {}))
    for key, value in extra.items():
        if key not in base and key not in ("id", "name", "content", "refusal", "tool_calls"):
            if key in ("reasoning_content", "reasoning", "tool_call_id"):
                continue  # mapped for some roles: read as that field, not kept
            assert kept[key] == value


@given(
    _extra_keys | st.just({"cache_control": {"type": "ephemeral"}, "citations": []}),
    st.dictionaries(st.sampled_from(["_note", "_tag"]), _json, max_size=1),
)
def test_a_system_block_keeps_what_the_same_block_in_a_turn_keeps(
    extra: dict[str, Any], private: dict[str, Any]
) -> None:
    block = {**extra, **private, "type": "text", "text": "You are terse."}
    (system,) = from_anthropic([], system=[block])
    (user,) = from_anthropic([{"role": "user", "content": [block]}])
    assert system.content == user.content
    assert thaw(system.content[0].metadata.get(ANTHROPIC_EXTRA_KEY, {})) == {
        k: v for k, v in extra.items() if k not in ("type", "text")
    }
    assert to_anthropic([system])[0] == "You are terse."  # kept, never sent


@pytest.mark.parametrize("text", [5, None, ["x"], {"t": 1}, "missing"])
def test_a_text_block_whose_text_is_not_a_string_is_refused(text: object) -> None:
    block: dict[str, Any] = (
        {"type": "text"} if text == "missing" else {"type": "text", "text": text}
    )
    with pytest.raises(UserError, match="system block 1: a text block needs a string 'text'"):
        from_anthropic([], system=[{"type": "text", "text": "ok"}, block])
    with pytest.raises(UserError, match="message 0: a text block needs a string 'text'"):
        from_anthropic([{"role": "user", "content": [block]}])
