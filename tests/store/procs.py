"""Child-process workloads for the crash and concurrency tests (``python -m tests.store.procs``).

``crash URL``: save ``expected_list(v)`` for v = 1, 2, 3 ... forever (until killed).
``contend URL NAME COUNT``: append COUNT messages to one session with ``expected_version``,
retrying on conflict; print one JSON line with the versions won and the conflicts seen.
"""

from __future__ import annotations

import json
import sys

from agentledger.errors import ConflictError
from agentledger.messages import ImageBlock, Msg, TextBlock
from agentledger.store import Ledger

SESSION = "crash-test"


def expected_list(version: int) -> list[Msg]:
    """The content committed at ``version``: positions change at different rates, the list
    grows and shrinks, and position 0 carries an image large enough to be stored as a blob."""
    msgs = [
        Msg.user(
            [
                TextBlock(text=f"image {version // 10}"),
                ImageBlock(media_type="image/png", data=bytes([version // 10 % 256]) * 5000),
            ],
            id="m0",
            created_at=None,
        )
    ]
    for i in range(1, 5 + version % 17):
        msgs.append(
            Msg.user(f"{version // (i % 4 + 1)}-{i}" + "x" * 300, id=f"m{i}", created_at=None)
        )
    return msgs


def crash(url: str) -> None:
    ledger = Ledger(url)
    version = ledger.version(SESSION)
    while True:
        report = ledger.save(SESSION, expected_list(version + 1), expected_version=version)
        version = report.version


def contend(url: str, name: str, count: int) -> None:
    ledger = Ledger(url)
    won: list[int] = []
    conflicts = 0
    attempts = 0
    for k in range(count):
        while True:
            attempts += 1
            state = ledger.load("contended")
            msgs = [*state.context, Msg.user(f"{name}-{k}", id=f"{name}-{k}", created_at=None)]
            try:
                report = ledger.save("contended", msgs, expected_version=state.version)
            except ConflictError:
                conflicts += 1
                continue
            won.append(report.version)
            break
    ledger.close()
    print(json.dumps({"won": won, "conflicts": conflicts, "attempts": attempts}))


if __name__ == "__main__":
    command, url, *rest = sys.argv[1:]
    if command == "crash":
        crash(url)
    elif command == "contend":
        contend(url, rest[0], int(rest[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")
