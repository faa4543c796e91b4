"""Shared builders for the context tests: seed 002's mixed-media tool result, and histories."""

from __future__ import annotations

from hypothesis import strategies as st

from agentledger import (
    AudioBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from agentledger.messages import FileBlock, VideoBlock
from tests.messages.strategies import media, metadata

PNG = b"\x89PNG\r\n\x1a\n\x00png-bytes"
WAV = b"RIFF\x00\x00WAVEfmt "


def media_of(blocks) -> list:
    """The non-text blocks, in order."""
    return [b for b in blocks if not isinstance(b, TextBlock)]


def mixed_result(head: str = "H" * 3000, tail: str = "T" * 3000, **kw) -> ToolResultBlock:
    """Seed 002's shape: long head text, an image, audio, long tail text, every field set."""
    fields = {
        "id": "call_1",
        "name": "screenshot",
        "is_error": True,
        "metadata": {"execution": {"seconds": 1.5, "exit": 3}, "_trace": b"\x00\x01"},
    }
    fields.update(kw)
    return ToolResultBlock(
        output=(
            TextBlock(text=head, metadata={"part": "head"}),
            ImageBlock(media_type="image/png", data=PNG, metadata={"detail": "high"}),
            AudioBlock(media_type="audio/wav", data=WAV),
            TextBlock(text=tail, metadata={"part": "tail"}),
        ),
        **fields,
    )


def every_media() -> tuple:
    return (
        ImageBlock(media_type="image/png", data=PNG),
        AudioBlock(media_type="audio/wav", url="https://example.com/a.wav"),
        VideoBlock(media_type="video/mp4", url="https://example.com/v.mp4"),
        FileBlock(media_type="application/pdf", data=b"%PDF", filename="r.pdf"),
    )


def tool_message(result: ToolResultBlock, **kw) -> Msg:
    kw.setdefault("metadata", {"turn": 7, "_cost": 0.25})
    kw.setdefault("name", "tools")
    return Msg.tool(result, **kw)


def turn(n: int, output: str, *, tool: str = "search", usage=None) -> list[Msg]:
    """One user turn: question, a tool call, its result, an answer (ids derived from ``n``)."""
    call = ToolUseBlock(id=f"call_{n}", name=tool, input={"q": f"question {n}"})
    return [
        Msg.user(f"question {n}", id=f"u{n}"),
        Msg.assistant([TextBlock(text=f"looking up {n}"), call], id=f"a{n}"),
        Msg.tool(ToolResultBlock(id=f"call_{n}", name=tool, output=output), id=f"t{n}"),
        Msg.assistant(f"answer {n}", id=f"r{n}", usage=usage),
    ]


def history(turns: int, output_size: int = 200) -> list[Msg]:
    msgs: list[Msg] = []
    for n in range(turns):
        msgs.extend(turn(n, f"result {n} " + "x" * output_size))
    return msgs


text_blocks = st.builds(TextBlock, text=st.text(max_size=40), metadata=metadata)
results = st.builds(
    ToolResultBlock,
    id=st.text(min_size=1, max_size=8),
    name=st.text(max_size=8),
    output=st.lists(text_blocks | media, max_size=6).map(tuple),
    is_error=st.booleans(),
    metadata=metadata,
)
"""Any tool result: text and media blocks in any mix, any fields."""
