"""Store a pydantic-ai agent's message history in the ledger, losslessly and incrementally.

``LedgerHistory(ledger, session)`` loads the history as pydantic-ai ``ModelMessage`` objects (for
``message_history=``) or as a whole ``Conversation`` (for ``conversation=``) and saves it back,
writing only what changed; its ``capability()`` persists the run's history after every step and
on every exit path.
``to_msgs`` / ``from_msgs`` are the conversion itself.

Importing this module needs pydantic-ai (``pip install "agentledger[pydantic-ai]"``).
"""

from agentledger._optional import require

require("pydantic_ai", "pydantic-ai")

from agentledger.integrations.pydantic_ai.convert import METADATA_KEY, from_msgs, to_msgs  # noqa: E402
from agentledger.integrations.pydantic_ai.history import (  # noqa: E402
    CONVERSATION_VALUE,
    LedgerHistory,
    PersistHistory,
)

__all__ = [
    "CONVERSATION_VALUE",
    "METADATA_KEY",
    "LedgerHistory",
    "PersistHistory",
    "from_msgs",
    "to_msgs",
]
