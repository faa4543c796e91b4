"""Tools: schema from type hints and docstring, sync and async, errors and timeouts as results."""

from __future__ import annotations

import asyncio
import threading
from typing import Literal

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger.agent.tools import Tool, ToolContext, as_tools, tool
from agentledger.errors import UserError
from agentledger.messages import ImageBlock, Msg, ToolUseBlock
from tests.messages.strategies import assert_round_trip, surrogate_text, wild_values

CTX = ToolContext("t", "s", "call-1", {"user": "ana"})


class Filters(pydantic.BaseModel):
    tags: list[str] = []


@tool(idempotent=True, timeout=5)
def search(
    query: str, limit: int = 3, order: Literal["new", "old"] = "new", filters: Filters | None = None
) -> list[str]:
    """Search the notes.

    Args:
        query: words to look for
        limit: how many results
    """
    return [f"{query}-{i}" for i in range(limit)]


def test_schema_from_hints_and_docstring() -> None:
    spec = search.spec
    assert spec.name == "search" and spec.description == "Search the notes."
    props = spec.parameters["properties"]
    assert props["query"] == {"type": "string", "description": "words to look for"}
    assert props["limit"]["default"] == 3 and props["limit"]["description"] == "how many results"
    assert props["order"]["enum"] == ["new", "old"]
    assert spec.parameters["required"] == ["query"]
    assert "Filters" in str(spec.parameters.get("$defs", {}))
    assert search.idempotent and search.timeout == 5


async def test_sync_tool_runs_in_a_thread_and_result_is_text() -> None:
    seen = []

    @tool
    def where() -> str:
        """Which thread am I on."""
        seen.append(threading.current_thread() is threading.main_thread())
        return "here"

    result = await where.run(ToolUseBlock(id="c", name="where"), CTX)
    assert seen == [False] and result.text == "here" and not result.is_error
    assert result.metadata["execution"]["seconds"] >= 0


async def test_structured_results_and_blocks() -> None:
    result = await search.run(ToolUseBlock(id="c", name="search", input={"query": "x"}), CTX)
    assert result.text == '["x-0", "x-1", "x-2"]'

    @tool
    async def picture() -> ImageBlock:
        """A picture."""
        return ImageBlock(media_type="image/png", data=b"\x89PNG")

    result = await picture.run(ToolUseBlock(id="c", name="picture"), CTX)
    assert result.output[0].data == b"\x89PNG"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "query: Field required"),
        ({"query": "x", "limit": "many"}, "limit"),
        ({"query": "x", "extra": 1}, "extra"),
    ],
)
async def test_bad_arguments_become_error_results(args: dict, fragment: str) -> None:
    result = await search.run(ToolUseBlock(id="c", name="search", input=args), CTX)
    assert result.is_error and fragment in result.text


async def test_exceptions_and_timeouts_become_error_results() -> None:
    @tool(timeout=0.05)
    async def sleepy() -> str:
        """Sleeps too long."""
        await asyncio.sleep(5)
        return "late"

    @tool
    def broken() -> str:
        """Raises."""
        raise ValueError("bad input")

    timed_out = await sleepy.run(ToolUseBlock(id="c", name="sleepy"), CTX)
    assert timed_out.is_error and "timed out" in timed_out.text
    failed = await broken.run(ToolUseBlock(id="c", name="broken"), CTX)
    assert failed.is_error and "ValueError: bad input" in failed.text


def _exits(how: str) -> None:
    if how == "argparse":
        import argparse

        parser = argparse.ArgumentParser(prog="cli")
        parser.add_argument("--n", type=int, required=True)
        parser.parse_args(["--bogus"])  # prints usage, then sys.exit(2)
    elif how == "sys.exit":
        raise SystemExit("gave up")
    raise KeyboardInterrupt("stop")


