"""The event agent: resolves arguments, runs a round's events, and answers the chat agent.

It consumes ``EventAgentRequest``s from ``queues.events`` and answers through
``queues.input``: one ``tool`` message per event id (in the order results land); then,
when the chat agent should hear about them, one ``user`` message named ``event_agent``;
last, an ``EventBatchDone`` marker carrying the batch outcome.
Arguments come from the tool's resolver (or are empty for a tool without one) when they
satisfy the schema; otherwise one forced ``tool_choice`` model call per event fills
them in.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application import _policies
from agent_lab.application._metrics import ModelCall
from agent_lab.application._outputs import elapsed_ms
from agent_lab.application._transcript import results_message
from agent_lab.application.contracts import AgentParams, EventAgentParams
from agent_lab.application.events import (
    BatchAborted,
    EventBatch,
    EventBatchExecutor,
    EventBatchResult,
    EventResult,
    EventSource,
)
from agent_lab.application.ports import ChatClient, Clock
from agent_lab.application.tools import ToolExecutionContext, ToolRegistry
from agent_lab.domain.errors import AgentLabError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

AuditFn = Callable[[str, dict[str, Any]], Awaitable[float]]


@dataclass(frozen=True)
class ArgumentCall:
    """A forced-tool-choice call made for one event."""

    event_id: str
    event_name: str
    fallback: bool
    """True when a resolver existed but its arguments did not fit the schema."""
    call: ModelCall


@dataclass(frozen=True)
class EventAgentOutcome:
    batch: EventBatchResult
    argument_calls: tuple[ArgumentCall, ...] = ()
    results_message: ChatMessage | None = None
    """The ``event_agent`` message put on ``queues.input``, if the chat agent needs one."""
    failure: BaseException | None = None


@dataclass(frozen=True)
class EventBatchDone:
    """Put on ``queues.input`` after the last reply of a batch."""

    scope: str
    outcome: EventAgentOutcome


@dataclass
class EventAgentRequest:
    """One round's events for the event agent, and how to answer."""

    events: list[ToolCallEvent]
    history: list[ChatMessage]
    """User and assistant messages, ending with the current round's assistant message."""
    scope: str
    enabled_tools: list[str]
    params: EventAgentParams
    chat_params: AgentParams
    session_id: str | None = None
    turn_index: int = 0
    round_index: int = 0
    audit: AuditFn | None = None
    results: dict[str, EventResult] = field(default_factory=dict)
    """Filled before each reply is put, so the runtime knows the call's status."""
    acks: dict[str, asyncio.Future[None]] = field(default_factory=dict)
    """The runtime resolves these once a reply is durable; an exception stops the batch."""

    def ack_for(self, event_id: str) -> asyncio.Future[None]:
        if event_id not in self.acks:
            self.acks[event_id] = asyncio.get_running_loop().create_future()
        return self.acks[event_id]


