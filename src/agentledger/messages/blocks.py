"""Content blocks: the parts a message is made of.

Each block is a small immutable value type with a ``type`` discriminator. Mapping-valued fields
(``input``, ``metadata``) are frozen on construction (see ``values``), so a block never changes
after it is made and can be shared by any number of messages.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, TypeAlias

import msgspec

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
]


class _BlockBase(
    msgspec.Struct, frozen=True, omit_defaults=True, tag_field="type", kw_only=True, gc=False
):
    """Shared behaviour: frozen mappings, equality and hashing by canonical encoding.

    ``gc=False``: a block never refers back to itself, so the cycle collector need not track
    it; loading 12,000 messages then spends far less time in collections.
    """

    _frozen_fields: ClassVar[tuple[str, ...]] = ("metadata",)

    def __post_init__(self) -> None:
        for name in self._frozen_fields:
            value = getattr(self, name)
            if not isinstance(value, FrozenMap):
                msgspec.structs.force_setattr(self, name, freeze_map(value))

    def _canonical(self) -> bytes:
        from agentledger.messages.codec import canonical_bytes

        return canonical_bytes(self)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _BlockBase):
            return NotImplemented
        return type(self) is type(other) and self._canonical() == other._canonical()

    def __hash__(self) -> int:
        return hash(self._canonical())

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields changed."""
        return msgspec.structs.replace(self, **changes)


class TextBlock(_BlockBase, tag="text"):
    """Plain text."""

    text: str
    metadata: FrozenMap = EMPTY


class ThinkingBlock(_BlockBase, tag="thinking"):
    """Model reasoning. ``signature`` is the provider's proof (Anthropic); ``redacted`` marks
    encrypted reasoning whose text is in ``thinking`` as an opaque string."""

    thinking: str
    signature: str | None = None
    redacted: bool = False
    metadata: FrozenMap = EMPTY


class _Media(_BlockBase, frozen=True, gc=False):
    """Media given either inline (``data``) or by ``url``; exactly one of the two."""

    media_type: str
    data: bytes | None = None
    url: str | None = None
    metadata: FrozenMap = EMPTY

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.data is None) == (self.url is None):
            from agentledger.errors import UserError

            raise UserError(f"{type(self).__name__} needs exactly one of data= or url=")
        if self.data is not None and type(self.data) is not bytes:
            msgspec.structs.force_setattr(self, "data", bytes(self.data))


class ImageBlock(_Media, tag="image"):
    """An image (png, jpeg, webp, gif ...)."""


class AudioBlock(_Media, tag="audio"):
    """An audio clip (wav, mp3 ...)."""


class VideoBlock(_Media, tag="video"):
    """A video clip."""


class FileBlock(_Media, tag="file"):
    """A document or any other file, with an optional file name."""

    filename: str | None = None


class ToolUseBlock(_BlockBase, tag="tool_use"):
    """A call the model asks for. ``id`` pairs it with exactly one ``ToolResultBlock``."""

    _frozen_fields: ClassVar[tuple[str, ...]] = ("input", "metadata")

    id: str
    name: str
    input: FrozenMap = EMPTY
    metadata: FrozenMap = EMPTY


class ToolResultBlock(_BlockBase, tag="tool_result"):
    """The answer to a tool call: its own content blocks, an error flag, and details such as
    execution time in ``metadata``."""

    id: str
    name: str = ""
    output: tuple[TextBlock | ImageBlock | AudioBlock | VideoBlock | FileBlock, ...] = ()
    is_error: bool = False
    metadata: FrozenMap = EMPTY

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.output, str):
            msgspec.structs.force_setattr(self, "output", (TextBlock(text=self.output),))
        elif not isinstance(self.output, tuple):
            msgspec.structs.force_setattr(self, "output", tuple(self.output))

    @property
    def text(self) -> str:
        """The text parts of the output, joined by newlines."""
        return "\n".join(b.text for b in self.output if isinstance(b, TextBlock))


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
