"""Step 1 of a run: the request body → a checked ``RunRequest``, or a readable refusal.

The body is read up to a size limit (``BodyTooLarge`` past it, before the rest is read), parsed
as strict JSON (no ``NaN``, no number a float cannot hold), validated as AG-UI 1.0
``RunAgentInput`` by the protocol's own models, and checked for what this server
cannot honour. Nothing is dropped silently: a field the protocol does not define, or ``resume``
entries for interrupts this server never raised, are refused by name.

Messages are the exception to checking everything here. A client resends the whole thread with
every run, and validating it with the protocol's models and writing it back in canonical form
(camelCase, no ``null`` for an absent field, unknown fields kept: ``normalize_agui``) cost more
than the rest of a run at 12,000 messages. So a message leaves this step as sent when it is a
JSON object with a string ``id`` and ``role``; the merge, which holds the stored thread, takes a
message equal to a form the server holds as it is (that form is canonical and valid, so the
message is too) and validates every other one, by position, before anything is written
(``server.merge``). Any other message, and every ``activity`` message (stored as sent), is
validated here.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from agentledger._optional import require
from agentledger.agent.model import ToolSpec
from agentledger.errors import UserError
from agentledger.store.ids import check_id
from agentledger.wire.agui import brief, normalize_agui

__all__ = [
    "NO_STATE",
    "BodyIncomplete",
    "BodyTooLarge",
    "RunRequest",
    "UnsupportedBody",
    "check_body_type",
    "parse_run_input",
    "read_body",
]

NO_STATE: Any = object()
"""``RunRequest.state`` when the client sent none (the stored state is kept)."""


class BodyTooLarge(UserError):
    """The request body is over the server's limit (HTTP 413)."""


class UnsupportedBody(UserError):
    """The request body is not declared as JSON, or is compressed (HTTP 415)."""


class BodyIncomplete(UserError):
    """The client went away before sending the whole body (HTTP 400, to no one)."""


def check_body_type(content_type: str | None, content_encoding: str | None) -> None:
    """Refuse a run body that is not declared ``application/json`` (or ``+json``), or that
    is compressed.

    The declared type is the guard against cross-site requests: a web page can make a
    browser post ``text/plain``, a form or an untyped body to a server on the user's machine
    without asking it first (no CORS preflight), and such a body can still be valid JSON.
    ``application/json`` is never sent that way, and every AG-UI client declares it.
    """
    media = (content_type or "").partition(";")[0].strip().lower()
    kind, _, subtype = media.partition("/")
    if kind != "application" or not (subtype == "json" or subtype.endswith("+json")):
        said = f"Content-Type {content_type[:80]!r}" if content_type else "no Content-Type"
        raise UnsupportedBody(
            f"a run body must be sent as Content-Type: application/json, not with {said}"
        )
    encoding = (content_encoding or "identity").strip().lower()
    if encoding != "identity":
        raise UnsupportedBody(
            f"Content-Encoding {content_encoding[:40]!r} is not supported: send the body "
            "uncompressed"
        )


@dataclass(frozen=True, slots=True)
class RunRequest:
    """One AG-UI run request, checked. ``messages`` are the client's message dicts, each
    canonical or waiting for the merge to validate it (see the module docstring)."""

    thread_id: str
    run_id: str
    messages: list[dict[str, Any]]
    tools: tuple[ToolSpec, ...] = ()
    state: Any = NO_STATE
    context: list[dict[str, Any]] = field(default_factory=list)
    forwarded_props: Any = None
    parent_run_id: str | None = None

    def instructions(self) -> str | None:
        """The AG-UI ``context`` entries as instructions for the model (never stored)."""
        if not self.context:
            return None
        lines = [f"- {c['description']}: {c['value']}" for c in self.context]
        return "Context from the application:\n" + "\n".join(lines)


async def read_body(chunks: AsyncIterator[bytes], limit: int, declared_length: str | None) -> bytes:
    """The whole body, refusing it as soon as it is known to exceed ``limit`` bytes."""
    declared = declared_length or ""
    if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
        raise BodyTooLarge(f"the request body is {declared[:40]} bytes; the limit is {limit}")
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(f"the request body is over the limit of {limit} bytes")
    return bytes(body)


