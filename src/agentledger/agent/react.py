"""``ReActAgent``: reason, act, repeat — persisting every step as it completes.

One run, in order: take the session's run lease, load the state, set ``ctx.state``, call
``on_state_loaded(ctx, msgs)``, resolve tool calls a crash left unanswered (``lifecycle``), append
the input and **save**; then loop: stream from the model, check for an interrupt, **save** the
answer, run its tool calls and **save** each result as it lands. What is left unsaved is saved on
every exit path: success, model error, interrupt, cancellation, max iterations; the run ends
(and gives back its lease) only once that save is done, however often its task is cancelled
meanwhile, so no save of a run that has ended can land on the next run's session.

Every save is fenced: it expects the session at the version the run last loaded or saved, so a
commit another writer made meanwhile (the run's lease was lost, or the writer took none) fails
the run with ``ConflictError`` (its ``RunError``) and is never replaced; on PostgreSQL a lease
known lost fails the next save with ``LeaseLostError`` first. A run reports only what is durable:
each message a save committed is announced (``MessageCommitted``), and a save that failed is not
tried again behind the run's error (which would make "not committed" untrue).

The answer is persisted under the id announced by ``ResponseStarted`` before the model streams,
so a client shown the stream finds the same id in the store. Calls to the run's client tools are
not run here: the run ends with them waiting for the client (``lifecycle.CLIENT``).

History sent to the model is validated first (``wire.HistoryChecker``), the system prompt is
passed separately and never stored, and private metadata never reaches the provider.

Within a run, a step costs what it adds, not what the session holds: the context is a
``TrackedList`` known to be as stored from the load on, so each save compares it from its
first changed position, and the checker walks only the messages added since the last history
it passed. What stays proportional to the session is what must be: the request sent to the
model, which carries the whole context (one snapshot per call, the very tuple the checker
passed, whose prefix it confirms in one C-level comparison). From run to run, the ledger hands
out the messages it remembers, decoded, while the session is at the version it last saw, and
the agent keeps each session's history checker, so the first check of a run walks only what
came since the last run.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from operator import is_
from typing import Any

from agentledger._shield import shield_to_end
from agentledger.agent.call_ids import CallIds
from agentledger.agent.context import (
    AgentEvent,
    ContextEditFailed,
    MessageCommitted,
    OnStateLoaded,
    ResponseStarted,
    RunError,
    RunFinished,
    RunInterrupted,
    RunStarted,
    RuntimeContext,
    ToolResultEvent,
)
from agentledger.agent.events import ModelResponse, ResponseBuilder
from agentledger.agent.interrupts import (
    InterruptSource,
    PartialReasoningPolicy,
    UnexecutedCallPolicy,
    keep_on_interrupt,
)
from agentledger.agent.lifecycle import (
    CLIENT,
    ISSUED,
    PENDING_VALUE,
    STARTED,
    maybe_ran_result,
    no_client_result,
    state_of,
    unanswered_calls,
)
from agentledger.agent.middleware import Middleware
from agentledger.agent.model import Model, ModelSettings
from agentledger.agent.tools import Tool, ToolContext, ToolLike, as_tools, describe_error
from agentledger.errors import AgentLedgerError, ConflictError, HistoryError, ModelError, UserError
from agentledger.messages import (
    Msg,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    checks,
    message_list,
    new_id,
)
from agentledger.store import Ledger, SaveReport, SessionKey, Store
from agentledger.store.aio import AsyncLedger
from agentledger.store.base import check_wait
from agentledger.store.tracked import TrackedList
from agentledger.wire import HistoryChecker
from agentledger.wire.validate import (
    TARGETS,
    FindingKind,
    Target,
    is_empty_assistant,
    validate,
)

__all__ = ["ReActAgent"]

log = logging.getLogger("agentledger.agent")

#: Sessions whose last checked history an agent keeps (see ``ReActAgent._checker``).
KEPT_CHECKERS = 64

AgentInput = str | Msg | Sequence[Msg] | None


class _Interrupted(Exception):
    def __init__(self, source: InterruptSource) -> None:
        super().__init__(source)
        self.source: InterruptSource = source


@dataclass(slots=True)
class _Run:
    """The mutable state of one run."""

    ctx: RuntimeContext
    run_id: str
    context: TrackedList = field(default_factory=TrackedList)
    checker: HistoryChecker = field(default_factory=HistoryChecker)  # what was sent passed
    pending: dict[str, Any] = field(default_factory=dict)
    version: int = 0
    loaded: list[Msg] = field(default_factory=list)  # the loaded context, until ``_save`` reads it
    committed: set[str] = field(default_factory=set)  # ids announced (see ``_save``)
    builder: ResponseBuilder | None = None
    interrupt: InterruptSource | None = None
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    refused: bool = False  # the history failed its check: nothing more is saved
    saved_edits: int = 0  # ``context.edits`` when the context was last loaded or saved
    saved_pending: dict[str, Any] = field(default_factory=dict)  # ``pending`` then
    save_error: BaseException | None = None  # a save failed: nothing more is saved

    def unsaved(self) -> bool:
        """Whether the context or the pending calls changed since they were loaded or saved."""
        return self.context.edits != self.saved_edits or self.pending != self.saved_pending

    def check(self, msgs: Sequence[Msg]) -> tuple[Msg, ...]:
        """``checker.check(msgs)``; a history it refuses is never saved (``refused``), so a
        run that fails here leaves the session as it stood, not as the input or a hook made
        it: every later run would fail on it too."""
        try:
            return self.checker.check(msgs)
        except HistoryError:
            self.refused = True
            raise


def _as_input(value: AgentInput) -> list[Msg]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Msg.user(value)]
    if isinstance(value, Msg):
        return [value]
    return message_list(value, "agent input (a string, a Msg or a list of Msg)")


def _history_target(model: Any) -> Target:
    target = getattr(model, "history_target", "strict")
    if target not in TARGETS or target == "agui":
        raise UserError(
            f"{type(model).__name__}.history_target must be one of 'strict', 'openai' or "
            f"'anthropic', got {target!r}"
        )
    return target  # type: ignore[no-any-return]


def _check_answer(model: str, message: Msg) -> None:
    """``ModelError`` for an answer no history may hold (tool results or thinking where they
    cannot be, a role other than assistant): the model's fault, refused before it is saved.
    Its calls are answered later, so they are not asked for here."""
    if message.role != "assistant":
        raise ModelError(f"model {model} answered with a {message.role} message, not assistant")
    findings = [f for f in validate([message]) if f.kind is not FindingKind.UNANSWERED_CALL]
    if findings:
        said = "; ".join(f"{f.kind.value}: {f.text}" for f in findings)
        raise ModelError(f"model {model} answered with a message no provider takes: {said}")


def _overtaken(run: _Run, exc: ConflictError) -> ConflictError:
    """The run's error when a save found that another writer committed since ``run.version``:
    what was kept, and what was not."""
    unsaved = [m.id for m in run.context[run.context.changed_from :]]
    named = ", ".join(unsaved[:5]) + (", ..." if len(unsaved) > 5 else "")
    lost = f"; not saved: {len(unsaved)} message(s) ({named})" if unsaved else ""
    saved = f"is in version {run.version} and earlier" if run.version else "was nothing"
    return ConflictError(
        f"session {run.ctx.session_id!r} moved on from version {run.version} under this run "
        "(another writer committed: the run's lease was lost, or the writer took none); the "
        f"run stopped without replacing that commit. What the run saved {saved}{lost}",
        expected=run.version,
        actual=exc.actual,
    )


def _edited_context(middleware: Middleware, edited: Any) -> list[Msg]:
    """A middleware's edit as a list of messages, or ``UserError`` naming the middleware."""
    return message_list(edited, f"{type(middleware).__name__}.before_reasoning")


