"""Hypothesis strategies for pydantic-ai ``ModelMessage`` lists: every part kind the adapter
maps natively and several it keeps whole, media inline and by URL, unicode text, free-form JSON
(big integers, nested objects in any key order) and tool arguments written every which way."""

from __future__ import annotations

import json
from datetime import UTC, timedelta, timezone
from typing import Any

from hypothesis import strategies as st
from pydantic_ai import messages as m
from pydantic_ai.usage import RequestUsage

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)
keys = st.text(st.characters(exclude_categories=("Cs",)), max_size=5)
zones = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
stamps = st.datetimes(timezones=zones)
scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: over 64 bits too
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(keys, json_values, max_size=3)
ids = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=8)
names = st.sampled_from(["get_weather", "search", "functions.lookup:0", "t"])

MEDIA_TYPES = ["image/png", "audio/wav", "video/mp4", "application/pdf", "text/plain"]
binary = st.builds(
    m.BinaryContent,
    data=st.binary(max_size=24),
    media_type=st.sampled_from(MEDIA_TYPES),
    vendor_metadata=st.none() | json_objects,
)
urls = st.builds(
    lambda cls, stem, ext: cls(url=f"https://example.com/{stem}.{ext[0]}", media_type=ext[1]),
    st.sampled_from([m.ImageUrl, m.AudioUrl, m.VideoUrl, m.DocumentUrl]),
    st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=6),
    st.sampled_from([("png", "image/png"), ("mp3", "audio/mpeg"), ("pdf", None), ("mp4", None)]),
)
media = binary | urls
uploads = st.builds(m.UploadedFile, file_id=ids, provider_name=st.sampled_from(["openai", "xai"]))
user_items = st.lists(
    texts | media | uploads | st.builds(m.TextContent, content=texts) | st.just(m.CachePoint()),
    max_size=4,
)


def _args_text(obj: dict[str, Any], style: int) -> str:
    if style == 0:
        return json.dumps(obj)
    if style == 1:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    if style == 2:
        return json.dumps(obj, indent=1, sort_keys=True)
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


tool_args = (
    st.none()
    | json_objects
    | st.builds(_args_text, json_objects, st.integers(0, 3))
    | st.sampled_from(['{"a": 1.0e2}', '{"a":1,"a":2}', '{"q": "\\u00fc"}', "[1, 2]", "{trunc", ""])
)

request_parts = st.one_of(
    st.builds(m.SystemPromptPart, content=texts, timestamp=stamps),
    st.builds(m.UserPromptPart, content=texts | user_items, timestamp=stamps),
    st.builds(
        m.ToolReturnPart,
        tool_name=names,
        content=json_values | st.lists(texts | media, max_size=3),
        tool_call_id=ids,
        timestamp=stamps,
        outcome=st.sampled_from(["success", "failed", "denied"]),
        metadata=st.none() | json_values,
    ),
    st.builds(m.CompactionPart, content=st.none() | texts),
)
response_parts = st.one_of(
    st.builds(
        m.TextPart, content=texts, id=st.none() | ids, provider_details=st.none() | json_objects
    ),
    st.builds(
        m.ThinkingPart,
        content=texts,
        signature=st.none() | texts,
        id=st.none() | ids,
        provider_name=st.none() | st.just("anthropic"),
    ),
    st.builds(m.ToolCallPart, tool_name=names, args=tool_args, tool_call_id=ids),
    st.builds(m.NativeToolCallPart, tool_name=names, args=tool_args, tool_call_id=ids),
    st.builds(
        m.NativeToolReturnPart,
        tool_name=names,
        content=json_values,
        tool_call_id=ids,
        timestamp=stamps,
        provider_name=st.none() | texts,
    ),
    st.builds(m.FilePart, content=binary, provider_name=st.none() | texts),
    st.builds(m.CompactionPart, content=st.none() | texts, provider_name=st.none() | texts),
)
counts = st.integers(0, 2**70)  # some over what Usage holds: kept verbatim
usages = st.builds(
    RequestUsage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=st.integers(0, 50),
    output_reasoning_tokens=st.integers(0, 50),
    details=st.dictionaries(keys, st.integers(0, 9), max_size=2),
)
requests = st.builds(
    m.ModelRequest,
    parts=st.lists(request_parts, max_size=4),
    timestamp=st.none() | stamps,
    instructions=st.none() | texts,
    run_id=st.none() | ids,
    metadata=st.none() | json_objects,
)
responses = st.builds(
    m.ModelResponse,
    parts=st.lists(response_parts, max_size=4),
    usage=usages,
    model_name=st.none() | texts,
    timestamp=stamps,
    provider_name=st.none() | texts,
    provider_details=st.none() | json_objects,
    provider_response_id=st.none() | ids,
    finish_reason=st.none() | st.sampled_from(["stop", "length", "tool_call"]),
    run_id=st.none() | ids,
)
histories = st.lists(requests | responses, max_size=6)
