"""One AG-UI run from start to last event: the steps put together, and every exit path.

``start_run`` does everything that can refuse a run before a byte of the response is sent: it
takes the thread's run lease, loads and merges (the agent does both, calling the merge hook) and
waits for the agent's ``RunStarted``. A busy thread, a bad input or an unreachable store
therefore become HTTP errors, not a stream that fails. A request cancelled before then cancels
its run too, and ends once the run has let go of the thread.

The agent runs in a task of its own, feeding a queue the response reads. A client that goes away
only stops the reading: the run is interrupted as a *user* interrupt (what was streamed is kept,
tool calls that never ran are dropped) and finishes its final save and releases the lease on its
own, so the thread is left persisted up to the last completed step and usable, whatever the
web server does to the response task.

The run's last events are read back from the store: ``STATE_SNAPSHOT`` and
``MESSAGES_SNAPSHOT`` at the version the run ended at, then ``RUN_FINISHED`` (with the client
tool calls left waiting as ``pendingToolCallIds``) or ``RUN_ERROR`` with a code. A request with
no messages hydrates: the snapshots only, no model call; its ``state`` is stored as any run's
is (``hook.client_state``), so the snapshot never sends a client back the state it replaced.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from agentledger._shield import wait_done
from agentledger.agent.context import (
    RunError,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RuntimeContext,
)
from agentledger.agent.lifecycle import PENDING_VALUE, client_calls
from agentledger.agent.react import ReActAgent
from agentledger.errors import AgentLedgerError
from agentledger.server.activity import ACTIVITY_VALUE, interleave
from agentledger.server.events import EventStream, error_code
from agentledger.server.forms import AguiForms
from agentledger.server.hook import (
    STATE_VALUE,
    client_state,
    merge_hook,
    merge_of,
    save_client_values,
)
from agentledger.server.parse import RunRequest
from agentledger.store import SessionState

__all__ = ["ServerRun", "start_run"]

log = logging.getLogger("agentledger.server")

_DONE = object()
_tasks: set[asyncio.Task[None]] = set()  # running agents, referenced until they finish


@dataclass(frozen=True, slots=True)
class _Failed:
    error: BaseException


async def start_run(
    agent: ReActAgent, request: RunRequest, tenant: str, forms: AguiForms | None = None
) -> ServerRun:
    """Start a run; raises (``SessionBusyError``, ``UserError`` ...) before any event.
    ``forms``: the server's AG-UI forms of its messages, kept from run to run."""
    run = ServerRun(agent, request, tenant, forms)
    await run.start()
    return run


