"""Every failure is one line on stderr with a documented exit code, in every command; a read
never creates a store; ``--debug`` shows the traceback. The cases are the ones a new user hit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentledger.cli.errors import EXIT_CONFLICT, EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_USAGE
from agentledger.messages import Msg
from agentledger.store import Ledger
from tests.cli.conftest import assert_error, cli


@pytest.mark.parametrize(
    "args",
    [
        ["show", "nosuch"],
        ["history", "nosuch"],
        ["export", "nosuch", "x.jsonl"],
        ["fork", "nosuch", "x1"],
        ["delete", "nosuch", "--yes"],
        ["purge", "nosuch", "--yes"],
        ["rewind", "nosuch", "--to-message", "u"],
    ],
)
def test_a_missing_session_is_not_found_in_every_command(store: str, args: list[str]) -> None:
    line = assert_error(cli(*args, "--store", store), EXIT_NOT_FOUND, "nosuch")
    assert "agentledger sessions --store" in line


@pytest.mark.parametrize(
    "args", [["show", "chat", "--version", "99"], ["fork", "chat", "x", "--at-version", "99"]]
)
def test_a_missing_version_is_not_found(store: str, args: list[str]) -> None:
    assert_error(
        cli(*args, "--store", store),
        EXIT_NOT_FOUND,
        "version 99",
        "agentledger history chat --store",
    )


def test_fork_onto_an_existing_session_is_a_conflict(store: str) -> None:
    assert cli("fork", "chat", "other", "--store", store).exit_code == 0
    assert_error(cli("fork", "chat", "other", "--store", store), EXIT_CONFLICT, "already exists")


def test_import_into_an_existing_session_names_overwrite(store: str, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    assert cli("export", "chat", str(path), "--store", store).exit_code == 0
    assert_error(cli("import", str(path), "--store", store), EXIT_CONFLICT, "'chat'", "--overwrite")
    assert cli("import", str(path), "--store", store, "--overwrite").exit_code == 0


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"kind":"header"\n', ["bad.jsonl", "line 1"]),
        (b"", ["bad.jsonl", "no header"]),
        (b'{"kind":"header","format":"agentledger.export/9","session":"s"}\n', ["export/9"]),
        (b"[1, 2", ["not valid JSON"]),
        (b"[" * 100_000, ["nested too deeply"]),
    ],
)
def test_import_of_a_bad_file_is_one_line(
    store: str, tmp_path: Path, content: bytes, words: list[str]
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    assert_error(cli("import", str(path), "--store", store), EXIT_FAILURE, *words)


def test_import_of_a_missing_file_is_not_found(store: str, tmp_path: Path) -> None:
    assert_error(
        cli("import", str(tmp_path / "nope.jsonl"), "--store", store), EXIT_NOT_FOUND, "nope.jsonl"
    )


def test_export_into_a_missing_directory_is_not_found(store: str, tmp_path: Path) -> None:
    target = tmp_path / "nodir" / "x.jsonl"
    assert_error(cli("export", "chat", str(target), "--store", store), EXIT_NOT_FOUND, "nodir")
    assert not target.parent.exists()


def test_usage_errors_exit_2(store: str) -> None:
    assert_error(cli("purge", "chat", "--keep-last", "0", "--store", store), EXIT_USAGE, "--help")
    assert_error(cli("search", "", "--store", store), EXIT_USAGE, "word")
    assert_error(cli("show", "--bogus"), EXIT_USAGE, "--bogus")
    assert_error(cli("show", "a/../b" * 100, "--store", store), EXIT_USAGE, "session id")
    assert_error(cli("sessions", "--store", "ftp://nope"), EXIT_USAGE, "unknown store URL")
    assert_error(cli("sessions", "--store", "sqlite:////"), EXIT_USAGE, "is a directory")
    directory = f"sqlite:///{Path(store.removeprefix('sqlite:///')).parent}"
    assert_error(cli("migrate", "--to", directory, "--from", store), EXIT_USAGE, "is a directory")
    assert_error(cli("sessions", "--store", "postgresql://[::1"), EXIT_USAGE, "PostgreSQL URL")
    for port in ("99999", "-1"):
        assert_error(cli("serve", "--port", port), EXIT_USAGE, "--port")


@pytest.mark.parametrize(
    "args",
    [
        ["import", "t.json", "--session", "x"],
        ["fork", "chat", "x"],
        ["rewind", "chat", "--to-message", "u"],
        ["repair", "chat"],
        ["delete", "chat", "--yes"],
        ["purge", "chat", "--yes"],
    ],
)
def test_a_command_that_writes_refuses_a_store_that_ends_with_it(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """import on memory:// said it imported, exit 0, into a store gone as the command
    exited; the others said the session was not found there."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.json").write_text('[{"role": "user", "content": "hi"}]')
    assert_error(cli(*args, "--store", "memory://"), EXIT_USAGE, "memory://", "lasts")
    assert_error(cli(*args, env={"AGENTLEDGER_STORE": "memory://"}), EXIT_USAGE, "memory://")
    if args[0] in ("rewind", "repair", "delete", "purge"):  # only reads: an empty store
        dry = cli(*args, "--dry-run", "--store", "memory://")
        assert_error(dry, EXIT_NOT_FOUND, "no session 'chat'")


