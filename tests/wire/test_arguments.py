"""Tool-call argument text is kept verbatim and sent back byte for byte, before and after a
reload on every backend, whatever the text holds (big integers, escapes, exponents, duplicate
keys, key order, invalid JSON)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings

from agentledger import Ledger, Msg, ToolUseBlock
from agentledger.errors import UserError
from agentledger.messages import decode, encode
from agentledger.messages.arguments import json_arguments
from agentledger.wire import (
    from_agui,
    from_anthropic,
    from_openai,
    to_agui,
    to_anthropic,
    to_openai,
)
from tests.messages.strategies import json_texts
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)

_SETTINGS = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SAMPLES = [
    '{"n": 123456789012345678901234567890}',
    '{"city":  "M\\u00fcnchen", "x": 1.0e2}',
    '{"a": 1, "a": 2}',
    '{"b": 1, "a": 2}',
    '{"a":1}',
    '{"b":1,"a":2}',  # compact, keys unsorted: a stored map reads back sorted
    '{"a":{"z":1,"y":[{"d":0,"c":1}]}}',
    '{"a": tru',
    "",
    "[1, 2]",
]


def _dicts(text: str) -> list[dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": text}}
    return [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
    ]


def _sent(msgs: list[Msg]) -> str:
    return str(to_openai(msgs)[1]["tool_calls"][0]["function"]["arguments"])


@pytest.mark.parametrize("text", SAMPLES)
def test_openai_text_comes_back_byte_for_byte(text: str) -> None:
    msgs = from_openai(_dicts(text))
    assert _sent(msgs) == text
    assert _sent([decode(encode(m)) for m in msgs]) == text
    (call,) = msgs[1].tool_calls
    exact = json_arguments(text)
    # the object formats get the object the text holds, exactly (or {} for no object)
    (_, turns) = to_anthropic(msgs)
    assert turns[1]["content"][0]["input"] == ({} if exact is None else exact)
    agui_call = to_agui(msgs)[1]["toolCalls"][0]
    assert agui_call["function"]["arguments"] == text
    assert from_agui(to_agui(msgs))[1].tool_calls == (call,)


@given(text=json_texts)
def test_an_object_given_as_an_object_is_sent_as_that_object_by_every_format(text: str) -> None:
    """Anthropic gives arguments as an object: whatever it holds (a parameter named
    ``_raw_arguments``, an integer past 64 bits), every format is sent that very object."""
    exact = json_arguments(text)
    assume(exact is not None and "NaN" not in text)
    turns = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": exact}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    msgs = from_anthropic(turns)
    assert to_anthropic(msgs)[1][1]["content"][0]["input"] == exact
    assert json.loads(_sent(msgs)) == exact
    assert json.loads(to_agui(msgs)[1]["toolCalls"][0]["function"]["arguments"]) == exact
    assert to_anthropic([decode(encode(m)) for m in msgs])[1][1]["content"][0]["input"] == exact


@_SETTINGS
@given(text=json_texts)
def test_any_text_survives_a_reload_on_every_backend(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
    text: str,
) -> None:
    dicts = _dicts(text)
    session = uuid.uuid4().hex
    with ledger_on(backend) as ledger:
        ledger.sync(session, dicts)
        with Ledger(ledger.store) as fresh:
            loaded = fresh.messages(session)
            assert _sent(loaded) == text
            assert fresh.sync(session, dicts).noop  # the same list, unchanged after a reload


def test_a_block_agrees_with_its_text() -> None:
    block = ToolUseBlock(id="c", name="f", arguments='{"x": 1.0e2}')
    assert block.input == {"x": 100.0}
    assert ToolUseBlock(id="c", name="f", input={"x": 100.0}, arguments='{"x": 1.0e2}') == block
    with pytest.raises(UserError, match="does not match"):
        ToolUseBlock(id="c", name="f", input={"x": 1}, arguments='{"x": 2}')
    # compact text is not kept twice: input gives it back
    assert ToolUseBlock(id="c", name="f", arguments='{"x":1}').arguments is None
    big = ToolUseBlock(id="c", name="f", arguments='{"n": 18446744073709551616}')
    assert big.input == {"_raw_arguments": '{"n": 18446744073709551616}'}
    assert json.loads(big.arguments or "") == {"n": 2**64}


def test_blocks_stored_before_the_field_still_load() -> None:
    old = (
        b'{"content":[{"id":"c","input":{"_raw_arguments":"{oops"},"name":"f",'
        b'"type":"tool_use"}],"id":"m","role":"assistant"}'
    )
    msg = decode(old)
    assert _sent([Msg.user("go"), msg]) == "{oops"
    assert encode(msg) == old
