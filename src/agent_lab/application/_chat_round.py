"""One chat call of a round: stream it, show it, and note what it asked for."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application import _audit_details, _outputs
from agent_lab.application._audit import Auditor
from agent_lab.application._metrics import CLIENT_CALLS, ModelCall
from agent_lab.application.contracts import AgentParams
from agent_lab.application.ports import ChatClient
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


@dataclass
class ChatRoundRequest:
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
    shown: list[str] = field(default_factory=list)
    """Where the round's visible deltas go: the turn keeps them, so a turn that ends
    mid-stream can say what it showed."""


class StreamedRound:
    """What one chat stream produced.

    Most rounds accept no event and ignore none: those lists are made on the first one.
    """

    __slots__ = ("_events", "_ignored", "call", "duplicate_call_id", "parts", "ttft_ms")

    def __init__(self, call: ModelCall, parts: list[str] | None = None) -> None:
        self.call = call
        self.parts: list[str] = parts if parts is not None else []
        """The visible deltas, in order (the turn's list of what it showed, if given)."""
        self.ttft_ms: int | None = None
        """Visible TTFT: the first ``message_delta`` after the round started."""
        self.duplicate_call_id: str | None = None
        self._events: list[ToolCallEvent] | None = None
        self._ignored: list[str] | None = None

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

    def accept(self, event: ToolCallEvent) -> None:
        if self._events is None:
            self._events = []
        self._events.append(event)

    def ignore(self, name: str) -> None:
        if self._ignored is None:
            self._ignored = []
        self._ignored.append(name)


async def stream_round(
    client: ChatClient, auditor: Auditor, request: ChatRoundRequest
) -> StreamedRound:
    """Stream one chat call, putting deltas, usage and accepted events on the output.

    Visible TTFT leaves out the client warm-up the call waited for (recorded apart).
    The stream's state is this call's locals and the ``StreamedRound`` it returns: no
    handler object lives while the round streams.
    """
    call = ModelCall(model=request.params.model)
    streamed = StreamedRound(call, parts=request.shown)
    output, parts = auditor.output, streamed.parts
    measuring = request.measure_provider_ttft
    first_of_client = CLIENT_CALLS.first_use(client)
    stream = client.stream_chat(request.messages, request.offer.tools, request.params)
    async for item in stream:  # the two kinds of every chunk, without a detour
        kind = item.kind
        if kind == "message_delta" and parts:  # a delta after the first: shown at once
            content = item.content
            parts.append(content)
            await output.put(_outputs.message_delta(content))
            continue
        if measuring:  # provider TTFT: the call's first item of any kind
            measuring = False
            call.ttft_ms = _outputs.elapsed_ms(request.requested_at, auditor.clock())
        if kind == "raw_chunk":  # kept for the response audit (no await on this path)
            if item.raw_chunk is not None:
                call.add_chunk(item.raw_chunk, item.raw_json)
        elif kind == "message_delta":
            await _first_delta(auditor, request, streamed, item.content)
        else:
            await _take(auditor, request, streamed, item)
    await _finish(auditor, request, streamed)
    call.observe(stream, first_of_client=first_of_client)
    warmup = round(call.warmup_ms)
    if streamed.ttft_ms is not None and warmup:
        streamed.ttft_ms = max(0, streamed.ttft_ms - warmup)
    return streamed


async def _first_delta(
    auditor: Auditor, request: ChatRoundRequest, streamed: StreamedRound, content: str
) -> None:
    """The round's first ``message_delta``: visible TTFT, audited before it is shown."""
    streamed.ttft_ms = _outputs.elapsed_ms(request.started, auditor.clock())
    await auditor.emit(
        "chat_message_stream_started", _audit_details.stream_started(request.round_index)
    )
    streamed.parts.append(content)
    await auditor.output.put(_outputs.message_delta(content))


async def _take(
    auditor: Auditor, request: ChatRoundRequest, streamed: StreamedRound, item: StreamItem
) -> None:
    """Any other item: usage and events."""
    if item.kind == "usage" and item.usage is not None:
        streamed.call.usage = item.usage
        await auditor.output.put(_outputs.usage(item.usage))
    elif item.kind == request.offer.accepts and item.event is not None:
        await _accept(auditor, request, streamed, item.event)


async def _accept(
    auditor: Auditor, request: ChatRoundRequest, streamed: StreamedRound, event: ToolCallEvent
) -> None:
    offer = request.offer
    if offer.offered_names_only and event.name not in offer.events:
        streamed.ignore(event.name)
        return
    if offer.unique_call_ids and (
        event.id in request.seen_call_ids or any(e.id == event.id for e in streamed.events)
    ):
        streamed.duplicate_call_id = streamed.duplicate_call_id or event.id
        return
    streamed.accept(event)
    await auditor.emit(
        "chat_event_detected",
        _audit_details.event_detected(request.round_index, event, offer.accepts),
    )
    await auditor.output.put(_outputs.event(event))


async def _finish(auditor: Auditor, request: ChatRoundRequest, streamed: StreamedRound) -> None:
    parts = streamed.parts
    if parts:
        await auditor.emit(
            "chat_message_stream_finished",
            _audit_details.stream_finished(request.round_index, parts),
        )