_PAST = str(2**63)  # one more than any store holds


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["demo", "--turns", "1001"], "--turns"),  # ran for hours and filled the disk
        (["demo", "--turns", "1" + "0" * 30], "--turns"),
        (["serve", "--workers", "129"], "--workers"),  # as many processes
        (["show", "chat", "--version", "-1"], "--version"),  # was "no version -1", exit 3
        (["check", "chat", "--version", "-1"], "--version"),
        (["fork", "chat", "x", "--at-version", "-1"], "--at-version"),
        (["diff", "chat", "1", "--", "-1"], "v2"),
        (["diff", "chat", "1", _PAST], "v2"),
        (["show", "chat", "--version", _PAST], "--version"),
        (["sessions", "--limit", _PAST], "--limit"),  # was refused as "list_sessions.limit"
        (["sessions", "--offset", _PAST], "--offset"),
        (["show", "chat", "--limit", _PAST], "--limit"),
        (["search", "hi", "--limit", _PAST], "--limit"),
        (["purge", "chat", "--keep-last", _PAST, "--yes"], "--keep-last"),
    ],
)
def test_a_number_out_of_bounds_is_a_usage_error_naming_its_option(
    store: str, args: list[str], option: str
) -> None:
    assert_error(cli(*args, "--store", store), EXIT_USAGE, f"'{option}'", "--help")


def test_the_largest_limit_is_taken(store: str) -> None:
    """A limit of 2**63 - 1 was refused: the listing asked the store for one more."""
    result = cli("sessions", "--limit", str(2**63 - 1), "--store", store, "--json")
    assert result.exit_code == 0, result.output
    assert [row["session"] for row in json.loads(result.stdout)] == ["chat"]


def test_a_bad_sessions_cursor_is_a_usage_error(store: str) -> None:
    assert_error(cli("sessions", "--store", store, "--after", "nope"), EXIT_USAGE, "cursor")
    [row] = json.loads(cli("sessions", "--store", store, "--json").stdout)
    foreign = cli("sessions", "--store", store, "--tenant", "other", "--after", row["cursor"])
    assert_error(foreign, EXIT_USAGE, "another tenant")
    both = cli("sessions", "--store", store, "--offset", "1", "--after", row["cursor"])
    assert_error(both, EXIT_USAGE, "after or offset")


@pytest.mark.parametrize(
    "url",
    ["sqlite:///{}/nodir/x.db", "sqlite:///{}/nodir/x.db?synchronous=full", "jsonl:///{}/nodir"],
)
def test_a_read_never_creates_a_store(tmp_path: Path, url: str) -> None:
    url = url.format(tmp_path)
    for args in (["sessions"], ["show", "s"], ["history", "s"], ["search", "hi"]):
        assert_error(cli(*args, "--store", url), EXIT_NOT_FOUND, "no store at", url)
    assert not (tmp_path / "nodir").exists()


@pytest.mark.parametrize("content", [b"", "an application's own database"])
def test_a_read_never_makes_a_store_of_a_file_that_holds_none(
    tmp_path: Path, content: bytes | str
) -> None:
    """A SQLite file without agentledger's tables (empty, or another program's database) is
    no store: reading it once installed the tables in it."""
    import sqlite3

    path = tmp_path / "foreign.db"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE users (name TEXT)")
        conn.close()
    before = path.read_bytes()
    url = f"sqlite:///{path}"
    for args in (["sessions"], ["show", "s"], ["history", "s"], ["search", "hi"]):
        assert_error(cli(*args, "--store", url), EXIT_NOT_FOUND, "holds no agentledger tables")
    assert path.read_bytes() == before


