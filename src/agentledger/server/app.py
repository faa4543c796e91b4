"""The HTTP app: routes, and the one place errors become HTTP statuses.

- ``POST /``: an AG-UI 1.0 run (``RunAgentInput`` in, ``text/event-stream`` out).
- ``GET /threads``: the tenant's threads, most recent first; ``?limit=N`` pages them, and
  ``next`` (present when more follow) is the cursor to pass as ``?after=`` for the next page.
- ``GET /threads/{thread_id}/messages``: a thread's stored messages as AG-UI messages
  (``?version=N`` for the thread as it was at version ``N``, an earlier branch included).
- ``GET /health``: ``{"status": "ok"}`` when the store answers (no token needed).

Refusals come before any event, as JSON ``{"error": {"code": ..., "message": ...}}``: 401 no or
unknown token, 404 no such thread (in this tenant) or no such version of it, 409 the thread is
running (or another writer changed it while the run began), 413 the body is over the limit,
415 a run body not sent as ``application/json`` (the guard against cross-site posts, see
``parse.check_body_type``) or compressed, 400 a body the client stopped sending, 422 a body
that is not a valid run or a query value that is not valid (the message says which field; a
cursor that is malformed or was taken in another tenant's listing is one), 503 the store is
unreachable.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from agentledger._optional import require
from agentledger.agent.model import Model
from agentledger.agent.react import ReActAgent
from agentledger.agent.tools import ToolLike
from agentledger.errors import (
    AgentLedgerError,
    ClosedError,
    ConflictError,
    HistoryError,
    SessionBusyError,
    SessionNotFoundError,
    StoreUnavailableError,
    UserError,
    VersionNotFoundError,
)
from agentledger.server.activity import ACTIVITY_VALUE, interleave
from agentledger.server.auth import Auth, Unauthorized
from agentledger.server.encode import MEDIA_TYPE, frames
from agentledger.server.forms import AguiForms
from agentledger.server.hook import STATE_VALUE
from agentledger.server.parse import (
    BodyIncomplete,
    BodyTooLarge,
    UnsupportedBody,
    check_body_type,
    parse_run_input,
    read_body,
)
from agentledger.server.runner import start_run
from agentledger.store import Ledger, Store
from agentledger.store.aio import AsyncLedger
from agentledger.store.ids import DEFAULT_TENANT

__all__ = ["DEFAULT_MAX_BODY", "create_app"]

log = logging.getLogger("agentledger.server")

DEFAULT_MAX_BODY = 8 * 1024 * 1024
_STATUS: list[tuple[type[BaseException], int, str]] = [
    (Unauthorized, 401, "unauthorized"),
    (BodyTooLarge, 413, "body_too_large"),
    (UnsupportedBody, 415, "unsupported_media_type"),
    (BodyIncomplete, 400, "body_incomplete"),
    (SessionBusyError, 409, "thread_busy"),
    (ConflictError, 409, "thread_changed"),  # written by another writer while the run began
    (SessionNotFoundError, 404, "thread_not_found"),
    (VersionNotFoundError, 404, "version_not_found"),
    (StoreUnavailableError, 503, "store_unavailable"),
    (ClosedError, 500, "server_error"),  # the app's ledger was closed: not the client's input
    (UserError, 422, "invalid_input"),
    (HistoryError, 422, "invalid_history"),
    (AgentLedgerError, 500, "server_error"),
]


def create_app(
    agent: ReActAgent | None = None,
    *,
    model: Model | str | None = None,
    store: str | Store | Ledger | AsyncLedger | None = None,
    tools: Sequence[ToolLike] = (),
    system_prompt: str | None = None,
    auth: Mapping[str, str] | None = None,
    tenant: str = DEFAULT_TENANT,
    max_body: int = DEFAULT_MAX_BODY,
    lease_wait: float = 2.0,
) -> Any:
    """A FastAPI app serving ``agent`` over AG-UI, or a ``ReActAgent`` built from ``model``,
    ``store``, ``tools`` and ``system_prompt``. ``auth`` maps bearer tokens to tenants (without
    it every request is ``tenant``); ``max_body`` limits a request body in bytes;
    ``lease_wait`` is how long a run waits for a thread another run holds before HTTP 409.
    Mount it in an existing app with ``app.mount("/agent", create_app(...))``."""
    fastapi = require("fastapi", "server")
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.requests import ClientDisconnect

    if agent is None:
        if model is None:
            raise UserError("create_app needs an agent or a model (e.g. model='openai:gpt-4o')")
        agent = ReActAgent(
            model, tools, store=store, system_prompt=system_prompt, lease_wait=lease_wait
        )
    served: ReActAgent = agent
    gate = Auth(auth, tenant=tenant)
    server_tools = frozenset(served.tools)
    forms = AguiForms()  # the AG-UI forms of the messages runs compare and send
    app = fastapi.FastAPI(title="agentledger AG-UI server", docs_url=None, redoc_url=None)

    def error(exc: BaseException) -> Any:
        for kind, status, code in _STATUS:
            if isinstance(exc, kind):
                headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
                body = {"error": {"code": code, "message": str(exc)}}
                return JSONResponse(body, status_code=status, headers=headers)
        raise exc

    def guarded(handler: Callable[[Any, str], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        """The endpoint: the tenant from the token, errors as statuses, dicts as JSON."""

        async def endpoint(request: Any) -> Any:
            try:
                tenant = gate.tenant(request.headers.get("authorization"))
                result = await handler(request, tenant)
            except AgentLedgerError as exc:
                return error(exc)
            return JSONResponse(result) if isinstance(result, dict) else result

        return endpoint

    @guarded
    async def run(request: Any, tenant: str) -> Any:
        sent = request.headers
        check_body_type(sent.get("content-type"), sent.get("content-encoding"))
        try:
            body = await read_body(request.stream(), max_body, sent.get("content-length"))
        except ClientDisconnect:  # the answer goes nowhere; nothing was read, nothing done
            log.info("a client went away before sending the whole run body")
            raise BodyIncomplete("the client went away before sending the whole body") from None
        run_request = parse_run_input(body, server_tools=server_tools)
        started = await start_run(served, run_request, tenant, forms)
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(frames(started.events()), media_type=MEDIA_TYPE, headers=headers)

    @guarded
    async def threads(request: Any, tenant: str) -> Any:
        limit, after = _int(request, "limit", least=1), request.query_params.get("after")
        more = None if limit is None else limit + 1  # one more says whether a next page exists
        infos = await served.ledger.list_sessions(tenant=tenant, limit=more, after=after)
        out: dict[str, Any] = {
            "threads": [
                {
                    "threadId": i.session_id,
                    "title": i.title,
                    "messages": i.message_count,
                    "version": i.version,
                    "updatedAt": i.updated_at.isoformat(),
                }
                for i in infos[:limit]
            ]
        }
        if limit is not None and len(infos) > limit:
            out["next"] = infos[limit - 1].cursor
        return out

    @guarded
    async def messages(request: Any, tenant: str) -> Any:
        thread = request.path_params["thread_id"]
        version = _int(request, "version")
        ledger = served.ledger
        if not await ledger.exists(thread, tenant=tenant):
            raise SessionNotFoundError(f"no thread {thread!r}")
        state = await ledger.load(thread, tenant=tenant, version=version)
        out: dict[str, Any] = {
            "threadId": thread,
            "version": state.version,
            "messages": interleave(forms.thread(state.context), state.values.get(ACTIVITY_VALUE)),
        }
        if STATE_VALUE in state.values:
            out["state"] = state.values[STATE_VALUE]
        return out

    async def health(request: Any) -> Any:
        try:
            await served.ledger.version("agentledger-health", tenant=gate.default)
        except AgentLedgerError as exc:
            log.warning("health check: the store failed: %s", exc)
            return JSONResponse({"status": "store_unavailable"}, status_code=503)
        return JSONResponse({"status": "ok"})

    app.add_route("/", run, methods=["POST"])
    app.add_route("/threads", threads, methods=["GET"])
    app.add_route("/threads/{thread_id:path}/messages", messages, methods=["GET"])
    app.add_route("/health", health, methods=["GET"])
    app.state.agent = served
    return app


_MAX_DIGITS = 18  # any such number fits every backend's 64-bit integer


def _int(request: Any, name: str, *, least: int = 0) -> int | None:
    """A query value as an integer of at least ``least``: ASCII digits only (``str.isdigit``
    also takes ``²`` and other scripts' digits, which ``int`` refuses) and at most 18 of them.

    A page of ``limit=0`` would be empty with no ``next``, which a client paging through the
    threads reads as the end of the list: refused like any other value out of range."""
    raw = request.query_params.get(name)
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_DIGITS or int(raw) < least:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise UserError(f"{name} must be an integer from {least} to below 10**18, got {shown!r}")
    return int(raw)
