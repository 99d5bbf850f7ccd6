"""Batch spans: the event agent's batch (or the provider tool batch), argument
resolution, tool execution and the policy decision of one round."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agent_lab.infrastructure.telemetry import content
from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.calls import argument_call_span
from agent_lab.infrastructure.telemetry.record import RoundAudits, RoundView, TurnRecord, offset
from agent_lab.infrastructure.telemetry.spans import SpanData

_ARGUMENT_KINDS = ("argument_fallback", "argument_generation")


def batch_spans(view: RoundView, round_id: int, round_end_ms: int) -> list[SpanData]:
    """The round's batch and what ran inside it; empty when the round had no batch."""
    record, audits = view.record, view.audits
    started = audits.get("event_batch_started")
    if started is None:
        return []
    dual = audits.get("event_agent_request") is not None or record.mode == "dual_agent"
    closed = audits.get("event_agent_completed") or audits.get("provider_tools_completed")
    start_ms = offset(started, 0)
    end_ms = offset(closed, round_end_ms)
    batch_id = record.span_id(f"round-{audits.index}/batch")
    children: list[SpanData] = []
    tools_start = start_ms
    if dual:
        resolutions, tools_start = _resolutions(view, batch_id)
        children += resolutions
    children += _tool_spans(view, batch_id, tools_start, end_ms)
    decision = _policy_span(record, audits, round_id)
    batch = record.span(
        batch_id,
        round_id,
        "invoke_agent event_agent" if dual else "provider tools",
        start_ms,
        end_ms,
        _batch_attributes(record, started, closed, dual),
        status="error" if closed is None else "unset",
        status_message="the batch did not finish" if closed is None else None,
    )
    return [batch, *children, *([decision] if decision is not None else [])]


def _batch_attributes(
    record: TurnRecord,
    started: Mapping[str, Any],
    closed: Mapping[str, Any] | None,
    dual: bool,
) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        sc.MODE: record.mode,
        sc.BATCH_SCOPE: str(started.get("scope") or ""),
        sc.BATCH_EVENT_IDS: [str(value) for value in started.get("event_ids") or []],
        sc.BATCH_EVENT_NAMES: [str(value) for value in started.get("event_names") or []],
    }
    if dual:
        attributes[sc.OPERATION_NAME] = sc.OP_INVOKE_AGENT
        attributes[sc.AGENT_NAME] = "event_agent"
        attributes[sc.CONVERSATION_ID] = record.session_id
    if closed is not None and isinstance(closed.get("result_count"), int):
        attributes[sc.BATCH_RESULT_COUNT] = closed["result_count"]
    return attributes


def _resolutions(view: RoundView, batch_id: int) -> tuple[list[SpanData], int]:
    """One span per event, with its argument call; and when the tools could start."""
    record, audits = view.record, view.audits
    request = audits.get("event_agent_request")
    response = audits.get("event_agent_response") or {}
    start_ms = offset(request or audits.get("event_batch_started"), 0)
    failures = _by_event(response.get("argument_failures"))
    chunks = _by_event(response.get("raw_model_chunks"))
    spans: list[SpanData] = []
    ready_ms = start_ms
    for event_id, name in _batch_events(audits):
        metric = _argument_metric(record, audits.index, event_id)
        span_id = record.span_id(f"round-{audits.index}/arguments/{event_id}")
        duration = int((metric or {}).get("latency_ms") or 0)
        ready_ms = max(ready_ms, start_ms + duration)
        attributes: dict[str, Any] = {
            "agent_lab.arguments.tool_name": name,
            "agent_lab.arguments.call_id": event_id,
            sc.ARG_RESOLUTION: str(metric.get("call_kind")) if metric else "resolver",
        }
        failure = failures.get(event_id)
        if failure is not None:
            attributes[sc.ARG_FAILURE] = f"{failure.get('stage')}: {failure.get('cause')}"
        failed = failure is not None and failure.get("stage") == "generation"
        spans.append(
            record.span(
                span_id,
                batch_id,
                f"resolve arguments {name}",
                start_ms,
                start_ms + duration,
                attributes,
                status="error" if failed else "unset",
                status_message=attributes.get(sc.ARG_FAILURE) if failed else None,
            )
        )
        if metric is not None:
            spans.append(
                argument_call_span(
                    record,
                    audits.index,
                    metric,
                    parent_id=span_id,
                    start_ms=start_ms,
                    chunks=(chunks.get(event_id) or {}).get("chunks") or [],
                    request=request,
                    options=view.options,
                )
            )
    return spans, ready_ms


