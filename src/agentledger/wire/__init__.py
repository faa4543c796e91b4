"""Converters between ``Msg`` and provider/protocol formats, and strict history validation.

- ``to_openai`` / ``from_openai``: OpenAI chat-completions message dicts.
- ``to_anthropic`` / ``from_anthropic``: the Anthropic Messages API ``system`` + ``messages``.
- ``to_agui`` / ``from_agui``: AG-UI 1.0 messages (camelCase dicts).
- ``to_responses`` / ``from_responses``: OpenAI Responses-API input and output items (what the
  OpenAI Agents SDK stores), every key kept.
- ``validate`` / ``check`` / ``repair``: find, refuse or explicitly fix histories that strict
  providers reject (unanswered tool calls, orphan or duplicate results, empty messages);
  ``HistoryChecker`` checks a growing history from where the last valid one ended.
- ``ToolIds``: tool-call ids mapped per provider (Anthropic's id pattern, OpenAI's 40
  characters) and back, the stored ids never changed.

What each provider takes of media, and the text note sent in place of the rest, is in
``wire.media``.

Metadata keys starting with ``_`` are private: stored, never written into any of these formats.
"""

from agentledger.wire.agui import (
    from_agui,
    reasoning_message_id,
    to_agui,
    to_agui_models,
    tool_message_id,
)
from agentledger.wire.anthropic import from_anthropic, to_anthropic
from agentledger.wire.openai import derived_id, from_openai, to_openai
from agentledger.wire.private import is_private, public_metadata, strip_private
from agentledger.wire.repair import (
    NOT_EXECUTED,
    RepairChange,
    RepairKind,
    RepairReport,
    repair,
)
from agentledger.wire.responses import from_responses, to_responses
from agentledger.wire.tool_ids import ToolIds, wire_tool_id
from agentledger.wire.validate import (
    Finding,
    FindingKind,
    HistoryChecker,
    Target,
    check,
    validate,
)

__all__ = [
    "NOT_EXECUTED",
    "Finding",
    "FindingKind",
    "HistoryChecker",
    "RepairChange",
    "RepairKind",
    "RepairReport",
    "Target",
    "ToolIds",
    "check",
    "derived_id",
    "from_agui",
    "from_anthropic",
    "from_openai",
    "from_responses",
    "is_private",
    "public_metadata",
    "reasoning_message_id",
    "repair",
    "strip_private",
    "to_agui",
    "to_agui_models",
    "to_anthropic",
    "to_openai",
    "to_responses",
    "tool_message_id",
    "validate",
    "wire_tool_id",
]
