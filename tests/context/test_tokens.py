"""Token counts: the provider's usage while it is true, an estimate otherwise."""

from __future__ import annotations

from pathlib import Path

from agentledger import ImageBlock, Msg, ToolResultBlock, ToolUseBlock, Usage
from agentledger.context import (
    ToolResultEviction,
    ToolResultPruning,
    context_tokens,
    estimate_tokens,
)
from agentledger.context.tokens import MEDIA_TOKENS, usage_basis
from tests.context.samples import PNG, history, turn


def test_the_estimate_counts_text_calls_results_and_media() -> None:
    assert estimate_tokens([]) == 0
    assert estimate_tokens([Msg.user("x" * 400)]) == 4 + 100
    call = Msg.assistant(ToolUseBlock(id="c", name="abcd", input={"k": "v" * 10}))
    assert estimate_tokens([call]) == 4 + -(-(4 + len('{"k": "vvvvvvvvvv"}')) // 4)
    image = ToolResultBlock(id="c", output=(ImageBlock(media_type="image/png", data=PNG),))
    assert estimate_tokens([Msg.tool(image)]) == 4 + MEDIA_TOKENS


def test_usage_of_the_latest_answer_counts_and_only_what_follows_is_estimated() -> None:
    answered = turn(0, "r", usage=Usage(input_tokens=5_000, output_tokens=20))
    after = [Msg.user("y" * 40)]
    assert context_tokens([*answered, *after]) == 5_020 + estimate_tokens(after)
    assert usage_basis(answered) == answered[-1].id


def test_without_usage_everything_is_estimated() -> None:
    msgs = history(3)
    assert usage_basis(msgs) is None
    assert context_tokens(msgs) == estimate_tokens(msgs)


def test_an_edit_made_after_the_latest_answer_makes_its_usage_stale(tmp_path: Path) -> None:
    msgs = [*history(3, output_size=10_000), *turn(3, "r", usage=Usage(input_tokens=9_000))]
    assert context_tokens(msgs) == 9_000  # the answer is last: its usage is the count
    pruned = ToolResultPruning(keep_recent=1, preview=50).prune(msgs)
    assert context_tokens(pruned) == estimate_tokens(pruned) < 9_000
    evicted = ToolResultEviction(tmp_path, limit=5_000, preview=50).evict(msgs, session="s")
    assert context_tokens(evicted) == estimate_tokens(evicted) < 9_000
    fresh = [*pruned, *turn(4, "r", usage=Usage(input_tokens=700, output_tokens=3))]
    assert context_tokens(fresh) == 703  # the next answer brings a true count again
