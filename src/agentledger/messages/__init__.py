"""The message model: ``Msg``, its content blocks, ``Usage``, and the canonical codec."""

from agentledger.messages.blocks import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    MediaBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from agentledger.messages.codec import (
    canonical_bytes,
    decode,
    decode_list,
    decode_many,
    decode_value,
    digest_of,
    encode,
    encode_many,
    encode_value,
    encode_with_digest,
)
from agentledger.messages.ids import new_id
from agentledger.messages.msg import ROLES, Msg, Role, Usage, message_list
from agentledger.messages.values import EMPTY, Bytes, FrozenMap, freeze, thaw

__all__ = [
    "EMPTY",
    "ROLES",
    "AudioBlock",
    "Block",
    "Bytes",
    "FileBlock",
    "FrozenMap",
    "ImageBlock",
    "MediaBlock",
    "Msg",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "Usage",
    "VideoBlock",
    "canonical_bytes",
    "decode",
    "decode_list",
    "decode_many",
    "decode_value",
    "digest_of",
    "encode",
    "encode_many",
    "encode_value",
    "encode_with_digest",
    "freeze",
    "message_list",
    "new_id",
    "thaw",
]
