"""One chat call of a round: stream it, show it, and note what it asked for."""

from __future__ import annotations

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
    seen_call_ids: set[str]
    """Call ids used earlier in the session; a provider call reusing one is rejected."""
    started: float
    """Clock reading at the round's start."""
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


class _RoundStream:
    """Handles the items of one chat stream, one kind at a time."""

    def __init__(self, auditor: Auditor, request: ChatRoundRequest, requested_at: float) -> None:
        self.auditor = auditor
        self.request = request
        self.requested_at = requested_at
        self.streamed = StreamedRound(
            call=ModelCall(model=request.params.model), parts=request.shown
        )
        self.measuring = request.measure_provider_ttft

    def first_item(self) -> None:
        self.measuring = False
        self.streamed.call.ttft_ms = _outputs.elapsed_ms(self.requested_at, self.auditor.clock())

    async def take(self, item: StreamItem) -> None:
        """Any other item: deltas, usage and events."""
        if self.measuring:
            self.first_item()
        if item.kind == "message_delta":
            await self.delta(item.content)
        elif item.kind == "usage" and item.usage is not None:
            self.streamed.call.usage = item.usage
            await self.auditor.output.put(_outputs.usage(item.usage))
        elif item.kind == self.request.offer.accepts and item.event is not None:
            await self._accept(item.event)

    async def delta(self, content: str) -> None:
        """A ``message_delta``: shown at once (the first one is audited before it)."""
        if self.measuring:
            self.first_item()
        streamed = self.streamed
        if not streamed.parts:
            streamed.ttft_ms = _outputs.elapsed_ms(self.request.started, self.auditor.clock())
            await self.auditor.emit(
                "chat_message_stream_started",
                _audit_details.stream_started(self.request.round_index),
            )
        streamed.parts.append(content)
        await self.auditor.output.put(_outputs.message_delta(content))

    async def _accept(self, event: ToolCallEvent) -> None:
        streamed, request = self.streamed, self.request
        if request.offer.offered_names_only and event.name not in request.offer.events:
            streamed.ignore(event.name)
            return
        if request.offer.unique_call_ids and (
            event.id in request.seen_call_ids or any(e.id == event.id for e in streamed.events)
        ):
            streamed.duplicate_call_id = streamed.duplicate_call_id or event.id
            return
        streamed.accept(event)
        await self.auditor.emit(
            "chat_event_detected",
            _audit_details.event_detected(request.round_index, event, request.offer.accepts),
        )
        await self.auditor.output.put(_outputs.event(event))

    async def finish(self) -> StreamedRound:
        parts = self.streamed.parts
        if parts:
            await self.auditor.emit(
                "chat_message_stream_finished",
                _audit_details.stream_finished(self.request.round_index, parts),
            )
        return self.streamed


async def stream_round(
    client: ChatClient, auditor: Auditor, request: ChatRoundRequest, requested_at: float
) -> StreamedRound:
    """Stream one chat call, putting deltas, usage and accepted events on the output.

    Visible TTFT leaves out the client warm-up the call waited for (recorded apart).
    """
    handler = _RoundStream(auditor, request, requested_at)
    streamed, output = handler.streamed, auditor.output
    parts, call = streamed.parts, streamed.call
    first_of_client = CLIENT_CALLS.first_use(client)
    stream = client.stream_chat(request.messages, request.offer.tools, request.params)
    async for item in stream:  # the two kinds of every chunk, without a detour
        kind = item.kind
        if kind == "message_delta" and parts:  # a delta after the first: shown at once
            content = item.content
            parts.append(content)
            await output.put(_outputs.message_delta(content))
        elif kind == "raw_chunk":  # kept for the response audit (no await on this path)
            if handler.measuring:
                handler.first_item()
            if item.raw_chunk is not None:
                call.add_chunk(item.raw_chunk, item.raw_json)
        elif kind == "message_delta":
            await handler.delta(item.content)
        else:
            await handler.take(item)
    await handler.finish()
    streamed.call.observe(stream, first_of_client=first_of_client)
    warmup = round(streamed.call.warmup_ms)
    if streamed.ttft_ms is not None and warmup:
        streamed.ttft_ms = max(0, streamed.ttft_ms - warmup)
    return streamed
