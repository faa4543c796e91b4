"""``text_of_body``: the searchable text read from a stored body equals ``searchable_text`` of
the message, for every message agentledger can store, media stored apart or not; and bytes that
are not a body give ``""``, never an error."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentledger import Msg, TextBlock, ToolResultBlock
from agentledger.messages import ImageBlock, encode_with_digest
from agentledger.store import media
from agentledger.store.base import searchable_text
from agentledger.store.body_text import text_of_body
from tests.messages.strategies import hostile_messages, messages


def _storage_body(msg: Msg) -> bytes:
    canonical, _ = encode_with_digest(msg)
    body, _ = media.externalize(msg, canonical)
    return body


@given(messages | hostile_messages)
def test_the_text_of_a_stored_body_is_the_messages_searchable_text(msg: Msg) -> None:
    assert text_of_body(_storage_body(msg)) == searchable_text(msg)


def test_text_blocks_and_tool_result_text_are_read_in_order_and_nothing_else() -> None:
    image = ImageBlock(media_type="image/png", data=b"\x89PNG" * 5000)  # stored apart
    msg = Msg.tool(
        [
            TextBlock(text="first"),
            ToolResultBlock(id="c1", output=(TextBlock(text="out a"), image, TextBlock(text="b"))),
            TextBlock(text=""),
            ToolResultBlock(id="c2", output=(image,)),
            TextBlock(text="last", metadata={"text": "not this"}),
        ]
    )
    canonical, _ = encode_with_digest(msg)
    body, blobs = media.externalize(msg, canonical)
    assert list(blobs.values()) == [image.data]  # the body holds a reference to it
    assert text_of_body(body) == "first\n\nlast\nout a\nb" == searchable_text(msg)


@given(st.binary(max_size=64) | st.sampled_from([b"", b"{}", b"[]", b'{"content": 3}']))
def test_bytes_that_are_not_a_body_give_no_text(data: bytes) -> None:
    text = text_of_body(data)
    assert isinstance(text, str)


def test_bodies_of_the_wrong_shape_give_no_text() -> None:
    assert text_of_body(b'{"content": [{"type": "text", "text": 7}]}') == ""
    assert text_of_body(b'{"content": [{"text": "no type"}]}') == ""
    assert text_of_body(b"\xff\xfe") == ""
    assert text_of_body(None) == ""  # type: ignore[arg-type]