def _replace_context(context: TrackedList, edited: Sequence[Msg]) -> None:
    """Make ``context`` hold a middleware's ``edited`` list, changing it only from the first
    message that is not the same object, so that the next save and check start there."""
    edited = list(edited)
    same = list(map(is_, context, edited))
    kept = same.index(False) if False in same else len(same)
    if kept < len(context) or kept < len(edited):
        context[kept:] = edited[kept:]


def _open_ledger(store: str | Store | Ledger | AsyncLedger | None) -> AsyncLedger:
    if isinstance(store, AsyncLedger):
        return store
    return AsyncLedger(store)


class ReActAgent:
    """A tool-using agent whose every step is persisted; see the module docstring.

    ``model`` is a ``Model`` or a spec string (``openai:gpt-4o-mini``, ``scripted:path.json``).
    ``store`` is a URL, ``Store``, ``Ledger`` or ``AsyncLedger`` (default: SQLite in the user
    data directory).
    """

    def __init__(
        self,
        model: Model | str,
        tools: Sequence[ToolLike] = (),
        *,
        store: str | Store | Ledger | AsyncLedger | None = None,
        system_prompt: str | None = None,
        middlewares: Sequence[Middleware] = (),
        max_iters: int = 10,
        settings: ModelSettings | None = None,
        reasoning_policy: PartialReasoningPolicy = PartialReasoningPolicy.SAVE,
        unexecuted_calls: UnexecutedCallPolicy = UnexecutedCallPolicy.DROP,
        on_state_loaded: OnStateLoaded | None = None,
        lease_wait: float = 0.0,
    ) -> None:
        if isinstance(model, str):
            from agentledger.agent.spec import model_from_spec

            model = model_from_spec(model)
        checks.count("ReActAgent", "max_iters", max_iters, minimum=1)
        self.model = model
        self.tools: dict[str, Tool] = as_tools(tools)
        self.ledger = _open_ledger(store)
        self.system_prompt = system_prompt
        self.middlewares = list(middlewares)
        self.max_iters = max_iters
        self.settings = settings
        self.reasoning_policy = reasoning_policy
        self.unexecuted_calls = unexecuted_calls
        self.on_state_loaded = on_state_loaded
        self.lease_wait = check_wait(lease_wait, "lease_wait")
        #: The rules the history must keep (``wire.validate``'s target): the model's provider's
        #: (``Model.history_target``), else ``strict``.
        self.history_target: Target = _history_target(model)
        self._runs: dict[SessionKey, _Run] = {}
        self._checkers: OrderedDict[SessionKey, HistoryChecker] = OrderedDict()

    # -- public API ------------------------------------------------------------------------
    async def run(self, input: AgentInput, ctx: RuntimeContext | str) -> Msg | None:
        """Run to the end and return the final assistant message (``None`` if interrupted
        before anything was kept). Errors are raised after everything completed is saved."""
        final: Msg | None = None
        async for event in self.stream(input, ctx):
            if isinstance(event, (RunFinished, RunInterrupted)):
                final = event.message
        return final

    def run_sync(self, input: AgentInput, ctx: RuntimeContext | str) -> Msg | None:
        """``run`` for synchronous code (starts an event loop)."""
        return asyncio.run(self.run(input, ctx))

    def interrupt(
        self,
        session: str | RuntimeContext,
        source: InterruptSource = "user",
        *,
        tenant: str | None = None,
    ) -> bool:
        """Interrupt the running run of a session. True if one was running."""
        if isinstance(session, RuntimeContext):
            tenant, session = session.tenant, session.session_id
        key = self.ledger.sync.key(session, tenant)
        run = self._runs.get(key)
        if run is None:
            return False
        if source not in ("user", "system"):
            raise UserError(f'source must be "user" or "system", got {source!r}')
        if run.interrupt is None:
            run.interrupt = source
            run.interrupted.set()
        return True

    async def recover(self, ctx: RuntimeContext | str) -> list[Msg]:
        """Resolve tool calls left unanswered by a crash (see ``lifecycle``), without calling
        the model; returns the session's context afterwards."""
        ctx = self._ctx(ctx)
        async for _ in self.stream(None, ctx, _recover_only=True):
            pass
        return await self.ledger.messages(ctx.session_id, tenant=ctx.tenant)

    async def stream(
        self,
        input: AgentInput,
        ctx: RuntimeContext | str,
        *,
        _recover_only: bool = False,
        _input_from_hook: bool = False,
    ) -> AsyncIterator[AgentEvent]:
        """Run and yield events as they happen (see ``context`` for the event types).

        The run holds the session's lease until the generator ends. A consumer that may stop
        early (``break``, or an error in its loop body) should close it, e.g. with
        ``async with contextlib.aclosing(agent.stream(...)) as events``: left to the garbage
        collector, the run ends (saves and gives its lease back) only some time after the
        consumer has gone on, and a retry at once finds the session busy.

        ``_input_from_hook`` (the AG-UI server's runs): the run has input, which the
        ``on_state_loaded`` hook puts in the list it is given; as for any input, a hook that
        leaves the list empty ends the run without calling the model."""
        ctx = self._ctx(ctx)
        msgs = _as_input(input)
        key = self.ledger.sync.key(ctx.session_id, ctx.tenant)
        async with self.ledger.lease(ctx.session_id, tenant=ctx.tenant, wait=self.lease_wait):
            run = _Run(ctx=ctx, run_id=new_id(), checker=self._checker(key))
            self._runs[key] = run
            try:
                had_input = bool(msgs) or _input_from_hook
                # closed here, not by the garbage collector: a consumer that closes the stream
                # early gets the run's final save done before the lease is given back
                lifecycle = self._lifecycle(run, msgs, had_input, _recover_only)
                async with aclosing(lifecycle) as events:
                    async for event in events:
                        yield event
            finally:
                del self._runs[key]

    # -- one run -----------------------------------------------------------------------------
    def history_checker(self, session_id: str, tenant: str | None = None) -> HistoryChecker:
        """The checker this agent keeps for a session's history (``_checker``). Code that checks
        a history the session is about to run on (the AG-UI server's input merge) shares its
        walk: a history that begins with the last one that passed costs what was added since."""
        return self._checker(self.ledger.sync.key(session_id, tenant))

    def _checker(self, key: SessionKey) -> HistoryChecker:
        """The session's history checker, kept from run to run (for the ``KEPT_CHECKERS``
        sessions run most recently): a run's context is made of the objects the last run left,
        which its ledger remembers and loads again, so its first check walks only what came
        since. The session's lease keeps two runs from sharing it."""
        checker = self._checkers.pop(key, None) or HistoryChecker(self.history_target)
        self._checkers[key] = checker
        while len(self._checkers) > KEPT_CHECKERS:
            self._checkers.popitem(last=False)
        return checker

    def _ctx(self, ctx: RuntimeContext | str) -> RuntimeContext:
        """The run's context, its tenant defaulting to the ledger's."""
        if isinstance(ctx, str):
            ctx = RuntimeContext(session_id=ctx)
        if ctx.tenant is None:
            ctx.tenant = self.ledger.sync.tenant
        return ctx

    async def _lifecycle(
        self, run: _Run, msgs: list[Msg], had_input: bool, recover_only: bool
    ) -> AsyncIterator[AgentEvent]:
        ctx = run.ctx
        # the context as a TrackedList known to be as stored: the first save compares from
        # where the run changed it, not from its first message
        state, run.context = await self.ledger.load_tracked(ctx.session_id, tenant=ctx.tenant)
        run.saved_edits = run.context.edits
        ctx.state = state
        hook = ctx.on_state_loaded or self.on_state_loaded
        if hook is not None and not recover_only:
            outcome = hook(ctx, msgs)
            if inspect.isawaitable(outcome):
                await outcome
            msgs[:] = message_list(msgs, "the input on_state_loaded left")
            # the hook may have cut the context short
            context = message_list(ctx.state.context, "the context on_state_loaded left")
            _replace_context(run.context, context)
        run.loaded = run.context.copy()  # what the run starts from
        run.pending = dict(state.values.get(PENDING_VALUE) or {})
        run.saved_pending = dict(run.pending)
        run.version = state.version  # as a hook that saved left it (the AG-UI server's does)
        yield RunStarted(ctx.session_id, ctx.tenant, run.run_id, run.version)
        try:
            try:
                async for event in self._steps(run, msgs, had_input, recover_only):
                    yield event
                async for event in self._save_unsaved(run):  # records a recovery cleared
                    yield event
            except _Interrupted as stop:
                yield await self._finish_interrupt(run, stop.source)
            # the last saves run to their end even if the task is cancelled again meanwhile (as
            # a cancel scope does): merely shielded, the run ended, and gave its lease to the
            # next one, while its save still wrote the session
            except asyncio.CancelledError:
                await shield_to_end(self._persist_cancelled(run))
                raise
        except AgentLedgerError as exc:
            for event in await shield_to_end(self._recover(run, exc)):
                yield event
            said = "; ".join([str(exc), *getattr(exc, "__notes__", ())])
            yield RunError(said, type(exc).__name__, run.version)
            raise
        finally:
            await shield_to_end(self._last_save(run))

    async def _steps(
        self, run: _Run, msgs: list[Msg], had_input: bool, recover_only: bool
    ) -> AsyncIterator[AgentEvent]:
        """The run from its load on: resume what a crash left, save the input, loop."""
        async for event in self._resume(run, msgs, recover_only or had_input):
            yield event
        if recover_only:
            return
        if msgs:
            # input the model could not be sent is refused before it is stored
            run.check([*run.context, *msgs])
            run.context.extend(msgs)
            for result in (r for m in msgs for r in m.tool_results):
                run.pending.pop(result.id, None)  # a client call answered by the input
            async for event in self._save(run):
                yield event
        elif had_input:
            async for event in self._save_unsaved(run):  # a cut the hook made
                yield event
            yield RunFinished(None, "no_new_input", run.version)
            return
        elif not run.context or run.context[-1].role == "assistant":
            raise UserError("nothing to run: no input and no pending tool results")
        async for event in self._loop(run):
            yield event

    async def _loop(self, run: _Run) -> AsyncIterator[AgentEvent]:
        for _ in range(self.max_iters):
            for middleware in self.middlewares:
                try:
                    edited = await middleware.before_reasoning(run.ctx, list(run.context))
                except ModelError as exc:  # its own model call (a summary): keep the context
                    log.warning("%s left the context unchanged: %s", type(middleware).__name__, exc)
                    name, kind = type(middleware).__name__, type(exc).__name__
                    yield ContextEditFailed(name, str(exc), kind, run.version)
                    continue
                if edited is None:
                    continue
                edited = _edited_context(middleware, edited)
                try:
                    run.checker.check(edited)  # an edit is saved only if it can be sent
                except HistoryError as exc:
                    log.warning("%s's edit was not applied: %s", type(middleware).__name__, exc)
                    name, kind = type(middleware).__name__, type(exc).__name__
                    yield ContextEditFailed(name, str(exc), kind, run.version)
                    continue
                _replace_context(run.context, edited)
            sent = run.check(run.context)  # what is saved next can be sent
            async for event in self._save(run):  # persist middleware edits before sending
                yield event
            run.builder = ResponseBuilder()
            call_ids = CallIds(run.checker.call_ids)
            async for event in self._reason(run, sent, call_ids):
                yield event
            response = run.builder.response
            assert response is not None
            message = call_ids.message(response.message)
            if message.id != run.builder.id:  # the id announced by ResponseStarted
                message = message.replace(id=run.builder.id)
            for middleware in self.middlewares:
                message = await middleware.after_reasoning(run.ctx, message)
            self._raise_if_interrupted(run)  # the pre-acting check: nothing persisted yet
            run.builder = None
            if message.role == "assistant" and is_empty_assistant(message):
                # no text (or blank text), no call: a message strict providers refuse
                log.warning("model %s returned an empty answer; nothing saved", self.model.name)
                yield RunFinished(None, response.stop_reason, run.version)
                return
            _check_answer(self.model.name, message)
            run.context.append(message)
            calls = message.tool_calls
            client = {t.name for t in run.ctx.client_tools} - set(self.tools)
            for call in calls:
                state = CLIENT if call.name in client else ISSUED
                run.pending[call.id] = {"state": state, "name": call.name}
            async for event in self._save(run):
                yield event
            if not calls:
                yield RunFinished(message, response.stop_reason, run.version)
                return
            ours = [c for c in calls if c.name not in client]
            if ours:
                async for event in self._act(run, ours):
                    yield event
            if len(ours) < len(calls):
                yield RunFinished(message, "client_tool", run.version)
                return
        yield RunFinished(None, "max_iters", run.version)

    async def _reason(
        self, run: _Run, sent: Sequence[Msg], call_ids: CallIds
    ) -> AsyncIterator[AgentEvent]:
        assert run.builder is not None
        yield ResponseStarted(run.builder.id)
        extra = run.ctx.instructions
        system = "\n\n".join(p for p in (self.system_prompt, extra) if p) or None
        server = [t.spec for t in self.tools.values()]
        client = [t for t in run.ctx.client_tools if t.name not in self.tools]
        stream = self.model.stream(
            sent, system=system, tools=[*server, *client], settings=self.settings
        )
        try:
            while True:
                try:
                    event = await self._until_interrupted(run, stream.__anext__())
                except StopAsyncIteration:
                    break
                except (AgentLedgerError, _Interrupted):
                    raise
                except Exception as exc:  # the protocol allows ModelError only: a faulty model
                    said = describe_error(exc)
                    raise ModelError(f"model {self.model.name!r} failed: {said}") from exc
                event = call_ids.event(event)  # a reused tool-call id made unique
                run.builder.add(event)
                if not isinstance(event, ModelResponse):
                    yield event  # type: ignore[misc]
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                try:
                    await aclose()
                except (RuntimeError, ModelError):  # a stream torn down mid-await
                    pass
        if run.builder.response is None:
            raise ModelError(f"model {self.model.name!r} ended its stream without a response")

    async def _act(self, run: _Run, calls: list[ToolUseBlock]) -> AsyncIterator[AgentEvent]:
        for call in calls:
            run.pending[call.id] = {"state": STARTED, "name": call.name}
        async for event in self._save(run):
            yield event
        tasks: dict[asyncio.Task[ToolResultBlock], ToolUseBlock] = {
            asyncio.ensure_future(self._run_tool(run, call)): call for call in calls
        }
        try:
            while tasks:
                done, _ = await self._until_interrupted(
                    run, asyncio.wait(set(tasks), return_when=asyncio.FIRST_COMPLETED)
                )
                for task in done:
                    call = tasks.pop(task)
                    result = task.result()
                    yield ToolResultEvent(result)
                    run.context.append(Msg.tool(result))
                    run.pending.pop(call.id, None)
                    async for event in self._save(run):
                        yield event
        finally:
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_tool(self, run: _Run, call: ToolUseBlock) -> ToolResultBlock:
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResultBlock(
                id=call.id,
                name=call.name,
                is_error=True,
                output=(TextBlock(text=f"There is no tool named {call.name!r}."),),
            )
        ctx = run.ctx
        context = ToolContext(
            ctx.tenant, ctx.session_id, call.id, ctx.attributes, messages=tuple(run.context)
        )
        return await tool.run(call, context)

    async def _resume(
        self, run: _Run, msgs: list[Msg], keep_client_calls: bool
    ) -> AsyncIterator[AgentEvent]:
        """Answer calls a crash left without results, before anything new is appended. Calls
        waiting for the client are left to the input that answers them (see ``lifecycle``);
        with ``keep_client_calls`` (recovering, or input the merge found nothing new in, such
        as a client resending the thread it has) they stay waiting even without new input."""
        calls = unanswered_calls(run.context)
        if not calls:
            if run.pending:
                run.pending.clear()  # stale records (their results are all in the context)
            return
        answered = {r.id for m in msgs for r in m.tool_results}
        to_run = []
        for call in calls:
            if state_of(run.pending, call.id) == CLIENT:
                if call.id in answered or (keep_client_calls and not msgs):
                    continue
                if not msgs:
                    raise UserError(
                        f"tool call {call.id} ({call.name}) is waiting for its result from the "
                        "client: send it as a tool message"
                    )
                run.context.append(Msg.tool(no_client_result(call)))
                run.pending.pop(call.id, None)
                continue
            tool = self.tools.get(call.name)
            never_started = state_of(run.pending, call.id) == ISSUED
            if never_started or (tool is not None and tool.idempotent):
                to_run.append(call)
            else:
                log.warning(
                    "tool call %s (%s) may have run before a crash; not re-run", call.id, call.name
                )
                run.context.append(Msg.tool(maybe_ran_result(call)))
                run.pending.pop(call.id, None)
        async for event in self._save(run):
            yield event
        if to_run:
            async for event in self._act(run, to_run):
                yield event

    # -- persistence ---------------------------------------------------------------------------
    async def _save(self, run: _Run) -> AsyncIterator[AgentEvent]:
        """Save the run's context and pending calls; yield ``MessageCommitted`` for each message
        this save committed. Both cost what changed: the context is a ``TrackedList``, so the
        save compares it from its first changed position, and only messages from there on can
        be new. A message is announced once, the first time a save commits its id; not if the
        run started with it (``loaded``), which can matter only once a save reaches back into
        those messages (a middleware's edit), so their ids are collected then, once. A message
        appended with the id of an earlier one is written as a row of its own, and announced.

        Every save of a run is fenced (``_commit``): a commit anyone else made since the run's
        last load or save fails it with ``ConflictError`` instead of being replaced."""
        changed_from = run.context.changed_from
        if changed_from < len(run.loaded):
            run.committed.update(m.id for m in run.loaded)
            run.loaded = []  # collected once for the run
        report = await shield_to_end(self._commit(run))
        for msg in run.context[changed_from:]:
            if msg.id not in run.committed:
                run.committed.add(msg.id)
                yield MessageCommitted(msg, report.version)

    async def _commit(self, run: _Run) -> SaveReport:
        """Save the run's state with ``expected_version`` the version the run last read or
        wrote, and record the outcome in ``run``: the new version, or, if it failed, the error
        (the run then saves nothing more: see ``_save_unsaved``). A session that moved on means
        another writer committed under the run (its lease was lost, or the writer took none):
        the save fails with ``ConflictError`` rather than replace their turn (re-planned, it
        would have kept it only in history). ``_save`` sees this through even if the run is
        cancelled meanwhile, so the run always knows the version its saves left."""
        edits, pending = run.context.edits, dict(run.pending)
        try:
            report = await self.ledger.save_state(
                run.ctx.session_id,
                lists={"context": run.context},
                values={PENDING_VALUE: pending or None},
                tenant=run.ctx.tenant,
                expected_version=run.version,
            )
        except ConflictError as exc:
            run.save_error = _overtaken(run, exc)
            raise run.save_error from exc
        except BaseException as exc:
            run.save_error = exc
            raise
        run.version, run.saved_edits, run.saved_pending = report.version, edits, pending
        return report

    async def _save_unsaved(self, run: _Run) -> AsyncIterator[AgentEvent]:
        """``_save``, if the run changed anything since its last save and may save at all: not
        once its history was refused, nor once a save failed. A save that failed is not tried
        again, so what the run reports stays true: a save it reported as not committed (or
        refused as a conflict) does not commit later behind that report."""
        if run.refused or run.save_error is not None or not run.unsaved():
            return
        async for event in self._save(run):
            yield event

    async def _final_save(self, run: _Run) -> None:
        async for _ in self._save_unsaved(run):
            pass

    async def _recover(self, run: _Run, exc: AgentLedgerError) -> list[AgentEvent]:
        """What a run that failed with ``exc`` had not saved, saved now (``_save_unsaved``): the
        ``MessageCommitted`` events of what that committed. A failure of this save is noted on
        ``exc``, which stays the run's error."""
        try:
            return [event async for event in self._save_unsaved(run)]
        except AgentLedgerError as failed:
            exc.add_note(f"what the run had not saved was not saved either: {failed}")
            return []

    async def _last_save(self, run: _Run) -> None:
        """The save of a run that ended on a path that made none (its stream closed early, an
        error raised by the caller's code): a failure is logged, not raised over the exception
        already on its way."""
        try:
            await self._final_save(run)
        except AgentLedgerError as exc:
            log.warning("the last save of a run of session %r failed: %s", run.ctx.session_id, exc)

    # -- interrupts ---------------------------------------------------------------------------
    def _raise_if_interrupted(self, run: _Run) -> None:
        if run.interrupt is not None:
            raise _Interrupted(run.interrupt)

    async def _until_interrupted(self, run: _Run, awaitable: Any) -> Any:
        """Await ``awaitable`` unless the run is interrupted first."""
        self._raise_if_interrupted(run)
        task = asyncio.ensure_future(awaitable)
        waiter = asyncio.ensure_future(run.interrupted.wait())
        try:
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            waiter.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise _Interrupted(run.interrupt or "user")

    async def _persist_interrupt(self, run: _Run, source: InterruptSource) -> Msg | None:
        """Keep what the interrupt policy keeps of a partial answer; answer started calls."""
        kept: Msg | None = None
        if run.builder is not None:
            partial = (
                run.builder.response.message if run.builder.response else run.builder.partial()
            )
            run.builder = None
            kept, answers = keep_on_interrupt(
                partial, source, self.reasoning_policy, self.unexecuted_calls
            )
            if kept is not None:
                run.context.append(kept)
                run.context.extend(answers)
        for call in unanswered_calls(run.context):  # calls interrupted while running
            run.context.append(
                Msg.tool(
                    ToolResultBlock(
                        id=call.id,
                        name=call.name,
                        is_error=True,
                        output=(
                            TextBlock(
                                text=f"Interrupted ({source}) before it finished; it may "
                                "have partly run."
                            ),
                        ),
                        metadata={"interrupted": source},
                    )
                )
            )
            run.pending.pop(call.id, None)
        await self._final_save(run)
        return kept

    async def _persist_cancelled(self, run: _Run) -> None:
        """``_persist_interrupt`` for a cancelled run: the cancellation goes on whatever its save
        does, so a save that fails (another writer committed, say) is logged."""
        try:
            await self._persist_interrupt(run, "user")
        except AgentLedgerError as exc:
            log.warning(
                "a run of session %r was cancelled and what it kept was not saved: %s",
                run.ctx.session_id,
                exc,
            )

    async def _finish_interrupt(self, run: _Run, source: InterruptSource) -> RunInterrupted:
        kept = await self._persist_interrupt(run, source)
        return RunInterrupted(source, kept, run.version)
