"""The agent runtime: the model protocol and its streaming events (this module), adapters in
``agentledger.agent.providers``, spec strings in ``model_from_spec``."""

from agentledger.agent.events import (
    ModelEvent,
    ModelResponse,
    RedactedThinking,
    ResponseBuilder,
    StreamedToolCall,
    TextDelta,
    ThinkingDelta,
    ThinkingSignature,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from agentledger.agent.model import Model, ModelSettings, ToolSpec, complete
from agentledger.agent.spec import model_from_spec

__all__ = [
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelSettings",
    "RedactedThinking",
    "ResponseBuilder",
    "StreamedToolCall",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingSignature",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolSpec",
    "UsageReport",
    "complete",
    "model_from_spec",
]