def test_an_empty_tenant_or_store_is_refused_not_taken_for_the_default(store: str) -> None:
    """``-t ""`` deleted the default tenant's session; ``--store ""`` wrote to the default
    store in the user's data directory."""
    for args in (["delete", "chat", "--yes", "-t", ""], ["show", "chat", "--tenant", ""]):
        assert_error(cli(*args, "--store", store), EXIT_USAGE, "tenant id must not be empty")
    assert_error(cli("sessions", "--store", ""), EXIT_USAGE, "the store URL is empty")
    assert cli("show", "chat", "--store", store).exit_code == 0  # nothing was deleted


def test_destructive_commands_need_yes_in_a_script(store: str) -> None:
    assert_error(cli("delete", "chat", "--store", store), EXIT_USAGE, "--yes")
    assert_error(cli("purge", "chat", "--store", store), EXIT_USAGE, "--yes")
    assert cli("show", "chat", "--store", store).exit_code == 0


def test_debug_shows_the_traceback(store: str) -> None:
    result = cli("--debug", "show", "nosuch", "--store", store)
    assert result.exit_code == EXIT_NOT_FOUND
    assert "Traceback" in result.stderr and result.stderr.splitlines()[-1].startswith("error: ")
    result = cli("show", "nosuch", "--store", store, env={"AGENTLEDGER_DEBUG": "1"})
    assert "Traceback" in result.stderr
    for off in ("0", "false", "no", "off", "False"):
        result = cli("show", "nosuch", "--store", store, env={"AGENTLEDGER_DEBUG": off})
        assert "Traceback" not in result.stderr, off


def test_unreachable_postgres_fails_with_one_line() -> None:
    pytest.importorskip("psycopg")
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://postgres@127.0.0.1:{port}/test"
    assert_error(cli("sessions", "--store", url), EXIT_FAILURE, "cannot connect to PostgreSQL")


def test_a_save_whose_outcome_is_unknown_says_how_to_find_out() -> None:
    from agentledger.cli.errors import _message, exit_code_for
    from agentledger.errors import OutcomeUnknownError

    exc = OutcomeUnknownError("saving session 'chat' as version 3 failed, outcome unknown")
    assert exit_code_for(exc) == EXIT_FAILURE
    assert "agentledger history" in _message(exc)


_HUGE = "n" * 1_000_000


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["rewind", "chat", "--to-message", _HUGE], EXIT_NOT_FOUND, "no message"),
        (["rewind", "chat", "--to-message", "u", "--list", _HUGE], EXIT_NOT_FOUND, "list"),
        (["check", "chat", "--list", _HUGE], EXIT_NOT_FOUND, "holds no list"),
        (["repair", "chat", "--list", _HUGE], EXIT_NOT_FOUND, "holds no list"),
        (["show", _HUGE, "--version", "99"], EXIT_USAGE, "session id"),
        (["show", "chat", "--tenant", _HUGE], EXIT_USAGE, "tenant id"),
        (["import", "t.json", "--session", _HUGE], EXIT_USAGE, "session id"),
        (["sessions", "--after", _HUGE], EXIT_USAGE, "cursor"),
        (["sessions", "--store", "x" + _HUGE], EXIT_USAGE, "unknown store URL"),
        (["sessions", "--store", "sqlite:///" + _HUGE], EXIT_FAILURE, "too long"),  # the OS's
        (["check", "chat", "--provider", _HUGE], EXIT_USAGE, "--provider"),  # click's
    ],
)
def test_a_huge_name_is_not_echoed_whole(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list, code: int, said: str
) -> None:
    """A 1 MB list name, message id, store URL or option value came back whole: a megabyte on
    the terminal for one error line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.json").write_text('[{"role": "user", "content": "hi"}]')
    if "--store" not in args:
        args = [*args, "--store", store]
    line = assert_error(cli(*args), code, said)
    assert len(line) < 2100, line[:3000]
    if code == EXIT_NOT_FOUND or "store URL" in said or "cursor" in said:
        assert "'… (1,000,0" in line  # a name: its start, and how long it is


def test_an_unknown_config_key_of_a_megabyte_is_shown_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'{_HUGE} = "x"\n')
    monkeypatch.setenv("AGENTLEDGER_CONFIG", str(config))
    line = assert_error(cli("sessions"), EXIT_USAGE, "unknown key(s)", "(1,000,000 characters)")
    assert len(line) < 400


def test_a_hint_names_a_long_session_by_placeholder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    long = "l" * 200
    with Ledger(url) as ledger:
        ledger.save(long, [Msg.user("hi")])
    line = assert_error(cli("show", long, "--version", "9", "--store", url), EXIT_NOT_FOUND)
    assert f"agentledger history SESSION --store {url}" in line
