"""Running one round's batch, in each mode, with the write-ahead journal (DESIGN.md §9).

Both runners keep the effect ledger (DESIGN.md §9.4): the batch is durable before any
tool starts (every call's intent), each call is journaled as dispatched right before its
handler runs, and each result is durable before it is shown. Results are shown in call
order whatever order they finish in.
They receive a ``RoundContext``: the round's state and the few services a batch uses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application import _audit_details, _outputs
from agent_lab.application._audit import Auditor
from agent_lab.application._chat_round import ChatRound
from agent_lab.application._event_agent_audits import open_argument_call
from agent_lab.application._metrics import SOURCE_OF_MODE, argument_metric, tool_metrics
from agent_lab.application._session_state import OpenBatch, SessionState, TurnState
from agent_lab.application._transcript import event_history
from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.event_agent import (
    ArgumentCall,
    DispatchNotice,
    EventAgentRequest,
    EventBatchDone,
    ReplyChannel,
    ToolReply,
)
from agent_lab.application.events import (
    BatchAborted,
    EventBatch,
    EventBatchExecutor,
    EventBatchResult,
    EventResult,
    EventSource,
    EventStatus,
)
from agent_lab.application.session_store import BatchIntent, CallStatus
from agent_lab.application.tools import ToolExecutionContext
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, TokenUsage


@dataclass
class EventAgentLink:
    """How the engine reaches the session's event agent."""

    requests: asyncio.Queue[Any]
    """``queues.events``."""
    replies: ReplyChannel
    ensure_running: Callable[[], None]


@dataclass(frozen=True, slots=True)
class EventServices:
    """What a round with tool calls needs: the batch executor and the event agent."""

    executor: EventBatchExecutor
    event_agent: EventAgentLink


@dataclass
class RoundContext:
    """What a batch runner may touch: the round's state and its services."""

    session: SessionState
    turn: TurnState
    scope: str
    auditor: Auditor
    executor: EventBatchExecutor
    event_agent: EventAgentLink

    @property
    def output(self) -> asyncio.Queue[Any]:
        return self.auditor.output


@dataclass
class BatchRun:
    result: EventBatchResult
    transcript: list[ChatMessage] = field(default_factory=list)
    """What the chat agent sees of the batch from now on."""
    persisted: list[ChatMessage] = field(default_factory=list)
    """What joins the visible stored transcript when the batch commits."""
    argument_calls: tuple[ArgumentCall, ...] = ()


class ReplyEmitter:
    """Shows ``tool_result``s in call order as they land (in the open batch)."""

    def __init__(self, order: list[str], output: asyncio.Queue[Any], batch: OpenBatch) -> None:
        self._order = list(dict.fromkeys(order))
        self._batch = batch  # the turn keeps what landed, for its record
        self._next = 0
        self._output = output

    def expects(self, event_id: str | None) -> bool:
        return event_id in self._order and event_id not in self._batch.landed

    async def land(self, result: EventResult, message: ChatMessage) -> None:
        self._batch.land(result, message)
        landed = self._batch.landed
        while self._next < len(self._order) and self._order[self._next] in landed:
            await self._output.put(_outputs.tool_result(landed[self._order[self._next]]))
            self._next += 1

    def messages(self) -> list[ChatMessage]:
        landed = self._batch.landed
        return [landed[event_id] for event_id in self._order if event_id in landed]


def _status(result: EventResult) -> CallStatus:
    return "succeeded" if result.succeeded else "failed"


async def _begin(
    ctx: RoundContext,
    streamed: ChatRound,
    *,
    assistant: ChatMessage | None,
    visible: list[ChatMessage],
) -> OpenBatch:
    """Journal the batch (durable before any tool starts) and audit its start."""
    session, turn = ctx.session, ctx.turn
    batch_id = await session.batch_recorder().begin_batch(
        BatchIntent(
            turn.index,
            turn.round_index,
            ctx.scope,
            session.mode,
            list(streamed.events),
            assistant,
            visible,
        )
    )
    turn.open_batch = opened = OpenBatch(batch_id)
    await ctx.auditor.emit(
        "event_batch_started",
        _audit_details.event_batch_started(
            ctx.scope, turn.round_index, session.mode, streamed.events
        ),
    )
    return opened


