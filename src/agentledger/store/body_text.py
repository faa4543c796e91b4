"""The searchable text of a stored message body, read without decoding the message.

Search indexes the text of a message's text blocks and of its tool results' text parts
(``searchable_text``). A store that keeps no copy of that text reads it again from the body:
Postgres and the JSONL log for a hit's snippet, SQLite for its full-text index, which must be
given, when a row leaves it, the very text it was given when the row entered.

``text_of_body`` decodes only the fields that text comes from (msgspec skips every other field
in C): about 2 µs for the benchmark's 1.3 KB bodies, against 8 µs to decode the whole message
and take ``searchable_text`` of it, which it equals for every body agentledger writes
(``tests/store/test_body_text.py`` holds it to that). Bytes that are not such a body give ``""``:
the load that reads them reports the damage.

SQLite's index keeps, per row, a digest of the text the row was committed with, and reads the
text only while the body still gives that text (``sqlite_schema``, step 6). Changing what this
returns would leave the rows indexed before in the index and keep rows still queued out of it:
a change needs a schema step that rebuilds that index.
"""

from __future__ import annotations

import msgspec

__all__ = ["searchable_parts", "text_of_body"]


class _Part(msgspec.Struct, gc=False):
    """A block of a tool result's output: its text, if it is a text block."""

    type: str
    text: str = ""


class _Block(msgspec.Struct, gc=False):
    """A content block: its text (a text block) or output (a tool result); nothing else."""

    type: str
    text: str = ""
    output: list[_Part] = []


class _Body(msgspec.Struct, gc=False):
    content: list[_Block] = []


_decode = msgspec.json.Decoder(_Body).decode


def searchable_parts(text: str, tool_results: list[str]) -> str:
    """The searchable text of a message from its text (text blocks joined by newlines) and the
    text of each tool result: the non-empty ones, joined by newlines."""
    return "\n".join(part for part in (text, *tool_results) if part)


def text_of_body(body: bytes) -> str:
    """The searchable text of a stored body (see the module docstring); ``""`` for bytes that
    are not a message body."""
    try:
        content = _decode(body).content
    except (msgspec.DecodeError, TypeError):
        return ""
    text = "\n".join([block.text for block in content if block.type == "text"])
    results = [
        "\n".join([part.text for part in block.output if part.type == "text"])
        for block in content
        if block.type == "tool_result"
    ]
    return searchable_parts(text, results)
