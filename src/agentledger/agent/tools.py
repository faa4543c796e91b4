"""Tools: plain Python functions the model may call.

``@tool`` turns a function (sync or async) into a ``Tool``: its JSON schema comes from the type
hints (through pydantic), its description from the docstring, and each parameter's description
from an ``Args:`` section. Running a tool never raises into the loop: bad arguments, exceptions
and timeouts all become error results that the model can read and react to.

``idempotent=True`` marks a tool that is safe to run twice. After a crash, a call that started
but whose result was never saved is re-run only if its tool is idempotent; otherwise it gets an
error result saying it may have run (see ``lifecycle``).
"""

from __future__ import annotations

import asyncio
import inspect
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import pydantic

from agentledger.agent.model import ToolSpec
from agentledger.errors import UserError
from agentledger.messages import (
    AudioBlock,
    FileBlock,
    ImageBlock,
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
    thaw,
)
from agentledger.messages.arguments import RAW_ARGUMENTS_KEY, is_raw, json_arguments

__all__ = ["Tool", "ToolContext", "tool"]

_OUTPUT_BLOCKS = (TextBlock, ImageBlock, AudioBlock, VideoBlock, FileBlock)
_ARG_LINE = re.compile(r"^\s{2,}(\w+)\s*(?:\([^)]*\))?:\s*(.+)$")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may ask for by declaring a parameter annotated ``ToolContext``: the
    session, the call, the run's attributes and ``messages``, the session's context as it stood
    when the call started (the message that made the call included)."""

    tenant: str
    session_id: str
    call_id: str
    attributes: Mapping[str, Any] = field(default_factory=dict)
    messages: Sequence[Msg] = ()


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary_lines: list[str] = []
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
            continue
        if in_args:
            match = _ARG_LINE.match("  " + line if not line.startswith("  ") else line)
            if match:
                params[match.group(1)] = match.group(2).strip()
                continue
            if line and not line.startswith(" "):
                in_args = False
        if not in_args:
            summary_lines.append(line)
    return "\n".join(summary_lines).strip(), params


class Tool:
    """A callable the model can use. Build one with ``@tool`` or ``Tool(fn, ...)``."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        idempotent: bool = False,
        timeout: float | None = 60.0,
    ) -> None:
        self.fn = fn
        self.name = fn.__name__ if name is None else name
        summary, param_docs = _doc_parts(fn)
        self.description = description if description is not None else summary
        self.idempotent = idempotent
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(fn)
        signature = inspect.signature(fn)
        hints = _hints(fn)
        fields: dict[str, Any] = {}
        self._context_param: str | None = None
        for pname, param in signature.parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                self._context_param = pname
                continue
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UserError(f"tool {self.name!r}: *args/**kwargs parameters are not supported")
            if pname.startswith("_"):
                raise UserError(
                    f"tool {self.name!r}: parameter {pname!r} starts with an underscore, which "
                    "the model cannot be asked for (pydantic keeps such names private); rename it"
                )
            default = ... if param.default is param.empty else param.default
            fields[pname] = (
                annotation,
                pydantic.Field(default, description=param_docs.get(pname)),
            )
        try:
            self._args_model = pydantic.create_model(  # type: ignore[call-overload]
                f"{self.name}_args", __config__=pydantic.ConfigDict(extra="forbid"), **fields
            )
            schema = self._args_model.model_json_schema()
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError) as exc:
            raise UserError(
                f"tool {self.name!r}: its parameters have no JSON schema: {describe_error(exc)}"
            ) from exc
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        self.spec = ToolSpec(name=self.name, description=self.description, parameters=schema)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    async def __call__(self, **kwargs: Any) -> Any:
        """Call the underlying function directly (validation included)."""
        args = self._args_model.model_validate(kwargs)
        return await self._invoke(dict(args), None)

    async def _invoke(self, args: dict[str, Any], context: ToolContext | None) -> Any:
        if self._context_param is not None:
            args[self._context_param] = context
        if self.is_async:
            try:
                return await self.fn(**args)
            except SystemExit as exc:  # see ``_in_thread``
                raise ToolExit(describe_error(exc)) from exc
        return await asyncio.to_thread(_in_thread, self.fn, args)

    async def run(self, call: ToolUseBlock, context: ToolContext) -> ToolResultBlock:
        """Run one call and return its result; never raises (except on cancellation)."""
        started = time.monotonic()
        given = _arguments(call)
        if given is None:
            what = call.arguments if call.arguments is not None else call.input[RAW_ARGUMENTS_KEY]
            return _error(
                call, f"invalid arguments for {self.name}: not a JSON object: {what!r}", started
            )
        try:
            validated = self._args_model.model_validate(given)
        except pydantic.ValidationError as exc:
            return _error(call, f"invalid arguments for {self.name}: {_brief(exc)}", started)
        args = {name: getattr(validated, name) for name in type(validated).model_fields}
        try:
            if self.timeout is not None:
                value = await asyncio.wait_for(self._invoke(args, context), self.timeout)
            else:
                value = await self._invoke(args, context)
        except TimeoutError:
            return _error(call, f"{self.name} timed out after {self.timeout:g} s", started)
        except asyncio.CancelledError:
            raise
        except ToolExit as exc:
            return _error(call, str(exc), started)
        except Exception as exc:  # a tool's failure is information for the model
            return _error(call, describe_error(exc), started)
        try:
            output = _as_output(value)
        except Exception as exc:  # text no store can hold, a model that cannot be dumped ...
            return _error(
                call, f"{self.name} returned what cannot be kept: {describe_error(exc)}", started
            )
        return ToolResultBlock(
            id=call.id,
            name=call.name,
            output=output,
            metadata={"execution": {"seconds": round(time.monotonic() - started, 6)}},
        )


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        import typing

        return typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        return dict(getattr(fn, "__annotations__", {}))


