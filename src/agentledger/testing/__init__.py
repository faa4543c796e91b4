"""Test helpers shipped with the package, for our tests and for third-party backends.

- ``StoreConformance``: the store conformance suite (pytest); subclass it with an
  ``open_ledger`` fixture to check a backend.
- ``run_ledger_state_machine``: the Hypothesis state machine that drives random edits, saves,
  reloads and past-version loads against a backend and a plain list model.
- ``ScriptedModel``: a deterministic model for agent tests and offline demos.
- ``sample_conversation``: deterministic conversations (the benchmark workload).

pytest and Hypothesis are imported only when these are used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ScriptedModel", "StoreConformance", "run_ledger_state_machine", "sample_conversation"]


def __getattr__(name: str) -> Any:
    if name == "StoreConformance":
        from agentledger.testing.conformance import StoreConformance

        return StoreConformance
    if name == "run_ledger_state_machine":
        from agentledger.testing.statemachine import run_ledger_state_machine

        return run_ledger_state_machine
    if name == "ScriptedModel":
        from agentledger.testing.scripted import ScriptedModel

        return ScriptedModel
    if name == "sample_conversation":
        from agentledger.testing.samples import sample_conversation

        return sample_conversation
    raise AttributeError(name)
