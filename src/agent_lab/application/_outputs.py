"""Constructors of the output protocol's messages (DESIGN.md §4); each field named once."""

from __future__ import annotations

from typing import Any

from agent_lab.domain.errors import AgentLabError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, TokenUsage

Output = dict[str, Any]


def session_started(session_id: str | None) -> Output:
    if session_id is None:
        return {"type": "session_started"}
    return {"type": "session_started", "session_id": session_id}


def turn_started(turn_index: int) -> Output:
    return {"type": "turn_started", "turn_index": turn_index}


def message_delta(content: str) -> Output:
    return {"type": "message_delta", "content": content}


def usage(value: TokenUsage) -> Output:
    return {"type": "usage", "usage": value.model_dump()}


def event(value: ToolCallEvent) -> Output:
    return {"type": "event", "event": value.model_dump()}


NO_USAGE = TokenUsage()
"""The counts of a call the provider reported no usage for (read, never handed out)."""


def tool_result(message: ChatMessage) -> Output:
    return {"type": "tool_result", "message": message.model_dump()}


def round_stats(
    round_index: int,
    ttft_ms: int | None,
    elapsed_ms: int,
    usage_value: TokenUsage | None,
    had_event: bool,
) -> Output:
    counts = usage_value or NO_USAGE
    return {
        "type": "round_stats",
        "round_index": round_index,
        "ttft_ms": ttft_ms,
        "elapsed_ms": elapsed_ms,
        "prompt_tokens": counts.prompt_tokens,
        "completion_tokens": counts.completion_tokens,
        "total_tokens": counts.total_tokens,
        "cached_tokens": counts.cached_tokens,
        "had_event": had_event,
    }


def turn_completed(turn_index: int, round_count: int) -> Output:
    return {"type": "turn_completed", "turn_index": turn_index, "round_count": round_count}


def done() -> Output:
    return {"type": "done"}


def error(failure: AgentLabError) -> Output:
    """An ``error`` output: the message, and the reason and exit class the error carries."""
    return {
        "type": "error",
        "message": str(failure),
        "failure_reason": failure.failure_reason,
        "exit_class": failure.exit_class,
    }


def audit(event_name: str, details: dict[str, Any]) -> Output:
    return {"type": "audit", "event": event_name, "details": details}


def elapsed_ms(start: float, end: float) -> int:
    """Whole milliseconds between two clock readings, never negative."""
    return max(0, round((end - start) * 1000))
