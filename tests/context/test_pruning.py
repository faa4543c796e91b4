"""Pruning old tool results: the protected window, seed 002's media rule, the saved edit."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentledger import Ledger, Msg, ToolResultBlock, ToolUseBlock, UserError
from agentledger.agent.context import MessageCommitted, RuntimeContext
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.context import ToolResultEviction, ToolResultPreview, ToolResultPruning
from agentledger.context.marks import PREVIEW_KEY
from agentledger.messages import canonical_bytes
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.testing import ScriptedModel
from tests.context.samples import history, media_of, mixed_result, tool_message


def results(msgs: list[Msg]) -> list[ToolResultBlock]:
    return [r for m in msgs for r in m.tool_results]


def test_results_before_the_window_become_previews_the_rest_stays() -> None:
    msgs = history(6, output_size=1_000)
    pruned = ToolResultPruning(keep_recent=2, preview=50).prune(msgs)
    for old in results(pruned)[:4]:
        assert len(old.text) < 200 and old.metadata[PREVIEW_KEY]["by"] == "pruning"
    assert results(pruned)[4:] == results(msgs)[4:]
    changed = [i for i, (a, b) in enumerate(zip(pruned, msgs)) if a is not b]
    assert changed == [2, 6, 10, 14]  # the four old tool messages, nothing else


def test_pruning_keeps_media_in_order_and_every_field() -> None:
    original = tool_message(mixed_result())
    (pruned, _recent) = ToolResultPruning(keep_recent=1, preview=100).prune(
        [original, tool_message(mixed_result(id="call_2"))]
    )
    (result,) = pruned.tool_results
    (source,) = original.tool_results
    assert media_of(result.output) == media_of(source.output)
    assert (result.id, result.name, result.is_error) == (source.id, source.name, source.is_error)
    assert {k: v for k, v in result.metadata.items() if k != PREVIEW_KEY} == source.metadata
    assert result.metadata[PREVIEW_KEY]["chars"] == 6000
    assert (pruned.id, pruned.metadata, pruned.name) == (original.id, original.metadata, "tools")


def test_pruning_again_changes_nothing_and_spares_offloaded_results(tmp_path: Path) -> None:
    msgs = history(3, output_size=5_000)
    offloaded = ToolResultEviction(tmp_path, limit=4_000, preview=1_000).evict(msgs, session="s")
    pruner = ToolResultPruning(keep_recent=0, preview=10)
    assert all(a is b for a, b in zip(pruner.prune(offloaded), offloaded))
    once = pruner.prune(msgs)
    assert all(a is b for a, b in zip(pruner.prune(once), once))


def test_a_window_larger_than_the_history_prunes_nothing() -> None:
    msgs = history(3, output_size=5_000)
    assert all(a is b for a, b in zip(ToolResultPruning(keep_recent=3).prune(msgs), msgs))


def test_keep_recent_must_be_a_non_negative_int() -> None:
    with pytest.raises(UserError):
        ToolResultPruning(keep_recent=-1)


def test_a_pruning_save_writes_the_previews_and_history_keeps_the_originals() -> None:
    msgs = history(250, output_size=3_000)  # 1,000 messages
    ledger = Ledger("memory://")
    first = ledger.save("s", msgs)
    window = 249  # one result leaves the window: one row rewritten
    pruned = ToolResultPruning(keep_recent=window, preview=ToolResultPreview(200)).prune(msgs)
    report = ledger.save("s", pruned)
    assert report.replaced == 1
    assert report.bytes_written == len(canonical_bytes(pruned[2])) < 1_000
    assert ledger.messages("s", version=first.version) == msgs


@tool
def fetch(n: int) -> str:
    """Fetch page n."""
    return f"page {n} " + "word " * 400


async def test_in_the_agent_each_step_prunes_what_left_the_window() -> None:
    ledger = AsyncLedger(MemoryStore())
    seen: list[bool] = []

    def step(answer: Msg):
        async def respond(messages: list[Msg], tools) -> Msg:
            seen.append(messages == await ledger.messages("s"))  # what is sent is what is saved
            return answer

        return respond

    calls = [
        Msg.assistant(ToolUseBlock(id=f"c{n}", name="fetch", input={"n": n})) for n in range(4)
    ]
    model = ScriptedModel([step(a) for a in [*calls, Msg.assistant("done")]])
    pruner = ToolResultPruning(keep_recent=1, preview=40)
    agent = ReActAgent(model, [fetch], store=ledger, middlewares=[pruner])
    events = [e async for e in agent.stream("read four pages", RuntimeContext("s"))]
    committed_tool_messages = [
        (e.message, e.version)
        for e in events
        if isinstance(e, MessageCommitted) and e.message.role == "tool"
    ]
    assert len(committed_tool_messages) == 4 and seen == [True] * 5
    stored = await ledger.messages("s")
    texts = [r.text for r in results(stored)]
    assert [len(t) < 100 for t in texts] == [True, True, True, False]
    for message, version in committed_tool_messages:  # each stayed whole at its own version
        (whole,) = message.tool_results
        assert len(whole.text) > 2_000 and PREVIEW_KEY not in whole.metadata
        assert message in await ledger.messages("s", version=version)
