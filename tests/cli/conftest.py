"""Fixtures for the command line: an isolated environment, a small store, and checks that a
failure is one line on stderr with the documented exit code."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from agentledger.cli import app
from agentledger.messages import Msg
from agentledger.store import Ledger

runner = CliRunner()


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No setting leaks in from the machine: no store, tenant, model or config file."""
    for var in (
        "AGENTLEDGER_STORE",
        "AGENTLEDGER_TENANT",
        "AGENTLEDGER_MODEL",
        "AGENTLEDGER_DEBUG",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AGENTLEDGER_CONFIG", str(tmp_path / "no-config.toml"))


def cli(*args: str, input: str | bytes | None = None, env: dict | None = None) -> Result:
    """Run ``agentledger ARGS`` in-process (stdout and stderr kept apart)."""
    return runner.invoke(app, list(args), input=input, env=env, catch_exceptions=False)


def assert_error(result: Result, code: int, *words: str) -> str:
    """The run failed with exit ``code`` and one line on stderr containing ``words``, no
    traceback and nothing on stdout; returns that line."""
    assert result.exit_code == code, (result.exit_code, result.output)
    assert result.stdout == "", result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> str:
    """A SQLite store holding session ``chat`` at version 2 (the answer edited in v2)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Ledger(url) as ledger:
        ledger.save("chat", [Msg.user("hello there", id="u"), Msg.assistant("hi", id="a")])
        ledger.save("chat", [Msg.user("hello there", id="u"), Msg.assistant("hi!", id="a")])
    return url
