"""Message content on spans, only when the user opts in.

The standard switch ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` turns it
on. Messages follow the GenAI conventions' JSON shapes (``gen_ai.input.messages``,
``gen_ai.output.messages``, ``gen_ai.system_instructions``). The record never holds a
secret (API keys and headers are not audited), so content carries none either.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from agent_lab.infrastructure.telemetry import semconv as sc
from agent_lab.infrastructure.telemetry.record import RoundAudits, TurnRecord, details

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_enabled(environ: Mapping[str, str] | None = None) -> bool:
    value = (environ if environ is not None else os.environ).get(CAPTURE_ENV, "")
    return value.strip().lower() in ("1", "true", "yes", "on")


def chat_content(
    request: Mapping[str, Any],
    response: Mapping[str, Any] | None,
    detected: Sequence[Mapping[str, Any]],
) -> dict[str, str]:
    messages = [m for m in request.get("messages") or [] if isinstance(m, Mapping)]
    system = [m for m in messages if m.get("role") == "system"]
    found = {
        sc.INPUT_MESSAGES: _dumps([_message(m) for m in messages if m.get("role") != "system"]),
        sc.SYSTEM_INSTRUCTIONS: _dumps([_text(m.get("content")) for m in system]),
    }
    if response is not None:
        parts: list[dict[str, Any]] = []
        if response.get("content"):
            parts.append(_text(response.get("content")))
        for item in detected:
            event = item.get("event")
            if isinstance(event, Mapping):
                parts.append(_tool_call(event))
        found[sc.OUTPUT_MESSAGES] = _dumps([{"role": "assistant", "parts": parts}])
    return found


def history_content(request: Mapping[str, Any]) -> dict[str, str]:
    """The event agent's input: the conversation it resolves arguments from."""
    history = [m for m in request.get("history") or [] if isinstance(m, Mapping)]
    return {sc.INPUT_MESSAGES: _dumps([_message(m) for m in history])}


def arguments_by_call(audits: RoundAudits) -> dict[str, str]:
    """Tool arguments by call id: the resolved ones when the record has them, else the
    provider's (``chat_agent_tools``)."""
    found: dict[str, str] = {}
    for detected in audits.every("chat_event_detected"):
        event = detected.get("event")
        if isinstance(event, Mapping) and event.get("arguments"):
            found[str(event.get("id"))] = _dumps(event.get("arguments"))
    results = (audits.get("event_batch_results") or {}).get("results") or []
    for result in results:
        if isinstance(result, Mapping) and isinstance(result.get("arguments"), Mapping):
            found[str(result.get("event_id"))] = _dumps(result["arguments"])
    return found


def results_by_call(record: TurnRecord, audits: RoundAudits) -> dict[str, str]:
    """Tool results by call id: the event agent's replies, or the ``tool`` messages the
    next chat request sent back."""
    found: dict[str, str] = {}
    replies = (audits.get("event_agent_response") or {}).get("replies") or []
    for audit in record.audits:
        if audit.get("event") == "chat_agent_request":
            replies = [*replies, *(details(audit).get("messages") or [])]
    for reply in replies:
        if isinstance(reply, Mapping) and reply.get("role") == "tool":
            found.setdefault(str(reply.get("tool_call_id")), str(reply.get("content") or ""))
    return found


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    role = str(message.get("role"))
    parts: list[dict[str, Any]] = []
    if role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": message.get("tool_call_id"),
                "response": message.get("content"),
            }
        )
    elif message.get("content"):
        parts.append(_text(message.get("content")))
    for call in message.get("tool_calls") or []:
        if isinstance(call, Mapping):
            parts.append(_tool_call(call))
    entry: dict[str, Any] = {"role": role, "parts": parts}
    if message.get("name") and role != "tool":
        entry["name"] = message["name"]
    return entry


def _tool_call(event: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "tool_call",
        "id": event.get("id"),
        "name": event.get("name"),
        "arguments": event.get("arguments") or {},
    }


def _text(value: Any) -> dict[str, Any]:
    return {"type": "text", "content": value if isinstance(value, str) else json.dumps(value)}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)
