"""Move a finished session from one store to another, through the store ports.

``export_session`` reads everything recorded for a session into plain data (it
pickles and serialises as JSON); ``merge_session`` writes it into another store under
the same id: the session and its config, every turn with its status and failure, the
committed messages turn by turn, the tool journal (each batch with its calls'
outcomes and final state), the audits and the call metrics. Timestamps are the
target store's; everything else reads back as it was written.

Campaigns on Ray use it: each repeat runs on a scratch store in its worker and comes
back as an export merged into the lab's store.
"""

from __future__ import annotations

from typing import Any

from agent_lab.application.session_store import CallMetric, SessionStore
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

SessionExport = dict[str, Any]

_MESSAGE_FIELDS = ("role", "content", "name", "tool_call_id", "tool_calls")
_METRIC_FIELDS = tuple(CallMetric.model_fields)


def export_session(store: SessionStore, session_id: str) -> SessionExport:
    """Everything recorded for the session, as plain data."""
    session = store.get_session(session_id)
    if session is None:
        from agent_lab.domain.errors import SessionNotFound

        raise SessionNotFound(session_id)
    return {
        "session": session,
        "turns": store.list_turns(session_id),
        "messages": store.list_messages(session_id),
        "batches": store.list_batches(session_id),
        "audits": store.list_audit_logs(session_id),
        "calls": store.usage_summary(session_id)["calls"],
    }


def merge_session(store: SessionStore, export: SessionExport) -> str:
    """Write an exported session into ``store`` (same id); return the id.

    Raises:
        UsageError: the store already has a session with that id.
    """
    session = export["session"]
    session_id = store.create_session(session["title"], session["config"], session["id"])
    by_turn: dict[int, list[ChatMessage]] = {}
    for row in export["messages"]:
        message = ChatMessage(**{key: row[key] for key in _MESSAGE_FIELDS})
        by_turn.setdefault(int(row["turn_index"]), []).append(message)
    for turn in export["turns"]:
        index = int(turn["turn_index"])
        store.start_turn(session_id, index, turn["user_message"], messages=by_turn.pop(index, []))
        _merge_batches(store, session_id, index, export["batches"])
        if turn["status"] != "running":
            store.complete_turn(
                session_id,
                index,
                status=turn["status"],
                wall_time_ms=turn["wall_time_ms"],
                round_count=turn["round_count"],
                failure_reason=turn["failure_reason"],
                failure_message=turn["failure_message"],
            )
    for index, messages in sorted(by_turn.items()):  # messages of no recorded turn
        store.append_messages(session_id, index, messages)
    records = [(a["turn_index"], a["event"], a["details"]) for a in export["audits"]]
    if records:
        store.append_audits(session_id, records)
    metrics = [CallMetric(**{key: c[key] for key in _METRIC_FIELDS}) for c in export["calls"]]
    if metrics:
        store.append_usages(session_id, metrics)
    return session_id


def _merge_batches(
    store: SessionStore, session_id: str, turn_index: int, batches: list[dict[str, Any]]
) -> None:
    for batch in batches:
        if int(batch["turn_index"]) != turn_index:
            continue
        events = [ToolCallEvent(**call["event"]) for call in batch["calls"]]
        assistant = batch["assistant"]
        batch_id = store.begin_batch(
            session_id,
            turn_index,
            int(batch["round_index"]),
            scope=batch["scope"],
            mode=batch["mode"],
            events=events,
            assistant=None if assistant is None else ChatMessage(**assistant),
        )
        for call, event in zip(batch["calls"], events, strict=True):
            if call["result"] is not None and call["state"] != "pending":
                store.record_result(
                    batch_id, event.id, call["state"], ChatMessage(**call["result"])
                )
        if batch["state"] == "committed":
            store.commit_batch(batch_id, [])  # its messages are in the transcript already
        elif batch["state"] in ("cancelled", "failed"):
            store.abandon_batch(batch_id, batch["state"])
