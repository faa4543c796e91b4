"""``Ledger`` itself, over the reference store: what it remembers, how it re-plans, what it reads.

The conformance suite checks what every backend stores; these tests pin what the ledger does
between the caller and any backend: it remembers as committed only what it committed, it keeps
re-planning a save that lost a race, deriving a title does not read the session, and a fork or
an import of a state that holds nothing makes a session that holds nothing (it reported
version 0 and made none).
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable

import pytest

from agentledger import AsyncLedger
from agentledger.errors import ConflictError
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store import ledger as ledger_module
from agentledger.store.base import CommitPlan
from agentledger.store.memory import MemoryStore
from tests.store.backends import LedgerOn, backend, ledger_on  # noqa: F401  (fixtures)


class _HookedStore(MemoryStore):
    """A memory store that runs ``during_commit`` inside each commit, before applying it."""

    def __init__(self) -> None:
        super().__init__()
        self.during_commit: Callable[[CommitPlan], None] = lambda plan: None

    def commit(self, plan: CommitPlan) -> str | None:
        self.during_commit(plan)
        return super().commit(plan)


def test_an_element_replaced_during_a_commit_is_not_remembered_as_saved() -> None:
    store = _HookedStore()
    ledger = Ledger(store)
    live = [Msg.user(f"m{i}", id=f"m{i}") for i in range(5)]
    ledger.save("s", live)
    edited = live[2].replace(content="edited while the first save was committing")

    def edit_during_commit(plan: CommitPlan) -> None:
        live[2] = edited  # another thread edits the caller's list mid-commit
        store.during_commit = lambda plan: None

    store.during_commit = edit_during_commit
    live.append(Msg.user("m5", id="m5"))
    assert ledger.save("s", live).appended == 1
    report = ledger.save("s", live)
    assert not report.noop and report.replaced == 1
    assert Ledger(store).messages("s")[2].text == "edited while the first save was committing"


def test_threads_editing_one_list_lose_no_edit() -> None:
    """Many threads edit and save one shared list; whatever the interleaving, the final save
    leaves the store equal to the list (the race lost 4-11 of 200 edits before)."""
    store = MemoryStore()
    ledger = Ledger(store)
    live = [Msg.user(f"m{i}", id=f"m{i}") for i in range(20)]
    ledger.save("s", live)

    def editor(n: int) -> None:
        for round_ in range(25):
            position = (n * 7 + round_) % len(live)
            live[position] = live[position].replace(content=f"edit {n}.{round_}")
            ledger.save("s", live)

    threads = [threading.Thread(target=editor, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledger.save("s", live)
    assert Ledger(store).messages("s") == live


def test_a_save_without_expected_version_re_plans_as_long_as_others_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ledger_module, "_MAX_BACKOFF", 0.0005)
    store = _HookedStore()
    ledger, other = Ledger(store), Ledger(store)
    base = [Msg.user("base", id="base")]
    ledger.save("s", base)
    races = 0

    def another_writer_commits_first(plan: CommitPlan) -> None:
        nonlocal races
        if races < 50 and plan.lists[0].puts[-1][1].msg_id == "mine":  # not other's own commit
            races += 1  # far more races than any fixed retry count would take
            other.save("s", [*base, Msg.user(f"other {races}", id="o")])

    store.during_commit = another_writer_commits_first
    report = ledger.save("s", [*base, Msg.user("mine", id="mine")])
    assert races == 50 and report.version == 52
    assert Ledger(store).messages("s")[-1].text == "mine"


def test_with_expected_version_the_first_lost_race_is_reported() -> None:
    store = _HookedStore()
    ledger, other = Ledger(store), Ledger(store)
    ledger.save("s", [Msg.user("base", id="base")])

    def another_writer_commits_first(plan: CommitPlan) -> None:
        store.during_commit = lambda plan: None
        other.save("s", [Msg.user("other", id="o")])

    store.during_commit = another_writer_commits_first
    with pytest.raises(ConflictError):
        ledger.save("s", [Msg.user("mine", id="m")], expected_version=1)
    assert [m.text for m in Ledger(store).messages("s")] == ["other"]


def test_a_save_reads_nothing_before_its_commit_and_a_stale_one_is_planned_again(
    persistent_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit checks, under the write lock, the version and incarnation the save was
    planned at, so a save plans from the ledger's cache without reading the session first.
    When another writer moved the session, or deleted and created it again, the commit refuses
    and the save is planned again on what was committed: nothing of the other writer's is
    lost, and ``expected_version`` still refuses."""
    with Ledger(persistent_url) as mine, Ledger(persistent_url) as other:
        reads: list[str] = []
        for name in ("read_stamp", "read_head"):
            real = getattr(mine.store, name)
            monkeypatch.setattr(
                mine.store, name, lambda key, real=real, name=name: reads.append(name) or real(key)
            )
        a, b, c, d = (Msg.user(x, id=x) for x in "abcd")
        mine.save("s", [a])
        reads.clear()
        assert mine.save("s", [a, b]).version == 2
        assert reads == []

        other.save("s", [a, b, c])  # version 3, which mine has not seen
        assert mine.save("s", [a, b, d]).version == 4
        assert reads == ["read_head"]  # once, after the commit refused the stale plan
        assert [m.id for m in other.messages("s", version=3)] == ["a", "b", "c"]
        assert [m.id for m in other.messages("s")] == ["a", "b", "d"]

        other.delete("s")
        other.save("s", [c])  # the same id, a new session at version 1
        with pytest.raises(ConflictError):
            mine.save("s", [a, b, d, c], expected_version=4)
        assert mine.save("s", [c, d]).version == 2
        assert [v.version for v in other.history("s")] == [1, 2]
        assert [m.id for m in other.messages("s", version=1)] == ["c"]


