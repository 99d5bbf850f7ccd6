"""One chat call of a round: stream it, show it, and note what it asked for."""

from __future__ import annotations

import asyncio
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Final

from agent_lab.application import _audit_details, _outputs
from agent_lab.application._audit import Auditor
from agent_lab.application._metrics import (
    CLIENT_CALLS,
    ModelCall,
    ModelCallStatus,
    chat_metric,
    chat_metric_key,
)
from agent_lab.application._session_state import TurnState
from agent_lab.application.contracts import AgentParams, ToolInvocationMode
from agent_lab.application.ports import ChatClient
from agent_lab.domain.errors import ModelBehaviorError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem, StreamItemKind


@dataclass(frozen=True)
class Offer:
    """What a round offers the model for tools; built by the session's ``ToolMode``."""

    events: list[str]
    """Registry names on offer (none once the turn's event budget is spent)."""
    accepts: StreamItemKind | None
    """The stream item kind taken as an event this round, or ``None``."""
    catalog: str | None = None
    """Dual mode: the ``Available events:`` system message."""
    tools: list[dict[str, Any]] = field(default_factory=list)
    """Direct mode: the provider tool schemas."""
    unique_call_ids: bool = False
    """Direct mode: a call id seen before in the session is a protocol error."""
    offered_names_only: bool = False
    """Dual mode: an event block naming anything but an offered event is no event."""

    @property
    def prompt_events(self) -> list[str]:
        """The events the catalog prompt names."""
        return self.events if self.catalog is not None else []


@dataclass(eq=False, slots=True)
class ChatRound:
    """One chat call of a round: what it asks (built with the round's request audit)
    and what its stream produced (filled in by ``stream_round``). One object per round,
    request and result alike, so a streaming session keeps one alive, not two.

    Most rounds accept no event and ignore none: those lists are made on the first one.
    """

    round_index: int
    messages: list[ChatMessage]
    offer: Offer
    params: AgentParams
    seen_call_ids: AbstractSet[str]
    """Call ids used earlier in the session; a provider call reusing one is rejected."""
    started: float
    """Clock reading at the round's start."""
    loop_started: float
    """The event loop's time at the round's start (its loop-lag window)."""
    requested_at: float
    """Clock reading of the round's ``chat_agent_request`` audit."""
    measure_provider_ttft: bool
    parts: list[str] = field(default_factory=list)
    """The visible deltas, in order: the turn's list of what it showed, so a turn that
    ends mid-stream can say what it showed."""
    call: ModelCall = field(init=False)
    ttft_ms: int | None = field(default=None, init=False)
    """Visible TTFT: the first ``message_delta`` after the round started."""
    duplicate_call_id: str | None = field(default=None, init=False)
    answered: bool = field(default=False, init=False)
    """The call's ``chat_agent_response`` is out (and its metric noted)."""
    _events: list[ToolCallEvent] | None = field(default=None, init=False)
    _ignored: list[str] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.call = ModelCall(model=self.params.model)

    @property
    def content(self) -> str:
        return "".join(self.parts)

    @property
    def events(self) -> list[ToolCallEvent]:
        """The events accepted this round, in order."""
        return self._events if self._events is not None else []

    @property
    def ignored_event_names(self) -> list[str]:
        """Event names the model wrote that were not on offer; they never ran."""
        return self._ignored if self._ignored is not None else []

    def detected_events(self) -> list[ToolCallEvent]:
        """The round's accepted events; a reused provider call id ends the turn."""
        if self.duplicate_call_id is not None:
            raise ModelBehaviorError(f"duplicate provider tool-call ID: {self.duplicate_call_id}")
        return self.events

    def accept(self, event: ToolCallEvent) -> None:
        if self._events is None:
            self._events = []
        self._events.append(event)

    def ignore(self, name: str) -> None:
        if self._ignored is None:
            self._ignored = []
        self._ignored.append(name)


_MODEL_EVENTS: Final = frozenset({"text_event", "provider_tool_call"})
"""The stream item kinds that are a call the model wrote (``event`` items are not)."""


