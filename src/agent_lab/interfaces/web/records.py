"""Read-only views of stored sessions for the REST API, history frames and exports.

Every function here is synchronous (the store is); callers run them in a worker
thread. Audit records carry ``offset`` (their store id, increasing per store).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_lab.application.session_store import SessionStore
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.errors import SessionNotFound


def session_summaries(store: SessionStore, live: set[str]) -> list[dict[str, Any]]:
    """Every session, newest first, with its usage totals, whether it is live and its
    ``status``: the status of its last turn (``completed``, ``failed``, ``cancelled``,
    ``terminated``…) or ``empty``; ``failed_turns`` counts the failed and cancelled ones."""
    summaries = []
    for session in store.list_sessions():
        session_id = session["id"]
        try:
            usage = store.usage_summary(session_id)
        except SessionNotFound:
            continue  # deleted between the two reads
        turns = usage["turns"]
        status = _last_status(turns)
        failed = sum(turn.get("status") in ("failed", "cancelled") for turn in turns)
        summaries.append(
            {
                **_without_config(session),
                "usage": usage["session"],
                "live": session_id in live,
                "status": status,
                "failed_turns": failed,
            }
        )
    return summaries


def _last_status(turns: list[dict[str, Any]]) -> str:
    return str(turns[-1].get("status") or "unknown") if turns else "empty"


def session_record(
    store: SessionStore,
    session_id: str,
    *,
    before_turn: int | None = None,
    audit_after: int = 0,
) -> dict[str, Any]:
    """A session's transcript, audit trail (with offsets), per-turn metrics and usage.

    Args:
        store: Where the session lives.
        session_id: The session.
        before_turn: Keep only messages and audits of turns before this index (the
            live part of a session is replayed from memory instead).
        audit_after: Only audits whose offset is greater.

    Raises:
        SessionNotFound: no such session.
    """
    session = store.get_session(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    messages = store.list_messages(session_id, include_pending=True)
    audits = store.list_audit_logs(session_id, after_id=audit_after)
    usage = store.usage_summary(session_id)
    if before_turn is not None:
        messages = [m for m in messages if _before(m.get("turn_index"), before_turn)]
        audits = [a for a in audits if _before(a.get("turn_index"), before_turn)]
    return {
        "session": session,
        "messages": messages,
        "audit": [{"offset": audit["id"], **audit} for audit in audits],
        "turns": usage["turns"],
        "calls": usage["calls"],
        "usage": usage["session"],
    }


def export_lines(record: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The record as JSON Lines objects, each tagged with its ``kind``."""
    yield {"kind": "session", **record["session"], "usage": record["usage"]}
    for kind, key in (("turn", "turns"), ("message", "messages"), ("call", "calls")):
        for item in record[key]:
            yield {"kind": kind, **item}
    for audit in record["audit"]:
        yield {"kind": "audit", **audit}


def tool_catalog(registry: ToolRegistry, enabled: list[str]) -> list[dict[str, Any]]:
    """Every registered tool with its schema, result policy and default state."""
    return [_tool_entry(tool, tool.name in enabled) for tool in registry.definitions()]


def _tool_entry(tool: ToolDefinition, enabled: bool) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "result_policy": tool.result_policy.value,
        "has_argument_resolver": tool.argument_resolver is not None,
        "confirmation_template": tool.confirmation_template,
        "timeout_seconds": tool.timeout_seconds,
        "enabled_by_default": enabled,
    }


def _before(turn_index: object, limit: int) -> bool:
    return not isinstance(turn_index, int) or turn_index < limit


def _without_config(session: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in session.items() if key != "config"}