def test_a_no_op_save_compares_the_list_once_and_checks_the_stamp(
    persistent_url: str, compared: list[int]
) -> None:
    """Nothing to write is decided only on a committed state confirmed by the store, and
    confirming it does not plan the save a second time; a stale cache plans again."""
    with Ledger(persistent_url) as mine, Ledger(persistent_url) as other:
        msgs = [Msg.user(f"m{i}", id=f"m{i}") for i in range(50)]
        mine.save("s", msgs)
        with Ledger(persistent_url) as reader:
            loaded = reader.messages("s")
        compared.clear()
        assert mine.save("s", loaded).noop
        assert compared == [50]

        other.save("s", [*msgs, Msg.user("more", id="more")])
        compared.clear()
        report = mine.save("s", loaded)  # the cache says "equal"; the store says otherwise
        assert not report.noop and report.truncated == 1
        assert len(compared) == 2


def test_saving_a_reloaded_context_without_user_text_decodes_no_message() -> None:
    store = MemoryStore()
    msgs = [Msg.system("rules"), *(Msg.assistant(f"step {i}") for i in range(2000))]
    Ledger(store).save("agent", msgs)
    ledger = Ledger(store)
    loaded = ledger.messages("agent")
    for n in range(3):
        loaded.append(Msg.assistant(f"more {n}"))
        assert ledger.save("agent", loaded).appended == 1
    fresh = Ledger(store)
    reloaded = fresh.messages("agent")
    reloaded[1000] = reloaded[1000].replace(content="edited")
    assert fresh.save("agent", reloaded).replaced == 1
    still_encoded = [m for m in loaded[:2001] + reloaded[:1000] if m._stored is not None]
    assert len(still_encoded) == 3001  # none of them was decoded to look for a title


def test_a_fork_or_import_of_nothing_makes_a_session_that_holds_nothing(
    backend: str,  # noqa: F811
    ledger_on: LedgerOn,  # noqa: F811
) -> None:
    """Each returned version 0 and made no session, reporting success: a fork or an import is
    asked to make a session, and an emptied one is made as it was, holding nothing."""
    with ledger_on(backend) as ledger:
        ledger.save("e", [Msg.user("hi", id="u")])
        ledger.save("e", [])
        plain = io.BytesIO()
        ledger.export("e", plain)
        makes = {
            "fork": lambda new: ledger.fork("e", new),
            "transcript": lambda new: ledger.import_openai(new, []),
            "transcript, overwrite": lambda new: ledger.import_openai(new, [], overwrite=True),
            "export": lambda new: ledger.import_(plain.getvalue(), session=new),
            "export, overwrite": lambda new: ledger.import_(
                plain.getvalue(), session=new, overwrite=True
            ),
            "save_state, create": lambda new: ledger.save_state(new, create=True),
            "async save_state, create": lambda new: asyncio.run(
                AsyncLedger(ledger).save_state(new, lists={"context": []}, create=True)
            ),
        }
        for i, (what, make) in enumerate(makes.items()):
            new = f"new{i}"
            report = make(new)
            assert (report.version, report.noop, report.appended) == (1, False, 0), what
            again = Ledger(ledger.store)  # what the store holds, not the ledger's memory of it
            assert again.exists(new) and again.version(new) == 1, what
            assert again.messages(new) == [] and again.load(new).values == {}, what
            assert again.save(new, [Msg.user("later", id="l")]).version == 2, what
        assert ledger.import_openai("new0", [], overwrite=True).version == 3  # empties it
        assert ledger.import_openai("new0", [], overwrite=True).noop  # already empty
        assert ledger.save_state("plain", lists={"context": []}).version == 0  # not asked to
        assert not ledger.exists("plain")