#: RFC 8259 JSON, numbers that fit a float64: the protocol's models (pydantic) also read ``NaN``,
#: ``Infinity`` and 1e400 as non-finite floats, which their JSON dump writes as ``null``.
_strict_json = msgspec.json.Decoder().decode


def _json_problem(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "it is nested too deeply"
    text = str(exc)
    if text.startswith("Number out of range"):
        return "it holds a number out of a 64-bit float's range"
    return f"it is not JSON ({text})"


@functools.cache
def _input_model() -> Any:
    return require("ag_ui.core", "server").RunAgentInput


def parse_run_input(body: bytes, *, server_tools: frozenset[str] = frozenset()) -> RunRequest:
    """Parse and check a ``RunAgentInput`` body. Raises ``UserError`` saying what is wrong."""
    from pydantic import ValidationError

    if not body.strip():
        raise UserError("the request body is empty: send an AG-UI RunAgentInput as JSON")
    try:
        data = _strict_json(body)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise UserError(
            f"the body is not a valid AG-UI RunAgentInput: {_json_problem(exc)}"
        ) from None
    sent = data.get("messages") if isinstance(data, dict) else None
    envelope = {**data, "messages": []} if isinstance(sent, list) else data
    try:
        run = _input_model().model_validate(envelope)
    except ValidationError as exc:
        raise UserError(f"the body is not a valid AG-UI RunAgentInput: {brief(exc)}") from None
    if run.model_extra:
        names = ", ".join(sorted(run.model_extra))
        raise UserError(f"RunAgentInput has fields this server does not know: {names}")
    if run.resume:
        ids = ", ".join(r.interrupt_id for r in run.resume)
        raise UserError(f"resume answers interrupts this agent never raised: {ids}")
    check_id(run.thread_id, "threadId")
    messages = [_client_message(m, index) for index, m in enumerate(sent or ())]
    return RunRequest(
        thread_id=run.thread_id,
        run_id=run.run_id,
        messages=messages,
        tools=_tool_specs(run.tools or (), server_tools),
        state=NO_STATE if run.state is None else run.state,
        context=[c.model_dump(by_alias=True, mode="json") for c in run.context or ()],
        forwarded_props=run.forwarded_props,
        parent_run_id=run.parent_run_id,
    )


def _client_message(message: Any, index: int) -> dict[str, Any]:
    """A client message as sent, when the merge can take it from there (a JSON object with a
    string id and role, not an activity message); otherwise validated now."""
    if (
        type(message) is dict
        and type(message.get("id")) is str
        and type(message.get("role")) is str
        and message["role"] != "activity"
    ):
        return message
    return normalize_agui(message, index)


def _tool_specs(tools: Any, server_tools: frozenset[str]) -> tuple[ToolSpec, ...]:
    """The client's tools, refused here when a provider would refuse the run that declares
    them (after the user's message was stored): two tools of one name, or parameters that
    are not an object's schema (OpenAI and Anthropic both take only ``"type": "object"``)."""
    specs: dict[str, ToolSpec] = {}
    for tool in tools:
        if tool.name in server_tools:
            raise UserError(
                f"tool {tool.name!r} is a server tool; a client tool needs another name"
            )
        if tool.name in specs:
            raise UserError(f"tools declares {tool.name!r} twice; tool names must be unique")
        parameters = tool.parameters
        if parameters is None:
            parameters = {"type": "object", "properties": {}}
        if not isinstance(parameters, Mapping):
            raise UserError(f"tool {tool.name!r}: parameters must be a JSON schema object")
        if parameters.get("type", "object") != "object":
            raise UserError(
                f"tool {tool.name!r}: parameters must be the schema of an object "
                f'("type": "object"), got "type": {_brief_json(parameters["type"])}'
            )
        specs[tool.name] = ToolSpec(
            name=tool.name, description=tool.description, parameters=dict(parameters)
        )
    return tuple(specs.values())


def _brief_json(value: Any) -> str:
    """``value`` as JSON, cut to 40 characters."""
    text = msgspec.json.encode(value).decode()
    return text if len(text) <= 40 else text[:39] + "…"
