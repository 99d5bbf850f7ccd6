"""Model call spans: the chat agent's calls and the event agent's argument calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agent_lab.application.pricing import CallCost, call_cost
from agent_lab.application.session_store import CallMetric
from agent_lab.infrastructure.telemetry import content
from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.record import (
    RoundAudits,
    RoundView,
    TurnRecord,
    mapping,
    offset,
)
from agent_lab.infrastructure.telemetry.spans import SpanData, SpanEvent

if TYPE_CHECKING:
    from agent_lab.infrastructure.telemetry.convert import ConvertOptions


def chat_call_span(view: RoundView, parent_id: int, round_end_ms: int) -> SpanData | None:
    """The round's chat call, from its request audit to its response audit."""
    record, audits, options = view.record, view.audits, view.options
    request = audits.get("chat_agent_request")
    if request is None:
        return None
    response = audits.get("chat_agent_response")
    measured = response if response is not None else _cut_short(record, audits.index)
    start_ms = offset(request, 0)
    end_ms = offset(response, round_end_ms)
    metric = record.metric(f"chat:{record.turn_index}:{audits.index}")
    params = mapping(request.get("params"))
    model = str((metric or {}).get("model") or params.get("model") or "")
    role = "chat" if audits.index == 1 else "follow_up"
    attributes = _call_attributes(record, model, role, metric, options)
    attributes[sc.AGENT_NAME] = "chat_agent"
    _request_params(attributes, params)
    if measured is not None:
        _response_attributes(attributes, measured, metric)
        attributes.update(_chunk_attributes(_as_list(measured.get("raw_chunks"))))
    if options.capture_content:
        detected = audits.every("chat_event_detected")
        attributes.update(content.chat_content(request, response, detected))
    return record.span(
        f"round-{audits.index}/chat",
        parent_id,
        f"chat {model}".strip(),
        start_ms,
        end_ms,
        attributes,
        kind="client",
        status="error" if response is None else "unset",
        status_message="the call did not finish" if response is None else None,
        events=_stream_events(record, audits, start_ms, measured),
    )


def _cut_short(record: TurnRecord, round_index: int) -> Mapping[str, Any] | None:
    """A chat call the turn ended in the middle of, as a response audit would tell it:
    what was measured until then (its provider TTFT, visible TTFT and usage)."""
    cut = record.unfinished_call(round_index)
    if cut is None:
        return None
    call = mapping(cut.get("call"))
    return {
        "provider_ttft_ms": call.get("provider_ttft_ms"),
        "visible_ttft_ms": cut.get("visible_ttft_ms"),
        "usage": call.get("usage"),
        "usage_reported": call.get("usage") is not None,
        "timing": {key: call.get(key) for key in ("warmup_ms", "connect_ms")},
    }


