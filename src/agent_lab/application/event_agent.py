"""The event agent: resolves arguments, runs a round's events, and answers the chat agent.

It consumes ``EventAgentRequest``s from ``queues.events`` and answers on its own typed
channel, a ``ReplyChannel``: one ``ToolReply`` per event id (in the order results land),
each waiting until the runtime has made it durable; last, an ``EventBatchDone`` carrying
the batch outcome (with the ``event_agent`` results message when the chat agent should
hear about the results). Each ``tool`` reply is also put on ``queues.input``, the
public record of the handshake (``RuntimeQueues``); the runtime never reads replies
from there.

Arguments come from the tool's resolver (or are empty for a tool without one) when they
satisfy the schema; otherwise one forced ``tool_choice`` model call per event fills
them in. A resolver that raises, or an argument call that fails, is reported with its
cause in ``event_agent_response.argument_failures``; a failed argument call fails its
event with that cause instead of running the tool without arguments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from agent_lab.application import _audit_details, _event_agent_audits, _policies
from agent_lab.application._event_replies import (
    ArgumentCall,
    ArgumentFailure,
    DispatchNotice,
    EventAgentOutcome,
    EventAgentReply,
    EventBatchDone,
    ReplyChannel,
    Resolving,
    ToolReply,
)
from agent_lab.application._metrics import CLIENT_CALLS, ModelCall, argument_metric_key
from agent_lab.application._outputs import elapsed_ms
from agent_lab.application._resolving import (
    ForcedAnswer,
    cause,
    resolve_with,
    resolver_name,
    with_arguments,
)
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
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.errors import AgentLabError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, TokenUsage

__all__ = [
    "ArgumentCall",
    "ArgumentFailure",
    "DispatchNotice",
    "EventAgent",
    "EventAgentOutcome",
    "EventAgentReply",
    "EventAgentRequest",
    "EventBatchDone",
    "ReplyChannel",
    "Resolving",
    "ToolReply",
]

AuditFn = Callable[[str, dict[str, Any]], Awaitable[float]]
UsageFn = Callable[[TokenUsage], Awaitable[None]]


@dataclass(frozen=True)
class EventAgentRequest:
    """One round's events for the event agent."""

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
    history_dumps: list[dict[str, Any]] | None = None
    """``history``'s message dumps, when the caller keeps them (else made per request)."""
    on_usage: UsageFn | None = None
    """Told an argument call's token usage the moment the provider reports it."""
    resolving: Callable[[Resolving], None] | None = None
    """Given each event's ``Resolving`` as its resolution starts (then kept up to date)."""


@dataclass(frozen=True)
class _Resolution:
    event: ToolCallEvent
    call: ArgumentCall | None = None
    failures: tuple[ArgumentFailure, ...] = ()
    resolved_by: str = "empty"
    """``resolver``, ``argument_fallback``, ``argument_generation``, ``empty`` (no
    resolver, and the empty arguments fit the schema) or ``not_resolved`` (an unknown
    or disabled tool)."""
    resolver: str | None = None
    """The name of the tool's argument resolver, when it has one."""

    def audit_entry(self, request: EventAgentRequest) -> dict[str, Any]:
        call = None
        if self.call is not None:
            key = argument_metric_key(
                self.call.fallback, request.turn_index, request.round_index, self.event.id
            )
            call = _audit_details.model_call(self.call.call, key)
        return _event_agent_audits.resolution(
            self.event, resolved_by=self.resolved_by, resolver=self.resolver, call=call
        )


