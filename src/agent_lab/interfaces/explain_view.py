"""Explain a turn: what the model saw, what is stored, what the user was shown.

``explain_turns`` lines the three up for every turn of a session and names where they
differ, plus every repair a restore applied before the turn (the ``repaired_rows`` and
``recovered_calls`` of its ``session_started`` audit). The CLI (``sessions show
--explain``) and the web lab's explain view both render this. Synchronous.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agent_lab.application.pricing import PriceTable
from agent_lab.application.session_store import SessionStore
from agent_lab.interfaces.turn_views import turn_records

Row = dict[str, Any]
_REQUESTS = ("chat_agent_request", "event_agent_request")


def explain_turns(store: SessionStore, session_id: str, prices: PriceTable) -> list[Row]:
    """One explanation per turn, in turn order.

    Raises:
        SessionNotFound: no such session.
    """
    records = turn_records(store, session_id, prices)
    audits = store.list_audit_logs(session_id)
    messages = store.list_messages(session_id, include_pending=True)
    batches = store.list_batches(session_id)
    explained = []
    for record in records:
        index = record["turn_index"]
        turn_audits = [a for a in audits if a.get("turn_index") == index]
        stored = [m for m in messages if m.get("turn_index") == index]
        model_saw = [_request(audit) for audit in turn_audits if audit.get("event") in _REQUESTS]
        shown = _shown(record)
        explained.append(
            {
                "turn_index": index,
                "status": record["status"],
                "model_saw": model_saw,
                "stored": {
                    "messages": [_message(m) for m in stored],
                    "batches": [_batch(b) for b in batches if b.get("turn_index") == index],
                },
                "shown": shown,
                "differences": _differences(shown, stored, _next_request(audits, index))
                + _unstored(model_saw, messages),
                "repairs": _repairs(turn_audits),
            }
        )
    return explained


def _request(audit: Mapping[str, Any]) -> Row:
    details = audit.get("details") or {}
    tools = [(tool.get("function") or {}).get("name") for tool in details.get("tools") or []]
    return {
        "audit": audit.get("event"),
        "seq": audit.get("id"),
        "round_index": details.get("round_index"),
        "model": (details.get("params") or {}).get("model"),
        "messages": [_message(m) for m in details.get("messages") or []],
        "tools": [name for name in tools if name],
        "events": [e.get("name") for e in details.get("events") or []],
    }


def _message(message: Mapping[str, Any]) -> Row:
    row: Row = {"role": message.get("role"), "content": message.get("content") or ""}
    for key in ("name", "tool_call_id", "seq", "state"):
        if message.get(key) is not None:
            row[key] = message[key]
    calls = message.get("tool_calls") or []
    if calls:
        row["tool_calls"] = [
            {"id": c.get("id"), "name": (c.get("function") or c).get("name")} for c in calls
        ]
    return row


def _batch(batch: Mapping[str, Any]) -> Row:
    return {
        "round_index": batch.get("round_index"),
        "state": batch.get("state"),
        "calls": [
            {
                "event_id": (c.get("event") or {}).get("id"),
                "name": (c.get("event") or {}).get("name"),
                "state": c.get("state"),
            }
            for c in batch.get("calls") or []
        ],
    }


def _shown(record: Mapping[str, Any]) -> list[Row]:
    tools = {tool["event_id"]: tool for tool in record["tool_executions"]}
    shown = []
    for entry in record["rounds"]:
        text = entry["text"] + "".join(entry["spoken"])
        calls = [
            {
                "event_id": event_id,
                "name": tools[event_id]["event_name"] if event_id in tools else None,
                "status": tools[event_id]["status"] if event_id in tools else "unknown",
            }
            for event_id in entry["event_ids"]
        ]
        shown.append({"round_index": entry["round_index"], "text": text, "tools": calls})
    if record.get("failure"):
        shown.append({"round_index": None, "text": "", "tools": [], "failure": record["failure"]})
    return shown


def _next_request(audits: Sequence[Mapping[str, Any]], index: int) -> Row | None:
    for audit in audits:
        turn = audit.get("turn_index")
        if isinstance(turn, int) and turn > index and audit.get("event") == "chat_agent_request":
            return dict(audit.get("details") or {})
    return None


def _differences(
    shown: Sequence[Mapping[str, Any]],
    stored: Sequence[Mapping[str, Any]],
    next_request: Mapping[str, Any] | None,
) -> list[Row]:
    """What the user saw, what the transcript holds and what the next turn sent, compared."""
    differences = _shown_not_stored(shown, stored) + _stored_not_committed(stored)
    if next_request is not None:
        differences += _stored_not_sent(stored, next_request)
    return differences


def _shown_not_stored(
    shown: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]]
) -> list[Row]:
    stored_text = _squash(
        " ".join(str(m.get("content") or "") for m in stored if m.get("role") == "assistant")
    )
    return [
        {"kind": "shown_not_stored", "round_index": entry["round_index"], "text": text}
        for entry in shown
        if (text := str(entry.get("text") or "").strip()) and _squash(text) not in stored_text
    ]


def _stored_not_committed(stored: Sequence[Mapping[str, Any]]) -> list[Row]:
    return [
        {"kind": "stored_not_committed", "seq": m.get("seq"), "state": m.get("state")}
        for m in stored
        if m.get("state") not in (None, "committed")
    ]


def _stored_not_sent(
    stored: Sequence[Mapping[str, Any]], next_request: Mapping[str, Any]
) -> list[Row]:
    sent = {_squash(str(m.get("content") or "")) for m in next_request.get("messages") or []}
    return [
        {"kind": "stored_not_sent_next_turn", "seq": m.get("seq"), "role": m.get("role")}
        for m in stored
        if m.get("state", "committed") == "committed"
        and (content := _squash(str(m.get("content") or "")))
        and content not in sent
    ]


def _unstored(
    requests: Sequence[Mapping[str, Any]], stored: Sequence[Mapping[str, Any]]
) -> list[Row]:
    """Messages a request sent that the transcript does not hold (runtime notes)."""
    kept = {_squash(str(m.get("content") or "")) for m in stored}
    seen: set[str] = set()
    differences: list[Row] = []
    for request in requests:
        for message in request["messages"]:
            content = _squash(str(message.get("content") or ""))
            if message.get("role") == "system" or not content or content in kept | seen:
                continue
            seen.add(content)
            differences.append(
                {
                    "kind": "sent_not_stored",
                    "request_seq": request["seq"],
                    "role": message.get("role"),
                    "name": message.get("name"),
                    "text": content[:200],
                }
            )
    return differences


def _squash(text: str) -> str:
    return " ".join(text.split())


def _repairs(audits: Sequence[Mapping[str, Any]]) -> list[Row]:
    repairs: list[Row] = []
    for audit in audits:
        if audit.get("event") != "session_started":
            continue
        details = audit.get("details") or {}
        for row in details.get("repaired_rows") or []:
            repairs.append({"kind": "repaired_row", **row})
        for call in details.get("recovered_calls") or []:
            repairs.append({"kind": "recovered_call", **call})
    return repairs
