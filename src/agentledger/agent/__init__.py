"""The agent runtime: ``ReActAgent`` and what it is made of.

- the loop (``react``), its context and run events (``context``), interrupt policies
  (``interrupts``), the durable tool-call lifecycle (``lifecycle``), middleware;
- tools (``tools``: ``@tool``);
- the model protocol and its streaming events (``model``, ``events``), adapters in
  ``agentledger.agent.providers``, spec strings in ``model_from_spec``.
"""

from agentledger.agent.context import (
    AgentEvent,
    ContextEditFailed,
    MessageCommitted,
    RunError,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RuntimeContext,
    ToolResultEvent,
)
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
from agentledger.agent.interrupts import PartialReasoningPolicy, UnexecutedCallPolicy
from agentledger.agent.middleware import Middleware
from agentledger.agent.model import Model, ModelSettings, ToolSpec, complete
from agentledger.agent.react import ReActAgent
from agentledger.agent.spec import model_from_spec
from agentledger.agent.tools import Tool, ToolContext, tool

__all__ = [
    "AgentEvent",
    "ContextEditFailed",
    "MessageCommitted",
    "Middleware",
    "Model",
    "ModelEvent",
    "ModelResponse",
    "ModelSettings",
    "PartialReasoningPolicy",
    "ReActAgent",
    "RedactedThinking",
    "ResponseBuilder",
    "RunError",
    "RunFinished",
    "RunInterrupted",
    "RunStarted",
    "RuntimeContext",
    "StreamedToolCall",
    "TextDelta",
    "ThinkingDelta",
    "ThinkingSignature",
    "Tool",
    "ToolCallDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolContext",
    "ToolResultEvent",
    "ToolSpec",
    "UnexecutedCallPolicy",
    "UsageReport",
    "complete",
    "model_from_spec",
    "tool",
]
