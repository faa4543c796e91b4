"""Hypothesis strategies for messages: every block type, bytes nested anywhere in metadata."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import strategies as st

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

text = st.text(max_size=30)
keys = st.text(max_size=8)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text
    | st.binary(max_size=16)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(keys | st.sampled_from(["$bytes", "$map"]), children, max_size=3)
    ),
    max_leaves=10,
)
metadata = st.dictionaries(keys | st.just("_private"), json_values, max_size=3)
media_type = st.sampled_from(["image/png", "audio/wav", "video/mp4", "application/pdf"])


def _media(cls: type) -> st.SearchStrategy:
    inline = st.builds(cls, media_type=media_type, data=st.binary(max_size=64), metadata=metadata)
    linked = st.builds(cls, media_type=media_type, url=st.just("https://example.com/x"))
    return inline | linked


media = _media(ImageBlock) | _media(AudioBlock) | _media(VideoBlock) | _media(FileBlock)
text_block = st.builds(TextBlock, text=text, metadata=metadata)
blocks = (
    text_block
    | st.builds(ThinkingBlock, thinking=text, signature=st.none() | text, redacted=st.booleans())
    | media
    | st.builds(ToolUseBlock, id=text, name=text, input=metadata, metadata=metadata)
    | st.builds(
        ToolResultBlock,
        id=text,
        name=text,
        output=st.lists(text_block | media, max_size=3).map(tuple),
        is_error=st.booleans(),
        metadata=metadata,
    )
)
usage = st.none() | st.builds(
    Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6)
)
timestamps = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
messages = st.builds(
    Msg,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    content=st.lists(blocks, max_size=4),
    id=st.none() | st.text(min_size=1, max_size=12),
    name=st.none() | text,
    metadata=metadata,
    usage=usage,
    created_at=timestamps,
)
