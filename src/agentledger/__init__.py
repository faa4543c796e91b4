"""agentledger: conversation state for LLM agents that is never silently lost, duplicated or
corrupted, and costs what changed to persist.

The names below are the public API. Optional parts (providers, server, Postgres) load lazily and
say which extra to install when it is missing.
"""

from agentledger.errors import (
    AgentLedgerError,
    ClosedError,
    CodecError,
    ConflictError,
    CorruptStoreError,
    HistoryError,
    InvalidIdError,
    LeaseLostError,
    MissingDependencyError,
    ModelError,
    OutcomeUnknownError,
    SessionBusyError,
    SessionNotFoundError,
    StoreError,
    StoreUnavailableError,
    UserError,
    VersionNotFoundError,
)
from agentledger.messages import (
    AudioBlock,
    Block,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
    VideoBlock,
    decode,
    encode,
)
from agentledger.store import Ledger, SaveReport, SessionState, TrackedList
from agentledger.store.aio import AsyncLedger

__version__ = "0.1.0"

_LAZY = {
    "ReActAgent": "agentledger.agent.react",
    "RuntimeContext": "agentledger.agent.context",
    "Tool": "agentledger.agent.tools",
    "tool": "agentledger.agent.tools",
}


def __getattr__(name: str) -> object:
    """The agent runtime loads on first use, so ``import agentledger`` stays light."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agentledger' has no attribute {name!r}")


__all__ = [
    "AgentLedgerError",
    "AsyncLedger",
    "AudioBlock",
    "Block",
    "ClosedError",
    "CodecError",
    "ConflictError",
    "CorruptStoreError",
    "FileBlock",
    "HistoryError",
    "ImageBlock",
    "InvalidIdError",
    "LeaseLostError",
    "Ledger",
    "MissingDependencyError",
    "ModelError",
    "Msg",
    "OutcomeUnknownError",
    "ReActAgent",
    "RuntimeContext",
    "SaveReport",
    "SessionBusyError",
    "SessionNotFoundError",
    "SessionState",
    "StoreError",
    "StoreUnavailableError",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolResultBlock",
    "ToolUseBlock",
    "TrackedList",
    "Usage",
    "UserError",
    "VersionNotFoundError",
    "VideoBlock",
    "__version__",
    "decode",
    "encode",
    "tool",
]
