"""Deterministic sample conversations covering every block type."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from agentledger.messages import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    VideoBlock,
)

__all__ = ["every_block_message", "sample_conversation", "turn"]

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def turn(index: int, *, rng: random.Random | None = None, result_size: int = 4000) -> list[Msg]:
    """One agent turn of four messages: user, assistant tool call, tool result, assistant answer.

    Sizes follow the benchmark workload (~200 / ~100 / ``result_size`` / ~500 characters).
    """
    rng = rng or random.Random(index)
    words = ["ledger", "agent", "state", "turn", "tool", "result", "model", "save", "load"]

    def text(n: int) -> str:
        out: list[str] = []
        length = 0
        while length < n:
            word = rng.choice(words)
            out.append(word)
            length += len(word) + 1
        return " ".join(out)[:n]

    at = _EPOCH + timedelta(seconds=index * 10)
    call_id = f"call_{index:06d}"
    return [
        Msg.user(text(200), id=f"u{index:06d}", created_at=at),
        Msg.assistant(
            ToolUseBlock(id=call_id, name="search", input={"query": text(60), "limit": 5}),
            id=f"a{index:06d}",
            created_at=at,
            usage=Usage(input_tokens=100 + index, output_tokens=20),
        ),
        Msg.tool(
            ToolResultBlock(id=call_id, name="search", output=(TextBlock(text=text(result_size)),)),
            id=f"t{index:06d}",
            created_at=at,
        ),
        Msg.assistant(text(500), id=f"f{index:06d}", created_at=at),
    ]


def sample_conversation(turns: int, *, seed: int = 0, result_size: int = 4000) -> list[Msg]:
    """``turns`` turns of ``turn`` (4 messages each), reproducible from ``seed``."""
    rng = random.Random(seed)
    out: list[Msg] = []
    for i in range(turns):
        out.extend(turn(i, rng=rng, result_size=result_size))
    return out


def every_block_message(seed: int = 0) -> list[Msg]:
    """A short history using every block type, bytes in metadata and a large inline image."""
    png = bytes(range(256)) * 40  # 10 KB: above the media threshold
    return [
        Msg.system("You are terse.", id=f"s{seed}"),
        Msg.user(
            [
                TextBlock(text="Look at this"),
                ImageBlock(media_type="image/png", data=png),
                AudioBlock(media_type="audio/wav", data=b"RIFF\x00\x01"),
                VideoBlock(media_type="video/mp4", url="https://example.com/v.mp4"),
                FileBlock(media_type="application/pdf", data=b"%PDF-1.7", filename="a.pdf"),
            ],
            id=f"u{seed}",
            metadata={"client": {"ip_hash": b"\x00\xffhash", "tags": ["a", 1, 2.5, None, True]}},
        ),
        Msg.assistant(
            [
                ThinkingBlock(thinking="consider", signature="sig=="),
                ToolUseBlock(
                    id=f"c{seed}",
                    name="zoom",
                    input={"factor": 2},
                    metadata={"thoughtSignature": b"\x01\x02\x03"},
                ),
            ],
            id=f"a{seed}",
            usage=Usage(input_tokens=10, output_tokens=5, reasoning_tokens=3),
        ),
        Msg.tool(
            ToolResultBlock(
                id=f"c{seed}",
                name="zoom",
                output=(
                    TextBlock(text="zoomed"),
                    ImageBlock(media_type="image/png", data=png[::-1]),
                ),
                metadata={"execution": {"ms": 12}},
            ),
            id=f"t{seed}",
        ),
        Msg.assistant("It is a gradient.", id=f"f{seed}", metadata={"_private": "kept"}),
    ]
