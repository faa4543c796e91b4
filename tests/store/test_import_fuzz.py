"""Fuzzing ``import_``: a mutated export is refused with a typed error, or stored exactly.

Inputs are real exports (every block type, values with bytes, two lists) mutated byte-wise (as
``tests/messages/test_fuzz.py`` mutates single messages) and line-wise (lines dropped,
repeated, swapped, cut short). For every input, ``import_`` either raises an ``AgentLedgerError``
(``CodecError`` for a malformed line, ``UserError`` for a value or name a session cannot hold),
or the session it stored loads in a fresh ledger, every message reads, and the session equals
what the export says (``read_export``) and survives another export and import unchanged: an
accepted import can never leave a session that later fails to load.

Quick mode runs a few hundred inputs; long mode at least 100,000 and prints the counts::

    AGENTLEDGER_FUZZ=long python -m pytest -s tests/store/test_import_fuzz.py
"""

from __future__ import annotations

import io
import os
import random
from collections import Counter

from reliability import record

from agentledger.errors import AgentLedgerError
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.store.transfer import read_export
from agentledger.testing.samples import every_block_message, sample_conversation
from tests.messages.test_fuzz import mutate

LONG = os.environ.get("AGENTLEDGER_FUZZ", "quick") == "long"
COUNT = 100_000 if LONG else 400


def _export() -> bytes:
    ledger = Ledger("memory://")
    ledger.save_state(
        "s",
        lists={"context": [*every_block_message(), *sample_conversation(1, result_size=40)]},
        values={"summary": {"b": b"\x00\xff", "n": [1, 2.5, None]}, "title": "A title"},
    )
    ledger.save_state("s", lists={"notes": every_block_message()[:2]})
    buf = io.BytesIO()
    ledger.export("s", buf)
    return buf.getvalue()


def _mutate_lines(data: bytes, rng: random.Random) -> bytes:
    lines = data.split(b"\n")
    kind = rng.randrange(4)
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    if kind == 0:
        del lines[i]
    elif kind == 1:
        lines.insert(j, lines[i])
    elif kind == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        return data[: rng.randrange(len(data))]
    return b"\n".join(lines)


def _read_all(msgs: list[Msg]) -> None:
    for m in msgs:
        m.content  # noqa: B018 - the first read decodes and checks the stored bytes


def _check(data: bytes, n: int) -> str:
    ledger = Ledger("memory://")
    try:
        ledger.import_(data, session=f"t{n}")
    except AgentLedgerError:
        return "refused"
    _, lists, values = read_export(data)
    fresh = Ledger(ledger.store)
    state = fresh.load(f"t{n}")
    for msgs in state.lists.values():
        _read_all(msgs)
    assert state.lists == {name: msgs for name, msgs in lists.items() if msgs}
    assert state.values == values
    again = io.BytesIO()
    fresh.export(f"t{n}", again)
    fresh.import_(again.getvalue(), session=f"u{n}")
    assert Ledger(ledger.store).load(f"u{n}").lists == state.lists
    return "accepted"


def test_a_mutated_export_is_refused_typed_or_stored_exactly() -> None:
    original = _export()
    rng = random.Random(20261203)
    outcomes: Counter[str] = Counter()
    for n in range(COUNT):
        data = mutate(original, rng) if rng.random() < 0.8 else _mutate_lines(original, rng)
        outcomes[_check(data, n) if data != original else "unchanged"] += 1
    if LONG:
        print(f"import fuzz: {COUNT} inputs, {dict(outcomes)}")
    record("hostile input", "mutated exports imported", inputs=COUNT, outcomes=outcomes)
    assert outcomes["refused"] and outcomes["accepted"]  # the corpus reaches both outcomes


def test_an_export_with_an_unknown_key_or_a_second_header_is_refused() -> None:
    original = _export()
    header, _, rest = original.partition(b"\n")
    for bad in (
        original.replace(b'{"kind":"message"', b'{"kind":"message","extra":1', 1),
        header + b"\n" + header + b"\n" + rest,
    ):
        try:
            Ledger("memory://").import_(bad, session="x")
        except AgentLedgerError as exc:
            assert "line 2" in str(exc)
        else:
            raise AssertionError("accepted")
