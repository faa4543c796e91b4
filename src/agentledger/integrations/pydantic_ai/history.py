"""``LedgerHistory``: one session's pydantic-ai history, and ``PersistHistory``, which saves it
during a run.

pydantic-ai carries a conversation as a list of ``ModelMessage`` objects: a run takes them as
``message_history=`` and returns them all from ``result.all_messages()``. ``LedgerHistory`` loads
and saves such a list through the ledger's ordinary save, so an unchanged history writes nothing,
a grown one appends only its new messages and an edited one (a history processor that trims or
rewrites) writes only what changed, while the replaced messages stay in the ledger's history.
pydantic-ai 2.68 also bundles a history with what the messages cannot say (the running usage,
the conversation id, the deferred tool calls a paused run waits on) as a ``Conversation``, for
``conversation=``; ``load_conversation``/``save_conversation`` store those beside the messages,
in the same commit.

pydantic-ai 2.68 lets code join a run as a *capability* (``Agent(capabilities=[...])`` or
``agent.run(..., capabilities=[...])``); history processors are capabilities too
(``ProcessHistory``). ``PersistHistory`` is one: it saves the run's live history
(``RunContext.messages``) before each model request (so the new prompt is stored before the
model is called), after every step of the run (each model response, each round of tool
results), and once more when the run ends, whether it ends by returning, raising or being
cancelled, so a crash mid-run loses at most the step in flight (the last save also stores the
usage, id and deferred tool calls of the run's ``Conversation``). What it saves is what the
history processors left, which is what the model saw, on every pydantic-ai version: 2.78 keeps
the unprocessed history in a result's ``conversation``, and ``save_conversation`` says why that
one is not stored. A run given no history on a session that holds one is refused before it starts,
since saving it would replace the session with that run alone; so is a run given a history the
stored one is not the start of (``ConflictError``: loaded before another run saved its turn).
Each save of a run is at the version its last save made, so of two runs on one session at once
the one overtaken fails with ``ConflictError`` rather than replacing the other's turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.conversation import Conversation
from pydantic_ai.run import AgentRunResult

from agentledger._optional import require
from agentledger.errors import ConflictError, UserError
from agentledger.integrations.pydantic_ai._cache import Conversions
from agentledger.integrations.pydantic_ai.convert import (
    from_msgs_grouped,
    json_of,
    message_key,
    to_msgs,
)
from agentledger.messages import Msg
from agentledger.store.aio import AsyncLedger
from agentledger.store.ledger import Ledger
from agentledger.store.state import CONTEXT, SaveReport

if TYPE_CHECKING:
    from pydantic_ai.capabilities.abstract import NodeResult, WrapNodeRunHandler, WrapRunHandler
    from pydantic_ai.messages import ModelMessage
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.tools import RunContext

__all__ = ["CONVERSATION_VALUE", "LedgerHistory", "PersistHistory"]

CONVERSATION_VALUE = "pydantic_ai"
"""Session value holding a saved ``Conversation``'s fields besides its messages (JSON text)."""

_REPEAT = "~"
_NOT_KEPT = {"messages", "new_message_index"}


def _conversation_type() -> Any:
    return require("pydantic_ai.conversation", "pydantic-ai").ConversationTypeAdapter


