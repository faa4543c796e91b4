"""The real AG-UI JavaScript client (``@ag-ui/client`` ``HttpAgent``, pinned in
``tests/server/js/package-lock.json``) against ``agentledger serve`` with two uvicorn workers on
SQLite, the model being the scripted OpenAI-compatible server.

Node and npm are needed; the dependencies are installed with ``npm ci`` when missing. Without
node or npm these tests skip, except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentledger import Ledger
from agentledger.wire import check
from tests.server.model_server import ModelServer

JS = Path(__file__).parent / "js"
pytestmark = pytest.mark.slow


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{tool} is not installed; CI must run the AG-UI JavaScript client test")
        pytest.skip(f"{tool} is not installed")
    return path


@pytest.fixture(scope="module")
def node() -> str:
    node = _require("node")
    npm = _require("npm")
    entry_points = [
        JS / "node_modules" / "@ag-ui" / p / "dist" / "index.mjs" for p in ("client", "core")
    ]
    if not all(path.is_file() for path in entry_points):
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JS, check=True, timeout=600)
    return node


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(model: ModelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    db = tmp_path_factory.mktemp("serve") / "threads.db"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "OPENAI_BASE_URL": model.url, "OPENAI_API_KEY": "test"}
    command = [
        sys.executable, "-c", "from agentledger.cli import main; main()", "serve",
        "--model", "openai:test-model", "--store", f"sqlite:///{db}", "--port", str(port),
        "--workers", "2",
    ]  # fmt: skip
    log = (db.parent / "serve.log").open("w")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.close()
            pytest.fail(f"agentledger serve did not start: {log.name}")
        time.sleep(0.1)
    try:
        yield {"url": url + "/", "db": db}
    finally:
        process.terminate()
        process.wait(timeout=15)
        log.close()


def drive(node: str, served: dict, scenario: str, thread: str) -> dict[str, Any]:
    done = subprocess.run(
        [node, "agui_client.mjs", scenario, served["url"], thread],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def stored(served: dict, thread: str) -> list:
    with Ledger(f"sqlite:///{served['db']}") as ledger:
        msgs = ledger.messages(thread)
    ids = [m.id for m in msgs]
    assert len(ids) == len(set(ids)), "the stored thread has a duplicate"
    check(msgs, target="strict")
    return msgs


def since(model: ModelServer, start: int) -> list[list[str]]:
    return model.user_texts()[start:]


def test_three_turns_resending_the_full_history(
    node: str, served: dict, model: ModelServer
) -> None:
    start = len(model.requests)
    out = drive(node, served, "three_turns", "js-three")
    assert since(model, start) == [["turn 0"], ["turn 0", "turn 1"], ["turn 0", "turn 1", "turn 2"]]
    msgs = stored(served, "js-three")
    assert [m["id"] for m in out["messages"]] == [m.id for m in msgs] and len(msgs) == 6
    assert all(t[0] == "RUN_STARTED" and t[-1] == "RUN_FINISHED" for t in out["types"])


def test_a_frontend_tool_round_trip(node: str, served: dict, model: ModelServer) -> None:
    out = drive(node, served, "frontend_tool", "js-tool")
    assert out["pending"] == ["call_red"]
    msgs = stored(served, "js-tool")
    assert [m.role for m in msgs] == ["user", "assistant", "tool", "assistant"]
    assert [m["id"] for m in out["messages"]] == [m.id for m in msgs]


def test_a_fresh_client_hydrates_and_one_sends_only_new_messages(
    node: str, served: dict, model: ModelServer
) -> None:
    drive(node, served, "three_turns", "js-fresh")
    start = len(model.requests)
    hydrated = drive(node, served, "hydrate", "js-fresh")
    assert len(model.requests) == start  # no model call
    assert [m["id"] for m in hydrated["messages"]] == [m.id for m in stored(served, "js-fresh")]
    out = drive(node, served, "only_new", "js-fresh")
    turns = ["turn 0", "turn 1", "turn 2", "only the new one"]
    assert since(model, start) == [turns, [*turns, "and one more"]]
    msgs = stored(served, "js-fresh")
    assert len(msgs) == 10
    assert sorted(out["order"]) == sorted(m.id for m in msgs[:8])  # the client's order differs
    assert sorted(m["id"] for m in out["messages"]) == sorted(m.id for m in msgs)


def test_abort_mid_stream_then_a_new_run(node: str, served: dict, model: ModelServer) -> None:
    out = drive(node, served, "abort", "js-abort")
    msgs = stored(served, "js-abort")
    assert msgs[-2].text == "after the abort" and msgs[-1].text == "echo: after the abort"
    partial = msgs[1]
    assert partial.role == "assistant" and "w59" not in partial.text
    assert [m["id"] for m in out["messages"]] == [m.id for m in msgs]


def test_two_concurrent_runs_on_one_thread(node: str, served: dict) -> None:
    out = drive(node, served, "concurrent", "js-both")
    assert "409" in out["second"], out["second"]
    msgs = stored(served, "js-both")
    assert msgs[0].text == "slow 80" and len(msgs) == 2
