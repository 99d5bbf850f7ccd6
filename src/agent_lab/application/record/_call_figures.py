"""A model call's figures, as its audit gives them, turned into its record's timings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_lab.application.record.model import CallTimings, ModelCallRecord
from agent_lab.domain.messages import TokenUsage

Details = Mapping[str, Any]


def finish_call(
    call: ModelCallRecord, figures: Details, at: int | None, *, visible_ttft_ms: int | None = None
) -> None:
    """Mark ``call`` succeeded at ``at`` with the usage, model and timings of ``figures``."""
    call.status = "succeeded"
    call.ended_ms = at
    take_figures(call, figures, visible_ttft_ms=visible_ttft_ms)


def break_off_call(call: ModelCallRecord, figures: Details, *, visible_ttft_ms: int | None) -> None:
    """What was measured of a call the turn ended in the middle of (the closing audit's
    ``unfinished_call``); it ends where its latency says, and the turn's close sets its
    state (``failed`` with the turn's reason, or ``cancelled``)."""
    take_figures(call, figures, visible_ttft_ms=visible_ttft_ms)
    latency = call.timings.latency_ms
    if call.started_ms is not None and latency is not None:
        call.ended_ms = call.started_ms + latency


def take_figures(call: ModelCallRecord, figures: Details, *, visible_ttft_ms: int | None) -> None:
    """The usage, model and timings of ``figures`` (a ``model_call`` audit entry)."""
    usage = figures.get("usage")
    call.usage = TokenUsage.model_validate(usage) if usage is not None else None
    call.model = figures.get("model", call.model)
    first_chunk = figures.get("first_chunk_ms")
    total = figures.get("total_ms")
    provider = first_chunk if first_chunk is not None else figures.get("provider_ttft_ms")
    latency = figures.get("latency_ms")
    call.timings = CallTimings(
        warmup_ms=figures.get("warmup_ms"),
        connect_ms=figures.get("connect_ms"),
        provider_first_chunk_ms=provider,
        visible_ttft_ms=visible_ttft_ms,
        stream_ms=stream_ms(first_chunk, total, figures.get("provider_ttft_ms"), latency),
        latency_ms=latency,
        attempts=figures.get("attempts"),
    )
    call.cold = bool(figures.get("cold")) if "cold" in figures else None
    call.cold_reasons = list(figures.get("cold_reasons", []))
    call.finish_reason = figures.get("finish_reason")


def stream_ms(
    first_chunk: float | None, total: float | None, ttft: int | None, latency: int | None
) -> float | None:
    """First chunk to end of stream: the client's figures, else the runtime's."""
    if first_chunk is not None and total is not None:
        return round(max(0.0, total - first_chunk), 3)
    if ttft is not None and latency is not None:
        return float(max(0, latency - ttft))
    return None
