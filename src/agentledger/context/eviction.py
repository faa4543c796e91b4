"""``ToolResultEviction``: large tool results move out of the context, their full text offloaded.

A tool result whose own text is longer than ``limit`` characters has that text (its text blocks
joined by newlines, as ``ToolResultBlock.text`` gives it) written through an
``OffloadFilesystem``; only then is the result replaced, in the context, by its preview
(``ToolResultPreview``: media, fields and order kept) followed by a note naming the recovery path.
The model reads the text back with the ``read_offloaded`` tool (``eviction.read_tool``). As a
middleware the edit is saved by the agent's normal incremental save, which writes just the
replaced row; the original stays in the ledger's history.

Rules that keep this exact:

- the write happens first; if it fails the result is left exactly as it was (logged) and tried
  again at the next step;
- an offloaded result is marked (``_preview`` with ``by: "eviction"`` and ``path``) and never
  evicted twice; nor is a result that was already shortened, nor a ``read_offloaded`` answer;
- each result is rebuilt from its own blocks, position by position: nothing is looked up by
  tool-call id, so a view with different media, or an id reused later in the context, gets its
  own preview and its own file;
- the file name is derived from the ids and the text (``offload.offload_path``), never taken from
  them, so no id can write or read outside the root; ``read_offloaded`` reads only the calling
  session's files, and those its context names (a session forked from the one that offloaded a
  result holds that result, and its path).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from functools import cached_property

from agentledger.agent.context import RuntimeContext
from agentledger.agent.middleware import Middleware
from agentledger.agent.model import ToolSpec
from agentledger.agent.tools import Tool, ToolContext
from agentledger.context.marks import NOTE_KEY, preview_mark
from agentledger.context.offload import (
    LocalFilesystem,
    OffloadFilesystem,
    default_offload_root,
    offload_path,
    parse_offload_path,
    session_folder,
)
from agentledger.context.preview import ToolResultPreview, as_preview, map_results
from agentledger.context.tokens import usage_basis
from agentledger.errors import UserError
from agentledger.messages import Msg, TextBlock, ToolResultBlock, message_list
from agentledger.store.ids import DEFAULT_TENANT

__all__ = ["ToolResultEviction"]

log = logging.getLogger("agentledger.context")

READ_TOOL = "read_offloaded"


class ToolResultEviction(Middleware):
    """Offload tool results longer than ``limit`` characters (see the module docstring).

    ``filesystem`` is an ``OffloadFilesystem`` or a directory (default: ``offload`` in the user
    data directory, beside the default store; ``LocalFilesystem.for_store(ledger)`` puts it beside
    another store). ``preview`` is the allowance kept in the context, or a ``ToolResultPreview``.
    """

    def __init__(
        self,
        filesystem: OffloadFilesystem | str | os.PathLike[str] | None = None,
        *,
        limit: int = 20_000,
        preview: ToolResultPreview | int = 2_000,
        tool_name: str = READ_TOOL,
    ) -> None:
        preview = as_preview(preview)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit <= preview.allowance:
            raise UserError(
                f"limit must be an int above the preview allowance ({preview.allowance}), "
                f"got {limit!r}"
            )
        if filesystem is None:
            filesystem = LocalFilesystem(default_offload_root())
        elif isinstance(filesystem, (str, os.PathLike)):
            filesystem = LocalFilesystem(filesystem)
        elif not isinstance(filesystem, OffloadFilesystem):
            raise UserError(f"filesystem must be an OffloadFilesystem or a path: {filesystem!r}")
        self.filesystem: OffloadFilesystem = filesystem
        self.limit = limit
        self.preview = preview
        self.tool_name = ToolSpec(name=tool_name).name  # a name every provider takes

    # -- over any list ---------------------------------------------------------------------
    def evict(
        self, messages: Sequence[Msg], *, session: str, tenant: str = DEFAULT_TENANT
    ) -> list[Msg]:
        """A copy of ``messages`` with every result over the limit offloaded (blocking I/O)."""
        messages = message_list(messages, "evict")
        session_folder(session, tenant)  # refuse a bad id before anything is written
        basis = usage_basis(messages)

        def evict_one(result: ToolResultBlock) -> ToolResultBlock:
            return self._evict(result, session=session, tenant=tenant, basis=basis)

        return [map_results(msg, evict_one) for msg in messages]

    def _evict(
        self, result: ToolResultBlock, *, session: str, tenant: str, basis: str | None
    ) -> ToolResultBlock:
        if preview_mark(result) is not None or result.name == self.tool_name:
            return result
        texts = [b.text for b in result.output if isinstance(b, TextBlock)]
        if sum(map(len, texts)) <= self.limit:
            return result
        full = "\n".join(texts)
        path = offload_path(
            full, session=session, tenant=tenant, call_id=result.id, tool=result.name
        )
        mark = {"by": "eviction", "path": path, "basis": basis}
        shortened = self.preview.result(result, mark=mark)
        if shortened is result:  # its own text fits the preview: nothing to offload
            return result
        try:
            self.filesystem.write(path, full)
        except Exception as exc:  # any failure of a pluggable filesystem keeps the original
            log.warning("could not offload the result of %s (%s): %s", result.name, result.id, exc)
            return result
        note = TextBlock(
            text=f"[The full output ({len(full):,} characters) is saved as {path}; call "
            f'{self.tool_name}(path="{path}") to read it.]',
            metadata={NOTE_KEY: path},
        )
        return shortened.replace(output=(*shortened.output, note))

    # -- as a middleware -------------------------------------------------------------------
    async def before_reasoning(self, ctx: RuntimeContext, context: list[Msg]) -> list[Msg] | None:
        edited = await asyncio.to_thread(
            self.evict, context, session=ctx.session_id, tenant=ctx.tenant
        )
        return None if all(a is b for a, b in zip(edited, context)) else edited

    # -- reading back ----------------------------------------------------------------------
    @cached_property
    def read_tool(self) -> Tool:
        """The tool that reads offloaded text back; give it to the agent with this middleware."""
        filesystem = self.filesystem

        def read_offloaded(
            path: str, context: ToolContext, offset: int = 0, limit: int | None = None
        ) -> str:
            """Read the full output of a tool result that was shortened to save context.

            Args:
                path: the path named in the shortened result.
                offset: the first character to return (default 0).
                limit: how many characters to return (default: all the rest).
            """
            tenant, session, _ = parse_offload_path(path)
            own = session_folder(context.session_id, context.tenant)
            if f"{tenant}/{session}" != own and not _names(context.messages, path):
                raise UserError("that path belongs to another session")
            if offset < 0 or (limit is not None and limit < 0):
                raise UserError("offset and limit must not be negative")
            text = filesystem.read(path)
            return text[offset:] if limit is None else text[offset : offset + limit]

        return Tool(read_offloaded, name=self.tool_name)


def _names(messages: Sequence[Msg], path: str) -> bool:
    """Whether a result in ``messages`` was offloaded to ``path`` (its mark says so): a session
    forked from the one that offloaded it holds that result, and so may read the file."""
    for msg in messages:
        for result in msg.tool_results:
            mark = preview_mark(result)
            if mark is not None and mark.get("path") == path:
                return True
    return False
