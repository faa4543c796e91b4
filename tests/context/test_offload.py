"""Offload paths and the local filesystem: derived names, hostile ids, nothing outside the root."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger import InvalidIdError, Ledger, Msg, ToolResultBlock, ToolUseBlock, UserError
from agentledger.agent.tools import ToolContext
from agentledger.context import (
    LocalFilesystem,
    ToolResultEviction,
    default_offload_root,
    offload_path,
    parse_offload_path,
)
from agentledger.store import MemoryStore
from agentledger.store.jsonl import JsonlStore
from agentledger.store.sqlite import SqliteStore

HOSTILE = [
    "../../../escaped",
    "..",
    ".",
    "/etc/passwd",
    "C:\\Windows\\x",
    "a\x00b",
    "x" * 5000,
    "ü/../../ÿ",
    "%2E%2E%2F",
    "",
]


def files_under(path: Path) -> set[Path]:
    return {p for p in path.rglob("*") if p.is_file()}


def big(call_id: str, tool: str, text: str = "secret-free " * 100) -> Msg:
    return Msg.tool(ToolResultBlock(id=call_id, name=tool, output=text))


# -- paths ---------------------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(call_id=st.text(max_size=300), tool=st.text(max_size=300), text=st.text(max_size=50))
def test_any_call_id_and_tool_name_make_one_parseable_file_name(
    call_id: str, tool: str, text: str
) -> None:
    path = offload_path(text, session="../s", tenant="t/..", call_id=call_id, tool=tool)
    tenant, session, name = parse_offload_path(path)
    assert path == f"{tenant}/{session}/{name}"
    assert len(name) < 255 and "." not in tenant + session
    assert ".." not in path.split("/") and "\x00" not in path and not path.startswith("/")


def test_the_text_digest_keeps_reused_call_ids_apart() -> None:
    one = offload_path("first", session="s", call_id="call_1", tool="t")
    two = offload_path("second", session="s", call_id="call_1", tool="t")
    assert one != two
    assert one == offload_path("first", session="s", call_id="call_1", tool="t")


@pytest.mark.parametrize(
    "path",
    [
        "../x/y.0123456789abcdef0123456789abcdef.txt",
        "/etc/passwd",
        "a/b/../../../c.0123456789abcdef0123456789abcdef.txt",
        "a/b/c.0123456789abcdef0123456789abcdef.txt\x00",
        "a\\b\\c.0123456789abcdef0123456789abcdef.txt",
        "a/b/c.txt",
        "a/b/c/d.0123456789abcdef0123456789abcdef.txt",
        "a" * 100_000,
        "",
        None,
    ],
)
def test_a_path_the_module_could_not_have_made_is_refused(path: object) -> None:
    with pytest.raises(UserError):
        parse_offload_path(path)


@pytest.mark.parametrize("session", ["a\x00b", "s" * 300, ""])
def test_an_invalid_session_id_never_reaches_a_path(session: str) -> None:
    with pytest.raises(InvalidIdError):
        offload_path("text", session=session)


# -- the local filesystem ------------------------------------------------------------------------
def test_write_then_read_gives_the_same_text_exactly(tmp_path: Path) -> None:
    fs = LocalFilesystem(tmp_path / "root")
    text = "line\r\nnext\n\x00 ünïcode \ud800 lone surrogate\n"
    path = offload_path(text, session="s", call_id="c", tool="t")
    fs.write(path, text)
    assert fs.read(path) == text
    assert [p.name for p in files_under(tmp_path)] == [path.rsplit("/", 1)[1]]  # no temp file


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside, root / "default")
    fs = LocalFilesystem(root)
    path = offload_path("x", session="s", call_id="c", tool="t")
    with pytest.raises(UserError, match="outside"):
        fs.write(path, "x")
    assert files_under(outside) == set()


def test_default_roots_sit_beside_the_store(tmp_path: Path) -> None:
    sqlite = SqliteStore(tmp_path / "state.db")
    try:
        assert default_offload_root(Ledger(sqlite)) == tmp_path / "state.db.offload"
    finally:
        sqlite.close()
    jsonl = JsonlStore(tmp_path / "sessions")
    assert default_offload_root(jsonl) == tmp_path / "sessions" / ".offload"
    assert default_offload_root().name == "offload"
    with pytest.raises(UserError, match="LocalFilesystem"):
        LocalFilesystem.for_store(MemoryStore())


# -- hostile ids end to end: eviction writes and read_offloaded reads only inside the root --------
@pytest.mark.parametrize("hostile", HOSTILE, ids=[f"id{i}" for i in range(len(HOSTILE))])
def test_hostile_call_ids_and_tool_names_write_only_inside_the_root(
    tmp_path: Path, hostile: str
) -> None:
    root = tmp_path / "root"
    evictor = ToolResultEviction(root, limit=100, preview=10)
    msgs = [big(hostile, "tool"), big("call", hostile), big(hostile, hostile, "other " * 50)]
    out = evictor.evict(msgs, session="../../../session", tenant="/abs/tenant")
    assert all(r.metadata.get("_preview") for m in out for r in m.tool_results)
    written = files_under(tmp_path)
    assert len(written) == 3 and all(p.is_relative_to(root) for p in written)
    for msg, original in zip(out, msgs):
        (result,) = msg.tool_results
        path = result.metadata["_preview"]["path"]
        assert evictor.filesystem.read(path) == original.tool_results[0].text


def read(evictor: ToolResultEviction, path: str, session: str = "s", tenant: str = "default"):
    call = ToolUseBlock(id="r", name="read_offloaded", input={"path": path})
    return asyncio.run(evictor.read_tool.run(call, ToolContext(tenant, session, "r")))


def test_read_offloaded_never_reads_outside_the_root_or_the_session(tmp_path: Path) -> None:
    root = tmp_path / "root"
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP SECRET")
    evictor = ToolResultEviction(root, limit=100, preview=10)
    (mine,) = evictor.evict([big("c1", "t")], session="s")
    (theirs,) = evictor.evict([big("c1", "t", "theirs " * 50)], session="other")
    my_path = mine.tool_results[0].metadata["_preview"]["path"]
    their_path = theirs.tool_results[0].metadata["_preview"]["path"]
    assert read(evictor, my_path).text == big("c1", "t").tool_results[0].text
    hostile = [
        str(secret),
        "../secret.txt",
        f"default/s/../../../secret.{'0' * 32}.txt",
        my_path + "\x00",
        my_path.replace("/", "\\"),
        "x" * 10_000,
        their_path,  # a real file, but another session's
    ]
    for path in hostile:
        result = read(evictor, path)
        assert result.is_error and "TOP SECRET" not in result.text and "theirs" not in result.text
    other_tenant = read(evictor, my_path, tenant="acme")
    assert other_tenant.is_error


def test_a_session_reads_the_files_its_context_names_and_no_other(tmp_path: Path) -> None:
    """A fork holds its parent's offloaded results, and their paths: it reads them (through
    the agent, as the model would); a session whose context does not name a path still cannot
    read it."""
    from agentledger import ReActAgent, tool
    from agentledger.store.aio import AsyncLedger
    from agentledger.testing import ScriptedModel

    @tool
    def read_log(name: str) -> str:
        """The whole log."""
        return "INFO ok\n" * 1000

    def calls(*blocks: ToolUseBlock) -> ScriptedModel:
        return ScriptedModel([*(Msg.assistant(b) for b in blocks), Msg.assistant("done")])

    ledger = AsyncLedger(f"sqlite:///{tmp_path / 'state.db'}")
    evictor = ToolResultEviction(tmp_path / "offload", limit=1000, preview=100)
    tools = [read_log, evictor.read_tool]
    agent = ReActAgent(
        calls(ToolUseBlock(id="c1", name="read_log", input={"name": "a"})),
        tools,
        store=ledger,
        middlewares=[evictor],
    )
    asyncio.run(agent.run("read it", "parent"))
    (result,) = asyncio.run(ledger.messages("parent"))[2].tool_results
    path = result.metadata["_preview"]["path"]
    asyncio.run(ledger.fork("parent", "fork"))
    asyncio.run(ledger.save("stranger", [Msg.user("hi")]))
    read = ToolUseBlock(id="c2", name="read_offloaded", input={"path": path})
    for session, readable in (("parent", True), ("fork", True), ("stranger", False)):
        again = ReActAgent(calls(read), tools, store=ledger)
        asyncio.run(again.run("the whole log, please", session))
        (answer,) = asyncio.run(ledger.messages(session))[-2].tool_results
        assert answer.is_error is not readable, (session, answer.text)
        assert (answer.text == "INFO ok\n" * 1000) is readable


def test_read_offloaded_pages_by_characters(tmp_path: Path) -> None:
    evictor = ToolResultEviction(tmp_path, limit=100, preview=10)
    text = "".join(chr(0x41 + i % 26) for i in range(500))
    (msg,) = evictor.evict([big("c", "t", text)], session="s")
    path = msg.tool_results[0].metadata["_preview"]["path"]
    call = ToolUseBlock(
        id="r", name="read_offloaded", input={"path": path, "offset": 26, "limit": 5}
    )
    result = asyncio.run(evictor.read_tool.run(call, ToolContext("default", "s", "r")))
    assert result.text == "ABCDE"


def test_a_missing_file_is_reported_without_the_root(tmp_path: Path) -> None:
    evictor = ToolResultEviction(tmp_path / "hidden-root", limit=100, preview=10)
    path = offload_path("never written", session="s", call_id="c", tool="t")
    result = read(evictor, path)
    assert result.is_error and path in result.text and "hidden-root" not in result.text
