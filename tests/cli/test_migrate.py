"""``migrate``: every session and every version move between stores, verified by digest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentledger.cli.migrate import version_digests
from agentledger.messages import Msg
from agentledger.store import Ledger
from agentledger.testing.samples import every_block_message, sample_conversation
from tests.cli.conftest import assert_error, cli
from tests.store.pg import fresh_schema, require_server


def _fill(url: str) -> None:
    """Two tenants; sessions with edits, cuts, two lists, values with bytes, and media."""
    conversation = sample_conversation(4, seed=3)
    with Ledger(url) as ledger:
        for n in range(3):
            ledger.save(f"s{n}", conversation[: 4 * (n + 1)])
            ledger.save_state(
                f"s{n}",
                lists={"context": conversation[: 4 * (n + 1) - 1], "media": every_block_message()},
                values={"summary": {"b": b"\x00\xff", "n": n}},
            )
        ledger.save("s0", [Msg.user("rewritten", id="r")])
        ledger.save("other", [Msg.user("acme's")], tenant="acme")


def _everything(url: str, tenants: tuple[str, ...] = ("default", "acme")) -> dict:
    out = {}
    with Ledger(url) as ledger:
        for tenant in tenants:
            for info in ledger.list_sessions(tenant=tenant):
                out[tenant, info.session_id] = [
                    (v.version, version_digests(ledger, info.session_id, v.version, tenant))
                    for v in ledger.history(info.session_id, tenant=tenant)
                ]
    return out


@pytest.mark.postgres
def test_jsonl_to_sqlite_to_postgres_keeps_every_digest_and_version(tmp_path: Path) -> None:
    server = require_server()
    jsonl, sqlite = f"jsonl:///{tmp_path / 'j'}", f"sqlite:///{tmp_path / 's.db'}"
    _fill(jsonl)
    expected = _everything(jsonl)
    assert len(expected) == 4 and len(expected["default", "s0"]) == 3
    with fresh_schema(server) as schema:
        postgres = f"{server}?schema={schema}"
        for source, target in ((jsonl, sqlite), (sqlite, postgres)):
            result = cli(
                "migrate", "--from", source, "--to", target, "-t", "default", "-t", "acme", "--json"
            )
            assert result.exit_code == 0, result.output
            report = json.loads(result.stdout)
            assert {(s["tenant"], s["session"]) for s in report["sessions"]} == set(expected)
            assert not any(s["renumbered"] for s in report["sessions"])
            assert _everything(target) == expected
        again = cli("migrate", "--from", sqlite, "--to", postgres)
        assert_error(again, 4, "already exist", "nothing was copied")


def test_migrate_refuses_the_same_store_a_missing_source_and_a_memory_target(
    tmp_path: Path,
) -> None:
    """Into memory:// it copied every session, verified them and exited 0, and the copy
    ended with the command."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    assert_error(cli("migrate", "--from", url, "--to", url), 2, "same store")
    target = f"sqlite:///{tmp_path / 't.db'}"
    assert_error(cli("migrate", "--from", url, "--to", target), 3, "no store at")
    assert not (tmp_path / "t.db").exists()
    _fill(url)
    for to in ("memory://", "memory://x"):
        assert_error(cli("migrate", "--from", url, "--to", to), 2, "--to memory://", "lasts")


def test_a_purged_source_is_renumbered_and_still_verified(tmp_path: Path) -> None:
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with Ledger(source) as ledger:
        for n in range(1, 4):
            ledger.save("p", [Msg.user(str(i), id=str(i)) for i in range(n)])
        ledger.purge_history("p", keep_last=2)
    result = cli("migrate", "--from", source, "--to", target)
    assert result.exit_code == 0, result.output
    assert "renumbered from v1" in result.stdout
    with Ledger(source) as a, Ledger(target) as b:
        assert version_digests(a, "p", 2, "default") == version_digests(b, "p", 1, "default")
        assert a.load("p").lists == b.load("p").lists


def test_a_session_whose_history_starts_empty_is_copied_as_it_is(tmp_path: Path) -> None:
    """Its history purged up to an emptied version: the import made no session of that
    version, the verification then asked the target for version 0, and the migration failed
    with the sessions before it copied (or, for a session holding only that version, said it
    was copied and verified while the target had no such session)."""
    source, target = f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}"
    with Ledger(source) as ledger:
        ledger.save("kept", [Msg.user("k", id="k")])
        for session in ("gone", "back"):
            ledger.save(session, [Msg.user("x", id="x")])
            ledger.save(session, [])
        ledger.purge_history("gone", keep_last=1)  # v2 only: nothing
        ledger.save("back", [Msg.user("b", id="b")])
        ledger.purge_history("back", keep_last=2)  # v2, nothing, then v3
    result = cli("migrate", "--from", source, "--to", target)
    assert result.exit_code == 0, result.output
    with Ledger(source) as a, Ledger(target) as b:
        assert {i.session_id for i in b.list_sessions()} == {"kept", "gone", "back"}
        for session in ("kept", "gone", "back"):
            assert a.load(session).lists == b.load(session).lists, session
        assert b.messages("gone") == [] and [m.id for m in b.messages("back")] == ["b"]
        assert b.messages("back", version=1) == []  # renumbered from v2, empty as it was
