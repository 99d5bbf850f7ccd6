"""Builders of audit ``details`` (DESIGN.md §4, §6); each audit's fields named once.

The names of the audits and their order are a contract; these builders only shape the
payloads. ``turn_elapsed_ms`` is added by the ``Auditor`` when it emits them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from agent_lab.application._metrics import ModelCall
from agent_lab.application._recording import kept_failure_message, kept_text
from agent_lab.application._session_state import OpenBatch, TurnOutcome, TurnState
from agent_lab.application.contracts import AgentParams, ToolInvocationMode
from agent_lab.application.events import EventBatchResult, EventResult
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.json_values import json_default
from agent_lab.domain.messages import ChatMessage, TokenUsage

Details = dict[str, Any]

RESULT_CAP_CHARS = 65_536
"""A tool result longer than this (as the JSON text the model saw) is audited as a
marker with its size, hash and first ``RESULT_HEAD_CHARS`` characters."""
RESULT_HEAD_CHARS = 2_048


def session_started(
    session_id: str | None, mode: ToolInvocationMode, restored: int, first_turn: int
) -> Details:
    return {
        "session_id": session_id,
        "tool_invocation_mode": mode,
        "restored_message_count": restored,
        "first_turn_index": first_turn,
    }


def session_finished(turn: TurnState | None = None, outcome: TurnOutcome | None = None) -> Details:
    """One-shot runs say how their turn ended (see ``turn_closing``); a session's close
    says nothing more."""
    return {} if turn is None or outcome is None else turn_closing(turn, outcome)


def turn_started(turn_index: int) -> Details:
    return {"turn_index": turn_index}


def turn_completed(turn: TurnState, outcome: TurnOutcome) -> Details:
    return {
        "turn_index": turn.index,
        "round_count": turn.round_index,
        **turn_closing(turn, outcome),
    }


def turn_closing(turn: TurnState, outcome: TurnOutcome) -> Details:
    """How a turn ended; for one that did not complete, why, the results of the batch it
    left unfinished that were shown (and made durable) before it ended, and the text and
    figures of a chat call it ended in the middle of (shown to the user, never answered
    in full)."""
    details: Details = {"status": outcome.status}
    failure = outcome.failure
    if failure is not None:
        details["failure_reason"] = failure.failure_reason
        details["failure_message"] = kept_failure_message(failure)
        detail = getattr(failure, "audit_detail", None)  # the libraries' own words
        if isinstance(detail, str) and detail:
            details["failure_detail"] = kept_text(detail)
    if turn.unfinished is not None and turn.unfinished.landed:
        details["unfinished_results"] = _shown_results(turn.unfinished)
    if turn.streaming_text:
        content = "".join(turn.streaming_text)
        details["cut_short_answer"] = {"round_index": turn.round_index, "content": content}
    if turn.unfinished_call is not None:
        details["unfinished_call"] = turn.unfinished_call
    if turn.unfinished_resolutions is not None:
        details["unfinished_resolutions"] = turn.unfinished_resolutions
    return details


def unfinished_call(
    round_index: int, call: ModelCall, metric_key: str, *, visible_ttft_ms: int | None
) -> Details:
    """A chat call the turn ended in the middle of: what was measured until it broke off
    or was cancelled (the figures a ``chat_agent_response`` would have carried)."""
    return {
        "round_index": round_index,
        "visible_ttft_ms": visible_ttft_ms,
        "call": model_call(call, metric_key),
    }


def _shown_results(batch: OpenBatch) -> list[Details]:
    """The results of a batch cut off by the turn's end that were shown, with how long
    each handler ran (``None``: it never ran)."""
    return [
        {**_shown_result(message), "tool_latency_ms": batch.results[event_id].tool_latency_ms}
        for event_id, message in batch.landed.items()
    ]


def _shown_result(message: ChatMessage) -> Details:
    result = tool_result_value(message.content)
    failed = isinstance(result.get("result"), dict) and "error" in result["result"]
    return {
        "event_id": message.tool_call_id,
        "event_name": message.name,
        "status": "failed" if failed else "succeeded",
        **result,
    }


def tool_result_value(content: str) -> Details:
    """``{"result": <the payload>}``, or ``{"result": None, "result_capped": {...}}`` for
    a result over ``RESULT_CAP_CHARS`` (the transcript keeps it whole)."""
    if len(content) <= RESULT_CAP_CHARS:
        try:
            return {"result": json.loads(content)}
        except ValueError:
            return {"result": content}
    return {
        "result": None,
        "result_capped": {
            "original_chars": len(content),
            "sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(),
            "head": content[:RESULT_HEAD_CHARS],
        },
    }


def json_value(value: Any) -> Any:
    """``value`` as JSON reads it back, converted as the store converts it (tuples
    become lists, dates ISO text, …); anything else as its ``str``: an audit never
    fails for a value it cannot hold."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=_json_or_text))


def _json_or_text(value: object) -> object:
    try:
        return json_default(value)
    except TypeError:
        return str(value)


