"""SIGKILL during every kind of write, on every persistent backend: appends, middle replaces,
shifting inserts and deletes, history purges, forks and imports (``crash_ops.py`` runs them).

After each kill a fresh ledger must find, for every acknowledged commit, exactly what was
acknowledged: session "ops" at the last acknowledged version or the one in flight (never older,
never a mix), each acknowledged version still on record loading the content saved as it, each
acknowledged fork and import present with the content it copied, and an unacknowledged one
either absent or complete. The next writer's saves show the store still takes writes.

``AGENTLEDGER_OPS_KILLS`` sets the kills per backend (default 12; ``python -m reliability``
full mode sets 200).
"""

from __future__ import annotations

import collections
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from reliability import knob, record

from agentledger.errors import VersionNotFoundError
from agentledger.store import Ledger
from tests.store.backends import backend_of
from tests.store.crash_ops import SESSION, content_digest

ROOT = Path(__file__).resolve().parents[2]
KILLS = knob("AGENTLEDGER_OPS_KILLS", 12)
pytestmark = pytest.mark.slow


def _spawn(url: str, seed: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_ops", url, str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])},
    )


def _run_and_kill(url: str, seed: int, rng: random.Random) -> list[dict[str, Any]]:
    """Start a writer, let it acknowledge a few operations, SIGKILL it at a random moment;
    return the lines it printed (a line cut by the kill is dropped)."""
    child = _spawn(url, seed)
    assert child.stdout is not None
    out = b""  # read unbuffered from the pipe: nothing the writer printed is held back
    deadline = time.monotonic() + 60
    wanted = rng.randint(1, 12)
    try:
        while out.count(b'"ack"') + out.count(b'"purged"') < wanted:
            ready, _, _ = select.select([child.stdout], [], [], 1.0)
            chunk = os.read(child.stdout.fileno(), 65536) if ready else b""
            if ready and not chunk:
                break  # the writer died by itself: its stderr says why
            out += chunk
            if time.monotonic() > deadline:
                break
        time.sleep(rng.uniform(0, 0.02))
        child.send_signal(signal.SIGKILL)
        rest, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == -signal.SIGKILL, f"the writer died by itself: {err[-2000:]!r}"
    lines = []
    for text in (out + rest).splitlines():
        try:
            lines.append(json.loads(text))
        except json.JSONDecodeError:
            pass  # the last line, cut short by the kill
    return lines


class Acknowledged:
    """What the writers were told was committed, and what was in flight at each kill."""

    def __init__(self) -> None:
        self.versions: dict[int, str] = {}  # version of "ops" -> digest of its content
        self.copies: dict[str, str] = {}  # forked or imported session -> digest
        self.in_flight_copy: list[tuple[str, str]] = []  # (session, digest), never acknowledged
        self.last = 0
        self.ops: collections.Counter[str] = collections.Counter()

    def take(self, lines: list[dict[str, Any]]) -> tuple[int, str] | None:
        """Fold in one writer's lines; return the save of "ops" in flight at the kill, if any."""
        pending: dict[str, dict[str, Any]] = {}
        for line in lines:
            if "intent" in line:
                pending[line["intent"]] = line
            elif "ack" in line:
                intent = pending.pop(line["ack"])
                self.ops[intent["op"]] += 1
                if line["ack"] == SESSION:
                    self.versions[line["version"]] = intent["digest"]
                    self.last = line["version"]
                else:
                    self.copies[line["ack"]] = intent["digest"]
            elif "purged" in line:
                self.ops["purge"] += 1
        flight = pending.pop(SESSION, None)
        self.in_flight_copy += [(name, p["digest"]) for name, p in pending.items()]
        return (flight["version"], flight["digest"]) if flight else None

    def check(self, ledger: Ledger, flight: tuple[int, str] | None) -> int:
        """Everything acknowledged is there, exactly; return the version "ops" loaded at."""
        state = ledger.load(SESSION)
        found = (state.version, content_digest(list(state.context)))
        if flight is not None and found == flight:
            self.versions[flight[0]] = flight[1]  # the save in flight committed: now it is acked
            self.last = flight[0]
        assert found == (self.last, self.versions[self.last]), (
            f"loaded version {found[0]} (in flight: {flight and flight[0]}), "
            f"last acknowledged {self.last}: lost, older or a mix"
        )
        for info in ledger.history(SESSION):  # every version still on record, as acknowledged
            try:
                msgs = ledger.messages(SESSION, version=info.version)
            except VersionNotFoundError:
                continue  # purged
            if info.version in self.versions:
                assert content_digest(msgs) == self.versions[info.version], info.version
        for name, digest in self.copies.items():
            assert content_digest(ledger.messages(name)) == digest, f"{name} changed"
        for name, digest in self.in_flight_copy:
            if ledger.exists(name):
                assert content_digest(ledger.messages(name)) == digest, f"{name} half-written"
        return state.version


def test_sigkill_during_any_write_keeps_every_acknowledged_commit(persistent_url: str) -> None:
    url, rng = persistent_url, random.Random(21)
    acked = Acknowledged()
    in_flight_committed = 0
    for kill in range(KILLS):
        lines = _run_and_kill(url, seed=kill, rng=rng)
        flight = acked.take(lines)
        with Ledger(url) as ledger:
            version = acked.check(ledger, flight)
        in_flight_committed += flight is not None and version == flight[0]
    figures = {
        "kills": KILLS,
        "acknowledged": dict(sorted(acked.ops.items())),
        "versions": acked.last,
        "in-flight save found committed": in_flight_committed,
        "forks and imports checked": len(acked.copies) + len(acked.in_flight_copy),
    }
    print(f"\n{figures}")
    record(
        "crash",
        "SIGKILL during any write (edit, purge, fork, import)",
        backend=backend_of(url),
        **figures,
    )
    assert acked.last > KILLS and acked.ops["fork"] and acked.ops["import"] and acked.ops["purge"]
