"""The command line: every command has help, the demo runs offline, session commands work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentledger.cli import app
from agentledger.messages import Msg
from agentledger.store import Ledger

runner = CliRunner()
COMMANDS = sorted(c.name for c in app.registered_commands if c.name)


def test_every_command_has_help() -> None:
    assert {"demo", "sessions", "show", "history", "export", "import"} <= set(COMMANDS)
    for name in COMMANDS:
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        command = next(c for c in app.registered_commands if c.name == name)
        assert (command.callback.__doc__ or "").strip(), f"{name} has no help text"


def test_python_dash_m_runs_the_command(tmp_path: Path) -> None:
    """``python -m agentledger``, for an environment whose scripts are not on PATH."""
    import subprocess
    import sys

    url = f"sqlite:///{tmp_path / 'none.db'}"
    result = subprocess.run(
        [sys.executable, "-m", "agentledger", "show", "s", "--store", url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 3 and result.stderr.startswith("error: no store at")


def test_demo_runs_offline_and_ends_valid(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    result = runner.invoke(app, ["demo", "--store", url, "--turns", "5"], env={"COLUMNS": "150"})
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    out = result.output
    assert "interrupted (user); saved v8, kept: assistant [thinking, text] Let me check Rome" in out
    assert "saved v3   tool calls marked as started" in out
    assert "died (exit code 9)" in out
    assert "[result error t3-book] The call to book_table started" in out
    assert "pass strict validation ✓" in out and "nothing written" in out
    assert f"agentledger sessions --store {url}" in out
    with Ledger(url) as ledger:
        history = ledger.messages("agent-demo-1")
        assert [m.role for m in history].count("tool") == 3
        assert not any(c.name == "book_table" for c in history[-1].tool_calls)


def test_the_demo_reruns_on_the_same_store(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    for run in (1, 2):
        result = runner.invoke(app, ["demo", "--store", url, "--turns", "2"])
        assert result.exit_code == 0, result.output
        assert result.stderr == "" and f"show agent-demo-{run} " in result.stdout
    with Ledger(url) as ledger:
        first, second = ledger.messages("agent-demo-1"), ledger.messages("agent-demo-2")
        assert len(first) == len(second) == 11
        assert ledger.messages("demo-1") and ledger.messages("own-loop-2")


def test_the_demo_runs_on_memory_and_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = runner.invoke(app, ["demo", "--store", "memory://", "--turns", "1"])
    assert result.exit_code == 0, result.output
    assert "skipped: a memory:// store dies with its process" in result.stdout
    assert "every tool call answered exactly once" in result.stdout
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    result = runner.invoke(app, ["demo", "--turns", "1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data" / "agentledger" / "demo.db").exists()


def test_demo_with_no_turns_is_a_usage_error() -> None:
    result = runner.invoke(app, ["demo", "--store", "memory://", "--turns", "0"])
    assert result.exit_code == 2 and "--turns" in result.stderr
    assert "Traceback" not in result.output


def test_sessions_show_history_search(store: str) -> None:
    out = runner.invoke(app, ["sessions", "--store", store]).output
    assert "chat" in out and "hello there" in out
    out = runner.invoke(app, ["show", "chat", "--store", store, "--version", "1"]).output
    assert "version 1" in out and "hi" in out and "hi!" not in out
    out = runner.invoke(app, ["history", "chat", "--store", store]).output
    assert "2" in out
    assert "chat" in runner.invoke(app, ["search", "hello", "--store", store]).output


def test_export_import_fork_delete(store: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    assert runner.invoke(app, ["export", "chat", str(path), "--store", store]).exit_code == 0
    result = runner.invoke(app, ["import", str(path), "--session", "copy", "--store", store])
    assert result.exit_code == 0, result.output
    transcript = tmp_path / "t.json"
    transcript.write_text(json.dumps([{"role": "user", "content": "from openai"}]))
    assert runner.invoke(app, ["import", str(transcript), "--store", store]).exit_code == 0
    assert (
        runner.invoke(
            app, ["fork", "chat", "branch", "--at-version", "1", "--store", store]
        ).exit_code
        == 0
    )
    with Ledger(store) as ledger:
        assert ledger.messages("copy") == ledger.messages("chat")
        assert ledger.messages("t")[0].text == "from openai"
        assert ledger.messages("branch")[1].text == "hi"
    assert "deleted" in runner.invoke(app, ["delete", "branch", "--yes", "--store", store]).output
    result = runner.invoke(app, ["show", "branch", "--store", store])
    assert result.exit_code != 0


def test_bad_store_url_is_a_clear_error() -> None:
    result = runner.invoke(app, ["sessions", "--store", "ftp://nope"])
    assert result.exit_code != 0 and "unknown store URL" in result.output


def test_every_command_is_in_the_readme() -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Command line", 1)[1].split("\n## ", 1)[0]
    for name in COMMANDS:
        assert f"`agentledger {name}" in section, f"{name} is not in README's Command line"
    for code in ("1", "2", "3", "4"):
        assert f"| {code} |" in section


def test_settings_come_from_flag_then_environment_then_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls = {n: f"sqlite:///{tmp_path / n}.db" for n in ("conf", "env", "flag")}
    for name, url in urls.items():
        with Ledger(url, tenant="acme") as ledger:
            ledger.save(f"in-{name}", [Msg.user(name)])
    config = tmp_path / "config.toml"
    config.write_text(f'store = "{urls["conf"]}"\ntenant = "acme"\nmodel = "scripted:x.json"\n')
    monkeypatch.setenv("AGENTLEDGER_CONFIG", str(config))

    def listed(*args: str, env: dict | None = None) -> list[str]:
        result = runner.invoke(app, ["sessions", "--json", *args], env=env)
        assert result.exit_code == 0, result.output
        return [s["session"] for s in json.loads(result.stdout)]

    assert listed() == ["in-conf"]
    assert listed(env={"AGENTLEDGER_STORE": urls["env"]}) == ["in-env"]
    assert listed("--store", urls["flag"], env={"AGENTLEDGER_STORE": urls["env"]}) == ["in-flag"]
    assert listed("--tenant", "default") == []
    from agentledger.cli.chat import resolve_model

    assert resolve_model(None) == "scripted:x.json"
    monkeypatch.setenv("AGENTLEDGER_MODEL", "openai:m")
    assert resolve_model(None) == "openai:m" and resolve_model("anthropic:c") == "anthropic:c"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("store = ", "cannot read the config file"),
        ('colour = "red"', "unknown key(s) 'colour'"),
        ("tenant = 3", "tenant in"),
    ],
)
def test_a_bad_config_file_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str, words: str
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content)
    monkeypatch.setenv("AGENTLEDGER_CONFIG", str(config))
    result = runner.invoke(app, ["sessions"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and words in result.stderr
    assert str(config) in result.stderr and result.stderr.count("\n") == 1
