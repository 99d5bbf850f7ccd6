"""Builders of audit ``details`` (DESIGN.md §4, §6); each audit's fields named once.

The names of the audits and their order are a contract; these builders only shape the
payloads. ``turn_elapsed_ms`` is added by the ``Auditor`` when it emits them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_lab.application.contracts import AgentParams, ToolInvocationMode
from agent_lab.application.events import EventBatchResult
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, TokenUsage

Details = dict[str, Any]


def session_started(
    session_id: str | None, mode: ToolInvocationMode, restored: int, first_turn: int
) -> Details:
    return {
        "session_id": session_id,
        "tool_invocation_mode": mode,
        "restored_message_count": restored,
        "first_turn_index": first_turn,
    }


def session_finished(status: str | None = None) -> Details:
    """One-shot runs say how their turn ended; a session's close says nothing more."""
    return {} if status is None else {"status": status}


def turn_started(turn_index: int) -> Details:
    return {"turn_index": turn_index}


def turn_completed(turn_index: int, round_count: int, status: str) -> Details:
    return {"turn_index": turn_index, "round_count": round_count, "status": status}


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
    return {
        "scope": scope,
        "round_index": round_index,
        "results": [entry.audit_entry() for entry in batch.logical_results],
    }


def event_policy_decision(scope: str, round_index: int, decision: dict[str, object]) -> Details:
    return {"scope": scope, "round_index": round_index, **decision}


def terminal_completed(scope: str, event_ids: Sequence[str]) -> Details:
    return {"scope": scope, "event_ids": list(event_ids)}


def chat_round_finished(turn_index: int, round_index: int) -> Details:
    return {"round_index": round_index, "turn_index": turn_index}


def event_agent_request(
    scope: str,
    round_index: int,
    *,
    params: AgentParams,
    events: Sequence[ToolCallEvent],
    tools: list[dict[str, Any]],
    history: Sequence[ChatMessage],
) -> Details:
    return {
        "agent": "event_agent",
        "scope": scope,
        "round_index": round_index,
        "params": params.model_dump(mode="json"),
        "events": [event.model_dump() for event in events],
        "tools": tools,
        "history": [message.model_dump() for message in history],
    }


def event_agent_response(
    scope: str, replies: Sequence[ChatMessage], raw_model_chunks: list[dict[str, Any]]
) -> Details:
    return {
        "agent": "event_agent",
        "scope": scope,
        "replies": [reply.model_dump() for reply in replies],
        "raw_model_chunks": raw_model_chunks,
    }


def event_agent_completed(
    scope: str, batch: EventBatchResult, summary: ChatMessage | None
) -> Details:
    details: Details = {
        "agent": "event_agent",
        "scope": scope,
        "result_count": len(batch.logical_results),
    }
    if summary is not None:
        details["result_summary"] = summary.content
    return details
