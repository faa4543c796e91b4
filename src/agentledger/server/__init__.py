"""The AG-UI server: ``ReActAgent`` runs served to AG-UI frontends, over the ledger.

``create_app(...)`` gives a FastAPI app (``pip install "agentledger[server]"``);
``agentledger serve`` runs it with uvicorn. A run goes through four steps, one module each:

1. ``parse``: the body → a checked ``RunRequest`` (AG-UI 1.0 ``RunAgentInput``);
2. ``merge`` (applied by ``hook`` in ``on_state_loaded``): the client's resent thread against
   the stored one, by message id, so nothing is duplicated or lost;
3. ``events``: the agent's events → AG-UI events whose ids are the stored ids;
4. ``encode``: the events → ``data: <json>\\n\\n`` frames.

``runner`` puts them together for one run and handles every exit path; ``auth`` maps bearer
tokens to tenants; ``app`` holds the routes and turns errors into HTTP statuses.
"""

from agentledger.server.app import DEFAULT_MAX_BODY, create_app

__all__ = ["DEFAULT_MAX_BODY", "create_app"]
