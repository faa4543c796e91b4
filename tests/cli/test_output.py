"""Scriptable output: ``--json`` parses back, plain text in a pipe, rich tables on a terminal,
windows of long transcripts, ``-`` for stdout/stdin, and destructive commands that ask first."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from agentledger.cli.output import Output
from agentledger.messages import Msg, decode
from agentledger.store import Ledger
from tests.cli.conftest import cli


def _json(*args: str) -> object:
    result = cli(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_sessions_json_and_plain(store: str) -> None:
    [row] = _json("sessions", "--store", store)
    assert row["session"] == "chat" and row["version"] == 2 and row["messages"] == 2
    assert row["title"] == "hello there"
    assert datetime.fromisoformat(row["updated_at"]).utcoffset().total_seconds() == 0
    lines = cli("sessions", "--store", store).stdout.splitlines()
    assert lines[0].split("\t") == ["session", "title", "messages", "version", "updated (UTC)"]
    assert lines[1].split("\t")[:4] == ["chat", "hello there", "2", "2"]
    assert cli("sessions", "--store", store, "--offset", "1").stdout.count("\n") == 1


def test_sessions_page_after_a_cursor(store: str) -> None:
    with Ledger(store) as ledger:
        for i in range(4):
            ledger.save(f"s{i}", [Msg.user(f"session {i}", id="q")])
        every = [i.session_id for i in ledger.list_sessions()]
    rows = _json("sessions", "--store", store, "--limit", "2")
    assert [r["session"] for r in rows] == every[:2]
    seen = [r["session"] for r in rows]
    while rows:
        rows = _json("sessions", "--store", store, "--limit", "2", "--after", rows[-1]["cursor"])
        seen += [r["session"] for r in rows]
    assert seen == every
    first = cli("sessions", "--store", store, "--limit", "2")
    assert first.stdout.count("\n") == 3  # the header and two rows; the hint is on stderr
    hint = first.stderr.strip()
    assert hint.startswith("more sessions follow: --after ")
    rest = cli("sessions", "--store", store, "--limit", "3", "--after", hint.split()[-1])
    assert [line.split("\t")[0] for line in rest.stdout.splitlines()[1:]] == every[2:]
    assert rest.stderr == ""  # the last page: nothing follows
    assert cli("sessions", "--store", store, "--limit", str(len(every))).stderr == ""


def test_show_json_is_lossless_and_windows_work(store: str) -> None:
    data = _json("show", "chat", "--store", store, "--version", "1")
    assert data["version"] == 1
    msgs = [decode(json.dumps(m).encode()) for m in data["lists"]["context"]["messages"]]
    with Ledger(store) as ledger:
        assert msgs == ledger.messages("chat", version=1)
    data = _json("show", "chat", "--store", store, "--offset", "1", "--limit", "1")
    assert data["lists"]["context"]["count"] == 2
    assert [m["id"] for m in data["lists"]["context"]["messages"]] == ["a"]
    out = cli("show", "chat", "--store", store, "--limit", "1").stdout
    assert "showing 0..0" in out and "hello there" in out and "hi!" not in out


def test_history_json_and_labels(store: str) -> None:
    rows = _json("history", "chat", "--store", store)
    assert [(r["version"], r["appended"], r["replaced"]) for r in rows] == [(1, 2, 0), (2, 0, 2)]
    assert {"committed_at", "truncated", "values_set"} <= set(rows[0])
    header = cli("history", "chat", "--store", store).stdout.splitlines()[0]
    assert "committed (UTC)" in header and "values set" in header
    help_text = " ".join(cli("history", "--help").stdout.split())
    assert "named values" in help_text


def test_search_json(store: str) -> None:
    [hit] = _json("search", "hello", "--store", store)
    assert (hit["session"], hit["position"], hit["message_id"]) == ("chat", 0, "u")
    assert _json("search", "nothing-like-this", "--store", store) == []


def test_a_terminal_gets_a_table_of_one_line_rows() -> None:
    out = Output(terminal=True)
    out.console = out.console.__class__(record=True, width=80, force_terminal=True)
    long = "word " * 40
    out.table(("session", "title", "updated (UTC)"), [("s1", long, "2026-12-03 13:51:19")], None)
    text = out.console.export_text()
    [row] = [line for line in text.splitlines() if "s1" in line]
    assert "2026-12-03 13:51:19" in row and "…" in row and len(row) <= 80
    assert len(text.splitlines()) == 5  # top rule, header, rule, the row, bottom rule


def test_export_to_stdout_and_import_from_stdin(store: str) -> None:
    result = cli("export", "chat", "-", "--store", store)
    assert result.exit_code == 0 and result.stdout.startswith('{"kind":"header"')
    assert "exported 2 messages" in result.stderr and not Path("-").exists()
    result = cli("import", "-", "--session", "piped", "--store", store, input=result.stdout)
    assert result.exit_code == 0, result.output
    with Ledger(store) as ledger:
        assert ledger.messages("piped") == ledger.messages("chat")
    result = cli(
        "import",
        "-",
        "--session",
        "oa",
        "--store",
        store,
        "--json",
        input=json.dumps([{"role": "user", "content": "x"}]),
    )
    assert json.loads(result.stdout) == {"versions": [1], "messages_written": 1}


def test_delete_dry_run_yes_and_json(store: str) -> None:
    data = _json("delete", "chat", "--dry-run", "--store", store)
    assert data == {
        "session": "chat",
        "messages": 2,
        "versions": 2,
        "dry_run": True,
        "deleted": False,
    }
    assert "would delete" in cli("delete", "chat", "--dry-run", "--store", store).stdout
    result = cli("delete", "chat", "--store", store, input="n\n")
    assert result.exit_code != 0  # not a terminal: --yes is needed
    assert _json("delete", "chat", "--yes", "--store", store)["deleted"] is True
    with Ledger(store) as ledger:
        assert not ledger.exists("chat")


def test_purge_says_what_it_removed(store: str) -> None:
    out = cli("purge", "chat", "--dry-run", "--store", store).stdout
    assert "would forget versions v1..v1" in out and "v2..v2 still load" in out
    with Ledger(store) as ledger:
        assert ledger.version("chat") == 2 and ledger.messages("chat", version=1)
    data = _json("purge", "chat", "--yes", "--store", store)
    assert data["forgotten_versions"] == [1] and data["removed_rows"] == 2
    out = cli("purge", "chat", "--yes", "--store", store).stdout
    assert "forgot versions none" in out and "removed 0" in out


def test_fork_and_rewind(store: str) -> None:
    data = _json("fork", "chat", "b", "--at-version", "1", "--store", store)
    assert data["version"] == 1 and data["new_session"] == "b" and data["messages"] == 2
    with Ledger(store) as ledger:
        ledger.save("b", [*ledger.messages("b"), Msg.user("more", id="m")])
    data = _json("rewind", "b", "--to-message", "u", "--dry-run", "--store", store)
    assert (data["cut"], data["version"]) == (2, 2)
    data = _json("rewind", "b", "--to-message", "u", "--store", store)
    assert (data["kept"], data["cut"], data["version"]) == (1, 2, 3)
    with Ledger(store) as ledger:
        assert [m.id for m in ledger.messages("b")] == ["u"]
        assert [m.id for m in ledger.messages("b", version=2)] == ["u", "a", "m"]
    result = cli("rewind", "b", "--to-message", "zzz", "--store", store)
    assert result.exit_code == 3 and "no message 'zzz'" in result.stderr


HOSTILE = "\x1b]0;PWNED\x07\x1b[2J\x1b[31mred\x00\x7f\x9b1m tail"


def _raw_controls(text: str) -> set[str]:
    return {c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F}


def test_stored_text_reaches_the_output_as_text_never_as_terminal_commands(
    tmp_path: Path,
) -> None:
    """A title or a message holding escape sequences once set the terminal's window title,
    cleared its screen or coloured it; now every control character is written as an escape
    (``\\x1b``), on a terminal and in a pipe; ``--json`` stays exact."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Ledger(url) as ledger:
        ledger.save_state(
            "s", lists={"context": [Msg.user(f"find {HOSTILE}")]}, values={"title": HOSTILE}
        )
    for args in (["sessions"], ["show", "s"], ["history", "s"], ["search", "find"]):
        result = cli(*args, "--store", url)
        assert result.exit_code == 0, result.output
        assert not _raw_controls(result.stdout), (args, result.stdout)
        assert "\\x1b]0;PWNED\\x07" in result.stdout or args == ["history", "s"]
    out = Output(terminal=True)
    out.console = out.console.__class__(record=True, width=200, force_terminal=True)
    out.table(("session", "title"), [("s", HOSTILE)], None)
    out.text(HOSTILE, style="bold")
    assert "\\x1b[2J" in out.console.export_text()
    assert not _raw_controls(out.console.export_text(styles=False))
    [row] = _json("sessions", "--store", url)
    assert row["title"] == HOSTILE
