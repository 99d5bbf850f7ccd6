"""Folds one stored turn (its audits, messages, batches and priced calls) into a record.

The rounds' text is what the user was shown: the chat agent's words and, after them,
the runtime's own sentences (template confirmations, the farewell), which the store
keeps as separate assistant messages. Tool executions carry the status and result the
journal recorded; a call still ``running`` when its turn ended is closed as
``cancelled``, as the turn was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Row = dict[str, Any]
_FINAL_TURN_STATES = ("completed", "terminated", "failed", "cancelled")
_BATCH_STATES = {"succeeded": "succeeded", "failed": "failed", "cancelled": "cancelled"}


def fold_turn(
    session_id: str,
    mode: str | None,
    turn: Mapping[str, Any],
    audits: Sequence[Mapping[str, Any]],
    messages: Sequence[Mapping[str, Any]],
    batches: Sequence[Mapping[str, Any]],
    model_calls: list[Row],
    cost: Row,
) -> Row:
    """The record of one turn from its stored rows."""
    rounds: dict[int, Row] = {}
    events: dict[str, Row] = {}
    tools: dict[str, Row] = {}
    for audit in audits:
        _fold_audit(audit, rounds, events, tools)
    _spoken(rounds, messages)
    _results(tools, messages, batches)
    status = str(turn.get("status") or "running")
    if status in _FINAL_TURN_STATES:
        for tool in tools.values():
            if tool["status"] == "running":
                tool["status"] = "cancelled" if status != "completed" else "failed"
    _resolution(mode, events, model_calls)
    reason = turn.get("failure_reason")
    failure = None
    if reason or status in ("failed", "cancelled"):
        failure = {
            "reason": reason or status,
            "message": turn.get("failure_message") or f"turn {status}",
            "where": "turn",
        }
    return {
        "record_version": 1,
        "session_id": session_id,
        "turn_index": turn["turn_index"],
        "mode": mode,
        "status": status,
        "user_message": turn.get("user_message"),
        "wall_time_ms": turn.get("wall_time_ms"),
        "round_count": len(rounds),
        "failure": failure,
        "rounds": [rounds[index] for index in sorted(rounds)],
        "model_calls": model_calls,
        "events": list(events.values()),
        "tool_executions": list(tools.values()),
        "cost": cost,
    }


def _round(rounds: dict[int, Row], index: int) -> Row:
    if index not in rounds:
        rounds[index] = {
            "round_index": index,
            "text": "",
            "spoken": [],
            "event_ids": [],
            "offered_events": [],
            "status": "running",
        }
    return rounds[index]


def _fold_audit(
    audit: Mapping[str, Any], rounds: dict[int, Row], events: dict[str, Row], tools: dict[str, Row]
) -> None:
    details = audit.get("details") or {}
    name = audit.get("event")
    index = details.get("round_index")
    if name == "chat_round_started" and isinstance(index, int):
        _round(rounds, index)["offered_events"] = list(details.get("events_enabled") or [])
    elif name == "chat_agent_response" and isinstance(index, int):
        entry = _round(rounds, index)
        entry["text"] = details.get("content") or ""
        entry["event_ids"] = list(details.get("event_ids") or [])
    elif name == "chat_round_finished" and isinstance(index, int):
        _round(rounds, index)["status"] = "succeeded"
    elif name == "chat_event_detected" and isinstance(index, int):
        event = details.get("event") or {}
        events[event["id"]] = {
            "event_id": event["id"],
            "event_name": event.get("name"),
            "round_index": index,
            "source": details.get("source"),
            "arguments": event.get("arguments") or None,
            "resolved_by": None,
        }
        tools[event["id"]] = {
            "event_id": event["id"],
            "event_name": event.get("name"),
            "round_index": index,
            "arguments": event.get("arguments") or None,
            "status": "running",
            "result": None,
            "latency_ms": None,
            "policy": None,
        }
    elif name == "event_batch_results":
        for result in details.get("results") or []:
            tool = tools.get(result.get("event_id"))
            if tool is not None:
                tool["policy"] = result.get("policy")
                tool["latency_ms"] = result.get("tool_latency_ms")
                tool["status"] = "succeeded" if result.get("status") == "success" else "failed"


def _spoken(rounds: dict[int, Row], messages: Sequence[Mapping[str, Any]]) -> None:
    """Attach the runtime's own assistant sentences to the round they followed."""
    said = [m for m in messages if m.get("role") == "assistant" and (m.get("content") or "")]
    ordered = [rounds[index] for index in sorted(rounds)]
    position = -1
    for message in said:
        content = str(message["content"])
        match = next(
            (
                at
                for at in range(position + 1, len(ordered))
                if ordered[at]["text"].strip() == content.strip()
            ),
            None,
        )
        if match is not None:
            position = match
        elif ordered:
            ordered[max(position, 0)]["spoken"].append(content)


def _results(
    tools: dict[str, Row],
    messages: Sequence[Mapping[str, Any]],
    batches: Sequence[Mapping[str, Any]],
) -> None:
    for batch in batches:
        for call in batch.get("calls") or []:
            event = call.get("event") or {}
            tool = tools.get(str(event.get("id")))
            if tool is None:
                continue
            state = _BATCH_STATES.get(str(call.get("state")))
            if state is not None:
                tool["status"] = _tool_status(state, call.get("result"))
            if call.get("result"):
                tool["result"] = call["result"].get("content")
    for message in messages:
        tool = tools.get(str(message.get("tool_call_id")))
        if message.get("role") == "tool" and tool is not None and tool["result"] is None:
            tool["result"] = message.get("content")
            if tool["status"] == "running":
                tool["status"] = "succeeded"


def _tool_status(state: str, result: Mapping[str, Any] | None) -> str:
    content = str((result or {}).get("content") or "")
    if state == "succeeded" and content.startswith('{"error"'):
        return "failed"
    return state


def _resolution(mode: str | None, events: dict[str, Row], calls: Sequence[Row]) -> None:
    by_event = {call["event_id"]: call for call in calls if call.get("event_id")}
    for event in events.values():
        call = by_event.get(event["event_id"])
        if mode == "chat_agent_tools":
            event["resolved_by"] = "model"
        elif call is not None:
            event["resolved_by"] = call["role"]
            event["argument_call"] = call["metric_key"]
