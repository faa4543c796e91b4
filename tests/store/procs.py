"""Child-process workloads for the crash and concurrency tests (``python -m tests.store.procs``).

``crash URL [SESSION]``: save ``expected_list(v)`` for v = 1, 2, 3 ... forever (until killed),
with ``expected_version``; after a conflict (another writer saved v first) it reloads and goes on,
so several writers on one session still commit exactly ``expected_list(v)`` as version v.
``contend URL NAME COUNT``: append COUNT messages to one session with ``expected_version``,
retrying on conflict; print one JSON line with the versions won and the conflicts seen.
``replan URL NAME COUNT``: COUNT times, load the session "replanned", add a message and save
without ``expected_version`` (the ledger re-plans against whatever committed meanwhile); print
one JSON line with each acknowledged version and the ids saved in it, and any error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentledger.errors import ConflictError
from agentledger.messages import ImageBlock, Msg, TextBlock
from agentledger.store import Ledger

ROOT = Path(__file__).resolve().parents[2]
SESSION = "crash-test"
REPLANNED = "replanned"


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


def spawn(*args: str) -> subprocess.Popen[str]:
    """``python -m tests.store.procs ARGS`` in a fresh interpreter on this checkout."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.procs", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )


def run_children(command: str, url: str, names: list[str], count: int) -> list[dict[str, Any]]:
    """Run ``python -m tests.store.procs COMMAND URL NAME COUNT`` for each name at once;
    return the JSON line each printed last."""
    children = [spawn(command, url, name, str(count)) for name in names]
    results = []
    try:
        for child in children:
            out, err = child.communicate(timeout=300)
            assert child.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()
    return results


def crash(url: str, session: str = SESSION) -> None:
    ledger = Ledger(url)
    version = ledger.version(session)
    while True:
        try:
            report = ledger.save(session, expected_list(version + 1), expected_version=version)
        except ConflictError:
            version = ledger.version(session)
            continue
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


def replan_saves(url: str, name: str, count: int) -> dict[str, Any]:
    """The ``replan`` workload (also run in threads): each acknowledged version with the ids
    saved in it, and the error that stopped it, if any."""
    saved: list[tuple[int, list[str]]] = []
    error = None
    with Ledger(url) as ledger:
        try:
            for k in range(count):
                msgs = ledger.messages(REPLANNED)
                msgs.append(Msg.user(f"{name}-{k}", id=f"{name}-{k}", created_at=None))
                saved.append((ledger.save(REPLANNED, msgs).version, [m.id for m in msgs]))
        except Exception as exc:  # reported to the caller, which fails the test with it
            error = f"{type(exc).__name__}: {exc}"
    return {"saved": saved, "error": error}


def replan(url: str, name: str, count: int) -> None:
    print(json.dumps(replan_saves(url, name, count)))


def check_replanned(url: str, results: list[dict[str, Any]], writers: int, count: int) -> None:
    """Every ``replan`` save was acknowledged, each with its own version, and that version
    of the session holds exactly the list its writer saved: no acknowledged commit is lost."""
    errors = [r["error"] for r in results if r["error"] is not None]
    saved = [(version, ids) for r in results for version, ids in r["saved"]]
    assert not errors, f"{len(errors)} of {writers} writers stopped early: {errors[0]}"
    assert len(saved) == writers * count
    assert sorted(v for v, _ in saved) == list(range(1, writers * count + 1)), "a version twice"
    with Ledger(url) as ledger:
        assert [v.version for v in ledger.history(REPLANNED)] == list(range(1, len(saved) + 1))
        for version, ids in saved:
            assert [m.id for m in ledger.messages(REPLANNED, version=version)] == ids, version


if __name__ == "__main__":
    command, url, *rest = sys.argv[1:]
    if command == "crash":
        crash(url, *rest)
    elif command == "contend":
        contend(url, rest[0], int(rest[1]))
    elif command == "replan":
        replan(url, rest[0], int(rest[1]))
    else:
        raise SystemExit(f"unknown command {command!r}")
