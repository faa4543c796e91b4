"""``export_session(history=True)`` then ``import_versions`` reproduces every version, for any
sequence of saves (and purge: a history whose oldest version holds nothing is refused, with
nothing written); a mutated history export is refused with a typed error or replayed exactly."""

from __future__ import annotations

import io
import random

from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentledger.errors import AgentLedgerError
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store.export_format import read_snapshots
from agentledger.store.transfer import export_session, import_versions
from tests.messages.test_fuzz import mutate

_POOL = [Msg.user(f"m{i}", id=f"m{i}") for i in range(6)] + [
    Msg.assistant(f"edited {i}", id=f"m{i}") for i in range(6)
]

# one save: new contents for "context" and "notes" (None: leave as is) and a value (None: unset)
_lists = st.lists(st.sampled_from(_POOL), max_size=6)
_saves = st.lists(
    st.tuples(
        st.none() | _lists,
        st.none() | _lists,
        st.sampled_from([None, "keep", {"n": 1, "b": b"\x00"}, [1, 2], "text"]),
    ),
    min_size=1,
    max_size=8,
)


def _by_version(ledger: Ledger, session: str) -> list[tuple[int, dict, dict]]:
    out = []
    for info in ledger.history(session):
        state = ledger.load(session, version=info.version)
        digests = {n: [m.digest for m in msgs] for n, msgs in state.lists.items()}
        out.append((info.version, digests, state.values))
    return out


def _replay(saves: list) -> Ledger:
    ledger = Ledger("memory://")
    for context, notes, value in saves:
        lists = {n: m for n, m in (("context", context), ("notes", notes)) if m is not None}
        values = {} if value == "keep" else {"v": value}
        ledger.save_state("s", lists=lists, values=values)
    return ledger


@settings(max_examples=60, deadline=None)
@given(_saves)
def test_history_export_import_reproduces_every_version(saves: list) -> None:
    source = _replay(saves)
    if not source.exists("s"):
        return
    buf = io.BytesIO()
    export_session(source, "s", buf, history=True)
    target = Ledger("memory://")
    reports = import_versions(target, buf.getvalue())
    assert [r.version for r in reports] == [v.version for v in source.history("s")]
    assert _by_version(target, "s") == _by_version(source, "s")


@settings(max_examples=60, deadline=None)
@given(_saves, st.integers(min_value=1, max_value=8))
@example([(_POOL[:1], None, "keep"), ([], None, "keep")], 1)  # one version, emptied
@example([(_POOL[:1], None, "keep"), ([], None, "keep"), (_POOL[:2], None, "keep")], 2)
def test_a_purged_history_is_reproduced_whole(saves: list, keep_last: int) -> None:
    """Purged up to a version that holds nothing (every list emptied, no value), the history
    export's first version made no session: the import reported it as version 0, and a
    history of that version alone as an import of nothing, exit 0."""
    source = _replay(saves)
    if not source.exists("s"):
        return
    source.purge_history("s", keep_last=keep_last)
    buf = io.BytesIO()
    export_session(source, "s", buf, history=True)
    target = Ledger("memory://")
    reports = import_versions(target, buf.getvalue())
    assert all(r.version > 0 and not r.noop for r in reports)
    assert [_state(target, r.version) for r in reports] == [
        _state(source, v.version) for v in source.history("s")
    ]


def _state(ledger: Ledger, version: int) -> tuple[dict, dict]:
    state = ledger.load("s", version=version)
    return {n: [m.digest for m in msgs] for n, msgs in state.lists.items()}, state.values


def test_a_mutated_history_export_is_refused_or_replayed_exactly() -> None:
    source = _replay(
        [
            (_POOL[:4], None, {"n": 1, "b": b"\x00"}),
            ([_POOL[0], _POOL[7], *_POOL[2:5]], _POOL[:1], None),
            (_POOL[:2], [], "text"),
        ]
    )
    buf = io.BytesIO()
    export_session(source, "s", buf, history=True)
    original = buf.getvalue()
    rng = random.Random(16)
    outcomes = {"refused": 0, "accepted": 0}
    for n in range(300):
        data = mutate(original, rng)
        target = Ledger("memory://")
        try:
            reports = import_versions(target, data, session=f"t{n}")
        except AgentLedgerError:
            outcomes["refused"] += 1
            continue
        outcomes["accepted"] += 1
        _, snapshots = read_snapshots(data)
        for report, snapshot in zip(reports, snapshots, strict=True):
            state = Ledger(target.store).load(f"t{n}", version=report.version)
            assert state.lists == {k: v for k, v in snapshot.lists.items() if v}
            assert state.values == snapshot.values
    assert outcomes["refused"] and outcomes["accepted"]
