"""The one converter: a turn's record (audits + call metrics) to its span tree.

Pure: no OpenTelemetry import, no I/O. Both exports call it, the live one with the
audits as they streamed, the later one with the audits the store kept, so both send
the same spans. Span times are the record's offsets on the turn's anchor:

* turn: 0 to ``turn_completed`` (a session) or ``session_finished`` (a one-shot run);
* round: ``chat_round_started`` to ``chat_round_finished``;
* model call: ``chat_agent_request`` to ``chat_agent_response``;
* the batch: ``event_batch_started`` to ``event_agent_completed`` /
  ``provider_tools_completed``; inside it, argument resolution (from
  ``event_agent_request``, as long as its argument call's recorded latency) and tool
  execution (after the resolutions, as long as its recorded ``tool_latency_ms``);
* policy decision: an instant at ``event_policy_decision``.

A span whose closing audit is missing (a failed or cancelled turn) ends with the turn
and has an error status.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agent_lab.application.pricing import PriceTable
from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.calls import chat_call_span
from agent_lab.infrastructure.telemetry.record import (
    RoundAudits,
    RoundView,
    TurnRecord,
    details,
    elapsed,
    offset,
    rounds_of,
)
from agent_lab.infrastructure.telemetry.spans import SpanData, span_id_of, trace_id_of
from agent_lab.infrastructure.telemetry.tools import batch_spans

_FAILED = frozenset({"failed", "cancelled"})


@dataclass(frozen=True)
class ConvertOptions:
    capture_content: bool = False
    """Put message text, tool arguments and results on the spans (opt-in)."""
    prices: PriceTable | None = None
    """Prices for ``agent_lab.cost.usd``; without one the cost is ``unknown``."""


def session_span_id(session_id: str) -> int:
    return span_id_of(session_id, "session")


def turn_spans(record: TurnRecord, options: ConvertOptions | None = None) -> list[SpanData]:
    """The turn's spans, parents before children; the turn's parent is the session span."""
    options = options or ConvertOptions()
    end_ms, status = _turn_end(record)
    turn_id = record.span_id("turn")
    spans: list[SpanData] = []
    rounds = rounds_of(record.audits)
    for audits in rounds:
        spans += _round_spans(RoundView(record, audits, options), turn_id, end_ms)
    model_spans = [span for span in spans if span.attributes.get(sc.OPERATION_NAME) == sc.OP_CHAT]
    attributes: dict[str, Any] = {
        sc.OPERATION_NAME: sc.OP_INVOKE_AGENT,
        sc.AGENT_NAME: "chat_agent",
        sc.CONVERSATION_ID: record.session_id,
        sc.MODE: record.mode,
        sc.TURN_INDEX: record.turn_index,
        sc.TURN_STATUS: status,
        sc.TURN_ROUNDS: len(rounds),
        sc.TURN_WALL_MS: end_ms,
        **_sum_usage(model_spans),
    }
    turn = record.span(
        turn_id,
        session_span_id(record.session_id),
        f"turn {record.turn_index}",
        0,
        end_ms,
        attributes,
        status="error" if status in _FAILED else "ok",
        status_message=f"turn {status}" if status in _FAILED else None,
    )
    return [turn, *spans]


def session_span(
    session_id: str, *, title: str, mode: str, start_ns: int, end_ns: int, turn_count: int
) -> SpanData:
    """The root span of a session's trace, from its first turn's start to its last end."""
    return SpanData(
        trace_id=trace_id_of(session_id),
        span_id=session_span_id(session_id),
        parent_id=None,
        name="session",
        start_ns=start_ns,
        end_ns=max(end_ns, start_ns),
        attributes={
            sc.CONVERSATION_ID: session_id,
            sc.SESSION_ID: session_id,
            sc.SESSION_TITLE: title,
            sc.MODE: mode,
            "agent_lab.session.turn_count": turn_count,
        },
    )


def turn_end(record: TurnRecord) -> int:
    """The turn's end as a turn-relative offset (ms)."""
    return _turn_end(record)[0]


def _turn_end(record: TurnRecord) -> tuple[int, str]:
    last = 0
    closing: Mapping[str, Any] | None = None
    for audit in record.audits:
        last = max(last, elapsed(details(audit)) or 0)
        if audit.get("event") == "turn_completed" or (
            audit.get("event") == "session_finished" and closing is None
        ):
            closing = details(audit)
    if closing is None:
        return last, "incomplete"
    return offset(closing, last), str(closing.get("status") or "completed")


def _round_spans(view: RoundView, turn_id: int, turn_end_ms: int) -> list[SpanData]:
    record, audits = view.record, view.audits
    started = audits.get("chat_round_started")
    finished = audits.get("chat_round_finished")
    start_ms = offset(started, _earliest(audits))
    end_ms = offset(finished, turn_end_ms)
    round_id = record.span_id(f"round-{audits.index}")
    children: list[SpanData] = []
    chat = chat_call_span(view, round_id, end_ms)
    if chat is not None:
        children.append(chat)
    children += batch_spans(view, round_id, end_ms)
    response = audits.get("chat_agent_response") or {}
    attributes: dict[str, Any] = {
        sc.ROUND_INDEX: audits.index,
        sc.TURN_INDEX: record.turn_index,
        sc.MODE: record.mode,
        sc.ROUND_HAD_EVENTS: bool(response.get("event_ids")),
    }
    if started is not None and isinstance(started.get("event_budget_remaining"), int):
        attributes[sc.ROUND_BUDGET] = started["event_budget_remaining"]
    cut = record.unfinished_call(audits.index) or {}
    visible = response.get("visible_ttft_ms", cut.get("visible_ttft_ms"))
    if isinstance(visible, int):
        attributes[sc.VISIBLE_TTFT_MS] = visible
    unfinished = finished is None
    round_span = record.span(
        round_id,
        turn_id,
        f"round {audits.index}",
        start_ms,
        end_ms,
        attributes,
        status="error" if unfinished else "unset",
        status_message="the round did not finish" if unfinished else None,
    )
    return [round_span, *children]


def _earliest(audits: RoundAudits) -> int:
    times = [elapsed(details(audit)) for audit in audits.first.values()]
    return min((value for value in times if value is not None), default=0)


def _sum_usage(model_spans: Sequence[SpanData]) -> dict[str, Any]:
    """The turn's token and cost totals (``agent_lab.*``, so viewers do not add them twice)."""
    tokens = [span.attributes.get(sc.TOTAL_TOKENS, 0) for span in model_spans]
    total = sum(value for value in tokens if isinstance(value, int))
    costs = [span.attributes.get(sc.COST_USD) for span in model_spans]
    summed: dict[str, Any] = {sc.TOTAL_TOKENS: total, "agent_lab.turn.model_calls": len(costs)}
    unreported = sum(span.attributes.get(sc.USAGE_REPORTED) is False for span in model_spans)
    summed[sc.UNREPORTED_USAGE_CALLS] = unreported  # their tokens are not in the total
    known = [cost for cost in costs if isinstance(cost, float)]
    if len(known) == len(costs):
        summed[sc.COST_USD] = sum(known)
        summed[sc.COST_STATUS] = "known"
    else:
        summed[sc.COST_STATUS] = "unknown"
    return summed