def _tool_spans(
    view: RoundView, batch_id: int, tools_start_ms: int, batch_end_ms: int
) -> list[SpanData]:
    record, audits, options = view.record, view.audits, view.options
    results = audits.get("event_batch_results") or {}
    arguments = content.arguments_by_call(audits) if options.capture_content else {}
    outputs = content.results_by_call(record, audits) if options.capture_content else {}
    spans: list[SpanData] = []
    for result in results.get("results") or []:
        if not isinstance(result, Mapping):
            continue
        event_id = str(result.get("event_id"))
        metric = record.metric(f"tool:{record.turn_index}:{audits.index}:{event_id}") or {}
        attributes = _tool_attributes(record, result, metric)
        if event_id in arguments:
            attributes[sc.TOOL_CALL_ARGUMENTS] = arguments[event_id]
        if event_id in outputs:
            attributes[sc.TOOL_CALL_RESULT] = outputs[event_id]
        latency = int(attributes.get(sc.TOOL_LATENCY_MS, 0))  # a call not run: no length
        status = attributes[sc.TOOL_STATUS]
        start_ms = max(min(tools_start_ms, batch_end_ms - latency), 0)
        failed = status not in ("", "success")
        spans.append(
            record.span(
                f"round-{audits.index}/tool/{event_id}",
                batch_id,
                f"execute_tool {attributes[sc.TOOL_NAME]}",
                start_ms,
                start_ms + latency,
                attributes,
                status="error" if failed else "ok",
                status_message=f"tool {status}" if failed else None,
            )
        )
    return spans


def _tool_attributes(
    record: TurnRecord, result: Mapping[str, Any], metric: Mapping[str, Any]
) -> dict[str, Any]:
    """A tool call's span attributes, its figures from its metric row first."""
    attributes: dict[str, Any] = {
        sc.OPERATION_NAME: sc.OP_EXECUTE_TOOL,
        sc.TOOL_NAME: str(result.get("event_name")),
        sc.TOOL_CALL_ID: str(result.get("event_id")),
        sc.TOOL_TYPE: "function",
        sc.MODE: record.mode,
        sc.TOOL_STATUS: str(result.get("status") or metric.get("status") or ""),
        sc.TOOL_SOURCE: str(result.get("source") or ""),
        sc.RESULT_POLICY: str(result.get("policy") or ""),
    }
    latency = metric.get("tool_latency_ms")
    latency = result.get("tool_latency_ms") if latency is None else latency
    if latency is not None:  # none: the handler never ran
        attributes[sc.TOOL_LATENCY_MS] = int(latency)
    if metric.get("metric_key"):
        attributes[sc.METRIC_KEY] = str(metric["metric_key"])
    return attributes


def _policy_span(record: TurnRecord, audits: RoundAudits, round_id: int) -> SpanData | None:
    decision = audits.get("event_policy_decision")
    if decision is None:
        return None
    results = (audits.get("event_batch_results") or {}).get("results") or []
    policies = [str(r.get("policy")) for r in results if isinstance(r, Mapping) and r.get("policy")]
    attributes: dict[str, Any] = {
        sc.POLICY_TERMINATE: bool(decision.get("terminate")),
        sc.POLICY_FOLLOW_UP: bool(decision.get("llm_follow_up")),
        sc.POLICY_POLICIES: policies,
    }
    terminal = audits.get("terminal_completed")
    if terminal is not None:
        ids = terminal.get("event_ids") or []
        attributes[sc.TERMINAL_EVENT_IDS] = [str(value) for value in ids]
    at_ms = offset(decision, 0)
    path = f"round-{audits.index}/policy"
    return record.span(path, round_id, "policy decision", at_ms, at_ms, attributes)


def _batch_events(audits: RoundAudits) -> list[tuple[str, str]]:
    started = audits.get("event_batch_started") or {}
    ids = [str(value) for value in started.get("event_ids") or []]
    names = [str(value) for value in started.get("event_names") or []]
    return list(zip(ids, names, strict=False))


def _argument_metric(
    record: TurnRecord, round_index: int, event_id: str
) -> Mapping[str, Any] | None:
    for prefix in ("fallback", "generation"):
        metric = record.metric(f"{prefix}:{record.turn_index}:{round_index}:{event_id}")
        if metric is not None and metric.get("call_kind") in _ARGUMENT_KINDS:
            return metric
    return None


def _by_event(entries: Any) -> dict[str, Mapping[str, Any]]:
    if not isinstance(entries, list):
        return {}
    return {str(entry.get("event_id")): entry for entry in entries if isinstance(entry, Mapping)}
