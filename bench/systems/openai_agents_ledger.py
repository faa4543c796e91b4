"""agentledger's ``LedgerSession`` (an OpenAI Agents SDK ``Session``) on ``sqlite://``.

Driven exactly as ``openai_agents`` drives ``SQLiteSession``, on the same items (built by the
SDK's own helpers, ``OpenAIAgents.convert``): ``add_items`` after each turn, ``get_items`` in a
fresh session to reload. The edit goes through the protocol like the peer's
(``clear_session`` + ``add_items``: ``edit="protocol"``) or through ``set_items``, the one call
``LedgerSession`` adds beyond the protocol (``edit="set_items"``: writes the edited item only).
Runs under the main interpreter, which needs ``openai-agents`` installed
(``pip install "agentledger[openai-agents]"``).
"""

from __future__ import annotations

import os
from importlib.metadata import version
from typing import Any

from bench.systems.openai_agents import SESSION, OpenAIAgents


class LedgerAgents(OpenAIAgents):
    durability = "agentledger sqlite://: WAL, synchronous=NORMAL (fsync at checkpoints)"

    def __init__(self, *, edit: str, **kw: Any) -> None:
        super().__init__(**kw)
        from agentledger.integrations.openai_agents import LedgerSession

        self._session_cls = LedgerSession
        self._edit = edit
        self.name = "openai-agents-ledger" + ("" if edit == "set_items" else "-protocol")
        edit_api = (
            "await session.set_items(all_items) (writes the edited item)"
            if edit == "set_items"
            else "await session.clear_session(); await session.add_items(all_items)"
        )
        self.api = {
            "grow": "await session.add_items(turn_items) after each turn (what Runner does)",
            "edit": edit_api,
            "noop": "await session.set_items(reloaded) (plans no write)"
            if edit == "set_items"
            else "n/a: append-only protocol",
            "reload": "await LedgerSession(id, Ledger(url)).get_items()",
        }

    def versions(self) -> dict[str, str]:
        return {**super().versions(), "agentledger": version("agentledger")}

    def path(self) -> str:
        return os.path.join(self.workdir, f"ledger{self.generation}.db")

    def open(self) -> Any:
        os.makedirs(self.workdir, exist_ok=True)
        return self._session_cls(SESSION, f"sqlite:///{self.path()}")

    def beside(self, handle: Any) -> Any:
        """A new session on the ledger ``handle`` opened (a server's session per request)."""
        return self._session_cls(SESSION, handle.ledger)

    def edit(self, handle: Any, live: list[Any], position: int) -> None:
        if self._edit == "set_items":
            self._run(handle.set_items(live))
        else:
            super().edit(handle, live, position)

    def persist_unchanged(self, handle: Any, loaded: Any) -> None:
        if self._edit != "set_items":
            super().persist_unchanged(handle, loaded)
        self._run(handle.set_items(loaded))