class ServerRun:
    """A started run; ``events()`` yields its AG-UI events, once."""

    def __init__(
        self,
        agent: ReActAgent,
        request: RunRequest,
        tenant: str,
        forms: AguiForms | None = None,
    ) -> None:
        self.agent = agent
        self.request = request
        self.ledger = agent.ledger
        self.forms = AguiForms() if forms is None else forms
        self.stream = EventStream(request)
        self.ctx = RuntimeContext(
            session_id=request.thread_id,
            tenant=tenant,
            attributes={
                "agui": {
                    "runId": request.run_id,
                    "parentRunId": request.parent_run_id,
                    "context": request.context,
                    "forwardedProps": request.forwarded_props,
                }
            },
            on_state_loaded=merge_hook(
                request,
                self.ledger,
                agent.on_state_loaded,
                self.forms,
                agent.history_checker(request.thread_id, tenant),
            ),
            client_tools=request.tools,
            instructions=request.instructions(),
        )
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.first: RunStarted | None = None
        self.hydrated: SessionState | None = None
        self.abandoned = False

    async def start(self) -> None:
        if not self.request.messages:
            thread, tenant = self.request.thread_id, self.ctx.tenant
            async with self.ledger.lease(thread, tenant=tenant, wait=self.agent.lease_wait):
                state = await self.ledger.load(thread, tenant=tenant)
                # the client's state is the thread's, as in a run (the snapshot must not undo
                # it); a thread that does not exist is not made for it
                values = client_state(self.request, state)
                await save_client_values(self.ledger, thread, tenant, state, values, create=False)
                self.hydrated = state
            return
        task = asyncio.create_task(self._pump())
        _tasks.add(task)
        task.add_done_callback(_tasks.discard)
        try:
            item = await self.queue.get()
        except asyncio.CancelledError:
            # the request went before the run started: so does the run (left going, it took
            # the thread when its wait ended and ran with no one to answer), and the request
            # ends only once the run has let go of the thread's lease
            task.cancel()
            await wait_done(task)
            raise
        if isinstance(item, _Failed):
            await self.queue.get()  # _DONE: the agent has let go of the lease
            raise item.error
        assert isinstance(item, RunStarted)
        self.first = item

    async def _pump(self) -> None:
        try:
            # the client's messages are the input: the merge hook converts what is new
            async for event in self.agent.stream(None, self.ctx, _input_from_hook=True):
                if not self.abandoned:
                    self.queue.put_nowait(event)
        except Exception as exc:  # reported as the run's error
            self.queue.put_nowait(_Failed(exc))
        finally:
            self.queue.put_nowait(_DONE)

    def abandon(self) -> None:
        """The client went away: interrupt the run, which persists and ends on its own."""
        self.abandoned = True
        self.agent.interrupt(self.ctx, "user")

    async def events(self) -> AsyncIterator[Any]:
        completed = False
        try:
            async for event in self._events():
                yield event
            completed = True
        finally:
            if not completed:
                self.abandon()

    async def _events(self) -> AsyncIterator[Any]:
        if self.hydrated is not None:
            state = self.hydrated
            for event in self.stream.started(None, state.version):
                yield event
            for event in self._closing(state):
                yield event
            yield self.stream.finished(state.version, "hydrated", self._pending(state))
            return
        assert self.first is not None
        version = self.first.version
        for event in self.stream.started(merge_of(self.ctx), version):
            yield event
        end: Any = None
        while (item := await self.queue.get()) is not _DONE:
            if isinstance(item, _Failed):
                if end is None:
                    log.error("run %s failed", self.request.run_id, exc_info=item.error)
                    end = RunError("the run failed on the server", "InternalError", version)
                continue
            if isinstance(item, (RunFinished, RunInterrupted, RunError)):
                end = item
            version = getattr(item, "version", version)
            for event in self.stream.translate(item):
                yield event
        for event in self.stream.close():
            yield event
        state = await self._final_state(version)
        if state is not None:
            for event in self._closing(state):
                yield event
        yield self._end(end, version, state)

    def _end(self, end: Any, version: int, state: SessionState | None) -> Any:
        if isinstance(end, RunError):
            return self.stream.failed(end.error, error_code(end.kind), version)
        if isinstance(end, RunInterrupted):
            return self.stream.finished(version, "interrupted", [])
        if isinstance(end, RunFinished):
            pending = self._pending(state) if state is not None else []
            return self.stream.finished(version, end.reason, pending)
        return self.stream.failed("the run ended without a result", "internal_error", version)

    async def _final_state(self, version: int) -> SessionState | None:
        """The thread as the run left it (at its last version, if another run has since
        moved it on); ``None`` if the store cannot be read now."""
        thread, tenant = self.request.thread_id, self.ctx.tenant
        try:
            state = await self.ledger.load(thread, tenant=tenant)
            if state.version != version and version > 0:
                state = await self.ledger.load(thread, tenant=tenant, version=version)
        except AgentLedgerError:
            log.exception("cannot read thread %r back for its snapshots", thread)
            return None
        return state

    def _closing(self, state: SessionState) -> list[Any]:
        messages = interleave(self.forms.thread(state.context), state.values.get(ACTIVITY_VALUE))
        return self.stream.snapshots(state.values.get(STATE_VALUE), messages)

    @staticmethod
    def _pending(state: SessionState) -> list[str]:
        pending = state.values.get(PENDING_VALUE) or {}
        return [c.id for c in client_calls(state.context, pending)]