class LedgerHistory:
    """The pydantic-ai history of one session (list ``name``, default ``"context"``).

    ``ledger`` is a ``Ledger`` or an ``AsyncLedger``; ``load``/``save`` block, ``aload``/``asave``
    run the same work in a thread for asyncio code.
    """

    def __init__(
        self,
        ledger: Ledger | AsyncLedger,
        session: str,
        *,
        tenant: str | None = None,
        name: str = CONTEXT,
    ) -> None:
        if not isinstance(ledger, (Ledger, AsyncLedger)):
            raise UserError(
                "LedgerHistory takes a Ledger or an AsyncLedger (Ledger(url) opens one), "
                f"got {type(ledger).__name__}"
            )
        self.ledger = ledger.sync if isinstance(ledger, AsyncLedger) else ledger
        self.session = session
        self.tenant = tenant
        self.name = name
        self.ledger.key(session, tenant)  # a bad id fails here, not at the first save
        self._conversions = Conversions()

    def load(self, *, version: int | None = None) -> list[ModelMessage]:
        """The stored history (at ``version``, default the latest); empty for a new session."""
        return self._read(
            self.ledger.messages(self.session, self.name, tenant=self.tenant, version=version)
        )

    def _read(self, msgs: list[Msg]) -> list[ModelMessage]:
        """The messages stored as ``msgs``, remembered so that saving them again is cheap."""
        messages, groups = from_msgs_grouped(msgs)
        for message, group in zip(messages, groups, strict=True):
            if not any(_REPEAT in msg.id for msg in group):  # a repeat's id depends on its place
                self._conversions.put(message_key(message), group)
        return messages

    def save(
        self, messages: Sequence[ModelMessage], *, expected_version: int | None = None
    ) -> SaveReport:
        """Make the stored history equal ``messages``, writing only what changed.

        ``expected_version`` works as in ``Ledger.save`` (``ConflictError`` if another writer
        committed since). The caller's messages are read, never changed.
        """
        return self.ledger.save(
            self.session,
            to_msgs(messages, conversions=self._conversions),
            name=self.name,
            tenant=self.tenant,
            expected_version=expected_version,
        )

    def load_conversation(self) -> Conversation:
        """The stored history as a pydantic-ai ``Conversation`` (for ``conversation=``), with the
        usage, id and pending deferred tool calls ``save_conversation`` kept beside it; a new
        session gives an empty conversation whose id is the session id."""
        conversation_type = _conversation_type()
        state = self.ledger.load(self.session, tenant=self.tenant)
        kept = state.values.get(CONVERSATION_VALUE)
        conversation = (
            conversation_type.validate_json(kept)
            if isinstance(kept, str)
            else Conversation(conversation_id=self.session)
        )
        conversation.messages = self._read(state.lists.get(self.name, []))
        return conversation

    def save_conversation(
        self,
        conversation: Conversation | AgentRunResult[Any],
        *,
        expected_version: int | None = None,
    ) -> SaveReport:
        """Store a ``Conversation``: its messages as ``save`` does, and its usage, id and
        deferred tool calls as the session value ``"pydantic_ai"``, in one commit.

        Given a run result, the messages stored are the run's history as the run left it
        (``all_messages()``, what ``save`` and ``PersistHistory`` store during the run: what a
        history processor rewrote, as the model saw it), and the rest comes from its
        ``conversation``. Since pydantic-ai 2.78 a result's ``conversation`` holds the history
        from before any processor ran; storing that would undo, as the newest version, an edit
        the run's own steps had already saved (a redaction, a trim). The replaced messages stay
        in the ledger's history either way."""
        if isinstance(conversation, Conversation):
            messages = conversation.messages
        else:
            messages = conversation.all_messages()
            conversation = conversation.conversation
        rest = json_of(
            _conversation_type(), conversation, "the conversation", exclude=_NOT_KEPT
        ).decode()
        return self.ledger.save_state(
            self.session,
            lists={self.name: to_msgs(messages, conversions=self._conversions)},
            values={CONVERSATION_VALUE: rest},
            tenant=self.tenant,
            expected_version=expected_version,
        )

    async def aload_conversation(self) -> Conversation:
        return await asyncio.to_thread(self.load_conversation)

    async def asave_conversation(
        self,
        conversation: Conversation | AgentRunResult[Any],
        *,
        expected_version: int | None = None,
    ) -> SaveReport:
        return await asyncio.to_thread(
            self.save_conversation, conversation, expected_version=expected_version
        )

    def stored_count(self) -> int:
        """How many ``Msg`` rows the stored history has (nothing is decoded)."""
        return len(self.ledger.messages(self.session, self.name, tenant=self.tenant))

    def base_version(self, messages: Sequence[ModelMessage]) -> int:
        """The version a run given ``messages`` continues: the latest, when the stored history
        is where ``messages`` begin; else ``ConflictError``. A run whose history lacks what is
        stored (loaded before another run saved its turn, or cut short by hand) would replace
        the session with its own; save such a history first, deliberately, to run on it."""
        state = self.ledger.load(self.session, tenant=self.tenant)
        stored = state.lists.get(self.name, [])
        given = to_msgs(messages, conversions=self._conversions)
        if [m.digest for m in given[: len(stored)]] != [m.digest for m in stored]:
            raise ConflictError(
                f"session {self.session!r} is at version {state.version}, whose history is not "
                "where the run's message_history begins (another run saved since it was "
                "loaded?); load it again, or save the history you mean first",
                actual=state.version,
            )
        return state.version

    async def aload(self, *, version: int | None = None) -> list[ModelMessage]:
        return await asyncio.to_thread(self.load, version=version)

    async def asave(
        self, messages: Sequence[ModelMessage], *, expected_version: int | None = None
    ) -> SaveReport:
        return await asyncio.to_thread(self.save, messages, expected_version=expected_version)

    def capability(self) -> PersistHistory[Any]:
        """A capability that saves this history during every run it joins."""
        return PersistHistory(self)