def argument_call_span(
    record: TurnRecord,
    round_index: int,
    metric: Mapping[str, Any],
    *,
    parent_id: int,
    start_ms: int,
    chunks: Sequence[Any],
    request: Mapping[str, Any] | None,
    options: ConvertOptions,
) -> SpanData:
    """An event agent's forced ``tool_choice`` call, as its metric recorded it."""
    event_id = str(metric.get("event_id") or "")
    model = str(metric.get("model") or "")
    role = str(metric.get("call_kind"))
    attributes = _call_attributes(record, model, role, metric, options)
    attributes[sc.AGENT_NAME] = "event_agent"
    params = (request or {}).get("params")
    if isinstance(params, Mapping):
        _request_params(attributes, params)
    _usage_attributes(attributes, metric)
    ttft = metric.get("ttft_ms")
    if isinstance(ttft, int):
        attributes[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = ttft / 1000
        attributes[sc.PROVIDER_TTFT_MS] = ttft
    attributes.update(_chunk_attributes(chunks))
    if options.capture_content and request is not None:
        attributes.update(content.history_content(request))
    latency = int(metric.get("latency_ms") or 0)
    path = f"round-{round_index}/arguments/{event_id}/call"
    name = f"chat {model}".strip()
    return record.span(
        path, parent_id, name, start_ms, start_ms + latency, attributes, kind="client"
    )


def _call_attributes(
    record: TurnRecord,
    model: str,
    role: str,
    metric: Mapping[str, Any] | None,
    options: ConvertOptions,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        sc.OPERATION_NAME: sc.OP_CHAT,
        sc.PROVIDER_NAME: sc.PROVIDER,
        sc.REQUEST_MODEL: model,
        sc.CONVERSATION_ID: record.session_id,
        sc.MODE: record.mode,
        sc.CALL_ROLE: role,
    }
    if metric is not None:
        attributes[sc.CALL_KIND] = str(metric.get("call_kind"))
        attributes[sc.METRIC_KEY] = str(metric.get("metric_key"))
        if isinstance(metric.get("latency_ms"), int):
            attributes[sc.LATENCY_MS] = metric["latency_ms"]
    attributes.update(_cost_attributes(metric, options))
    return attributes


def _cost_attributes(metric: Mapping[str, Any] | None, options: ConvertOptions) -> dict[str, Any]:
    cost: CallCost | None = None
    if metric is not None and options.prices is not None:
        cost = call_cost(CallMetric.model_validate(dict(metric)), options.prices)
    if cost is None or cost.amount is None:
        reason = cost.unknown_reason if cost is not None else "unpriced_model"
        return {sc.COST_STATUS: "unknown", "agent_lab.cost.unknown_reason": str(reason)}
    attributes: dict[str, Any] = {sc.COST_USD: float(cost.amount), sc.COST_STATUS: "known"}
    if cost.price is not None:
        attributes[sc.COST_SOURCE] = cost.price.source
    return attributes


def _request_params(attributes: dict[str, Any], params: Mapping[str, Any]) -> None:
    attributes[sc.REQUEST_STREAM] = True
    if isinstance(params.get("temperature"), int | float):
        attributes[sc.REQUEST_TEMPERATURE] = float(params["temperature"])
    if isinstance(params.get("max_tokens"), int):
        attributes[sc.REQUEST_MAX_TOKENS] = params["max_tokens"]


def _response_attributes(
    attributes: dict[str, Any], response: Mapping[str, Any], metric: Mapping[str, Any] | None
) -> None:
    usage = metric if metric is not None else _audit_usage(response)
    _usage_attributes(attributes, usage)
    provider_ttft = (metric or {}).get("ttft_ms", response.get("provider_ttft_ms"))
    if isinstance(provider_ttft, int):
        attributes[sc.RESPONSE_TIME_TO_FIRST_CHUNK] = provider_ttft / 1000
        attributes[sc.PROVIDER_TTFT_MS] = provider_ttft
    if isinstance(response.get("visible_ttft_ms"), int):
        attributes[sc.VISIBLE_TTFT_MS] = response["visible_ttft_ms"]
    timing = response.get("timing")
    if isinstance(timing, Mapping):
        for key, name in (("warmup_ms", sc.WARMUP_MS), ("connect_ms", sc.CONNECT_MS)):
            if isinstance(timing.get(key), int | float):
                attributes[name] = float(timing[key])


def _audit_usage(response: Mapping[str, Any]) -> Mapping[str, Any]:
    usage = response.get("usage")
    reported = {"usage_reported": bool(response.get("usage_reported"))}
    return {**usage, **reported} if isinstance(usage, Mapping) else reported


def _usage_attributes(attributes: dict[str, Any], usage: Mapping[str, Any]) -> None:
    reported = bool(usage.get("usage_reported", True))
    attributes[sc.USAGE_REPORTED] = reported
    if not reported:
        return
    attributes[sc.USAGE_INPUT_TOKENS] = int(usage.get("prompt_tokens") or 0)
    attributes[sc.USAGE_OUTPUT_TOKENS] = int(usage.get("completion_tokens") or 0)
    attributes[sc.USAGE_CACHE_READ_INPUT_TOKENS] = int(usage.get("cached_tokens") or 0)
    attributes[sc.CACHED_TOKENS] = int(usage.get("cached_tokens") or 0)
    attributes[sc.TOTAL_TOKENS] = int(usage.get("total_tokens") or 0)


def _chunk_attributes(chunks: Sequence[Any]) -> dict[str, Any]:
    """Response model, id and finish reasons from the provider's chunks."""
    found: dict[str, Any] = {}
    reasons: list[str] = []
    for chunk in chunks:
        if not isinstance(chunk, Mapping):
            continue
        if chunk.get("model") and sc.RESPONSE_MODEL not in found:
            found[sc.RESPONSE_MODEL] = str(chunk["model"])
        if chunk.get("id") and sc.RESPONSE_ID not in found:
            found[sc.RESPONSE_ID] = str(chunk["id"])
        for choice in _as_list(chunk.get("choices")):
            if isinstance(choice, Mapping) and choice.get("finish_reason"):
                reasons.append(str(choice["finish_reason"]))
    if reasons:
        found[sc.RESPONSE_FINISH_REASONS] = reasons
    return found


def _stream_events(
    record: TurnRecord,
    audits: RoundAudits,
    start_ms: int,
    response: Mapping[str, Any] | None,
) -> tuple[SpanEvent, ...]:
    events: list[SpanEvent] = []
    provider_ttft = (response or {}).get("provider_ttft_ms")
    if isinstance(provider_ttft, int):
        events.append(SpanEvent("agent_lab.first_chunk", record.at(start_ms + provider_ttft)))
    first = audits.get("chat_message_stream_started")
    if first is not None:
        events.append(SpanEvent("agent_lab.first_visible_text", record.at(offset(first, 0))))
    for detected in audits.every("chat_event_detected"):
        event = mapping(detected.get("event"))
        events.append(
            SpanEvent(
                "agent_lab.event_detected",
                record.at(offset(detected, 0)),
                {
                    "agent_lab.event.name": str(event.get("name")),
                    "agent_lab.event.id": str(event.get("id")),
                },
            )
        )
    finished = audits.get("chat_message_stream_finished")
    if finished is not None:
        events.append(
            SpanEvent(
                "agent_lab.stream_finished",
                record.at(offset(finished, 0)),
                {"agent_lab.stream.delta_count": int(finished.get("delta_count") or 0)},
            )
        )
    return tuple(sorted(events, key=lambda event: event.time_ns))


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []
