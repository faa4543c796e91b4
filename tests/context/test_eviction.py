"""Eviction with offload: seed 002's cases, failed writes, reused ids, the agent, save cost."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import (
    ImageBlock,
    Ledger,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserError,
)
from agentledger.agent.context import MessageCommitted, RuntimeContext
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import tool
from agentledger.context import LocalFilesystem, ToolResultEviction
from agentledger.context.marks import NOTE_KEY, PREVIEW_KEY, is_marker
from agentledger.messages import canonical_bytes
from agentledger.store import MemoryStore
from agentledger.store.aio import AsyncLedger
from agentledger.testing import ScriptedModel
from tests.context.samples import (
    PNG,
    WAV,
    history,
    media_of,
    mixed_result,
    results,
    tool_message,
)


class CountingFS(LocalFilesystem):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes: list[str] = []

    def write(self, path: str, text: str) -> None:
        self.writes.append(path)
        super().write(path, text)


class BrokenFS:
    def write(self, path: str, text: str) -> None:
        raise OSError(28, "No space left on device")

    def read(self, path: str) -> str:
        raise FileNotFoundError(path)


@pytest.fixture
def evictor(tmp_path: Path) -> ToolResultEviction:
    return ToolResultEviction(CountingFS(tmp_path / "offload"), limit=1_000, preview=100)


def the_result(msg: Msg) -> ToolResultBlock:
    (result,) = msg.tool_results
    return result


# -- seed 002 under offloading -------------------------------------------------------------------
def test_offloading_keeps_media_in_order_fields_and_names_the_recovery_path(
    evictor: ToolResultEviction,
) -> None:
    original = tool_message(mixed_result())
    (msg,) = evictor.evict([original], session="s")
    result = the_result(msg)
    source = the_result(original)
    assert media_of(result.output) == media_of(source.output)
    *cut, note = result.output
    assert [type(b).__name__ for b in cut] == [
        "TextBlock", "TextBlock", "ImageBlock", "AudioBlock", "TextBlock",
    ]  # fmt: skip
    assert (cut[0].text, cut[-1].text) == ("H" * 50, "T" * 50) and is_marker(cut[1])
    mark = result.metadata[PREVIEW_KEY]
    assert note.metadata[NOTE_KEY] == mark["path"] and mark["path"] in note.text
    assert mark["by"] == "eviction" and mark["chars"] == 6000
    assert (result.id, result.name, result.is_error) == (source.id, source.name, source.is_error)
    assert {k: v for k, v in result.metadata.items() if k != PREVIEW_KEY} == source.metadata
    for field in ("id", "name", "metadata", "created_at", "usage"):
        assert getattr(msg, field) == getattr(original, field)
    assert evictor.filesystem.read(mark["path"]) == source.text  # reads back identically


def test_a_failed_write_keeps_the_original_result(caplog: pytest.LogCaptureFixture) -> None:
    original = [Msg.user("hi"), tool_message(mixed_result())]
    out = ToolResultEviction(BrokenFS(), limit=1_000, preview=100).evict(original, session="s")
    assert out[1] is original[1]
    assert "No space left" in caplog.text


def test_a_failed_write_is_retried_at_the_next_step(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the root should be")
    msgs = [tool_message(mixed_result())]
    assert ToolResultEviction(blocker, limit=1_000, preview=100).evict(msgs, session="s") == msgs
    out = ToolResultEviction(tmp_path / "ok", limit=1_000, preview=100).evict(msgs, session="s")
    assert PREVIEW_KEY in the_result(out[0]).metadata


def test_an_evicted_result_is_never_evicted_twice(evictor: ToolResultEviction) -> None:
    once = evictor.evict([tool_message(mixed_result())], session="s")
    twice = evictor.evict(once, session="s")
    assert twice[0] is once[0]
    assert len(evictor.filesystem.writes) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("key", [NOTE_KEY, "_omitted"])
def test_a_result_whose_own_blocks_carry_a_marks_key_is_evicted_once(
    evictor: ToolResultEviction, key: str
) -> None:
    """A tool's own text block with a note's or a marker's key is the tool's text: it was left
    out of the preview, so the result came back unshortened, was given a note anyway, and was
    offloaded again at every later step, one more note and one more file each time."""
    text = TextBlock(text="y" * 2_000, metadata={key: "anything"})
    msgs = [Msg.tool(ToolResultBlock(id="c1", name="t", output=(text,)))]
    once = evictor.evict(msgs, session="s")
    assert the_result(once[0]).metadata[PREVIEW_KEY]["by"] == "eviction"
    for _ in range(3):
        assert evictor.evict(once, session="s")[0] is once[0]
    (written,) = evictor.filesystem.writes  # type: ignore[attr-defined]
    assert evictor.filesystem.read(written) == "y" * 2_000


def test_results_under_the_limit_and_read_back_answers_stay(evictor: ToolResultEviction) -> None:
    small = tool_message(mixed_result(head="h" * 400, tail="t" * 400))
    read_back = Msg.tool(ToolResultBlock(id="r", name="read_offloaded", output="x" * 5_000))
    msgs = [small, read_back]
    assert all(a is b for a, b in zip(evictor.evict(msgs, session="s"), msgs))


def test_a_reused_call_id_replaces_only_the_right_occurrence(
    evictor: ToolResultEviction,
) -> None:
    first = tool_message(mixed_result(head="small", tail="one"))
    second = tool_message(mixed_result(head="A" * 2000, tail="B" * 2000))
    third = tool_message(mixed_result(head="C" * 2000, tail="D" * 2000))
    out = evictor.evict([first, Msg.user("again"), second, third], session="s")
    assert out[0] is first
    paths = [the_result(out[i]).metadata[PREVIEW_KEY]["path"] for i in (2, 3)]
    assert paths[0] != paths[1]
    for path, source in zip(paths, (second, third)):
        assert evictor.filesystem.read(path) == the_result(source).text


def test_each_view_is_rebuilt_from_its_own_media(evictor: ToolResultEviction) -> None:
    """Two views of one call (inline media vs. the same media by URL) keep their own blocks."""
    inline = tool_message(mixed_result())
    linked_media = ImageBlock(media_type="image/png", url="https://example.com/shot.png")
    source = the_result(inline)
    linked = tool_message(
        source.replace(output=(source.output[0], linked_media, *source.output[2:]))
    )
    (from_inline,) = evictor.evict([inline], session="s")
    (from_linked,) = evictor.evict([linked], session="s")
    assert media_of(the_result(from_inline).output)[0].data == PNG
    assert media_of(the_result(from_linked).output)[0] == linked_media
    assert media_of(the_result(from_linked).output)[1].data == WAV


def test_limit_must_exceed_the_preview() -> None:
    with pytest.raises(UserError, match="limit"):
        ToolResultEviction("/tmp/unused", limit=100, preview=100)


@pytest.mark.parametrize("name", ["", "read offloaded"])
def test_the_read_tool_needs_a_name_a_provider_takes(name: str) -> None:
    """An empty name was taken: the read tool then got its function's name, so the middleware
    no longer knew its own tool's results and could evict what the model had just read."""
    with pytest.raises(UserError, match="tool name"):
        ToolResultEviction("/tmp/unused", tool_name=name)


# -- in the agent --------------------------------------------------------------------------------
HEAD, TAIL = "head " * 600, " tail" * 600


@tool
def screenshot() -> list:
    """Take a screenshot."""
    return [
        TextBlock(text=HEAD),
        ImageBlock(media_type="image/png", data=PNG),
        TextBlock(text=TAIL),
    ]


def read_back(messages: list[Msg], tools) -> Msg:
    path = messages[2].tool_results[0].metadata[PREVIEW_KEY]["path"]
    call = ToolUseBlock(id="call_2", name="read_offloaded", input={"path": path})
    return Msg.assistant(call)


async def test_in_the_agent_the_model_sees_what_is_persisted_and_the_original_stays(
    tmp_path: Path,
) -> None:
    ledger = AsyncLedger(MemoryStore())
    evictor = ToolResultEviction(tmp_path, limit=1_000, preview=100)
    model = ScriptedModel(
        [
            Msg.assistant(ToolUseBlock(id="call_1", name="screenshot", input={})),
            read_back,
            Msg.assistant("Seen it."),
        ]
    )
    agent = ReActAgent(model, [screenshot, evictor.read_tool], store=ledger, middlewares=[evictor])
    events = [e async for e in agent.stream("look", RuntimeContext("s"))]
    stored = await ledger.messages("s")
    for request in model.requests:  # the hook view, as sent, is the persisted view
        assert list(request.messages) == stored[: len(request.messages)]
    evicted = the_result(stored[2])
    assert evicted.metadata[PREVIEW_KEY]["by"] == "eviction"
    assert media_of(evicted.output) == [ImageBlock(media_type="image/png", data=PNG)]
    committed = next(
        e for e in events if isinstance(e, MessageCommitted) and e.message.role == "tool"
    )
    original = the_result((await ledger.messages("s", version=committed.version))[2])
    assert original.text == HEAD + "\n" + TAIL and PREVIEW_KEY not in original.metadata
    assert the_result(stored[4]).text == original.text  # read_offloaded, kept whole
    assert the_result(stored[4]).metadata.get(PREVIEW_KEY) is None


# -- what an eviction writes ---------------------------------------------------------------------
def test_an_eviction_in_the_middle_of_1000_messages_writes_about_the_preview(
    tmp_path: Path,
) -> None:
    msgs = history(250)  # 1,000 messages
    middle = 502
    assert msgs[middle].role == "tool"
    big = the_result(msgs[middle]).replace(output=(TextBlock(text="z" * 50_000),))
    msgs[middle] = msgs[middle].replace(content=[big])
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with Ledger(url) as ledger:
        before = ledger.save("s", msgs)
        evictor = ToolResultEviction(tmp_path / "offload", limit=20_000, preview=2_000)
        out = evictor.evict(msgs, session="s")
        report = ledger.save("s", out)
    assert (report.replaced, report.appended, report.truncated) == (1, 0, 0)
    assert report.bytes_written == len(canonical_bytes(out[middle]))
    assert report.bytes_written < 2_000 + 1_024  # about the preview, not the 50 KB result
    with Ledger(url) as fresh:
        assert fresh.messages("s") == out
        assert fresh.messages("s", version=before.version)[middle] == msgs[middle]


# -- the rule, for any result --------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(result=results, allowance=st.integers(0, 30), extra=st.integers(1, 30))
def test_eviction_property(result: ToolResultBlock, allowance: int, extra: int) -> None:
    msg = tool_message(result)
    with tempfile.TemporaryDirectory() as root:
        evictor = ToolResultEviction(root, limit=allowance + extra, preview=allowance)
        (out,) = evictor.evict([msg], session="s")
        texts = [b.text for b in result.output if isinstance(b, TextBlock)]
        if sum(map(len, texts)) <= allowance + extra:
            assert out is msg
            return
        (evicted,) = out.tool_results
        assert media_of(evicted.output) == media_of(result.output)
        assert (evicted.id, evicted.name, evicted.is_error) == (
            result.id,
            result.name,
            result.is_error,
        )
        assert {k: v for k, v in evicted.metadata.items() if k != PREVIEW_KEY} == result.metadata
        assert (out.id, out.metadata, out.name) == (msg.id, msg.metadata, msg.name)
        assert evictor.filesystem.read(evicted.metadata[PREVIEW_KEY]["path"]) == result.text
        assert evictor.evict([out], session="s")[0] is out  # never twice
