"""Read-only views of stored sessions for the REST API, history frames and exports.

Every function here is synchronous (the store is); callers run them in a worker
thread. Audit records carry ``offset`` (their store id, increasing per store).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from agent_lab.application.export import not_held
from agent_lab.application.pricing import PriceTable, cost_breakdown
from agent_lab.application.record import unreported_calls
from agent_lab.application.record.modes import modes_by_turn
from agent_lab.application.record.reading import left_pending_calls
from agent_lab.application.session_store import ClaimListing, SessionStore
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.errors import SessionNotFound
from agent_lab.interfaces.turn_views import turn_records


def session_summaries(
    store: SessionStore, live: set[str], prices: PriceTable | None = None
) -> list[dict[str, Any]]:
    """Every session, newest first, with its usage totals (with ``prices``, their
    ``cost``: US dollars, ``None`` when unknown), whether it is live and its
    ``status``: the status of its last turn (``completed``, ``failed``, ``cancelled``,
    ``terminated``…) or ``empty``; ``failed_turns`` counts the failed and cancelled ones.

    ``live`` holds for a session of ``live`` (this server's) and for one a live runtime
    of another process holds (another worker, ``agent-lab chat``): then ``held_by`` names
    that runtime and ``live_elsewhere`` is true."""
    held = store.live_claims() if isinstance(store, ClaimListing) else {}
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
                "modes": turn_modes(usage["calls"]),
                "usage": _session_usage(usage, prices),
                "live": session_id in live or session_id in held,
                "live_elsewhere": session_id in held and session_id not in live,
                "held_by": held.get(session_id),
                "status": status,
                "failed_turns": failed,
            }
        )
    return summaries


def _session_usage(usage: dict[str, Any], prices: PriceTable | None) -> dict[str, Any]:
    if prices is None:
        return dict(usage["session"])
    total = cost_breakdown(usage["calls"], prices).session.total.amount
    return {**usage["session"], "cost": _float(total)}


def turn_modes(calls: list[dict[str, Any]]) -> list[str]:
    """The tool modes the session's turns ran in, in turn order, each run of turns in
    one mode named once: ``["dual_agent", "chat_agent_tools"]`` for a session whose
    runtime was restarted in the other mode. ``mode`` is only its first request's.

    A turn's mode is its model calls' (a turn that made none is left out)."""
    by_turn = modes_by_turn(calls)
    modes: list[str] = []
    for turn in sorted(by_turn):
        if not modes or modes[-1] != by_turn[turn]:
            modes.append(by_turn[turn])
    return modes


def _last_status(turns: list[dict[str, Any]]) -> str:
    return str(turns[-1].get("status") or "unknown") if turns else "empty"


def session_record(
    store: SessionStore,
    session_id: str,
    *,
    before_turn: int | None = None,
    audit_after: int = 0,
    prices: PriceTable | None = None,
) -> dict[str, Any]:
    """A session's transcript, audit trail (with offsets), per-turn metrics and usage,
    its turn ``records`` (what the page renders a turn from; with ``prices``, each call's
    ``cold_start`` comes from them) and ``unreported_calls``:
    calls of interrupted batches that the next turn will report (uncertain effects).
    Request audits come without the conversation they repeat (``deferred``, see
    ``DEFERRED_FIELDS``); ``turn_audits`` has them in full.

    Args:
        store: Where the session lives.
        session_id: The session.
        before_turn: Keep only messages and audits of turns before this index (the
            live part of a session is replayed from memory instead).
        audit_after: Only audits whose offset is greater.
        prices: Price the calls: ``cost`` (US dollars, ``None`` when unknown) on every
            turn, call and the usage totals, and the turn ``records``.

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
    calls = usage["calls"]
    turns = usage["turns"]
    turn_rows: list[dict[str, Any]] = []
    if prices is not None:
        calls, turns, usage["session"] = _priced(calls, turns, usage["session"], prices)
        turn_rows = turn_records(store, session_id, prices)
        calls = _with_cold_starts(calls, turn_rows)
        if before_turn is not None:
            turn_rows = [row for row in turn_rows if row["turn_index"] < before_turn]
    unreported = unreported_calls(store.list_unreported_batches(session_id))
    if not_held(store, session_id):  # and those its stopped runtime left pending
        unreported += left_pending_calls(store.list_batches(session_id))
    return {
        "session": {**session, "modes": turn_modes(usage["calls"])},
        "records": turn_rows,
        "unreported_calls": [call.model_dump(mode="json") for call in unreported],
        "messages": messages,
        "audit": [_shipped(audit) for audit in audits],
        "turns": turns,
        "calls": calls,
        "usage": usage["session"],
    }


DEFERRED_FIELDS = {
    "chat_agent_request": ("messages",),
    "event_agent_request": ("history",),
    "chat_agent_response": ("raw_chunks",),
}
"""Bulky fields of audits that only a bar's detail shows: each request's messages
(which repeat the conversation so far, so a trail with them grows quadratically) and a
response's raw chunks. A session's trail ships without them (``deferred`` gives each
one's length), so it grows linearly with the session; ``turn_audits`` gives them back,
for the one turn a user opens."""


def _shipped(audit: dict[str, Any]) -> dict[str, Any]:
    entry = {"offset": audit["id"], **audit}
    details = audit.get("details")
    if not isinstance(details, dict):
        return entry
    fields = [
        f for f in DEFERRED_FIELDS.get(audit["event"], ()) if isinstance(details.get(f), list)
    ]
    if fields:
        entry["details"] = {key: value for key, value in details.items() if key not in fields}
        entry["deferred"] = {field: len(details[field]) for field in fields}
    return entry


def turn_audits(store: SessionStore, session_id: str, turn_index: int) -> list[dict[str, Any]]:
    """One turn's audits in full (requests with the messages they sent), with offsets.

    Raises:
        SessionNotFound: no such session.
    """
    if store.get_session(session_id) is None:
        raise SessionNotFound(session_id)
    audits = store.list_audit_logs(session_id, turn_index=turn_index)
    return [{"offset": audit["id"], **audit} for audit in audits]


def _priced(
    calls: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    totals: dict[str, Any],
    prices: PriceTable,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    costs = cost_breakdown(calls, prices)
    by_key = {cost.metric_key: cost.amount for cost in costs.calls}
    priced_calls = [{**call, "cost": _float(by_key.get(call["metric_key"]))} for call in calls]
    priced_turns = [
        {
            **turn,
            "cost": _float(costs.turn(turn["turn_index"]).total.amount),
            "cost_by_role": {
                role: _float(part.amount)
                for role, part in costs.turn(turn["turn_index"]).by_role.items()
                if part.priced_calls or part.unpriced_calls
            },
        }
        for turn in turns
    ]
    return priced_calls, priced_turns, {**totals, "cost": _float(costs.session.total.amount)}


def _with_cold_starts(
    calls: list[dict[str, Any]], turn_rows: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``calls`` with ``cold_start``: the turn record says the call was cold (it waited
    for client warm-up, or was the first call of its client in its process)."""
    cold = {
        call["metric_key"]
        for row in turn_rows
        for call in row.get("model_calls", [])
        if call.get("cold")
    }
    return [{**call, "cold_start": call["metric_key"] in cold} for call in calls]


def _float(amount: Decimal | None) -> float | None:
    return None if amount is None else float(amount)


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
