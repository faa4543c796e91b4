"""Session tools: ``diff`` two versions, ``check`` against a provider's rules, ``repair``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentledger.messages import Msg, ToolResultBlock, ToolUseBlock
from agentledger.store import Ledger
from agentledger.wire import validate
from tests.cli.conftest import assert_error, cli


def _json(*args: str, code: int = 0) -> dict:
    result = cli(*args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def broken(tmp_path: Path) -> str:
    """Session ``b``: a tool call that never got its result (what seed 003 left behind)."""
    url = f"sqlite:///{tmp_path / 'b.db'}"
    call = Msg.assistant([ToolUseBlock(id="c1", name="book", input={})], id="a1")
    with Ledger(url) as ledger:
        ledger.save("b", [Msg.user("book it", id="u1"), call, Msg.user("well?", id="u2")])
    return url


def test_diff_shows_added_removed_changed_and_values(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'd.db'}"
    one, two, three = Msg.user("one", id="1"), Msg.user("two", id="2"), Msg.user("three", id="3")
    with Ledger(url) as ledger:
        ledger.save("s", [one, two, three])
        ledger.save_state(
            "s",
            lists={"context": [one, two.replace(content="TWO"), Msg.user("four", id="4")]},
            values={"summary": {"n": 1}},
        )
    data = _json("diff", "s", "1", "2", "--store", url)
    ops = [(c["op"], c.get("message_id") or c.get("name")) for c in data["changes"]]
    assert ops == [("changed", "2"), ("removed", "3"), ("added", "4"), ("value", "summary")]
    assert data["changes"][0]["old"]["content"][0]["text"] == "two"
    assert data["changes"][3]["new"] == {"n": 1}
    out = cli("diff", "s", "1", "2", "--store", url).stdout
    assert "~ context[1] user      [text] TWO" in out and "- context[2]" in out
    assert "+ context[2] user      [text] four" in out and '= value summary: {"n": 1}' in out
    assert _json("diff", "s", "2", "2", "--store", url)["changes"] == []
    assert_error(cli("diff", "s", "1", "7", "--store", url), 3, "version 7")


def test_check_reports_every_finding_and_exits_1(broken: str, store: str) -> None:
    data = _json("check", "b", "--provider", "openai", "--store", broken, code=1)
    assert data["valid"] is False and data["provider"] == "openai"
    kinds = {(f["kind"], f["position"], f["tool_call_id"]) for f in data["findings"]}
    assert ("unanswered_call", 1, "c1") in kinds
    result = cli("check", "b", "--store", broken)
    assert result.exit_code == 1 and "unanswered_call\t1\ta1\tc1" in result.stdout
    assert result.stderr.count("\n") == 1 and "agentledger repair b" in result.stderr
    ok = _json("check", "chat", "--provider", "anthropic", "--store", store)
    assert ok["valid"] is True and ok["findings"] == [] and ok["messages"] == 2
    assert_error(cli("check", "b", "--provider", "gemini", "--store", broken), 2, "gemini")


@pytest.mark.parametrize(("strategy", "tool_messages"), [("drop", 0), ("error-result", 1)])
def test_repair_saves_a_new_version(broken: str, strategy: str, tool_messages: int) -> None:
    dry = _json("repair", "b", "--strategy", strategy, "--dry-run", "--store", broken)
    assert dry["changes"] and dry["version"] == 1
    with Ledger(broken) as ledger:
        assert ledger.version("b") == 1
    data = _json("repair", "b", "--strategy", strategy, "--store", broken)
    assert data["version"] == 2 and data["remaining"] == []
    with Ledger(broken) as ledger:
        repaired = ledger.messages("b")
        assert validate(repaired, target="openai") == []
        assert [m.role for m in repaired].count("tool") == tool_messages
        assert len(ledger.messages("b", version=1)) == 3
    again = cli("repair", "b", "--store", broken)
    assert again.exit_code == 0 and "nothing to repair" in again.stdout
    assert cli("check", "b", "--store", broken).exit_code == 0


def test_what_check_finds_for_a_provider_repair_fixes_for_it(tmp_path: Path) -> None:
    """check --provider anthropic told to run repair, which repaired for strict only and said
    there was nothing to repair: the history still failed the check."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    with Ledger(url) as ledger:  # valid for every provider but Anthropic: a late system message
        ledger.save(
            "a", [Msg.user("hi", id="u"), Msg.assistant("yes", id="a"), Msg.system("be brief")]
        )
    result = cli("check", "a", "--provider", "anthropic", "--store", url)
    assert result.exit_code == 1 and "bad_role_order" in result.stdout
    assert "(fix with: agentledger repair a --provider anthropic)" in result.stderr
    assert cli("check", "a", "--store", url).exit_code == 0
    data = _json("repair", "a", "--provider", "anthropic", "--store", url)
    assert data["changes"] and data["remaining"] == []
    assert cli("check", "a", "--provider", "anthropic", "--store", url).exit_code == 0
    assert_error(cli("repair", "a", "--provider", "agui", "--store", url), 2, "lenient")


@pytest.mark.parametrize("command", ["check", "repair"])
def test_a_list_the_session_does_not_hold_is_not_found(store: str, command: str) -> None:
    """A typo in --list checked an empty list and said the history was valid (exit 0)."""
    for name in ("contxt", "../x"):
        line = assert_error(cli(command, "chat", "--list", name, "--store", store), 3)
        assert f"holds no list {name!r}" in line and "its lists: context" in line


def test_repair_says_what_it_cannot_fix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    result = ToolResultBlock(id="c9", name="x", output=())
    with Ledger(url) as ledger:  # a tool result inside a user message: not repairable
        ledger.save("m", [Msg.user("hi", id="u"), Msg("user", [result], id="odd")])
    assert_error(cli("repair", "m", "--store", url), 1, "repair cannot fix")


@pytest.mark.parametrize(
    "command",
    [["rewind", "s", "--to-message", "a1"], ["repair", "s"]],
    ids=["rewind", "repair"],
)
def test_a_message_another_writer_adds_meanwhile_is_never_cut_unseen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """rewind and repair save what they read: a turn another writer committed between their
    load and their save was cut from the live list, exit 0. Now the save is at the version
    read, and the command fails with a conflict instead, the other turn kept."""
    import agentledger.cli.manage as manage
    import agentledger.cli.tools as tools

    url = f"sqlite:///{tmp_path / 's.db'}"
    call = Msg.assistant(ToolUseBlock(id="c9", name="t", input={}), id="a2")
    with Ledger(url) as ledger:
        ledger.save("s", [Msg.user("q1", id="u1"), Msg.assistant("a1", id="a1"), call])

    def racing(load):  # type: ignore[no-untyped-def]
        def load_then_another_writer(ledger, session, version=None):  # type: ignore[no-untyped-def]
            state = load(ledger, session, version)
            with Ledger(url) as other:
                other.save(session, [*other.messages(session), Msg.user("late", id="late")])
            return state

        return load_then_another_writer

    for module in (manage, tools):
        monkeypatch.setattr(module, "load_existing", racing(module.load_existing))
    line = assert_error(cli(*command, "--store", url), 4)
    assert "run the command again" in line
    with Ledger(url) as ledger:
        assert [m.id for m in ledger.messages("s")] == ["u1", "a1", "a2", "late"]
