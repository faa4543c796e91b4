"""Content blocks: the parts a message is made of.

Each block is a small immutable value type with a ``type`` discriminator. Every field is checked
where the block is built (``checks``: exact types, text UTF-8 can encode, no control characters
in a URL), mapping-valued fields (``input``, ``metadata``) are frozen, bytes-like data becomes a
``bytes`` copy, so a block never changes after it is made, shares nothing with its caller, and
always reads back equal. The checks run in each class's ``_check``, called when a caller builds
a block (``checked.Checked``); a decoded block is checked by msgspec's types and, for what
those cannot say, by ``check_decoded``. The common case (an exact ASCII ``str``, an already
frozen map) is tested inline at C speed.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from agentledger.errors import UserError
from agentledger.messages import checks
from agentledger.messages.arguments import input_of, kept_text
from agentledger.messages.canonical import encode_struct
from agentledger.messages.checked import Checked
from agentledger.messages.values import EMPTY, FrozenMap, freeze_map

__all__ = [
    "AudioBlock",
    "Block",
    "FileBlock",
    "ImageBlock",
    "MediaBlock",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "VideoBlock",
    "check_decoded",
]

_set = msgspec.structs.force_setattr


def _text(block: Any, field: str, value: Any) -> None:
    """The slow path of a ``str`` field: anything but an exact ASCII ``str``."""
    _set(block, field, checks.text(type(block).__name__, field, value))


def _freeze(block: Any, field: str) -> None:
    """The slow path of a mapping field: anything but an exact ``FrozenMap``."""
    _set(block, field, freeze_map(getattr(block, field), f"{type(block).__name__}.{field}"))


class _BlockBase(
    msgspec.Struct,
    metaclass=Checked,
    frozen=True,
    omit_defaults=True,
    tag_field="type",
    kw_only=True,
    gc=False,
    forbid_unknown_fields=True,
):
    """Shared behaviour: equality and hashing by canonical encoding.

    ``gc=False``: a block never refers back to itself, so the cycle collector need not track
    it; loading 12,000 messages then spends far less time in collections.
    ``forbid_unknown_fields``: a stored block with a misspelled key is refused, never read as
    a block without that field.
    """

    def _canonical(self) -> bytes:
        return encode_struct(self)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _BlockBase):
            return NotImplemented
        return type(self) is type(other) and self._canonical() == other._canonical()

    def __hash__(self) -> int:
        return hash(self._canonical())

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed (checked like a new block)."""
        fields = self.__struct_fields__
        unknown = set(changes) - set(fields)
        if unknown:
            raise UserError(f"{type(self).__name__} has no field(s) {sorted(unknown)}")
        kept = {name: getattr(self, name) for name in fields if name not in changes}
        return type(self)(**kept, **changes)

    def _check(self) -> None:
        """Check and normalise the fields of a block a caller built (see ``Checked``)."""


class TextBlock(_BlockBase, tag="text"):
    """Plain text."""

    text: str
    metadata: FrozenMap = EMPTY

    def _check(self) -> None:
        value = self.text
        if type(value) is not str or not value.isascii():
            _text(self, "text", value)
        if type(self.metadata) is not FrozenMap:
            _freeze(self, "metadata")


