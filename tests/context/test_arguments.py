"""Every call of ``agentledger.context`` refuses what is not a list of messages with a
``UserError`` saying what it got and where, and the compaction refuses a model or a prompt it
could not use when it is made (not at its first summary, mid-run)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentledger import Msg, UserError
from agentledger.context import (
    SummaryCompaction,
    ToolResultEviction,
    ToolResultPruning,
    context_tokens,
    estimate_tokens,
    summary_input,
)
from agentledger.testing import ScriptedModel

GOOD = [Msg.user("hi"), Msg.assistant("hello")]
#: What is not a list of messages, and what the error names of it.
JUNK: list[tuple[Any, str]] = [
    (None, "got NoneType"),
    ("hi", "got str"),
    ({"role": "user"}, "got dict"),
    (7, "got int"),
    ([*GOOD, None], "got a NoneType at position 2"),
    ([{"role": "user", "content": "hi"}], "got a dict at position 0"),
    ((Msg.user("a"), "b"), "got a str at position 1"),
]


def _calls(tmp_path: Path) -> dict[str, Callable[[Any], Any]]:
    evictor = ToolResultEviction(tmp_path, limit=100, preview=10)
    compaction = SummaryCompaction(ScriptedModel(["one", "two"]), max_messages=1, keep_recent=1)
    return {
        "evict": lambda msgs: evictor.evict(msgs, session="s"),
        "prune": ToolResultPruning().prune,
        "compact": lambda msgs: asyncio.run(compaction.compact(msgs, force=True)),
        "needed": compaction.needed,
        "estimate_tokens": estimate_tokens,
        "context_tokens": context_tokens,
        "summary_input": summary_input,
    }


@pytest.mark.parametrize(("junk", "said"), JUNK)
@pytest.mark.parametrize(
    "name",
    [
        "evict",
        "prune",
        "compact",
        "needed",
        "estimate_tokens",
        "context_tokens",
        "summary_input",
    ],
)
def test_each_call_refuses_what_is_not_a_list_of_messages(
    tmp_path: Path, name: str, junk: Any, said: str
) -> None:
    call = _calls(tmp_path)[name]
    call(GOOD)  # takes a list of messages
    call(tuple(GOOD))  # and any sequence of them
    with pytest.raises(UserError, match=f"^{name}: expected a list of Msg, {said}$"):
        call(junk)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"model": None}, "model must be a Model or a spec string, got NoneType"),
        ({"model": object()}, "model must be a Model or a spec string, got object"),
        ({"prompt": None}, "prompt must be a str, got NoneType"),
        ({"system": 5}, "system must be a str, got int"),
    ],
)
def test_a_compaction_that_could_not_summarize_is_refused_when_made(
    kwargs: dict[str, Any], said: str
) -> None:
    arguments = {"model": ScriptedModel(["summary"]), **kwargs}
    with pytest.raises(UserError, match=said):
        SummaryCompaction(**arguments)
