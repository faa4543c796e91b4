"""Summary compaction: where it cuts, what the summary sees, failures, and a long agent session."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import (
    ModelError,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    UserError,
)
from agentledger.agent.context import ContextEditFailed, MessageCommitted, RuntimeContext
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.context import SummaryCompaction, summary_input
from agentledger.context.marks import SUMMARY_KEY
from agentledger.context.preview import marker_text
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.testing import ScriptedModel
from agentledger.wire import check, validate
from tests.context.samples import PNG, history, mixed_result, tool_message, turn


class Summarizer:
    """A summary model that answers every call and records what it was asked."""

    def __init__(self) -> None:
        self.inputs: list[str] = []
        self.model = ScriptedModel([self.answer] * 200, name="summarizer")

    def answer(self, messages: list[Msg], tools) -> Msg:
        self.inputs.append(messages[-1].text)
        return Msg.assistant(f"summary #{len(self.inputs)}", usage=Usage(input_tokens=9))


def valid_for_both(msgs: list[Msg]) -> None:
    check(msgs, target="openai")
    check(msgs, target="anthropic")


# -- where the cut goes --------------------------------------------------------------------------
async def test_the_older_part_becomes_one_summary_and_the_recent_part_stays() -> None:
    msgs = [Msg.system("be brief", id="sys"), *history(5)]  # 21 messages
    summarizer = Summarizer()
    out = await SummaryCompaction(summarizer.model, max_messages=10, keep_recent=6).compact(msgs)
    assert out[0] is msgs[0]
    summary = out[1]
    assert summary.role == "user" and summary.text.endswith("summary #1")
    assert summary.metadata[SUMMARY_KEY]["summarized"] == 13
    assert msgs[21 - 6].role == "tool"
    assert out[2:] == msgs[14:]  # the cut moved back from that tool result to its call
    assert out[2].tool_calls
    valid_for_both(out)


async def test_a_cut_never_leaves_results_without_their_parallel_calls() -> None:
    calls = [ToolUseBlock(id=f"p{i}", name="t", input={}) for i in range(3)]
    msgs = [
        *history(2),
        Msg.user("do three things"),
        Msg.assistant(calls),
        *[Msg.tool(ToolResultBlock(id=f"p{i}", name="t", output="ok")) for i in range(3)],
        Msg.assistant("done"),
    ]
    for keep in range(1, 7):
        out = await SummaryCompaction(Summarizer().model, max_messages=1, keep_recent=keep).compact(
            msgs
        )
        valid_for_both(out)
        assert len(out) - 1 >= keep


async def test_nothing_happens_below_the_thresholds_or_without_a_usable_cut() -> None:
    summarizer = Summarizer()
    msgs = history(2)
    assert await SummaryCompaction(summarizer.model, max_messages=8).compact(msgs) == msgs
    only_recent = SummaryCompaction(summarizer.model, max_messages=1, keep_recent=8)
    assert await only_recent.compact(msgs) == msgs
    assert summarizer.inputs == []


async def test_an_earlier_summary_is_summarized_again_and_counted() -> None:
    summarizer = Summarizer()
    compaction = SummaryCompaction(summarizer.model, max_messages=8, keep_recent=4)
    once = await compaction.compact(history(4))
    twice = await compaction.compact([*once, *turn(9, "more")])
    assert summarizer.inputs[1].count("[earlier summary]") == 1
    assert "summary #1" in summarizer.inputs[1]
    assert sum(1 for m in twice if SUMMARY_KEY in m.metadata) == 1
    assert twice[0].metadata[SUMMARY_KEY]["summarized"] == 12 + 4
    valid_for_both(twice)


# -- failures ------------------------------------------------------------------------------------
async def test_a_failed_summary_raises_and_changes_nothing() -> None:
    msgs = history(5)
    copy = list(msgs)
    failing = ScriptedModel([ModelError("overloaded", status=529, retryable=True)])
    with pytest.raises(ModelError, match="overloaded"):
        await SummaryCompaction(failing, max_messages=4).compact(msgs)
    assert msgs == copy
    empty = ScriptedModel([Msg.assistant("   ")])
    with pytest.raises(ModelError, match="no text"):
        await SummaryCompaction(empty, max_messages=4).compact(msgs)


async def test_in_the_agent_a_failed_summary_keeps_context_and_version_and_is_reported() -> None:
    ledger = AsyncLedger(MemoryStore())
    earlier = history(5)
    await ledger.save("s", earlier)
    failing = ScriptedModel([ModelError("summary model down", status=503)])
    compaction = SummaryCompaction(failing, max_messages=10)
    agent = ReActAgent(ScriptedModel(["Still here."]), store=ledger, middlewares=[compaction])
    events = [e async for e in agent.stream("hello", RuntimeContext("s"))]
    (failed,) = [e for e in events if isinstance(e, ContextEditFailed)]
    assert (failed.middleware, failed.kind) == ("SummaryCompaction", "ModelError")
    commits = [e.version for e in events if isinstance(e, MessageCommitted)]
    assert commits == [failed.version, failed.version + 1]  # input, then the answer: no edit
    stored = await ledger.messages("s")
    assert stored[:-2] == earlier and [m.text for m in stored[-2:]] == ["hello", "Still here."]


def test_configuration_is_checked() -> None:
    model = ScriptedModel([])
    with pytest.raises(UserError):
        SummaryCompaction(model, max_tokens=None, max_messages=None)
    with pytest.raises(UserError):
        SummaryCompaction(model, keep_recent=0)
    with pytest.raises(UserError):
        SummaryCompaction(model, prompt="no placeholder")


# -- thresholds ----------------------------------------------------------------------------------
async def test_tokens_come_from_usage_and_stale_usage_is_not_trusted_after_compaction() -> None:
    msgs = [*history(3), *turn(3, "x", usage=Usage(input_tokens=150_000, output_tokens=10))]
    compaction = SummaryCompaction(Summarizer().model, max_tokens=100_000, keep_recent=4)
    assert compaction.needed(msgs)  # the estimate alone is tiny
    out = await compaction.compact(msgs)
    assert out[-1].usage.input_tokens == 150_000  # kept, but it counted the old context
    assert not compaction.needed(out)


# -- the summary input ---------------------------------------------------------------------------
@pytest.mark.parametrize(("size", "cut"), [(599, False), (600, False), (601, True)])
def test_summary_input_previews_results_at_600_characters(size: int, cut: bool) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    result = ToolResultBlock(id="c", name="search", output=text)
    rendered = summary_input([Msg.tool(result)])
    assert rendered.startswith("[search result] ")
    body = rendered.removeprefix("[search result] ")
    if cut:
        assert body == f"{text[:300]}\n{marker_text(1)}\n{text[-300:]}"
    else:
        assert body == text


def test_summary_input_names_media_and_leaves_thinking_out() -> None:
    msgs = [
        Msg.user([TextBlock(text="what is this?"), mixed_result().output[1]]),
        Msg.assistant(
            [ThinkingBlock(thinking="secret reasoning", signature="sig"), TextBlock(text="a PNG")]
        ),
        tool_message(mixed_result(head="h" * 10, tail="t" * 10)),
    ]
    rendered = summary_input(msgs)
    assert "[user] [image image/png]" in rendered and "secret reasoning" not in rendered
    assert (
        "[screenshot result (error)] hhhhhhhhhh\n[image image/png]\n[audio audio/wav]" in rendered
    )
    assert PNG.decode("latin-1") not in rendered


# -- any history, any window ---------------------------------------------------------------------
shapes = st.lists(st.sampled_from(["chat", "tool1", "tool2", "tool3"]), min_size=1, max_size=12)


def build(kinds: list[str]) -> list[Msg]:
    msgs: list[Msg] = [Msg.system("sys")]
    for n, kind in enumerate(kinds):
        msgs.append(Msg.user(f"q{n}"))
        if kind != "chat":
            calls = [ToolUseBlock(id=f"c{n}_{i}", name="t", input={}) for i in range(int(kind[-1]))]
            msgs.append(Msg.assistant(calls))
            msgs.extend(Msg.tool(ToolResultBlock(id=c.id, name="t", output="r")) for c in calls)
        msgs.append(Msg.assistant(f"a{n}"))
    return msgs


@settings(max_examples=80, deadline=None)
@given(kinds=shapes, keep=st.integers(1, 12))
def test_compaction_of_any_history_stays_valid_for_both_providers(kinds, keep) -> None:
    msgs = build(kinds)
    out = asyncio.run(
        SummaryCompaction(Summarizer().model, max_messages=1, keep_recent=keep).compact(msgs)
    )
    assert validate(out, target="openai") == [] and validate(out, target="anthropic") == []
    if out != msgs:
        kept = len(out) - 2
        assert out[0] == msgs[0] and out[2:] == msgs[-kept:] and kept >= keep


# -- a long scripted session ---------------------------------------------------------------------
@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"notes on {topic}: " + "detail " * 200


async def test_a_long_session_compacts_stays_valid_and_keeps_every_original() -> None:
    ledger = AsyncLedger(MemoryStore())
    summarizer = Summarizer()
    compaction = SummaryCompaction(summarizer.model, max_messages=24, keep_recent=6)
    script: list = []
    for n in range(30):
        script.append(
            Msg.assistant(ToolUseBlock(id=f"call_{n}", name="lookup", input={"topic": f"t{n}"}))
        )
        script.append(Msg.assistant(f"answer {n}"))
    agent = ReActAgent(
        ScriptedModel(script), [lookup], store=ledger, system_prompt="s", middlewares=[compaction]
    )
    originals: list[tuple[Msg, int]] = []
    for n in range(30):
        async for event in agent.stream(f"question {n}", RuntimeContext("long")):
            if isinstance(event, MessageCommitted):
                originals.append((event.message, event.version))
        stored = await ledger.messages("long")
        valid_for_both(stored)
        assert len(stored) <= 24 + 4
    assert len(summarizer.inputs) >= 4
    assert all("[earlier summary]" in text for text in summarizer.inputs[1:])
    stored = await ledger.messages("long")
    assert SUMMARY_KEY in stored[0].metadata and stored[0].role == "user"
    assert stored[0].metadata[SUMMARY_KEY]["summarized"] + len(stored) - 1 == 120
    for message, version in originals:  # every original loads at the version that saved it
        assert message in await ledger.messages("long", version=version)