@pytest.mark.parametrize(
    ("how", "is_async", "said"),
    [
        ("argparse", False, "SystemExit: 2"),
        ("sys.exit", False, "SystemExit: gave up"),
        ("KeyboardInterrupt", False, "KeyboardInterrupt: stop"),
        ("argparse", True, "SystemExit: 2"),
        ("sys.exit", True, "SystemExit: gave up"),
    ],
)
def test_a_tool_that_exits_gives_an_error_result_and_the_run_goes_on(
    how: str, is_async: bool, said: str
) -> None:
    """asyncio re-raises ``SystemExit`` and ``KeyboardInterrupt`` out of the event loop when a
    task ends with one: a tool wrapping ``argparse`` ended the program mid-run."""
    from agentledger.agent.react import ReActAgent
    from agentledger.testing.scripted import ScriptedModel

    if is_async:

        async def cli() -> str:
            """Runs a command line."""
            _exits(how)
            return "ran"
    else:

        def cli() -> str:
            """Runs a command line."""
            _exits(how)
            return "ran"

    model = ScriptedModel([Msg.assistant(ToolUseBlock(id="c1", name="cli")), "done"])
    agent = ReActAgent(model, [tool(cli)], store="memory://")
    answer = asyncio.run(agent.run("go", "s"))  # returns: nothing left the event loop
    assert answer is not None and answer.text == "done"
    (result,) = asyncio.run(agent.ledger.messages("s"))[2].tool_results
    assert result.is_error and result.text == said


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for this one")


class _BadModel(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    thing: object


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    wild_values
    | surrogate_text
    | st.just(_BadModel(thing=object()))
    | st.builds(lambda t: [t], surrogate_text)
)
async def test_whatever_a_tool_returns_or_raises_becomes_a_result_a_store_keeps(
    value: object,
) -> None:
    """``Tool.run`` never raises: a value no block can hold (text with a lone surrogate, which
    UTF-8 cannot encode) or an exception with such a message, or one that cannot be printed,
    becomes an error result, not a crashed run with the call left unanswered."""

    @tool
    async def gives() -> object:
        """Returns the value."""
        return value

    @tool
    async def raises() -> str:
        """Raises with the value as its message."""
        raise ValueError(value)

    @tool
    async def unprintable() -> str:
        """Raises an exception that cannot be printed."""
        raise _Unprintable

    for t in (gives, raises, unprintable):
        result = await t.run(ToolUseBlock(id="c", name=t.name), CTX)
        assert (result.id, result.name) == ("c", t.name)
        assert_round_trip(Msg("tool", [result], id="r", created_at=None))


async def test_tool_context_is_injected_not_in_schema() -> None:
    @tool
    def who(ctx: ToolContext) -> str:
        """Who asks."""
        return f"{ctx.session_id}/{ctx.call_id}/{ctx.attributes['user']}"

    assert who.spec.parameters["properties"] == {}
    assert (await who.run(ToolUseBlock(id="c", name="who"), CTX)).text == "s/call-1/ana"


@pytest.mark.parametrize("name", ["", "a b", "../x", "x" * 65, "caf\u00e9", "a.b", "a\n"])
def test_a_tool_name_no_provider_takes_is_refused_when_the_tool_is_made(name: str) -> None:
    """Such a name used to be taken, and every model request with the tool was then refused by
    the provider (an empty name quietly became the function's own name)."""
    with pytest.raises(UserError, match="tool name must be 1 to 64 letters"):
        Tool(search.fn, name=name)


def test_every_name_both_providers_take_is_a_tool_name() -> None:
    for name in ("x" * 64, "get_weather-2", "A", "_"):
        assert Tool(search.fn, name=name).spec.name == name


def test_misuse_is_a_user_error() -> None:
    def star(*args: int) -> int:
        return 0

    with pytest.raises(UserError):
        Tool(star)
    with pytest.raises(UserError):
        as_tools([search, search])


async def test_direct_call_validates() -> None:
    assert await search(query="q", limit=1) == ["q-0"]
    with pytest.raises(pydantic.ValidationError):
        await search(limit=1)


async def test_a_tool_gets_the_arguments_exactly_as_the_model_wrote_them() -> None:
    @tool
    def double(n: int) -> str:
        return str(2 * n)

    call = ToolUseBlock(id="c", name="double", arguments='{"n": 18446744073709551616}')
    result = await double.run(call, CTX)
    assert not result.is_error and result.text == str(2**65)
    for text in ('{"n": 1', "[1]"):  # no JSON object: an error result, not a run with {}
        bad = await double.run(ToolUseBlock(id="c", name="double", arguments=text), CTX)
        assert bad.is_error and "not a JSON object" in bad.text


@pytest.mark.parametrize(
    "tools",
    [None, 0, "search", b"search", {"search": len}, object(), ["search"], [None], [len, 1]],
    ids=repr,
)
def test_tools_that_are_not_functions_or_tools_are_refused_by_name(tools: object) -> None:
    """A list of tools holding something that is not one, or no list at all, is a ``UserError``
    that says which (a string in the list raised ``AttributeError: __name__``)."""
    with pytest.raises(UserError, match="tool"):
        as_tools(tools)  # type: ignore[arg-type]