def model_call(call: ModelCall, metric_key: str) -> Details:
    """One model call's figures: the runtime's and, when it reports them, the client's."""
    timing = call.timing
    return {
        "metric_key": metric_key,
        "model": call.model,
        "usage": call.usage.model_dump() if call.usage is not None else None,
        "provider_ttft_ms": call.ttft_ms,
        "latency_ms": call.latency_ms,
        "warmup_ms": timing.warmup_ms if timing is not None else None,
        "connect_ms": timing.connect_ms if timing is not None else None,
        "first_chunk_ms": timing.first_chunk_ms if timing is not None else None,
        "total_ms": timing.total_ms if timing is not None else None,
        "attempts": timing.attempts if timing is not None else None,
        "cold": call.cold,
        "cold_reasons": list(call.cold_reasons),
        "finish_reason": call.finish_reason,
    }


def chat_round_started(
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    *,
    offered: list[str],
    configured: list[str],
    prompt_events: list[str],
    budget: int,
) -> Details:
    return {
        "turn_index": turn_index,
        "round_index": round_index,
        "tool_invocation_mode": mode,
        "events_enabled": offered,
        "configured_events": configured,
        "event_generation_enabled": bool(offered),
        "event_prompt_events": prompt_events,
        "event_budget_remaining": max(budget, 0),
    }


def chat_agent_request(
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    *,
    params: AgentParams,
    tools: list[dict[str, Any]],
    messages: list[dict[str, Any]],
) -> Details:
    return {
        "agent": "chat_agent",
        "turn_index": turn_index,
        "round_index": round_index,
        "tool_invocation_mode": mode,
        "params": params.model_dump(mode="json"),
        "tools": tools,
        "messages": messages,
    }


def chat_agent_response(
    turn_index: int,
    round_index: int,
    mode: ToolInvocationMode,
    *,
    content: str,
    events: Sequence[ToolCallEvent],
    raw_chunks: list[dict[str, Any]],
    chunk_offsets_ms: list[float],
    usage: TokenUsage | None,
    visible_ttft_ms: int | None,
    provider_ttft_ms: int | None,
    call: Details | None = None,
    ignored_event_names: Sequence[str] = (),
) -> Details:
    details: Details = {
        "agent": "chat_agent",
        "turn_index": turn_index,
        "round_index": round_index,
        "tool_invocation_mode": mode,
        "content": content,
        "event_names": [event.name for event in events],
        "event_ids": [event.id for event in events],
        "raw_chunks": raw_chunks,
        "raw_chunk_offsets_ms": chunk_offsets_ms,
        "usage": usage.model_dump() if usage is not None else None,
        "usage_reported": usage is not None,
        "visible_ttft_ms": visible_ttft_ms,
        "provider_ttft_ms": provider_ttft_ms,
        "call": call,
    }
    if ignored_event_names:
        details["ignored_event_names"] = list(ignored_event_names)
    return details


def stream_started(round_index: int) -> Details:
    return {"agent": "chat_agent", "round_index": round_index}


def stream_finished(round_index: int, parts: Sequence[str]) -> Details:
    return {
        "agent": "chat_agent",
        "round_index": round_index,
        "delta_count": len(parts),
        "content_length": sum(len(part) for part in parts),
    }


def event_detected(round_index: int, event: ToolCallEvent, source: str | None) -> Details:
    return {
        "agent": "chat_agent",
        "round_index": round_index,
        "event": event.model_dump(),
        "source": source,
    }


def event_batch_started(
    scope: str, round_index: int, mode: ToolInvocationMode, events: Sequence[ToolCallEvent]
) -> Details:
    return {
        "scope": scope,
        "round_index": round_index,
        "tool_invocation_mode": mode,
        "event_ids": [event.id for event in events],
        "event_names": [event.name for event in events],
    }


def provider_tools_completed(scope: str, round_index: int, batch: EventBatchResult) -> Details:
    return {
        "scope": scope,
        "round_index": round_index,
        "result_count": len(batch.logical_results),
    }


def event_batch_results(scope: str, round_index: int, batch: EventBatchResult) -> Details:
    """One entry per logical result: its figures, arguments, result and the ids of the
    calls coalesced into it."""
    coalesced: dict[str, list[str]] = {}
    for entry in batch.results:
        if entry.deduplicated_from is not None:
            coalesced.setdefault(entry.deduplicated_from, []).append(entry.event_id)
    return {
        "scope": scope,
        "round_index": round_index,
        "results": [
            _result_entry(entry, coalesced.get(entry.event_id, []))
            for entry in batch.logical_results
        ],
    }


def _result_entry(entry: EventResult, coalesced: list[str]) -> Details:
    return {
        **entry.audit_entry(),
        "arguments": json_value(entry.arguments),
        **tool_result_value(entry.tool_message().content),
        "coalesced_ids": coalesced,
    }


def event_policy_decision(
    scope: str, round_index: int, decision: dict[str, object], spoken: Sequence[str] = ()
) -> Details:
    """The decision, and the runtime's own sentences (template confirmations, farewell)."""
    return {"scope": scope, "round_index": round_index, **decision, "spoken": list(spoken)}


def terminal_completed(scope: str, event_ids: Sequence[str]) -> Details:
    return {"scope": scope, "event_ids": list(event_ids)}


def chat_round_finished(
    turn_index: int,
    round_index: int,
    *,
    elapsed_ms: int | None = None,
    visible_ttft_ms: int | None = None,
) -> Details:
    return {
        "round_index": round_index,
        "turn_index": turn_index,
        "elapsed_ms": elapsed_ms,
        "visible_ttft_ms": visible_ttft_ms,
    }
