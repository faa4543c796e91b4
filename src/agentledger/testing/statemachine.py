"""A Hypothesis state machine that checks a backend against a plain Python list.

It appends, replaces, inserts, deletes and truncates messages in a model list, saves at random
moments (sometimes from a reopened handle with an empty cache), reloads, and loads every past
version it saved, comparing each with what the model held at that version.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agentledger.messages import Msg, decode, encode
from agentledger.store import Ledger

__all__ = ["run_ledger_state_machine"]

_texts = st.text(min_size=0, max_size=20)


def _ledger_machine(open_ledger: Callable[[], Ledger]) -> type[RuleBasedStateMachine]:
    class LedgerMachine(RuleBasedStateMachine):
        """Model: ``self.model`` (the caller's list) and ``self.saved`` (version -> list)."""

        def __init__(self) -> None:
            super().__init__()
            self.session = f"sm-{uuid.uuid4().hex}"
            self.ledger = open_ledger()
            self.handles = [self.ledger]
            self.model: list[Msg] = []
            self.saved: dict[int, list[Msg]] = {}
            self.counter = 0

        def _new(self, text: str) -> Msg:
            self.counter += 1
            return Msg.user(text, id=f"m{self.counter}", metadata={"n": self.counter})

        @initialize()
        def start(self) -> None:
            assert self.ledger.load(self.session).version == 0

        @rule(text=_texts)
        def append(self, text: str) -> None:
            self.model.append(self._new(text))

        @precondition(lambda self: self.model)
        @rule(data=st.data(), text=_texts)
        def replace(self, data: st.DataObject, text: str) -> None:
            i = data.draw(st.integers(0, len(self.model) - 1))
            self.model[i] = self.model[i].replace(content=text)

        @rule(data=st.data(), text=_texts)
        def insert(self, data: st.DataObject, text: str) -> None:
            i = data.draw(st.integers(0, len(self.model)))
            self.model.insert(i, self._new(text))

        @precondition(lambda self: self.model)
        @rule(data=st.data())
        def delete(self, data: st.DataObject) -> None:
            del self.model[data.draw(st.integers(0, len(self.model) - 1))]

        @rule(data=st.data())
        def truncate(self, data: st.DataObject) -> None:
            del self.model[data.draw(st.integers(0, len(self.model))) :]

        @rule(rebuild=st.booleans())
        def save(self, rebuild: bool) -> None:
            msgs = [decode(encode(m)) for m in self.model] if rebuild else list(self.model)
            before = self.ledger.version(self.session)
            report = self.ledger.save(self.session, msgs)
            last = self.saved.get(before, [])
            if msgs == last and (before > 0 or not msgs):
                assert report.noop and report.version == before
            else:
                assert not report.noop and report.version == before + 1
                self.saved[report.version] = list(self.model)

        @rule()
        def reopen(self) -> None:
            self.ledger = open_ledger()
            self.handles.append(self.ledger)

        @rule()
        def reload_into_model(self) -> None:
            version = self.ledger.version(self.session)
            loaded = self.ledger.messages(self.session)
            assert loaded == self.saved.get(version, [])
            self.model = loaded

        @precondition(lambda self: self.saved)
        @rule(data=st.data())
        def load_past_version(self, data: st.DataObject) -> None:
            version = data.draw(st.sampled_from(sorted(self.saved)))
            assert self.ledger.messages(self.session, version=version) == self.saved[version]

        @invariant()
        def version_matches_saves(self) -> None:
            assert self.ledger.version(self.session) == (max(self.saved) if self.saved else 0)

        def teardown(self) -> None:
            for handle in self.handles:
                handle.close()

    return LedgerMachine


def run_ledger_state_machine(
    open_ledger: Callable[[], Ledger], *, max_examples: int = 40, stateful_step_count: int = 30
) -> None:
    """Run the state machine against the storage that ``open_ledger`` opens (new handle per
    call). Each example uses a fresh session id, so one storage serves every example."""
    machine = _ledger_machine(open_ledger)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=max_examples,
            stateful_step_count=stateful_step_count,
            deadline=None,
        ),
    )
