"""``export --history`` and ``import`` reproduce every version; ``--format`` writes the other
formats; an export cut short is refused, not imported as a smaller session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.testing.samples import sample_conversation
from agentledger.wire import from_openai
from tests.cli.conftest import assert_error, cli


def _versions(ledger: Ledger, session: str) -> list[tuple[dict, dict]]:
    """Every version's lists (as digests) and values."""
    out = []
    for info in ledger.history(session):
        state = ledger.load(session, version=info.version)
        digests = {n: [m.digest for m in msgs] for n, msgs in state.lists.items()}
        out.append((digests, state.values))
    return out


@pytest.fixture
def rich_history(tmp_path: Path) -> str:
    """Session ``h``: appends, an edit, a cut, a second list, values set and deleted."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    conversation = sample_conversation(3, seed=2)
    with Ledger(url) as ledger:
        ledger.save("h", conversation[:4])
        ledger.save_state("h", lists={"context": conversation[:8]}, values={"summary": "s1"})
        edited = [*conversation[:8]]
        edited[2] = edited[2].replace(metadata={"edited": b"\x00\x01"})
        ledger.save_state("h", lists={"context": edited, "notes": [Msg.user("n", id="n")]})
        ledger.save_state("h", lists={"context": edited[:5]}, values={"summary": None, "k": [1]})
        ledger.save_state("h", lists={"notes": []}, values={"title": "T"})
    return url


def test_export_history_then_import_reproduces_every_version(rich_history: str, tmp_path: Path):
    path = tmp_path / "h.jsonl"
    result = cli("export", "h", str(path), "--history", "--store", rich_history)
    assert result.exit_code == 0, result.output
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    result = cli("import", str(path), "--store", target, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["versions"] == [1, 2, 3, 4, 5]
    with Ledger(rich_history) as source, Ledger(target) as copy:
        assert _versions(copy, "h") == _versions(source, "h")
        assert copy.load("h").lists == source.load("h").lists
    plain = tmp_path / "plain.jsonl"
    assert cli("export", "h", str(plain), "--store", rich_history).exit_code == 0
    result = cli("import", str(plain), "--session", "flat", "--store", target, "--json")
    assert json.loads(result.stdout)["versions"] == [1]


def test_a_cut_short_export_is_refused(rich_history: str, tmp_path: Path) -> None:
    for history in ([], ["--history"]):
        path = tmp_path / "h.jsonl"
        assert cli("export", "h", str(path), *history, "--store", rich_history).exit_code == 0
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-2]))
        line = assert_error(
            cli("import", str(path), "--session", "cut", "--store", rich_history), 1, "incomplete"
        )
        assert "cut short" in line
    with Ledger(rich_history) as ledger:
        assert not ledger.exists("cut")


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ((b'"value":"T"', b'"value":5'), "'title' value must be a str"),
        ((b'"list":"notes"', b'"list":"' + b"n" * 300 + b'"'), "list name"),
    ],
)
def test_an_import_refused_at_a_later_version_commits_none(
    rich_history: str, tmp_path: Path, damage: tuple[bytes, bytes], said: str
) -> None:
    """Versions are committed one by one: one a save refuses, after the first, left the
    session holding those before it (and a second try said it already exists)."""
    path = tmp_path / "h.jsonl"
    assert cli("export", "h", str(path), "--history", "--store", rich_history).exit_code == 0
    path.write_bytes(path.read_bytes().replace(*damage))
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    for _ in range(2):  # the same refusal the second time: nothing was left behind
        assert said in assert_error(cli("import", str(path), "--store", target), 2)
    with Ledger(target) as copy:
        assert not copy.exists("h")


def test_an_export_replaces_only_the_file_it_was_given(rich_history: str, tmp_path: Path):
    """The export is written beside its target under a name of its own, then moved over it:
    it once used ``FILE.tmp`` (overwriting and deleting a file of that name) and replaced
    whatever the path held, a symbolic link or a device node."""
    beside = tmp_path / "out.jsonl.tmp"
    beside.write_text("precious")
    real, link = tmp_path / "real.jsonl", tmp_path / "link.jsonl"
    real.write_text("old")
    real.chmod(0o640)
    link.symlink_to(real.name)
    for target in (tmp_path / "out.jsonl", link):
        assert cli("export", "h", str(target), "--store", rich_history).exit_code == 0
    assert beside.read_text() == "precious"
    written = (tmp_path / "out.jsonl").read_bytes().splitlines()[1:]  # after the dated header
    assert link.is_symlink() and real.read_bytes().splitlines()[1:] == written
    assert real.stat().st_mode & 0o777 == 0o640  # the file it replaced keeps its permissions
    before = sorted(p.name for p in tmp_path.iterdir())
    for target in ("/dev/null", str(tmp_path), ""):
        line = assert_error(cli("export", "h", target, "--store", rich_history), 2)
        assert "not a regular file" in line
    assert Path("/dev/null").is_char_device()
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no file left behind


@pytest.mark.parametrize(
    "content",
    [
        json.dumps({"messages": [{"role": "user", "content": "hi"}]}, indent=2),
        json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
        "\ufeff" + json.dumps([{"role": "user", "content": "hi"}]),
        "\n  " + json.dumps([{"role": "user", "content": "hi"}], indent=1),
    ],
    ids=["pretty", "another key first", "bom", "pretty list"],
)
def test_a_transcript_is_read_however_it_is_laid_out(tmp_path: Path, content: str) -> None:
    """It was told from an export by its first bytes: a pretty-printed ``{"messages": ...}``,
    one whose first key is another, or a BOM, was read as an export and refused."""
    path = tmp_path / "t.json"
    path.write_text(content, encoding="utf-8")
    url = f"sqlite:///{tmp_path / 't.db'}"
    result = cli("import", str(path), "--session", "t", "--store", url)
    assert result.exit_code == 0, result.output
    with Ledger(url) as ledger:
        assert [m.text for m in ledger.messages("t")] == ["hi"]


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "markdown"])
def test_export_formats(store: str, tmp_path: Path, fmt: str) -> None:
    result = cli("export", "chat", "-", "--format", fmt, "--store", store)
    assert result.exit_code == 0, result.output
    assert f"({fmt}) to stdout" in result.stderr
    if fmt == "openai":
        messages = json.loads(result.stdout)
        assert [m.text for m in from_openai(messages)] == ["hello there", "hi!"]
        path = tmp_path / "t.json"
        path.write_text(result.stdout)
        assert cli("import", str(path), "--session", "back", "--store", store).exit_code == 0
    elif fmt == "anthropic":
        body = json.loads(result.stdout)
        assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    else:
        assert result.stdout.startswith("# chat\n") and "## assistant\n\nhi!" in result.stdout
    assert_error(
        cli("export", "chat", "x", "--format", fmt, "--history", "--store", store), 2, "--history"
    )


def test_markdown_keeps_a_result_with_backticks_inside_its_fence() -> None:
    from agentledger.cli.formats import markdown
    from agentledger.messages import TextBlock, ToolResultBlock

    result = ToolResultBlock(id="c", name="sh", output=(TextBlock(text="```\nrm -rf\n````"),))
    text = markdown("s", 1, [Msg("tool", [result])])
    assert "`````\n```\nrm -rf\n````\n`````" in text


@pytest.fixture
def emptied(tmp_path: Path) -> str:
    """Session ``e`` at v2, emptied (v1 held one message); session ``live`` with a message."""
    url = f"sqlite:///{tmp_path / 'e.db'}"
    with Ledger(url) as ledger:
        ledger.save("e", [Msg.user("hi", id="u")])
        ledger.save("e", [])
        ledger.save("live", [Msg.user("hi", id="u")])
    return url


@pytest.mark.parametrize("content", ["[]", '{"messages": []}', "plain export"])
def test_an_import_of_nothing_makes_a_session_that_holds_nothing(
    emptied: str, tmp_path: Path, content: str
) -> None:
    """It said "imported e.json as v0 (1 version(s), 0 messages written)", exit 0, and made no
    session: an import is asked to make the session, empty or not."""
    path = tmp_path / "e.json"
    if content == "plain export":
        assert cli("export", "e", str(path), "--store", emptied).exit_code == 0
    else:
        path.write_text(content)
    for session, overwrite in (("new", []), ("other", ["--overwrite"])):
        result = cli("import", str(path), "--session", session, *overwrite, "--store", emptied)
        assert result.exit_code == 0, result.output
        assert result.stdout == f"imported {path} as v1 (1 version(s), 0 messages written)\n"
        with Ledger(emptied) as ledger:
            assert ledger.exists(session) and ledger.version(session) == 1
            assert ledger.messages(session) == []


def test_an_emptied_session_travels_with_its_history(emptied: str, tmp_path: Path) -> None:
    path = tmp_path / "e.jsonl"
    assert cli("export", "e", str(path), "--history", "--store", emptied).exit_code == 0
    result = cli("import", str(path), "--session", "copy", "--store", emptied)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"imported {path} as v1..v2 (2 version(s),")
    with Ledger(emptied) as ledger:
        assert ledger.version("copy") == 2 and ledger.load("copy").lists == {}


def test_an_empty_file_over_a_session_empties_it_as_a_new_version(
    emptied: str, tmp_path: Path
) -> None:
    path = tmp_path / "e.json"
    path.write_text("[]")
    result = cli("import", str(path), "--session", "live", "--overwrite", "--store", emptied)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"imported {path} as v2 (1 version(s), 0 messages written)")
    for session in ("live", "e"):  # already empty: nothing to commit, and it says so
        result = cli("import", str(path), "--session", session, "--overwrite", "--store", emptied)
        assert (
            result.stdout
            == f"nothing to import: the session already holds what {path} holds (v2)\n"
        )
    with Ledger(emptied) as ledger:
        assert ledger.version("live") == 2 and ledger.messages("live") == []
        assert ledger.messages("live", version=1) != []


def test_a_fork_of_an_emptied_session_makes_a_session_that_holds_nothing(emptied: str) -> None:
    """It said "forked e v2 -> copy (0 messages)" and made no session."""
    result = cli("fork", "e", "copy", "--store", emptied)
    assert result.exit_code == 0, result.output
    assert cli("fork", "e", "old", "--at-version", "1", "--store", emptied).exit_code == 0
    with Ledger(emptied) as ledger:
        assert ledger.exists("copy") and ledger.messages("copy") == []
        assert [m.id for m in ledger.messages("old")] == ["u"]