async def run_dual_batch(ctx: RoundContext, streamed: ChatRound) -> BatchRun:
    """Hand the batch to the event agent and collect its replies from its channel."""
    session, turn = ctx.session, ctx.turn
    assistant = ChatMessage(role="assistant", content=streamed.content)
    session.history.append(assistant)
    visible = [assistant] if assistant.content.strip() else []
    batch = await _begin(ctx, streamed, assistant=None, visible=visible)
    seen = event_history(session.prefix.event_view, session.history.event_view)

    async def show_usage(usage: TokenUsage) -> None:  # an argument call is a model call too
        await ctx.output.put(_outputs.usage(usage))

    request = EventAgentRequest(
        events=list(streamed.events),
        history=seen.messages,
        history_dumps=seen.dumps,
        scope=ctx.scope,
        enabled_tools=list(session.request.event_agent.enabled_tools),
        params=session.request.event_agent,
        chat_params=session.request.chat_agent,
        session_id=session.session_id,
        turn_index=turn.index,
        round_index=turn.round_index,
        audit=ctx.auditor.emit,
        on_usage=show_usage,
        resolving=turn.note_resolving,
    )
    ctx.event_agent.ensure_running()
    await ctx.event_agent.requests.put(request)
    done = await _collect_dual_replies(ctx, batch, request)
    if done.outcome.failure is None:
        turn.resolving = ()  # the outcome reports them (``event_agent_response``)
    if done.outcome.failure is not None:
        raise done.outcome.failure
    summary = done.outcome.results_message
    return BatchRun(
        result=done.outcome.batch,
        transcript=[summary] if summary is not None else [],
        argument_calls=done.outcome.argument_calls,
    )


async def _collect_dual_replies(
    ctx: RoundContext, batch: OpenBatch, request: EventAgentRequest
) -> EventBatchDone:
    emitter = ReplyEmitter([event.id for event in request.events], ctx.output, batch)
    while True:
        item = await ctx.event_agent.replies.receive()
        match item:
            case EventBatchDone(scope=scope) if scope == request.scope:
                return item
            case ToolReply(scope=scope) if scope == request.scope and emitter.expects(
                item.message.tool_call_id
            ):
                await _land_dual_reply(ctx, batch.batch_id, emitter, item)
            case DispatchNotice(scope=scope) if scope == request.scope:
                await _journal_dispatch(ctx, batch, item)
            case ToolReply():
                item.durable.set_result(None)  # nothing to keep: a reply no call expects
            case DispatchNotice():
                item.durable.set_exception(RuntimeError("no open batch for this call"))
            case EventBatchDone():
                pass  # a stale marker from a cancelled turn


async def _journal_dispatch(ctx: RoundContext, batch: OpenBatch, notice: DispatchNotice) -> None:
    """Journal the call as dispatched; only then may its handler run."""
    event = notice.event
    try:
        await ctx.session.recorder.mark_dispatched(batch.batch_id, event.id, dict(event.arguments))
    except Exception as exc:  # the event agent stops the batch and reports it back
        notice.durable.set_exception(exc)
        return
    batch.dispatched[event.id] = event
    notice.durable.set_result(None)


async def _land_dual_reply(
    ctx: RoundContext, batch_id: str, emitter: ReplyEmitter, reply: ToolReply
) -> None:
    event_id = reply.result.event_id
    try:
        await ctx.session.recorder.record_result(
            batch_id, event_id, _status(reply.result), reply.message
        )
    except Exception as exc:  # the event agent stops the batch and reports it back
        reply.durable.set_exception(exc)
        return
    reply.durable.set_result(None)
    await emitter.land(reply.result, reply.message)