@dataclass
class PersistHistory(AbstractCapability[Any]):
    """Save the run's history to ``history`` before each model request (the new input is then
    stored before the model is called), after every step and when the run ends, however it ends
    (see the module docstring)."""

    history: LedgerHistory
    _live: list[ModelMessage] | None = field(default=None, init=False, repr=False)
    _version: int | None = field(default=None, init=False, repr=False)

    async def for_run(self, ctx: RunContext[Any]) -> PersistHistory:
        # One copy per run, holding that run's live history list; the instance given to the
        # agent stays unchanged, so concurrent runs never share it.
        if not ctx.messages:
            stored = await asyncio.to_thread(self.history.stored_count)
            if stored:
                # Saving this run would replace the session with the run alone: refuse first.
                raise UserError(
                    f"session {self.history.session!r} holds {stored} messages but the run was "
                    "given no message_history; pass message_history=history.load() to continue "
                    "it, or use a new session"
                )
        run = PersistHistory(self.history)
        # Every save of the run is at the version the last one made, from the one the run's
        # history continues: a run that another writer overtook fails with ConflictError
        # rather than replacing that writer's turn with its own.
        run._version = await asyncio.to_thread(self.history.base_version, list(ctx.messages))
        return run

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        await self._save(ctx)
        return request_context

    async def wrap_node_run(
        self,
        ctx: RunContext[Any],
        *,
        node: Any,
        handler: WrapNodeRunHandler[Any],
    ) -> NodeResult[Any]:
        self._live = ctx.messages
        result = await handler(node)
        await self._save(ctx)
        return result

    async def wrap_run(
        self, ctx: RunContext[Any], *, handler: WrapRunHandler
    ) -> AgentRunResult[Any]:
        # The run-level context is a snapshot from before the run; the live history is the one
        # the steps saw (``_live``), or the result's.
        try:
            result = await handler()
        except BaseException:
            if self._live is not None:
                # Saved without awaiting: a cancelled task may not get to await again.
                with contextlib.suppress(ConflictError):  # overtaken: the run's error says so
                    self.history.save(list(self._live), expected_version=self._version)
            raise
        # usage and deferred calls too
        await self.history.asave_conversation(result, expected_version=self._version)
        return result

    async def _save(self, ctx: RunContext[Any]) -> None:
        self._live = ctx.messages
        report = await self.history.asave(list(ctx.messages), expected_version=self._version)
        self._version = report.version

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds a live ledger: not part of an agent spec
