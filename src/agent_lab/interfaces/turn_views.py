"""What the CLI and the web lab show of a stored turn: one adapter over the store.

Every view of a stored session (``sessions show``, the exports, the web lab's reopened
history and its explain view) reads its turns through ``turn_records`` and its export
through ``session_export``, so the CLI and the web show and export the same thing.

The records have the turn record's shape (``record_version`` 1: rounds, model calls
with cost, events with their arguments and how they were resolved, tool executions,
the failure); they are folded here from the store's rows (turns, messages, tool
batches, audits, call metrics). Synchronous: call from a worker thread on a loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal
from typing import Any

import orjson

from agent_lab.application.pricing import CostBreakdown, CostSplit, PriceTable, cost_breakdown
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionNotFound
from agent_lab.interfaces._turn_fold import fold_turn

EXPORT_VERSION = 1
RECORD_VERSION = 1
Row = dict[str, Any]

__all__ = [
    "EXPORT_VERSION",
    "RECORD_VERSION",
    "export_json",
    "export_jsonl",
    "export_lines",
    "session_export",
    "turn_records",
]


def session_export(store: SessionStore, session_id: str, prices: PriceTable) -> Row:
    """The one export document of a session (``export_version`` 1), as JSON values.

    Raises:
        SessionNotFound: no such session.
    """
    session = store.get_session(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    records, costs = _records(store, session_id, prices)
    return {
        "export_version": EXPORT_VERSION,
        "record_version": RECORD_VERSION,
        "session": {"session_id": session["id"], **_fields(session, _SESSION_FIELDS)},
        "turns": [_fields(turn, _TURN_FIELDS) for turn in store.list_turns(session_id)],
        "messages": [_fields(m, _MESSAGE_FIELDS) for m in store.list_messages(session_id)],
        "records": records,
        "cost": _cost(costs.session),
    }


def export_lines(document: Mapping[str, Any]) -> Iterator[Row]:
    """The export as JSON Lines objects, each tagged with its ``kind``."""
    header = {key: document[key] for key in ("export_version", "record_version")}
    yield {"kind": "session", **header, **document["session"]}
    for kind, key in (("turn", "turns"), ("message", "messages"), ("record", "records")):
        for item in document[key]:
            yield {"kind": kind, **item}
    yield {"kind": "cost", **document["cost"]}


def export_json(document: Mapping[str, Any]) -> str:
    """The export document as the JSON text both the CLI and the web lab write."""
    return orjson.dumps(document, option=_JSON_OPTIONS).decode() + "\n"


def export_jsonl(document: Mapping[str, Any]) -> str:
    """The export as JSON Lines text, the same from the CLI and the web lab."""
    return "".join(
        orjson.dumps(line, option=orjson.OPT_SORT_KEYS).decode() + "\n"
        for line in export_lines(document)
    )


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


def turn_records(store: SessionStore, session_id: str, prices: PriceTable) -> list[Row]:
    """Every turn of a session as a turn record (JSON values), in turn order.

    Raises:
        SessionNotFound: no such session.
    """
    if store.get_session(session_id) is None:
        raise SessionNotFound(session_id)
    return _records(store, session_id, prices)[0]


_SESSION_FIELDS = ("title", "mode", "created_at", "updated_at", "config")
_TURN_FIELDS = (
    "turn_index",
    "status",
    "user_message",
    "wall_time_ms",
    "round_count",
    "failure_reason",
    "failure_message",
    "started_at",
    "completed_at",
)
_MESSAGE_FIELDS = (
    "seq",
    "turn_index",
    "role",
    "content",
    "name",
    "tool_call_id",
    "tool_calls",
    "created_at",
)


def _fields(row: Mapping[str, Any], names: Sequence[str]) -> Row:
    return {name: row.get(name) for name in names}


def _records(store: SessionStore, session_id: str, prices: PriceTable) -> tuple[list[Row], Any]:
    turns = store.list_turns(session_id)
    messages = store.list_messages(session_id)
    audits = store.list_audit_logs(session_id)
    batches = store.list_batches(session_id)
    calls = store.usage_summary(session_id)["calls"]
    costs = cost_breakdown(calls, prices)
    mode = (store.get_session(session_id) or {}).get("mode")
    records = []
    for turn in turns:
        index = turn["turn_index"]
        records.append(
            fold_turn(
                session_id,
                mode,
                turn,
                [a for a in audits if a.get("turn_index") == index],
                [m for m in messages if m.get("turn_index") == index],
                [b for b in batches if b.get("turn_index") == index],
                _model_calls(calls, costs, index),
                _cost(costs.turn(index)),
            )
        )
    return records, costs


def _model_calls(
    calls: Sequence[Mapping[str, Any]], costs: CostBreakdown, turn_index: int
) -> list[Row]:
    priced = {cost.metric_key: cost for cost in costs.calls}
    first_chat = True
    rows = []
    for call in calls:
        key = call["metric_key"]
        if call["turn_index"] != turn_index or key not in priced:
            continue
        cost = priced[key]
        role = call["call_kind"]
        if role == "chat":
            role = "chat" if first_chat else "follow_up"
            first_chat = False
        rows.append(
            {
                "metric_key": key,
                "role": role,
                "round_index": call["round_index"],
                "event_id": call.get("event_id"),
                "model": call.get("model"),
                "status": call.get("status") or "succeeded",
                "timings": {
                    "provider_first_chunk_ms": call.get("ttft_ms"),
                    "latency_ms": call.get("latency_ms"),
                },
                "usage": _usage(call),
                "cost": {
                    "amount_usd": _usd(cost.amount),
                    "unknown_reason": cost.unknown_reason,
                    "price_source": cost.price.source if cost.price else None,
                },
                "cold": None,
            }
        )
    return sorted(rows, key=lambda row: (row["round_index"], row["role"] != "chat"))


def _usage(call: Mapping[str, Any]) -> Row | None:
    if not call.get("usage_reported", True):
        return None
    names = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")
    return {name: call.get(name, 0) for name in names}


def _cost(split: CostSplit) -> Row:
    return {
        "total_usd": _usd(split.total.amount),
        "known_usd": _usd(split.total.known),
        "unpriced_calls": split.total.unpriced_calls,
        "by_role": {
            role: _usd(part.amount)
            for role, part in split.by_role.items()
            if part.priced_calls or part.unpriced_calls
        },
    }


def _usd(amount: Decimal | None) -> str | None:
    return None if amount is None else str(amount)
