"""Event batches: one round's accepted tool calls, run concurrently under result policies.

``EventBatchExecutor`` runs a batch with bounded concurrency inside a per-round scope.
Identical calls of tools that must happen once are coalesced: one executes and the
duplicates' ``EventResult`` carry ``deduplicated_from``. Results come back in the order
the calls were made, whatever order they finish in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from agent_lab.application.ports import Clock
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

if TYPE_CHECKING:
    from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry


class ResultPolicy(StrEnum):
    """What happens after a batch, decided per tool."""

    FOLLOW_UP = "follow_up"
    """Results go back to the chat agent for another round."""
    SILENT_SUCCESS = "silent_success"
    """Success needs no model call; a failure asks for one corrective round."""
    TEMPLATE = "template"
    """Success is confirmed by the tool's own sentence; a failure asks for one round."""
    TERMINATE = "terminate"
    """Ends the turn and the session after the batch."""


class EventStatus(StrEnum):
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"


class EventSource(StrEnum):
    TEXT_EVENT = "text_event"
    """Named in an inline event block (``dual_agent``)."""
    PROVIDER_TOOL_CALL = "provider_tool_call"
    """A provider function call (``chat_agent_tools``)."""


@dataclass(frozen=True)
class EventResult:
    """The outcome of one call of a batch."""

    event_id: str
    event_name: str
    status: EventStatus
    source: EventSource
    tool_latency_ms: int | None = None
    """How long the handler ran; ``None`` when it never ran (the call was not run, or
    the batch stopped before it)."""
    deduplicated_from: str | None = None
    """Set on a coalesced duplicate: the id of the call that really ran."""
    policy: ResultPolicy = ResultPolicy.FOLLOW_UP
    payload: dict[str, Any] = field(default_factory=dict)
    confirmation: str | None = None
    """TEMPLATE tools: the sentence that confirms a success."""
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status is EventStatus.SUCCESS

    @property
    def is_logical(self) -> bool:
        """False for coalesced duplicates, which audits, counts and metrics leave out."""
        return self.deduplicated_from is None

    def tool_message(self) -> ChatMessage:
        """The provider-valid ``tool`` reply for this call."""
        return ChatMessage.model_construct(
            role="tool",
            content=json.dumps(self.payload, ensure_ascii=False),
            name=self.event_name,
            tool_call_id=self.event_id,
            tool_calls=[],
        )

    def audit_entry(self) -> dict[str, Any]:
        return {
            "event_id": self.event_id,
            "event_name": self.event_name,
            "status": self.status.value,
            "source": self.source.value,
            "tool_latency_ms": self.tool_latency_ms,
            "policy": self.policy.value,
        }


@dataclass(frozen=True)
class EventBatchResult:
    """All results of one batch, in call order (duplicates included)."""

    results: tuple[EventResult, ...] = ()
    scope: str = ""

    @property
    def logical_results(self) -> tuple[EventResult, ...]:
        return tuple(result for result in self.results if result.is_logical)

    @property
    def duplicates(self) -> tuple[EventResult, ...]:
        """The coalesced duplicates, in call order: their replies are the results of the
        calls that ran, which ``EventBatch.on_result`` never sees."""
        return tuple(result for result in self.results if not result.is_logical)


ResultCallback = Callable[[EventResult], Awaitable[None]]
DispatchCallback = Callable[[ToolCallEvent], Awaitable[None]]


def idempotency_key(scope: str, event_id: str) -> str:
    """The key a handler receives for one call: stable, unique per session and call."""
    return f"{scope}:{event_id}"


@dataclass
class EventBatch:
    """One round's calls, ready to run (arguments already resolved)."""

    scope: str
    events: Sequence[ToolCallEvent]
    source: EventSource
    enabled_names: Sequence[str]
    context: ToolExecutionContext
    on_result: ResultCallback | None = None
    """Awaited as each logical result lands (e.g. to make it durable); if it raises, no
    call of the batch that has not started yet starts, and the error propagates."""
    not_run: Mapping[str, str] = field(default_factory=dict)
    """Calls that fail without running, by id, with the error their reply carries
    (e.g. their arguments could not be generated)."""
    on_dispatch: DispatchCallback | None = None
    """Awaited with the call (its final arguments) right before its handler runs (e.g.
    to journal it as dispatched); if it raises, that handler and every call that has
    not started yet do not run, and the error propagates."""


class BatchAborted(Exception):
    """A dispatch or result callback failed; calls that had not started were skipped."""

    def __init__(self, cause: BaseException, partial: EventBatchResult) -> None:
        self.cause = cause
        self.partial = partial
        super().__init__(str(cause))


