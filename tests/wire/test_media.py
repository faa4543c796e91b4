"""``wire.media``: every writer sends a media block only in a form its provider takes, else the
media note; a provider's file handle reaches only the provider that issued it, by handle, for
the kinds it takes that way, and is never written as a URL."""

from __future__ import annotations

import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agentledger import AudioBlock, FileBlock, ImageBlock, Msg, TextBlock, VideoBlock
from agentledger.wire import from_anthropic, from_responses, to_anthropic, to_openai, to_responses
from agentledger.wire.private import PROVIDER_FILE_KEY

NOTE = re.compile(r"^\[(image|audio|video|file) \([^)]*\)( at \S+)? omitted: .+\]$")
KINDS = {"image": ImageBlock, "audio": AudioBlock, "video": VideoBlock, "file": FileBlock}
MEDIA_TYPES = {
    "image": "image/png",
    "audio": "audio/wav",
    "video": "video/mp4",
    "file": "application/pdf",
}
#: target -> (the provider whose handles it takes, the kinds it takes by handle)
TAKES = {
    "openai": ("openai", {"file"}),
    "responses": ("openai", {"image", "file"}),
    "anthropic": ("anthropic", {"image", "file"}),
}


def _part(target: str, block: Any) -> dict[str, Any]:
    """What ``target``'s writer sends for ``block`` in a user message after a text part."""
    msgs = [Msg.user([TextBlock(text="see"), block])]
    if target == "openai":
        return to_openai(msgs)[0]["content"][1]  # type: ignore[no-any-return]
    if target == "responses":
        return to_responses(msgs)[0]["content"][1]
    return to_anthropic(msgs)[1][0]["content"][1]  # type: ignore[no-any-return]


def _sent_as_handle(target: str, part: dict[str, Any]) -> str | None:
    """The file id ``part`` sends, if it sends one, in the place the target reads ids from."""
    if target == "openai":
        return part.get("file", {}).get("file_id")
    if target == "responses":
        return part.get("file_id")
    source = part.get("source", {})
    return source.get("file_id") if source.get("type") == "file" else None


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


handles = st.builds(
    lambda kind, issuer, handle: KINDS[kind](
        media_type=MEDIA_TYPES[kind], url=handle, metadata={PROVIDER_FILE_KEY: issuer}
    ),
    st.sampled_from(sorted(KINDS)),
    st.sampled_from(["openai", "anthropic", "", "xai"]),
    st.from_regex(r"file[-_][A-Za-z0-9]{3,24}", fullmatch=True),
)


@given(handles, st.sampled_from(sorted(TAKES)))
def test_a_file_handle_reaches_only_its_issuer_and_never_as_a_url(block: Any, target: str) -> None:
    part = _part(target, block)
    issuer, kinds = TAKES[target]
    kind = next(k for k, cls in KINDS.items() if type(block) is cls)
    if block.metadata[PROVIDER_FILE_KEY] == issuer and kind in kinds:
        assert _sent_as_handle(target, part) == block.url, part
    else:
        assert part["type"] in ("text", "input_text") and NOTE.match(part["text"]), part
        assert block.url not in part["text"]  # a handle is no address to show
    # a handle is sent as a handle or not at all: never as an image URL, a file URL ...
    assert all(s != block.url for s in _strings(part) if s != _sent_as_handle(target, part))


def test_the_probers_cases_give_the_media_note() -> None:
    anthropic_image = from_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "file", "file_id": "file_011CN"}},
                    {"type": "text", "text": "what is in this picture?"},
                ],
            }
        ]
    )
    responses_image = from_responses(
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "file_id": "file-abc123", "detail": "auto"},
                    {"type": "input_text", "text": "describe"},
                ],
            }
        ]
    )
    for sent in (
        to_openai(anthropic_image)[0]["content"][0],
        to_responses(anthropic_image)[0]["content"][0],
        to_openai(responses_image)[0]["content"][0],
    ):
        assert sent["type"] in ("text", "input_text") and NOTE.match(sent["text"]), sent
    # each provider's own handle still goes back to it
    assert to_responses(responses_image)[0]["content"][0]["file_id"] == "file-abc123"
    assert to_anthropic(anthropic_image)[1][0]["content"][0]["source"] == {
        "type": "file",
        "file_id": "file_011CN",
    }


# -- media types: Responses and chat follow one rule for media from other formats ----------------
IMAGE_TYPES = ["image/png", "image/jpeg", "image/jpg", "IMAGE/GIF", "image/webp", "image/bmp",
               "image/svg+xml", "image/tiff", "image/*"]  # fmt: skip
FILE_TYPES = ["application/pdf", "text/plain", "text/csv", "application/octet-stream"]
inline_media = st.one_of(
    st.builds(
        lambda media_type, data: ImageBlock(media_type=media_type, data=data),
        st.sampled_from(IMAGE_TYPES),
        st.binary(max_size=8),
    ),
    st.builds(
        lambda media_type, data: FileBlock(media_type=media_type, data=data),
        st.sampled_from(FILE_TYPES),
        st.binary(max_size=8),
    ),
)


@given(inline_media)
def test_responses_sends_inline_media_from_other_formats_exactly_when_chat_does(block: Any) -> None:
    chat, responses = _part("openai", block), _part("responses", block)
    assert (chat["type"] == "text") == (responses["type"] == "input_text"), (chat, responses)
    if responses["type"] == "input_text":
        assert NOTE.match(responses["text"]) and responses["text"] == chat["text"]
    elif responses["type"] == "input_image":  # a type the API takes, in its registered spelling
        assert responses["image_url"] == chat["image_url"]["url"]
        assert re.match(r"data:image/(png|jpeg|gif|webp);base64,", responses["image_url"])
    else:
        assert responses["file_data"].startswith("data:application/pdf;base64,")


def test_a_part_read_from_responses_goes_back_as_it_was_whatever_its_type() -> None:
    parts = [
        {"type": "input_image", "image_url": "data:image/bmp;base64,Qk0=", "detail": "low"},
        {"type": "input_file", "file_data": "data:text/csv;base64,YSxi", "filename": "t.csv"},
    ]
    items = [{"type": "message", "role": "user", "content": parts}]
    assert to_responses(from_responses(items)) == items
