"""Shared sample histories for the wire tests."""

from __future__ import annotations

import pytest

from agentledger import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

PNG = b"\x89PNG\r\n\x1a\n\x00\x01binary\xff"
WAV = b"RIFF\x00\x00WAVEfmt \xfe"
PDF = b"%PDF-1.7\n\x00\xfa"


@pytest.fixture
def history() -> list[Msg]:
    """A conversation using every feature the converters map; no metadata, no timestamps."""
    return [
        Msg.system("You are terse.", id="m-sys", created_at=None),
        Msg.user(
            [
                TextBlock(text="What is in these?"),
                ImageBlock(media_type="image/png", data=PNG),
                AudioBlock(media_type="audio/wav", data=WAV),
                FileBlock(media_type="application/pdf", data=PDF, filename="report.pdf"),
            ],
            id="m-user",
            created_at=None,
        ),
        Msg.assistant(
            [
                ThinkingBlock(thinking="Look closer.", signature="sig-abc"),
                TextBlock(text="Checking."),
                ToolUseBlock(id="call-1", name="zoom", input={"factor": 2, "area": [1, 2]}),
                ToolUseBlock(id="call-2", name="ocr", input={}),
            ],
            id="m-asst",
            created_at=None,
        ),
        Msg.tool(
            [
                ToolResultBlock(id="call-1", name="zoom", output="zoomed"),
                ToolResultBlock(id="call-2", name="ocr", output="failed", is_error=True),
            ],
            id="m-tool",
            created_at=None,
        ),
        Msg.assistant("A cat and a report.", id="m-final", created_at=None),
        Msg.user("Thanks!", id="m-thanks", created_at=None),
    ]