class ThinkingBlock(_BlockBase, tag="thinking"):
    """Model reasoning. ``signature`` is the provider's proof (Anthropic); ``redacted`` marks
    encrypted reasoning whose text is in ``thinking`` as an opaque string."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    metadata: FrozenMap = EMPTY

    def _check(self) -> None:
        value = self.thinking
        if type(value) is not str or not value.isascii():
            _text(self, "thinking", value)
        value = self.signature
        if value is not None and (type(value) is not str or not value.isascii()):
            _set(self, "signature", checks.optional_text("ThinkingBlock", "signature", value))
        if type(self.redacted) is not bool:
            checks.flag("ThinkingBlock", "redacted", self.redacted)
        if type(self.metadata) is not FrozenMap:
            _freeze(self, "metadata")


class _Media(_BlockBase, frozen=True, gc=False):
    """Media given either inline (``data``, any bytes-like value, kept as ``bytes``) or by
    ``url``; exactly one of the two."""

    media_type: str
    data: bytes | None = None
    url: str | None = None
    metadata: FrozenMap = EMPTY

    def _check(self) -> None:
        value = self.media_type
        if type(value) is not str or not value.isascii():
            _text(self, "media_type", value)
        data = self.data
        if data is not None and type(data) is not bytes:
            _set(self, "data", checks.raw_bytes(type(self).__name__, "data", data))
        url = self.url
        if url is not None and (
            type(url) is not str or not url.isascii() or not checks.url_ok(url)
        ):
            _set(self, "url", checks.url(type(self).__name__, "url", url))
        if (self.data is None) == (self.url is None):
            raise UserError(f"{type(self).__name__} needs exactly one of data= or url=")
        if type(self.metadata) is not FrozenMap:
            _freeze(self, "metadata")


class ImageBlock(_Media, tag="image"):
    """An image (png, jpeg, webp, gif ...)."""


class AudioBlock(_Media, tag="audio"):
    """An audio clip (wav, mp3 ...)."""


class VideoBlock(_Media, tag="video"):
    """A video clip."""


class FileBlock(_Media, tag="file"):
    """A document or any other file, with an optional file name."""

    filename: str | None = None

    def _check(self) -> None:
        super()._check()
        value = self.filename
        if value is not None and (type(value) is not str or not value.isascii()):
            _set(self, "filename", checks.optional_text("FileBlock", "filename", value))


class ToolUseBlock(_BlockBase, tag="tool_use"):
    """A call the model asks for. ``id`` pairs it with exactly one ``ToolResultBlock``.

    ``arguments`` is the model's argument text, verbatim, when it came as text; ``input`` is
    then derived from it (``messages.arguments.input_of``): give either, or both when they
    agree. Text that is exactly ``input``'s compact JSON is not kept twice (``arguments`` is
    then ``None``); formats that want text write ``arguments`` or else that compact JSON.
    """

    id: str
    name: str
    input: FrozenMap = EMPTY
    arguments: str | None = None
    metadata: FrozenMap = EMPTY

    def _check(self) -> None:
        value = self.id
        if type(value) is not str or not value.isascii():
            _text(self, "id", value)
        value = self.name
        if type(value) is not str or not value.isascii():
            _text(self, "name", value)
        if type(self.input) is not FrozenMap:
            _freeze(self, "input")
        if self.arguments is not None:
            self._derive_input()
        if type(self.metadata) is not FrozenMap:
            _freeze(self, "metadata")

    def _derive_input(self) -> None:
        value = self.arguments
        if type(value) is not str or not value.isascii():
            _set(self, "arguments", checks.optional_text("ToolUseBlock", "arguments", value))
        derived = input_of(self.arguments)
        given = self.input
        # ``input`` is replaced by ``derived`` below, so a loose ``!=`` (1 == 1.0) is enough
        if given is not EMPTY and given != derived:
            raise UserError(
                "ToolUseBlock.input does not match ToolUseBlock.arguments (input is read from "
                "the argument text; to change the input, pass arguments=None)"
            )
        _set(self, "input", derived)
        _set(self, "arguments", kept_text(self.arguments, derived))


class ToolResultBlock(_BlockBase, tag="tool_result"):
    """The answer to a tool call: its own content blocks (given as blocks, one block or a
    string), an error flag, and details such as execution time in ``metadata``."""

    id: str
    name: str = ""
    output: tuple[TextBlock | ImageBlock | AudioBlock | VideoBlock | FileBlock, ...] = ()
    is_error: bool = False
    metadata: FrozenMap = EMPTY

    def _check(self) -> None:
        value = self.id
        if type(value) is not str or not value.isascii():
            _text(self, "id", value)
        value = self.name
        if type(value) is not str or not value.isascii():
            _text(self, "name", value)
        output = self.output
        if type(output) is not tuple or not _OUTPUT_TYPES.issuperset(map(type, output)):
            _set(self, "output", _output(output))
        if type(self.is_error) is not bool:
            checks.flag("ToolResultBlock", "is_error", self.is_error)
        if type(self.metadata) is not FrozenMap:
            _freeze(self, "metadata")

    @property
    def text(self) -> str:
        """The text parts of the output, joined by newlines."""
        return "\n".join(b.text for b in self.output if isinstance(b, TextBlock))


def _output(value: Any) -> tuple[Any, ...]:
    return as_blocks(value, _OUTPUT_TYPES, "ToolResultBlock.output", "a TextBlock or a media block")


def as_blocks(value: Any, allowed: frozenset[type], where: str, what: str) -> tuple[Any, ...]:
    """A content argument as a tuple of blocks: a string is one ``TextBlock``, one block is
    itself, an iterable is copied; each block must be of exactly an ``allowed`` class."""
    if isinstance(value, str):
        return (TextBlock(text=value),)
    if type(value) in allowed:
        return (value,)
    try:
        blocks = tuple(value)
    except TypeError:
        raise UserError(
            f"{where} must be a string, a block or an iterable of blocks, "
            f"got {type(value).__name__}"
        ) from None
    for i, block in enumerate(blocks):
        if type(block) not in allowed:
            raise UserError(f"{where}[{i}] must be {what}, got {type(block).__name__}")
    return blocks


_OUTPUT_TYPES = frozenset((TextBlock, ImageBlock, AudioBlock, VideoBlock, FileBlock))
BLOCK_TYPES = frozenset(
    (
        TextBlock,
        ThinkingBlock,
        ImageBlock,
        AudioBlock,
        VideoBlock,
        FileBlock,
        ToolUseBlock,
        ToolResultBlock,
    )
)
"""The block classes a message may hold (exactly these: a subclass would not read back)."""

MediaBlock: TypeAlias = ImageBlock | AudioBlock | VideoBlock | FileBlock
Block: TypeAlias = (
    TextBlock
    | ThinkingBlock
    | ImageBlock
    | AudioBlock
    | VideoBlock
    | FileBlock
    | ToolUseBlock
    | ToolResultBlock
)
BlockType = Literal[
    "text", "thinking", "image", "audio", "video", "file", "tool_use", "tool_result"
]


def check_decoded(content: tuple[Any, ...]) -> None:
    """The checks msgspec's types cannot express, for blocks it has just decoded.

    A decoded block did not go through ``_check`` (see ``checked``). Its types are already
    exact and its maps frozen; what is left is a media block's URL and its one-of-two source,
    and a tool call whose input must be read from its argument text. Those few blocks get the
    full ``_check`` (the same code a caller's block runs); text, thinking and tool results of
    text pay one type test each. Raises ``UserError`` naming the field.
    """
    for block in content:
        kind = type(block)
        if kind is TextBlock or kind is ThinkingBlock:
            continue
        if kind is ToolResultBlock:
            for inner in block.output:
                if type(inner) is not TextBlock:
                    inner._check()
        elif kind is ToolUseBlock:
            if block.arguments is not None:
                block._check()
        else:
            block._check()
