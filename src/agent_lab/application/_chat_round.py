"""One chat call of a round: stream it, show it, and note what it asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent_lab.application import _outputs
from agent_lab.application._audit import Auditor
from agent_lab.application._metrics import ModelCall
from agent_lab.application.contracts import AgentParams
from agent_lab.application.ports import ChatClient
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItemKind


@dataclass
class ChatRoundRequest:
    round_index: int
    messages: list[ChatMessage]
    message_dumps: list[dict[str, Any]]
    """The same messages dumped, for the request audit."""
    tools: list[dict[str, Any]]
    params: AgentParams
    accepted_kind: StreamItemKind | None
    """``text_event`` or ``provider_tool_call`` while the round may run tools, else None."""
    seen_call_ids: set[str]
    """Call ids used earlier in the session; a provider call reusing one is rejected."""
    started: float
    """Clock reading at the round's start."""
    measure_provider_ttft: bool


@dataclass
class StreamedRound:
    """What one chat stream produced."""

    call: ModelCall
    parts: list[str] = field(default_factory=list)
    events: list[ToolCallEvent] = field(default_factory=list)
    ttft_ms: int | None = None
    """Visible TTFT: the first ``message_delta`` after the round started."""
    duplicate_call_id: str | None = None

    @property
    def content(self) -> str:
        return "".join(self.parts)


async def stream_round(
    client: ChatClient, auditor: Auditor, request: ChatRoundRequest, requested_at: float
) -> StreamedRound:
    """Stream one chat call, putting deltas, usage and accepted events on the output."""
    output = auditor.output
    streamed = StreamedRound(call=ModelCall(model=request.params.model))
    call = streamed.call
    parts = streamed.parts
    measure = request.measure_provider_ttft
    stream = client.stream_chat(request.messages, request.tools, request.params)
    async for item in stream:
        if measure:
            measure = False
            call.ttft_ms = _outputs.elapsed_ms(requested_at, auditor.clock())
        kind = item.kind
        if kind == "message_delta":
            if not parts:
                streamed.ttft_ms = _outputs.elapsed_ms(request.started, auditor.clock())
                await auditor.emit(
                    "chat_message_stream_started",
                    {"agent": "chat_agent", "round_index": request.round_index},
                )
            parts.append(item.content)
            await output.put({"type": "message_delta", "content": item.content})
        elif kind == "raw_chunk":
            if item.raw_chunk is not None:
                call.add_chunk(item.raw_chunk, item.raw_json)
        elif kind == "usage":
            if item.usage is not None:
                call.usage = item.usage
                await output.put(_outputs.usage(item.usage))
        elif kind == request.accepted_kind and item.event is not None:
            await _accept_event(auditor, request, streamed, item.event)
    if parts:
        await auditor.emit(
            "chat_message_stream_finished",
            {
                "agent": "chat_agent",
                "round_index": request.round_index,
                "delta_count": len(parts),
                "content_length": sum(len(part) for part in parts),
            },
        )
    return streamed


async def _accept_event(
    auditor: Auditor, request: ChatRoundRequest, streamed: StreamedRound, event: ToolCallEvent
) -> None:
    if request.accepted_kind == "provider_tool_call" and (
        event.id in request.seen_call_ids or any(e.id == event.id for e in streamed.events)
    ):
        streamed.duplicate_call_id = streamed.duplicate_call_id or event.id
        return
    streamed.events.append(event)
    await auditor.emit(
        "chat_event_detected",
        {
            "agent": "chat_agent",
            "round_index": request.round_index,
            "event": event.model_dump(),
            "source": request.accepted_kind,
        },
    )
    await auditor.output.put(_outputs.event(event))