class EventAgent:
    """Serves ``EventAgentRequest``s from an events queue until cancelled."""

    def __init__(
        self,
        chat_client: ChatClient,
        registry: ToolRegistry,
        executor: EventBatchExecutor,
        *,
        clock: Clock,
        events: asyncio.Queue[Any],
        replies: asyncio.Queue[Any],
    ) -> None:
        self._client = chat_client
        self._registry = registry
        self._executor = executor
        self._clock = clock
        self._events = events
        self._replies = replies

    async def serve(self) -> None:
        """Handle requests one at a time, forever."""
        while True:
            request = await self._events.get()
            outcome = await self._handle_safely(request)
            await self._replies.put(EventBatchDone(request.scope, outcome))

    async def _handle_safely(self, request: EventAgentRequest) -> EventAgentOutcome:
        try:
            return await self.handle(request)
        except BatchAborted as aborted:
            return EventAgentOutcome(batch=aborted.partial, failure=aborted.cause)
        except Exception as exc:  # reported to the runtime, which ends the turn with it
            return EventAgentOutcome(batch=EventBatchResult(scope=request.scope), failure=exc)

    async def handle(self, request: EventAgentRequest) -> EventAgentOutcome:
        """Resolve, execute, reply; returns what happened."""
        await self._audit(request, "event_agent_request", self._request_details(request))
        context = ToolExecutionContext(
            history=request.history,
            session_id=request.session_id,
            turn_index=request.turn_index,
            round_index=request.round_index,
        )
        resolved = await asyncio.gather(
            *(self._resolve(request, event, context) for event in request.events)
        )
        events = [event for event, _ in resolved]
        calls = tuple(call for _, call in resolved if call is not None)
        batch = await self._execute(request, events, context)
        replies = [result.tool_message() for result in batch.results]
        await self._audit(
            request,
            "event_agent_response",
            {
                "agent": "event_agent",
                "scope": request.scope,
                "replies": [reply.model_dump() for reply in replies],
                "raw_model_chunks": _raw_model_chunks(request.events, calls),
            },
        )
        summary = await self._maybe_results_message(batch)
        completed: dict[str, Any] = {
            "agent": "event_agent",
            "scope": request.scope,
            "result_count": len(batch.logical_results),
        }
        if summary is not None:
            completed["result_summary"] = summary.content
        await self._audit(request, "event_agent_completed", completed)
        return EventAgentOutcome(batch=batch, argument_calls=calls, results_message=summary)

    async def _execute(
        self,
        request: EventAgentRequest,
        events: list[ToolCallEvent],
        context: ToolExecutionContext,
    ) -> EventBatchResult:
        async def reply(result: EventResult) -> None:
            request.results[result.event_id] = result
            ack = request.ack_for(result.event_id)
            await self._replies.put(result.tool_message())
            await ack

        batch = await self._executor.execute(
            EventBatch(
                scope=request.scope,
                events=events,
                source=EventSource.TEXT_EVENT,
                enabled_names=request.enabled_tools,
                context=context,
                on_result=reply,
            )
        )
        for duplicate in (result for result in batch.results if not result.is_logical):
            await reply(duplicate)
        return batch

    async def _maybe_results_message(self, batch: EventBatchResult) -> ChatMessage | None:
        logical = batch.logical_results
        decision = _policies.decide(batch, chat_spoke=True, registry=self._registry)
        if not decision.llm_follow_up:
            return None
        message = results_message([result.tool_message() for result in logical])
        await self._replies.put(message)
        return message

    async def _resolve(
        self, request: EventAgentRequest, event: ToolCallEvent, context: ToolExecutionContext
    ) -> tuple[ToolCallEvent, ArgumentCall | None]:
        tool = self._registry.get(event.name)
        if tool is None or event.name not in request.enabled_tools:
            return event, None
        resolved: dict[str, Any] | None = {}
        if tool.argument_resolver is not None:
            resolved = await self._registry.resolve_arguments(event, context)
        if resolved is not None and self._registry.validation_error(event.name, resolved) is None:
            return _with_arguments(event, resolved), None
        call, arguments = await self._generate_arguments(request, event)
        argument_call = ArgumentCall(
            event_id=event.id,
            event_name=event.name,
            fallback=tool.argument_resolver is not None,
            call=call,
        )
        return _with_arguments(event, arguments), argument_call

    async def _generate_arguments(
        self, request: EventAgentRequest, event: ToolCallEvent
    ) -> tuple[ModelCall, dict[str, Any]]:
        params = _event_model_params(request)
        call = ModelCall(model=params.model)
        messages = [ChatMessage(role="system", content=request.params.system_prompt)]
        messages += request.history
        tools = [self._registry.tool_schema(event.name)]
        choice = {"type": "function", "function": {"name": event.name}}
        arguments: dict[str, Any] = {}
        started = self._clock()
        try:
            async for item in self._client.stream_chat(messages, tools, params, choice):
                if call.ttft_ms is None:
                    call.ttft_ms = elapsed_ms(started, self._clock())
                if item.kind == "raw_chunk" and item.raw_chunk is not None:
                    call.add_chunk(item.raw_chunk, item.raw_json)
                elif item.kind == "usage":
                    call.usage = item.usage
                elif item.kind == "provider_tool_call" and item.event is not None:
                    arguments = dict(item.event.arguments)
        except AgentLabError:
            arguments = {}
        call.latency_ms = elapsed_ms(started, self._clock())
        return call, arguments

    async def _audit(self, request: EventAgentRequest, event: str, details: dict[str, Any]) -> None:
        if request.audit is not None:
            await request.audit(event, details)

    def _request_details(self, request: EventAgentRequest) -> dict[str, Any]:
        params = _event_model_params(request)
        return {
            "agent": "event_agent",
            "scope": request.scope,
            "round_index": request.round_index,
            "params": params.model_dump(mode="json"),
            "events": [event.model_dump() for event in request.events],
            "tools": self._registry.provider_tool_schemas(
                list(dict.fromkeys(event.name for event in request.events))
            ),
            "history": [message.model_dump() for message in request.history],
        }


def _event_model_params(request: EventAgentRequest) -> AgentParams:
    """The event agent's model parameters; its model defaults to the chat agent's."""
    return AgentParams(
        model=request.params.model or request.chat_params.model,
        temperature=request.params.temperature,
        max_tokens=request.params.max_tokens,
        extra_body=request.params.extra_body,
    )


def _with_arguments(event: ToolCallEvent, arguments: dict[str, Any]) -> ToolCallEvent:
    return ToolCallEvent(
        id=event.id,
        name=event.name,
        arguments=arguments,
        raw_arguments=json.dumps(arguments, ensure_ascii=False),
    )


def _raw_model_chunks(
    events: list[ToolCallEvent], calls: tuple[ArgumentCall, ...]
) -> list[dict[str, Any]]:
    by_id = {call.event_id: call for call in calls}
    return [
        {
            "event_id": event.id,
            "event_name": event.name,
            "chunks": by_id[event.id].call.raw_chunks if event.id in by_id else [],
            "chunk_offsets_ms": (
                by_id[event.id].call.chunk_offsets_ms if event.id in by_id else []
            ),
        }
        for event in events
    ]