async def stream_round(client: ChatClient, auditor: Auditor, chat: ChatRound) -> None:
    """Stream one chat call, putting deltas, usage and accepted events on the output.

    Visible TTFT leaves out the client warm-up the call waited for (recorded apart).
    The stream's state is this call's locals and ``chat``: no handler object lives
    while the round streams.
    """
    call, output, parts = chat.call, auditor.output, chat.parts
    measuring = chat.measure_provider_ttft
    first_of_client = CLIENT_CALLS.first_use(client)
    stream = client.stream_chat(chat.messages, chat.offer.tools, chat.params)
    try:
        async for item in stream:  # the two kinds of every chunk, without a detour
            kind = item.kind
            if kind == "message_delta" and parts:  # a delta after the first: shown at once
                content = item.content
                parts.append(content)
                await output.put(_outputs.message_delta(content))
                continue
            if measuring:  # provider TTFT: the call's first item of any kind
                measuring = False
                call.ttft_ms = _outputs.elapsed_ms(chat.requested_at, auditor.clock())
            if kind == "raw_chunk":  # kept for the response audit (no await on this path)
                if item.raw_chunk is not None:
                    call.add_chunk(item.raw_chunk, item.raw_json)
            elif kind == "message_delta":
                await _first_delta(auditor, chat, item.content)
            else:
                await _take(auditor, chat, item)
        await _finish(auditor, chat)
    except BaseException as exc:  # broke off or cancelled: keep what was measured
        call.failed = not isinstance(exc, asyncio.CancelledError)
        call.latency_ms = _outputs.elapsed_ms(chat.requested_at, auditor.clock())
        _observe(chat, stream, first_of_client)
        raise
    _observe(chat, stream, first_of_client)


def _observe(chat: ChatRound, stream: object, first_of_client: bool) -> None:
    """The client's figures of the call once its stream ended (or broke off); visible
    TTFT leaves out the warm-up the call waited for."""
    call = chat.call
    call.observe(stream, first_of_client=first_of_client)
    warmup = round(call.warmup_ms)
    if chat.ttft_ms is not None and warmup:
        chat.ttft_ms = max(0, chat.ttft_ms - warmup)


async def _first_delta(auditor: Auditor, chat: ChatRound, content: str) -> None:
    """The round's first ``message_delta``: visible TTFT, audited before it is shown."""
    chat.ttft_ms = _outputs.elapsed_ms(chat.started, auditor.clock())
    await auditor.emit(
        "chat_message_stream_started", _audit_details.stream_started(chat.round_index)
    )
    chat.parts.append(content)
    await auditor.output.put(_outputs.message_delta(content))


async def _take(auditor: Auditor, chat: ChatRound, item: StreamItem) -> None:
    """Any other item: usage and events."""
    if item.kind == "usage" and item.usage is not None:
        chat.call.usage = item.usage
        await auditor.output.put(_outputs.usage(item.usage))
    elif item.event is not None and item.kind in _MODEL_EVENTS:
        if item.kind == chat.offer.accepts:
            await _accept(auditor, chat, item.event)
        else:  # nothing of this kind on offer: no tools, or the event budget is spent
            chat.ignore(item.event.name)


async def _accept(auditor: Auditor, chat: ChatRound, event: ToolCallEvent) -> None:
    offer = chat.offer
    if offer.offered_names_only and event.name not in offer.events:
        chat.ignore(event.name)
        return
    if offer.unique_call_ids and (
        event.id in chat.seen_call_ids or any(e.id == event.id for e in chat.events)
    ):
        chat.duplicate_call_id = chat.duplicate_call_id or event.id
        return
    chat.accept(event)
    await auditor.emit(
        "chat_event_detected",
        _audit_details.event_detected(chat.round_index, event, offer.accepts),
    )
    await auditor.output.put(_outputs.event(event))


async def _finish(auditor: Auditor, chat: ChatRound) -> None:
    parts = chat.parts
    if parts:
        await auditor.emit(
            "chat_message_stream_finished",
            _audit_details.stream_finished(chat.round_index, parts),
        )


def close_unfinished(
    turn: TurnState, chat: ChatRound | None, mode: ToolInvocationMode, *, cancelled: bool = False
) -> None:
    """A chat call the turn ends in the middle of (``chat``, unless it was answered) is
    still a call made: its metric (``failed``, or ``cancelled`` when the turn was) with
    what was measured until then, and the same figures for the turn's closing audit
    (``unfinished_call``)."""
    if chat is None or chat.answered:
        return
    status: ModelCallStatus = "cancelled" if cancelled else "failed"
    call, index, round_index = chat.call, turn.index, chat.round_index
    metric = chat_metric(call, turn_index=index, round_index=round_index, mode=mode, status=status)
    turn.metrics += (metric,)
    key = chat_metric_key(index, round_index)
    turn.unfinished_call = _audit_details.unfinished_call(
        round_index, call, key, visible_ttft_ms=chat.ttft_ms
    )