class EventBatchExecutor:
    """Runs batches with ``max_parallel`` concurrency inside per-round scopes."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        clock: Clock,
        max_parallel: int = 8,
    ) -> None:
        self._registry = registry
        self._clock = clock
        self._max_parallel = max_parallel
        self._scopes: set[str] = set()

    @property
    def active_scopes(self) -> frozenset[str]:
        return frozenset(self._scopes)

    async def execute(self, batch: EventBatch) -> EventBatchResult:
        """Run the batch; returns its results in call order.

        Raises:
            BatchAborted: ``batch.on_dispatch`` or ``batch.on_result`` raised; the
                partial results are attached.
        """
        self._scopes.add(batch.scope)
        primaries, duplicates = _coalesce(self._registry, batch.events)
        run = _BatchRun(self, batch, self._max_parallel)
        await run.run_all(primaries)
        results = [run.result_for(event, duplicates.get(event.id)) for event in batch.events]
        outcome = EventBatchResult(results=tuple(results), scope=batch.scope)
        if run.failure is not None:
            raise BatchAborted(run.failure, outcome)
        return outcome

    def release_scope(self, scope: str) -> None:
        """Forget a batch scope once its results were handled (called exactly once)."""
        self._scopes.discard(scope)

    def reaches_handler(self, event: ToolCallEvent, batch: EventBatch) -> bool:
        """True when running ``event`` calls its handler (it is known, enabled, and its
        arguments fit); otherwise the registry answers with an error payload itself."""
        return (
            event.id not in batch.not_run
            and event.name in self._registry
            and event.name in batch.enabled_names
            and self._registry.validation_error(event.name, event.arguments) is None
        )

    async def _run_one(self, event: ToolCallEvent, batch: EventBatch) -> EventResult:
        definition = self._registry.get(event.name)
        if event.id in batch.not_run:
            return _not_run(event, batch, batch.not_run[event.id], definition)
        context = dataclasses.replace(
            batch.context, idempotency_key=idempotency_key(batch.scope, event.id)
        )
        started = self._clock()
        outcome = await self._registry.run(event, batch.enabled_names, context)
        finished = self._clock()
        return EventResult(
            event_id=event.id,
            event_name=event.name,
            status=EventStatus.SUCCESS if outcome.ok else EventStatus.FAILED,
            source=batch.source,
            tool_latency_ms=max(0, round((finished - started) * 1000)) if outcome.ran else None,
            policy=definition.result_policy if definition else ResultPolicy.FOLLOW_UP,
            payload=outcome.payload,
            confirmation=outcome.confirmation,
            arguments=dict(event.arguments),
        )


class _BatchRun:
    """The mutable state of one ``execute`` call."""

    def __init__(self, executor: EventBatchExecutor, batch: EventBatch, limit: int) -> None:
        self.executor = executor
        self.batch = batch
        self.semaphore = asyncio.Semaphore(limit)
        self.results: dict[str, EventResult] = {}
        self.failure: BaseException | None = None

    async def run_all(self, events: list[ToolCallEvent]) -> None:
        async with asyncio.TaskGroup() as group:
            for event in events:
                group.create_task(self._guarded(event))

    async def _guarded(self, event: ToolCallEvent) -> None:
        async with self.semaphore:
            if self.failure is not None or not await self._dispatch(event):
                self.results[event.id] = _cancelled(event, self.batch.source)
                return
            result = await self.executor._run_one(event, self.batch)  # once dispatched, run
            self.results[event.id] = result
            if self.batch.on_result is None or self.failure is not None:
                return
            try:
                await self.batch.on_result(result)
            except Exception as exc:  # the callback's failure stops the batch, not the loop
                self.failure = self.failure or exc

    async def _dispatch(self, event: ToolCallEvent) -> bool:
        """Announce a call that will reach its handler; False (and the call not run)
        when the announcement failed."""
        announce = self.batch.on_dispatch
        if announce is None or not self.executor.reaches_handler(event, self.batch):
            return True
        try:
            await announce(event)
        except Exception as exc:  # not journaled as dispatched: the handler must not run
            self.failure = self.failure or exc
            return False
        return True

    def result_for(self, event: ToolCallEvent, primary_id: str | None) -> EventResult:
        if primary_id is None:
            return self.results.get(event.id) or _cancelled(event, self.batch.source)
        primary = self.results.get(primary_id) or _cancelled(event, self.batch.source)
        return dataclasses.replace(
            primary,
            event_id=event.id,
            event_name=event.name,
            deduplicated_from=primary_id,
            arguments=dict(event.arguments),
        )


def _not_run(
    event: ToolCallEvent, batch: EventBatch, error: str, definition: ToolDefinition | None
) -> EventResult:
    return EventResult(
        event_id=event.id,
        event_name=event.name,
        status=EventStatus.FAILED,
        source=batch.source,
        policy=definition.result_policy if definition else ResultPolicy.FOLLOW_UP,
        payload={"tool": event.name, "error": error},
        arguments=dict(event.arguments),
    )


def _cancelled(event: ToolCallEvent, source: EventSource) -> EventResult:
    return EventResult(
        event_id=event.id,
        event_name=event.name,
        status=EventStatus.CANCELLED,
        source=source,
        payload={"tool": event.name, "error": "not run: the batch was stopped"},
        arguments=dict(event.arguments),
    )


def _coalesce(
    registry: ToolRegistry, events: Sequence[ToolCallEvent]
) -> tuple[list[ToolCallEvent], dict[str, str]]:
    """Split calls into those that run and a map duplicate id → the id that runs."""
    primaries: list[ToolCallEvent] = []
    duplicates: dict[str, str] = {}
    first_by_key: dict[str, str] = {}
    for event in events:
        key = registry.coalesce_key(event)
        if key is not None and key in first_by_key:
            duplicates[event.id] = first_by_key[key]
            continue
        if key is not None:
            first_by_key[key] = event.id
        primaries.append(event)
    return primaries, duplicates
