"""Running one round's batch, in each mode, with the write-ahead journal (DESIGN.md §9).

Both runners make the batch durable before any tool starts, make each result durable
before it is shown, and show results in call order whatever order they finish in.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_lab.application import _outputs
from agent_lab.application._chat_round import StreamedRound
from agent_lab.application._transcript import EVENT_AGENT_NAME, event_agent_history
from agent_lab.application.event_agent import (
    ArgumentCall,
    EventAgentRequest,
    EventBatchDone,
)
from agent_lab.application.events import (
    BatchAborted,
    EventBatch,
    EventBatchResult,
    EventResult,
    EventSource,
)
from agent_lab.application.session_store import CallStatus
from agent_lab.application.tools import ToolExecutionContext
from agent_lab.domain.messages import ChatMessage

if TYPE_CHECKING:
    from agent_lab.application._session_state import TurnState
    from agent_lab.application._turn import TurnEngine


@dataclass
class BatchRun:
    result: EventBatchResult
    transcript: list[ChatMessage] = field(default_factory=list)
    """What the chat agent sees of the batch from now on."""
    persisted: list[ChatMessage] = field(default_factory=list)
    """What joins the visible stored transcript when the batch commits."""
    argument_calls: tuple[ArgumentCall, ...] = ()


class ReplyEmitter:
    """Shows ``tool_result``s in call order as they land."""

    def __init__(self, order: list[str], output: asyncio.Queue[Any]) -> None:
        self._order = list(dict.fromkeys(order))
        self._landed: dict[str, ChatMessage] = {}
        self._next = 0
        self._output = output

    def expects(self, event_id: str | None) -> bool:
        return event_id in self._order and event_id not in self._landed

    @property
    def complete(self) -> bool:
        return len(self._landed) == len(self._order)

    async def land(self, event_id: str, message: ChatMessage) -> None:
        self._landed[event_id] = message
        while self._next < len(self._order) and self._order[self._next] in self._landed:
            await self._output.put(_outputs.tool_result(self._landed[self._order[self._next]]))
            self._next += 1

    def messages(self) -> list[ChatMessage]:
        return [self._landed[event_id] for event_id in self._order if event_id in self._landed]


def _status(result: EventResult | None) -> CallStatus:
    if result is None:
        return "failed"
    return "succeeded" if result.succeeded else "failed"


async def _batch_started(
    engine: TurnEngine, turn: TurnState, streamed: StreamedRound, scope: str
) -> None:
    await engine.auditor.emit(
        "event_batch_started",
        {
            "scope": scope,
            "round_index": turn.round_index,
            "tool_invocation_mode": engine.session.mode,
            "event_ids": [event.id for event in streamed.events],
            "event_names": [event.name for event in streamed.events],
        },
    )


async def run_dual_batch(
    engine: TurnEngine, turn: TurnState, streamed: StreamedRound, scope: str
) -> BatchRun:
    """Hand the batch to the event agent and collect its replies from the input queue."""
    session = engine.session
    assistant = ChatMessage(role="assistant", content=streamed.content)
    session.history.append(assistant)
    if session.recorder is not None:
        turn.open_batch = await session.recorder.begin_batch(
            turn.index,
            turn.round_index,
            scope=scope,
            mode="dual_agent",
            events=list(streamed.events),
            assistant=None,
            visible=[assistant] if assistant.content.strip() else [],
        )
    await _batch_started(engine, turn, streamed, scope)
    request = EventAgentRequest(
        events=list(streamed.events),
        history=event_agent_history(session.request.pre_messages, session.history),
        scope=scope,
        enabled_tools=list(session.request.event_agent.enabled_tools),
        params=session.request.event_agent,
        chat_params=session.request.chat_agent,
        session_id=session.session_id,
        turn_index=turn.index,
        round_index=turn.round_index,
        audit=engine.auditor.emit,
    )
    engine.deps.ensure_event_agent()
    await engine.deps.queues.events.put(request)
    done = await _collect_dual_replies(engine, turn, request)
    if done.outcome.failure is not None:
        raise done.outcome.failure
    summary = done.outcome.results_message
    return BatchRun(
        result=done.outcome.batch,
        transcript=[summary] if summary is not None else [],
        argument_calls=done.outcome.argument_calls,
    )


async def _collect_dual_replies(
    engine: TurnEngine, turn: TurnState, request: EventAgentRequest
) -> EventBatchDone:
    queues = engine.deps.queues
    emitter = ReplyEmitter([event.id for event in request.events], queues.output)
    while True:
        item = await queues.input.get()
        if isinstance(item, EventBatchDone):
            if item.scope == request.scope:
                return item
            continue  # a stale marker from a cancelled turn
        if isinstance(item, ChatMessage) and item.role == "tool":
            if emitter.expects(item.tool_call_id):
                await _land_dual_reply(engine, turn, request, emitter, item)
            continue
        if isinstance(item, ChatMessage) and item.name == EVENT_AGENT_NAME:
            continue  # the results message; the outcome carries it
        engine.session.buffered.append(item)


async def _land_dual_reply(
    engine: TurnEngine,
    turn: TurnState,
    request: EventAgentRequest,
    emitter: ReplyEmitter,
    reply: ChatMessage,
) -> None:
    event_id = reply.tool_call_id or ""
    ack = request.ack_for(event_id)
    recorder = engine.session.recorder
    try:
        if recorder is not None and turn.open_batch is not None:
            status = _status(request.results.get(event_id))
            await recorder.record_result(turn.open_batch, event_id, status, reply)
    except Exception as exc:
        ack.set_exception(exc)
        return
    ack.set_result(None)
    await emitter.land(event_id, reply)


async def run_direct_batch(
    engine: TurnEngine, turn: TurnState, streamed: StreamedRound, scope: str
) -> BatchRun:
    """Run provider tool calls here, concurrently, replying in provider order."""
    session = engine.session
    events = list(streamed.events)
    assistant = ChatMessage(role="assistant", content=streamed.content, tool_calls=events)
    recorder = session.recorder
    if recorder is not None:
        turn.open_batch = await recorder.begin_batch(
            turn.index,
            turn.round_index,
            scope=scope,
            mode="chat_agent_tools",
            events=events,
            assistant=assistant,
            visible=[],
        )
    session.seen_call_ids.update(event.id for event in events)
    await _batch_started(engine, turn, streamed, scope)
    emitter = ReplyEmitter([event.id for event in events], engine.deps.queues.output)

    async def on_result(result: EventResult) -> None:
        reply = result.tool_message()
        if recorder is not None and turn.open_batch is not None:
            await recorder.record_result(turn.open_batch, result.event_id, _status(result), reply)
        await emitter.land(result.event_id, reply)

    context = ToolExecutionContext(
        history=event_agent_history(session.request.pre_messages, [*session.history, assistant]),
        session_id=session.session_id,
        turn_index=turn.index,
        round_index=turn.round_index,
    )
    try:
        result = await engine.deps.executor.execute(
            EventBatch(
                scope=scope,
                events=events,
                source=EventSource.PROVIDER_TOOL_CALL,
                enabled_names=session.request.event_agent.enabled_tools,
                context=context,
                on_result=on_result,
            )
        )
    except BatchAborted as aborted:
        raise aborted.cause from aborted
    for duplicate in (entry for entry in result.results if not entry.is_logical):
        await on_result(duplicate)
    await engine.auditor.emit(
        "provider_tools_completed",
        {
            "scope": scope,
            "round_index": turn.round_index,
            "result_count": len(result.logical_results),
        },
    )
    transcript = [assistant, *emitter.messages()]
    return BatchRun(result=result, transcript=transcript, persisted=transcript)