async def run_direct_batch(ctx: RoundContext, streamed: ChatRound) -> BatchRun:
    """Run provider tool calls here, concurrently, replying in provider order."""
    session, turn = ctx.session, ctx.turn
    events = list(streamed.events)
    assistant = ChatMessage(role="assistant", content=streamed.content, tool_calls=events)
    opened = await _begin(ctx, streamed, assistant=assistant, visible=[])
    session.note_call_ids(event.id for event in events)
    emitter = ReplyEmitter([event.id for event in events], ctx.output, opened)

    async def on_dispatch(event: ToolCallEvent) -> None:
        await session.recorder.mark_dispatched(opened.batch_id, event.id, dict(event.arguments))
        opened.dispatched[event.id] = event

    async def on_result(result: EventResult) -> None:
        reply = result.tool_message()
        status = _status(result)
        await session.recorder.record_result(opened.batch_id, result.event_id, status, reply)
        await emitter.land(result, reply)

    seen = event_history(session.prefix.event_view, session.history.event_view, assistant)
    context = ToolExecutionContext(
        history=seen.messages,
        session_id=session.session_id,
        turn_index=turn.index,
        round_index=turn.round_index,
    )
    batch = EventBatch(
        scope=ctx.scope,
        events=events,
        source=EventSource.PROVIDER_TOOL_CALL,
        enabled_names=session.request.event_agent.enabled_tools,
        context=context,
        on_result=on_result,
        on_dispatch=on_dispatch,
    )
    try:
        result = await ctx.executor.execute(batch)
    except BatchAborted as aborted:
        raise aborted.cause from aborted
    for duplicate in result.duplicates:
        await on_result(duplicate)
    await ctx.auditor.emit(
        "provider_tools_completed",
        _audit_details.provider_tools_completed(ctx.scope, turn.round_index, result),
    )
    transcript = [assistant, *emitter.messages()]
    return BatchRun(result=result, transcript=transcript, persisted=transcript)


def note_batch_metrics(turn: TurnState, batch: BatchRun, mode: ToolInvocationMode) -> None:
    """The metrics of a batch that ran to its end: one per logical result and one per
    argument call of the event agent."""
    index, round_index = turn.index, turn.round_index
    tools = tool_metrics(batch.result, turn_index=index, round_index=round_index, mode=mode)
    arguments = [
        argument_metric(
            call.call,
            fallback=call.fallback,
            event_id=call.event_id,
            event_name=call.event_name,
            turn_index=index,
            round_index=round_index,
            mode=mode,
        )
        for call in batch.argument_calls
    ]
    turn.metrics += (*tools, *arguments)


def close_cut_off_batch(
    turn: TurnState, mode: ToolInvocationMode, *, cancelled: bool
) -> str | None:
    """Close the record of the batch the turn ends in the middle of (if any) and return
    its journal id, for the journal to abandon it.

    Its calls that finished keep the results shown (for the closing audit) and get
    their ``tool_execution`` metrics with the latency measured, as in a batch that
    completes; each call whose handler was still running gets one as ``cancelled``,
    with no latency (it never finished); calls not started get none. The argument
    calls are closed as ``_close_arguments`` says."""
    _close_arguments(turn, mode, cancelled=cancelled)
    batch, turn.open_batch = turn.open_batch, None
    if batch is None:
        return None
    turn.unfinished = batch
    stopped = [
        EventResult(event.id, event.name, EventStatus.CANCELLED, SOURCE_OF_MODE[mode])
        for event in batch.dispatched.values()
        if event.id not in batch.results
    ]
    results = EventBatchResult((*batch.results.values(), *stopped))
    turn.metrics += tuple(
        tool_metrics(results, turn_index=turn.index, round_index=turn.round_index, mode=mode)
    )
    return batch.batch_id


def _close_arguments(turn: TurnState, mode: ToolInvocationMode, *, cancelled: bool) -> None:
    """The argument calls of a ``dual_agent`` batch the turn ends in the middle of are
    still calls made: each gets its metric (as it ended; one still open ``cancelled``
    when the turn was, else ``failed``) and, with the resolutions made so far, goes to
    the turn's closing audit."""
    progress, turn.resolving = turn.resolving, ()
    entries: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for event in progress:
        if event.entry is not None:
            entries.append(event.entry)
            failures.extend(event.failures)
        if event.call is None:
            continue
        call, still_open = event.call, event.entry is None
        if still_open and call.call.latency_ms is None:
            call.call.latency_ms = round((time.perf_counter() - call.call.sent_at) * 1000)
        metric = argument_metric(
            call.call,
            fallback=call.fallback,
            event_id=event.event_id,
            event_name=event.event_name,
            turn_index=turn.index,
            round_index=turn.round_index,
            mode=mode,
            status=("cancelled" if cancelled else "failed") if still_open else None,
        )
        turn.metrics += (metric,)
        if still_open:
            key = metric.metric_key
            entries.append(open_argument_call(event.event_id, event.event_name, call, key))
    if progress and entries:
        turn.unfinished_resolutions = {
            "scope": progress[0].scope,
            "resolutions": entries,
            "argument_failures": failures,
        }