@dataclass(eq=False)
class EventAgent:
    """Serves ``EventAgentRequest``s from an events queue until cancelled."""

    client: ChatClient
    registry: ToolRegistry
    executor: EventBatchExecutor
    _: KW_ONLY
    clock: Clock
    events: asyncio.Queue[Any]
    replies: ReplyChannel

    async def serve(self) -> None:
        """Handle requests one at a time, forever."""
        while True:
            request = await self.events.get()
            outcome = await self._handle_safely(request)
            await self.replies.done(request.scope, outcome)

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
        calls = tuple(r.call for r in resolved if r.call is not None)
        failures = [failure for r in resolved for failure in r.failures]
        batch = await self._execute(
            request, [r.event for r in resolved], context, _not_run(failures)
        )
        details = _event_agent_audits.event_agent_response(
            request.scope,
            [result.tool_message() for result in batch.results],
            _raw_model_chunks(request.events, calls),
            [r.audit_entry(request) for r in resolved],
        )
        if failures:
            details["argument_failures"] = [failure.audit_entry() for failure in failures]
        await self._audit(request, "event_agent_response", details)
        summary = self._results_message(batch)
        await self._audit(
            request,
            "event_agent_completed",
            _event_agent_audits.event_agent_completed(request.scope, batch, summary),
        )
        return EventAgentOutcome(batch=batch, argument_calls=calls, results_message=summary)

    async def _execute(
        self,
        request: EventAgentRequest,
        events: list[ToolCallEvent],
        context: ToolExecutionContext,
        not_run: dict[str, str],
    ) -> EventBatchResult:
        async def reply(result: EventResult) -> None:
            await self.replies.reply(request.scope, result)

        async def dispatching(event: ToolCallEvent) -> None:
            await self.replies.dispatching(request.scope, event)

        batch = await self.executor.execute(
            EventBatch(
                scope=request.scope,
                events=events,
                source=EventSource.TEXT_EVENT,
                enabled_names=request.enabled_tools,
                context=context,
                on_result=reply,
                not_run=not_run,
                on_dispatch=dispatching,
            )
        )
        for duplicate in batch.duplicates:
            await reply(duplicate)
        return batch

    def _results_message(self, batch: EventBatchResult) -> ChatMessage | None:
        decision = _policies.decide(batch, chat_spoke=True, registry=self.registry)
        if not decision.llm_follow_up:
            return None
        return results_message([result.tool_message() for result in batch.logical_results])

    async def _resolve(
        self, request: EventAgentRequest, event: ToolCallEvent, context: ToolExecutionContext
    ) -> _Resolution:
        tool = self.registry.get(event.name)
        if tool is None or event.name not in request.enabled_tools:
            return _Resolution(event, resolved_by="not_resolved")
        progress = Resolving(request.scope, event.id, event.name)
        if request.resolving is not None:
            request.resolving(progress)
        resolution = await self._resolve_tool(request, event, context, tool, progress)
        progress.entry = resolution.audit_entry(request)
        progress.failures = tuple(failure.audit_entry() for failure in resolution.failures)
        return resolution

    async def _resolve_tool(
        self,
        request: EventAgentRequest,
        event: ToolCallEvent,
        context: ToolExecutionContext,
        tool: ToolDefinition,
        progress: Resolving,
    ) -> _Resolution:
        failures: list[ArgumentFailure] = []
        resolved: dict[str, Any] | None = {}
        resolver = resolver_name(tool.argument_resolver)
        if tool.argument_resolver is not None:
            try:
                resolved = await resolve_with(tool.argument_resolver, event, context)
            except Exception as exc:  # a resolver bug: the model fills the arguments in
                failures.append(ArgumentFailure(event.id, event.name, "resolver", cause(exc)))
                resolved = None
        if resolved is not None and self.registry.validation_error(event.name, resolved) is None:
            return _Resolution(
                with_arguments(event, resolved),
                failures=tuple(failures),
                resolved_by="resolver" if resolver is not None else "empty",
                resolver=resolver,
            )
        call = ModelCall(model=_event_model_params(request).model)
        argument_call = ArgumentCall(event.id, event.name, tool.argument_resolver is not None, call)
        progress.call = argument_call  # sent from now on: on record even if the turn ends
        generated, problem = await self._generate_arguments(request, event, call)
        written = generated if isinstance(generated, str) else None
        arguments = generated if isinstance(generated, dict) else {}
        if problem is not None:
            failures.append(ArgumentFailure(event.id, event.name, "generation", problem))
        return _Resolution(
            with_arguments(event, arguments, written),
            argument_call,
            tuple(failures),
            resolved_by="argument_fallback" if argument_call.fallback else "argument_generation",
            resolver=resolver,
        )

    async def _generate_arguments(
        self, request: EventAgentRequest, event: ToolCallEvent, call: ModelCall
    ) -> tuple[dict[str, Any] | str, str | None]:
        """One forced call (measured into ``call``); the arguments (the model's text when
        it is not a JSON object: broken JSON, a list), and the cause when it failed."""
        params = _event_model_params(request)
        messages = [ChatMessage(role="system", content=request.params.system_prompt)]
        messages += request.history
        tools = [self.registry.tool_schema(event.name)]
        choice = {"type": "function", "function": {"name": event.name}}
        answer = ForcedAnswer(event.name)
        first_of_client = CLIENT_CALLS.first_use(self.client)
        started = self.clock()
        stream = self.client.stream_chat(messages, tools, params, choice)
        try:
            async for item in stream:
                if call.ttft_ms is None:
                    call.ttft_ms = elapsed_ms(started, self.clock())
                if item.kind == "raw_chunk" and item.raw_chunk is not None:
                    call.add_chunk(item.raw_chunk, item.raw_json)
                elif item.kind == "usage":
                    call.usage = item.usage
                    if item.usage is not None and request.on_usage is not None:
                        await request.on_usage(item.usage)
                elif item.kind == "message_delta":
                    answer.text.append(item.content)
                elif item.kind == "provider_tool_call" and item.event is not None:
                    answer.take_call(item.event)
        except AgentLabError as exc:
            answer.problem = cause(exc)
            call.failed = True
        call.latency_ms = elapsed_ms(started, self.clock())
        call.observe(stream, first_of_client=first_of_client)
        return answer.outcome()

    async def _audit(self, request: EventAgentRequest, event: str, details: dict[str, Any]) -> None:
        if request.audit is not None:
            await request.audit(event, details)

    def _request_details(self, request: EventAgentRequest) -> dict[str, Any]:
        return _event_agent_audits.event_agent_request(
            request.scope,
            request.round_index,
            params=_event_model_params(request),
            events=request.events,
            tools=self.registry.provider_tool_schemas(
                list(dict.fromkeys(event.name for event in request.events))
            ),
            history=request.history,
            history_dumps=request.history_dumps,
            system_prompt=request.params.system_prompt,
        )


def _not_run(failures: list[ArgumentFailure]) -> dict[str, str]:
    """Events whose arguments could not be generated fail with the cause, unrun."""
    return {
        failure.event_id: f"argument generation failed: {failure.cause}"
        for failure in failures
        if failure.stage == "generation"
    }


def _event_model_params(request: EventAgentRequest) -> AgentParams:
    """The event agent's model parameters; its model defaults to the chat agent's."""
    return AgentParams(
        model=request.params.model or request.chat_params.model,
        temperature=request.params.temperature,
        max_tokens=request.params.max_tokens,
        extra_body=request.params.extra_body,
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
