"""``AguiForms``: the AG-UI forms of a server's messages, kept by digest from run to run."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import Msg
from agentledger.server import forms as forms_module
from agentledger.server.forms import AguiForms
from agentledger.testing.samples import every_block_message
from agentledger.wire.agui import from_agui, to_agui
from tests.server.conftest import run, snapshot, user
from tests.wire.agui_strategies import agui_message

pytest.importorskip("ag_ui.core")


def _messages(sent: list[dict[str, Any]]) -> list[Msg]:
    """Messages a store can hold, with twins: the same content under another id."""
    msgs = [*from_agui(sent), *every_block_message()]
    return msgs + [m.replace(id=f"{m.id}-twin") for m in msgs[:2]]


@settings(max_examples=200)
@given(st.lists(agui_message(), max_size=5), st.integers(0, 6), st.data())
def test_the_forms_of_any_threads_are_to_agui_of_them(
    sent: list[dict[str, Any]], limit: int, data: Any
) -> None:
    msgs = _messages(sent)
    forms = AguiForms(max_messages=limit)
    for _ in range(3):  # threads that share messages, asked in turn: hits, misses, evictions
        thread = data.draw(st.lists(st.sampled_from(msgs), max_size=8))
        assert forms.thread(thread) == to_agui(thread)
        assert len(forms) <= limit


async def test_a_run_converts_only_the_messages_the_server_has_not_written_before(
    client: Any,
) -> None:
    converted: list[str] = []
    real = forms_module.to_agui

    def spy(msgs: list[Msg]) -> list[dict[str, Any]]:
        converted.extend(m.id for m in msgs)
        return real(msgs)

    with patch.object(forms_module, "to_agui", spy):
        history = snapshot(await run(client, "t", [user("u0", "first")]))
        assert len(converted) == 2  # the question and the answer, for the snapshot
        converted.clear()
        history = snapshot(await run(client, "t", [*history, user("u1", "second")]))
    assert converted == [d["id"] for d in history[2:]]  # the new question and its answer
