"""Builders of the event agent's audit ``details`` (DESIGN.md §4, §6).

Its request, its replies with how each event got its arguments, and its completion;
the shared value shaping (``json_value``) is ``_audit_details``'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_lab.application._audit_details import Details, json_value, model_call
from agent_lab.application._event_replies import ArgumentCall
from agent_lab.application.contracts import AgentParams
from agent_lab.application.events import EventBatchResult
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage


def event_agent_request(
    scope: str,
    round_index: int,
    *,
    params: AgentParams,
    events: Sequence[ToolCallEvent],
    tools: list[dict[str, Any]],
    history: Sequence[ChatMessage],
    history_dumps: list[dict[str, Any]] | None = None,
    system_prompt: str = "",
) -> Details:
    """What the event agent was sent; a forced argument call sends ``system_prompt`` as
    a system message, then ``history``, with its event's tool from ``tools``.
    ``history_dumps`` are ``history``'s dumps when the caller already has them."""
    return {
        "agent": "event_agent",
        "scope": scope,
        "round_index": round_index,
        "params": params.model_dump(mode="json"),
        "events": [event.model_dump() for event in events],
        "tools": tools,
        "history": (
            [message.model_dump() for message in history]
            if history_dumps is None
            else history_dumps
        ),
        "system_prompt": system_prompt,
    }


def event_agent_response(
    scope: str,
    replies: Sequence[ChatMessage],
    raw_model_chunks: list[dict[str, Any]],
    resolutions: Sequence[Details] = (),
) -> Details:
    """The replies, and per event its resolved arguments and how they were resolved."""
    return {
        "agent": "event_agent",
        "scope": scope,
        "replies": [reply.model_dump() for reply in replies],
        "raw_model_chunks": raw_model_chunks,
        "resolutions": list(resolutions),
    }


def resolution(
    event: ToolCallEvent,
    *,
    resolved_by: str,
    resolver: str | None,
    call: Details | None,
) -> Details:
    """How one event got its arguments: ``resolver`` (no model call),
    ``argument_fallback`` / ``argument_generation`` (the forced call in ``call``),
    ``empty`` (no resolver, and the empty arguments fit the schema) or
    ``not_resolved`` (an unknown or disabled tool)."""
    entry: Details = {
        "event_id": event.id,
        "event_name": event.name,
        "arguments": json_value(event.arguments),
        "resolved_by": resolved_by,
        "resolver": resolver,
        "call": call,
    }
    if not event.arguments and event.raw_arguments.strip() not in ("", "{}"):
        entry["raw_arguments"] = event.raw_arguments  # what the model wrote, unusable
    return entry


def open_argument_call(
    event_id: str, event_name: str, call: ArgumentCall, metric_key: str
) -> Details:
    """The resolution entry of an event whose forced argument call was still open when
    the turn ended: no arguments yet, the call's figures so far, marked ``open``."""
    return {
        "event_id": event_id,
        "event_name": event_name,
        "arguments": {},
        "resolved_by": "argument_fallback" if call.fallback else "argument_generation",
        "resolver": None,
        "call": {**model_call(call.call, metric_key), "open": True},
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