def _brief(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
    )


def _error(call: ToolUseBlock, text: str, started: float) -> ToolResultBlock:
    """An error result saying ``text``, in which a lone surrogate (from an exception's message;
    UTF-8 cannot encode one, so no block may hold it) is written as its escape."""
    return ToolResultBlock(
        id=call.id,
        name=call.name,
        output=(TextBlock(text=text.encode("utf-8", "backslashreplace").decode("utf-8")),),
        is_error=True,
        metadata={"execution": {"seconds": round(time.monotonic() - started, 6)}},
    )


class ToolExit(Exception):
    """A tool raised ``SystemExit``, or ``KeyboardInterrupt`` in its worker thread: the tool's
    own doing, reported to the model like any failure (see ``_in_thread``)."""


def _in_thread(fn: Callable[..., Any], args: dict[str, Any]) -> Any:
    """``fn(**args)`` in a worker thread, ``SystemExit`` and ``KeyboardInterrupt`` turned into
    ``ToolExit``. Either, left as it is, reaches the task that awaits the tool, and asyncio
    re-raises it out of the event loop: a tool wrapping ``argparse`` (which exits on bad
    arguments) ended the program mid-run, without the error result or the final save. In a
    worker thread a ``KeyboardInterrupt`` can only be the tool's own (signals go to the main
    thread); in the main thread (an async tool) it may be Ctrl-C, and stops the program."""
    try:
        return fn(**args)
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ToolExit(describe_error(exc)) from exc


def describe_error(exc: BaseException) -> str:
    """``Type: message``, or the type alone for an exception whose message cannot be made."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:
        return type(exc).__name__


def _as_output(value: Any) -> tuple[Any, ...]:
    """A tool's return value as result blocks: blocks pass through, the rest becomes text."""
    if isinstance(value, _OUTPUT_BLOCKS):
        return (value,)
    if isinstance(value, Sequence) and value and all(isinstance(v, _OUTPUT_BLOCKS) for v in value):
        return tuple(value)
    if value is None:
        return ()
    if isinstance(value, str):
        return (TextBlock(text=value),)
    if isinstance(value, pydantic.BaseModel):
        return (TextBlock(text=value.model_dump_json()),)
    try:
        import json

        return (TextBlock(text=json.dumps(value, ensure_ascii=False, default=str)),)
    except (TypeError, ValueError):
        return (TextBlock(text=str(value)),)


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout: float | None = 60.0,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    idempotent: bool = False,
    timeout: float | None = 60.0,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` from a function: ``@tool`` or ``@tool(idempotent=True, timeout=5)``."""
    if fn is not None:
        return Tool(fn)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, idempotent=idempotent, timeout=timeout)

    return wrap


ToolLike = Tool | Callable[..., Any] | Callable[..., Awaitable[Any]]


def as_tools(tools: Sequence[ToolLike]) -> dict[str, Tool]:
    """Tools by name; plain functions are wrapped with default settings."""
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Iterable):
        raise UserError(f"tools must be a list of functions or Tools, got {type(tools).__name__}")
    out: dict[str, Tool] = {}
    for index, item in enumerate(tools):
        if not isinstance(item, Tool) and not callable(item):
            raise UserError(f"tool {index} is not a function or a Tool: {type(item).__name__}")
        t = item if isinstance(item, Tool) else Tool(item)
        if t.name in out:
            raise UserError(f"two tools are named {t.name!r}")
        out[t.name] = t
    return out


def _arguments(call: ToolUseBlock) -> dict[str, Any] | None:
    """The call's arguments exactly as the model wrote them (an integer past 64 bits included),
    or ``None`` when they are not a JSON object."""
    if call.arguments is not None:
        return json_arguments(call.arguments)
    if is_raw(call.input):
        return None
    plain: dict[str, Any] = thaw(call.input)
    return plain
