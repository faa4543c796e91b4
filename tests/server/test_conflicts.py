"""A thread another writer commits to between a run's load and its first save (its lease was
lost, or the writer takes none): the client's state is not saved over it, and the run is
refused with 409 ``thread_changed`` before any event, the other turn left the thread's live
end."""

from __future__ import annotations

from typing import Any

import pytest

from agentledger import Msg
from agentledger.server import create_app
from agentledger.store import Ledger, SessionKey, SessionState
from agentledger.store.aio import AsyncLedger
from agentledger.testing.scripted import ScriptedModel
from tests.server.conftest import client_for, user

THEIRS = [Msg.user("B's question", id="bq"), Msg.assistant("B's answer", id="ba")]


class _Overtaken(Ledger):
    """A ledger that, once ``armed``, lets another writer commit a turn to the thread right
    after its next load of the latest version (a ledger of its own on the same store)."""

    def __init__(self) -> None:
        super().__init__("memory://")
        self.armed = False

    def _load(self, key: SessionKey, version: int | None = None, **kwargs: Any) -> SessionState:
        state = super()._load(key, version, **kwargs)
        if self.armed and version is None:
            self.armed = False
            other = Ledger(self.store)
            other.save(key.session, [*other.messages(key.session), *THEIRS])
        return state


@pytest.mark.parametrize("messages", [[user("u1", "A's question")], []], ids=["run", "hydrate"])
async def test_client_state_is_not_saved_over_another_writers_commit(
    messages: list[dict[str, Any]],
) -> None:
    """The state's save re-planned over the other commit and the run took its version as the
    one it had loaded: its input save then replaced the other turn in the live context."""
    overtaken = _Overtaken()
    overtaken.save("t", [Msg.user("earlier", id="u0"), Msg.assistant("hi", id="a0")])
    app = create_app(model=ScriptedModel(["A's answer"]), store=AsyncLedger(overtaken))
    overtaken.armed = True
    body = {"threadId": "t", "runId": "r", "messages": messages, "state": {"step": 2}}
    async with client_for(app) as client:
        response = await client.post("/", json=body)
    assert response.status_code == 409, response.text
    assert response.json()["error"]["code"] == "thread_changed"
    fresh = Ledger(overtaken.store)
    assert [m.id for m in fresh.messages("t")] == ["u0", "a0", "bq", "ba"]
    assert fresh.version("t") == 2 and "agui.state" not in fresh.load("t").values
