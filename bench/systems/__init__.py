"""Every system the benchmark runs, by name.

``interpreter`` says which Python runs it: ``main`` is the one running ``python -m bench``
(agentledger installed), ``peers`` is ``bench/.venv-peers/bin/python``. ``group`` orders the
report. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["SYSTEMS", "SystemSpec", "get"]


@dataclass(frozen=True)
class SystemSpec:
    name: str
    label: str
    module: str
    cls: str
    interpreter: str  # "main" or "peers"
    kwargs: dict[str, Any] = field(default_factory=dict)
    #: The peers' distribution this system needs (reported when it is not installed).
    distribution: str | None = None
    #: --quick runs this system only up to this many messages (its larger sizes take minutes).
    quick_max: int | None = None
    quick_why: str = ""


SYSTEMS: list[SystemSpec] = [
    SystemSpec(
        "agentledger-memory",
        "agentledger memory://",
        "agentledger_",
        "AgentLedger",
        "main",
        {"backend": "memory"},
    ),
    SystemSpec(
        "agentledger-jsonl",
        "agentledger jsonl://",
        "agentledger_",
        "AgentLedger",
        "main",
        {"backend": "jsonl"},
    ),
    SystemSpec(
        "agentledger-sqlite",
        "agentledger sqlite://",
        "agentledger_",
        "AgentLedger",
        "main",
        {"backend": "sqlite"},
    ),
    SystemSpec(
        "agentledger-sqlite-full",
        "agentledger sqlite:// synchronous=FULL",
        "agentledger_",
        "AgentLedger",
        "main",
        {"backend": "sqlite", "synchronous": "full"},
    ),
    SystemSpec(
        "agentledger-postgres",
        "agentledger postgresql://",
        "agentledger_",
        "AgentLedger",
        "main",
        {"backend": "postgres"},
    ),
    SystemSpec("json-file", "whole-file JSON rewrite", "jsonfile", "JsonFile", "main"),
    SystemSpec(
        "openai-agents",
        "OpenAI Agents SQLiteSession",
        "openai_agents",
        "OpenAIAgents",
        "peers",
        distribution="openai-agents",
    ),
    SystemSpec(
        "openai-agents-ledger",
        "LedgerSession (agentledger sqlite://)",
        "openai_agents_ledger",
        "LedgerAgents",
        "main",
        {"edit": "set_items"},
    ),
    SystemSpec(
        "openai-agents-ledger-protocol",
        "LedgerSession, protocol calls only",
        "openai_agents_ledger",
        "LedgerAgents",
        "main",
        {"edit": "protocol"},
    ),
    SystemSpec(
        "langgraph",
        "LangGraph SqliteSaver",
        "langgraph_",
        "LangGraph",
        "peers",
        {"delta": False},
        distribution="langgraph-checkpoint-sqlite",
    ),
    SystemSpec(
        "langgraph-delta",
        "LangGraph SqliteSaver + DeltaChannel",
        "langgraph_",
        "LangGraph",
        "peers",
        {"delta": True},
        distribution="langgraph-checkpoint-sqlite",
    ),
    SystemSpec(
        "openai-agents-postgres",
        "OpenAI Agents SQLAlchemySession (Postgres, asyncpg)",
        "openai_agents_pg",
        "OpenAIAgentsPostgres",
        "peers",
        distribution="asyncpg",
    ),
    SystemSpec(
        "langgraph-postgres",
        "LangGraph PostgresSaver",
        "langgraph_pg",
        "LangGraphPostgres",
        "peers",
        distribution="langgraph-checkpoint-postgres",
    ),
    SystemSpec(
        "hermes", "hermes-agent SessionDB", "hermes", "Hermes", "peers", distribution="hermes-agent"
    ),
    SystemSpec(
        "adk",
        "Google ADK DatabaseSessionService (SQLite)",
        "adk",
        "Adk",
        "peers",
        distribution="google-adk",
        quick_max=0,
        quick_why="not run by --quick: ADK appends about 100 events a second, so even its "
        "400-message run (grow, then a clear-and-re-add edit) takes longer than the quick "
        "budget; the full mode runs it",
    ),
    SystemSpec(
        "pydantic-ai",
        "pydantic-ai InMemoryConversationStore",
        "pydantic_ai_",
        "PydanticAI",
        "peers",
        distribution="pydantic-ai-slim",
    ),
]

_BY_NAME = {s.name: s for s in SYSTEMS}


def get(name: str) -> SystemSpec:
    return _BY_NAME[name]
