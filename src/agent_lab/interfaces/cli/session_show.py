"""``agent-lab sessions show``: every turn with its rounds, tool calls and cost.

Renders the turn records (``TurnRecord`` JSON values, from ``interfaces.turn_views``)
and, with ``--explain``, the three columns of ``interfaces.explain_view``. Calls of an
interrupted batch that a later turn reported (``recovered_calls``) are marked uncertain.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from decimal import Decimal
from typing import Any

from rich.console import Console
from rich.text import Text

from agent_lab.application.export import read_turn_record
from agent_lab.application.pricing import PriceTable, format_usd
from agent_lab.application.session_store import SessionStore
from agent_lab.interfaces.cli.render import cut_off_text, short

Row = Mapping[str, Any]
_ROLE_LABELS = {
    "chat": "chat",
    "follow_up": "follow-up",
    "argument_fallback": "argument fallback",
    "argument_generation": "argument generation",
}
_INSIDE_CHAT = frozenset({"follow_up"})
"""Record cost roles that are a share of ``chat``, not a part beside it."""
_STATUS_STYLES = {"succeeded": "green", "failed": "red", "cancelled": "yellow", "running": "red"}
UNCERTAIN_STATUSES = frozenset({"unknown", "not_executed"})
"""Recovered calls whose effect the ledger could not confirm."""


def usd(value: str | None) -> str:
    """A record's decimal-string amount in dollars, or ``unknown`` (never ``$0`` for it)."""
    return format_usd(None if value is None else Decimal(value))


def cost_text(cost: Row, roles: Collection[str] | None = None) -> str:
    """``$0.0012 — chat $0.001 · argument generation $0.0002`` or ``unknown (…)``.

    The parts add up to the total, as in ``run``'s cost line and the web lab's
    ``cost_by_role``: ``chat`` is the chat agent's calls, first calls and follow-ups
    (docs/runtime.md), so the record's ``follow_up`` sum, a share of it, is not listed.
    ``roles``: the roles that made calls (the split names only these); all by default.
    """
    total = _total_text(cost)
    split = _split_text(cost.get("by_role") or {}, roles)
    return f"{total} — {split}" if split else total


def _total_text(cost: Row) -> str:
    if cost.get("total_usd") is not None or not cost.get("unpriced_calls"):
        return usd(cost.get("total_usd"))
    known = Decimal(cost.get("known_usd") or 0)
    calls = cost["unpriced_calls"]
    total = "unknown" if not known else f"≥ {format_usd(known)}"
    return total + f" ({calls} call{'s' if calls != 1 else ''} unpriced)"


def _split_text(parts: Row, roles: Collection[str] | None) -> str:
    order = [*(r for r in _ROLE_LABELS if r in parts), *(r for r in parts if r not in _ROLE_LABELS)]
    return " · ".join(
        f"{_ROLE_LABELS.get(r, r)} {usd(parts[r])}"
        for r in order
        if r not in _INSIDE_CHAT and (roles is None or r in roles)
    )


def turn_cost_note(
    store: SessionStore, session_id: str, prices: PriceTable, turn_index: int | None = None
) -> str | None:
    """``  cost: $0.0012 — chat … · argument generation …`` of a turn (the last one by
    default), from its stored turn record, worded as ``sessions show`` words the turn's
    cost; ``None`` when the turn made no model call. Synchronous: call it from a worker
    thread on a loop."""
    if turn_index is None:
        turns = store.list_turns(session_id)
        turn_index = max((int(row["turn_index"]) for row in turns), default=0)
    record = read_turn_record(store, session_id, turn_index, prices=prices)
    if record is None or not record.model_calls:
        return None
    shown = record.model_dump(mode="json")
    return f"  cost: {cost_text(shown['cost'], _roles(shown))}"


CallKey = tuple[int, int, str]
"""``(turn, round, event id)``."""


def print_turns(
    console: Console,
    records: Sequence[Row],
    session_cost: Row,
    written: Mapping[CallKey, str] | None = None,
) -> None:
    """Every turn: user text, rounds (text, tool calls, results), failure, cost.

    ``written``: the arguments text of the provider's tool calls as the model wrote it
    (``written_arguments``), shown where it is not the JSON object the call ran with.
    """
    recovered = recovered_calls(records)
    for record in records:
        _print_turn(console, record, recovered, written or {})
    roles = set().union(*(_roles(record) for record in records))
    console.print(Text(f"session cost: {cost_text(session_cost, roles)}", style="bold"))


def written_arguments(audits: Sequence[Row]) -> dict[CallKey, str]:
    """The raw arguments text of each provider tool call (``chat_event_detected``), and
    of each ``dual_agent`` event whose forced argument call wrote no JSON object (its
    ``event_agent_response`` resolution keeps the text)."""
    found: dict[CallKey, str] = {}
    for audit in audits:
        details = audit.get("details") or {}
        event = details.get("event") or {}
        if audit.get("event") == "event_agent_response":
            found.update(_written_by_argument_calls(audit))
            continue
        if audit.get("event") != "chat_event_detected" or "raw_arguments" not in event:
            continue
        if details.get("source") != "provider_tool_call":
            continue
        turn = int(audit.get("turn_index") or 0)
        found[(turn, int(details.get("round_index") or 0), str(event.get("id")))] = str(
            event["raw_arguments"]
        )
    return found


def _written_by_argument_calls(audit: Row) -> dict[CallKey, str]:
    details, turn = audit.get("details") or {}, int(audit.get("turn_index") or 0)
    round_index = int(str(details.get("scope") or "").rpartition(":round-")[2] or 0)
    entries = [e for e in details.get("resolutions") or [] if "raw_arguments" in e]
    return {(turn, round_index, str(e["event_id"])): str(e["raw_arguments"]) for e in entries}


def recovered_calls(records: Sequence[Row]) -> dict[tuple[int, int, str], Row]:
    """The calls later turns reported as recovered, by ``(turn, round, event id)``."""
    found: dict[tuple[int, int, str], Row] = {}
    for record in records:
        for call in record.get("recovered_calls") or []:
            found[(call["turn_index"], call["round_index"], call["event_id"])] = call
    return found


def _roles(record: Row) -> set[str]:
    """The cost roles of a turn's calls (a follow-up is a chat call too)."""
    roles: set[str] = set()
    for call in record["model_calls"]:
        roles.add(str(call["role"]))
        if call["role"] == "follow_up":
            roles.add("chat")
    return roles


def _print_turn(
    console: Console,
    record: Row,
    recovered: Mapping[CallKey, Row],
    written: Mapping[CallKey, str],
) -> None:
    status = str(record["status"])
    console.rule(f"turn {record['turn_index']} · {status}")
    console.print(Text.assemble(("you› ", "bold cyan"), str(record.get("user_message") or "")))
    turn = int(record["turn_index"])
    tools = {(t["round_index"], t["event_id"]): t for t in record["tool_executions"]}
    events = {(e["round_index"], e["event_id"]): e for e in record["events"]}
    calls = record["model_calls"]
    for entry in record["rounds"]:
        index = entry["round_index"]
        console.print(Text(round_header(entry), style="bold"))
        said = spoken_text(entry["text"], entry["spoken"])
        if said.strip():
            console.print(Text.assemble(("  assistant› ", "bold green"), said))
        cut_off = cut_off_text(entry.get("cut_off"))
        if cut_off is not None:
            console.print(Text(f"  {cut_off}", style="bold yellow"))
        named = (e["event_id"] for e in record["events"] if e["round_index"] == index)
        for event_id in dict.fromkeys([*entry["event_ids"], *named]):  # and a failed round's
            key = (index, event_id)
            uncertain = recovered.get((turn, index, event_id))
            raw = written.get((turn, index, event_id))
            _print_tool(console, tools.get(key), events.get(key), event_id, uncertain, raw)
        for call in (c for c in calls if c["round_index"] == index):
            console.print(Text(f"  {_call_line(call)}", style="dim"))
    failure = record.get("failure")
    if failure:
        console.print(Text(f"  ✗ {failure['reason']}: {failure['message']}", style="bold red"))
    for call in record.get("recovered_calls") or []:
        console.print(Text(f"  ⚠ recovered {_recovered_line(call)}", style="bold yellow"))
    console.print(Text(f"  turn cost: {cost_text(record['cost'], _roles(record))}", style="dim"))


def round_header(entry: Row) -> str:
    """``round 1 · TTFT 304 ms · 591 ms``: the round's visible TTFT (``no text``) and
    wall time as its live stats chip gave them; a round that never finished has no
    wall time, one that ended before any figure, just its number."""
    parts = [f"round {entry['round_index']}"]
    ttft, elapsed = entry.get("visible_ttft_ms"), entry.get("elapsed_ms")
    if ttft is not None or elapsed is not None:
        parts.append("no text" if ttft is None else f"TTFT {ttft} ms")
    if elapsed is not None:
        parts.append(f"{elapsed} ms")
    return " · ".join(parts)


def spoken_text(text: str, spoken: Sequence[str]) -> str:
    """What the user heard in a round: the chat agent's text, then the runtime's own
    sentences (template confirmations, the farewell), a space between separate messages
    that do not already have one (the stored text is left as it is)."""
    said = text
    for sentence in spoken:
        if said and sentence and not said[-1].isspace() and not sentence[0].isspace():
            said += " "
        said += sentence
    return said


def _recovered_line(call: Row) -> str:
    where = f"turn {call['turn_index']} round {call['round_index']}"
    return f"{call['event_name']} {call['event_id']} ({where}): {_outcome(call)}"


def _outcome(call: Row) -> str:
    return str(call.get("note") or call["status"])


def _print_tool(
    console: Console,
    tool: Row | None,
    event: Row | None,
    event_id: str,
    uncertain: Row | None = None,
    raw: str | None = None,
) -> None:
    name = (tool or event or {}).get("event_name") or "?"
    status = _tool_status(tool, uncertain)
    console.print(
        Text.assemble(
            ("  ⚡ ", "cyan"),
            (str(name), "cyan"),
            f" {event_id} ",
            (status, _STATUS_STYLES.get(status, "")),
        )
    )
    arguments = (tool or event or {}).get("arguments")
    if raw is not None and _misread(raw, arguments):
        console.print(Text(f"    arguments: {_written(raw)}", style="yellow"))
    else:
        console.print(Text(f"    arguments: {_shown_arguments(tool, event, uncertain)}"))
    result = (tool or {}).get("result")
    if result is not None:
        console.print(Text(f"    result: {short(_text(result))}", style="magenta"))
    if tool and tool.get("policy"):
        latency = tool.get("latency_ms")
        ran = "not run" if latency is None or _generation_failed(event) else f"{latency} ms"
        console.print(Text(f"    policy {tool['policy']} · {ran}", style="dim"))


def _tool_status(tool: Row | None, uncertain: Row | None) -> str:
    if uncertain is not None and uncertain["status"] in UNCERTAIN_STATUSES:
        return f"uncertain: {_outcome(uncertain)}"
    if uncertain is not None:  # it ran: the ledger recorded its result
        return f"{uncertain['status']} (recorded before the interruption)"
    if (tool or {}).get("failure_reason") == "outcome_unknown":  # as the ledger has it
        return "uncertain: outcome unknown — check before repeating"
    status = str((tool or {}).get("status") or "not run")  # no execution, nothing in the ledger
    reason = (tool or {}).get("failure_reason")
    return f"{status} ({reason})" if status == "failed" and reason else status


def _misread(raw: str, arguments: object) -> bool:
    """The call's text is not the JSON object of the arguments it ran with."""
    if not raw.strip():
        return bool(arguments)  # no text: the empty arguments
    try:
        return bool(json.loads(raw) != (arguments or {}))
    except ValueError:
        return True


def _written(raw: str) -> str:
    """The model's arguments text, as it wrote it, and why the call could not use it."""
    try:
        json.loads(raw)
    except ValueError:
        return f"{short(raw)} (not valid JSON, as the model wrote them)"
    return f"{short(raw)} (not a JSON object, as the model wrote them)"


def _shown_arguments(tool: Row | None, event: Row | None, uncertain: Row | None) -> str:
    """The call's arguments as recorded, else as the effect ledger dispatched them."""
    arguments = _arguments(tool, event)
    dispatched = (uncertain or {}).get("arguments")
    if arguments.startswith("not recorded") and dispatched:
        return f"{short(json.dumps(dispatched, ensure_ascii=False))} (in the effect ledger)"
    return arguments


def _arguments(tool: Row | None, event: Row | None) -> str:
    arguments = (tool or {}).get("arguments") or (event or {}).get("arguments")
    how = (event or {}).get("resolved_by")
    shown = short(json.dumps(arguments, ensure_ascii=False)) if arguments else None
    if shown is None:
        shown = (
            "not recorded" if how in (None, "argument_generation", "argument_fallback") else "{}"
        )
    via = (event or {}).get("argument_call") or (event or {}).get("resolver")
    if _generation_failed(event):  # no arguments came: the tool never ran
        return f"none (argument generation failed: {via})" if via else "none"
    if how:
        shown += f" (resolved by {how.replace('_', ' ')}{f': {via}' if via else ''})"
    return shown


def _generation_failed(event: Row | None) -> bool:
    failures = (event or {}).get("argument_failures") or []
    return any(failure.get("stage") == "generation" for failure in failures)


def _call_line(call: Row) -> str:
    role = _ROLE_LABELS.get(str(call["role"]), str(call["role"]))
    usage, timings = call.get("usage"), call.get("timings") or {}
    tokens = "tokens not reported"
    if usage:
        tokens = f"{usage['total_tokens']} tok ({usage['cached_tokens']} cached)"
    ttft, attempts = timings.get("provider_first_chunk_ms"), timings.get("attempts") or 1
    first = f" · provider TTFT {ttft:.0f} ms" if isinstance(ttft, int | float) else ""
    first += f" over {attempts} attempts" if attempts > 1 else ""  # retries and backoff in it
    first += " · cold" if call.get("cold") else ""
    if call.get("finish_reason") in ("length", "content_filter"):
        first += f" · cut off ({call['finish_reason']})"
    status, reason = call.get("status"), call.get("failure_reason")
    if status not in ("succeeded", None):  # failed, cancelled: as its record says
        first += f" · {status}" + (f" ({reason})" if reason and reason != status else "")
    cost = call.get("cost") or {}
    price = usd(cost.get("amount_usd"))
    if cost.get("amount_usd") is None and cost.get("unknown_reason"):
        price += f" ({str(cost['unknown_reason']).replace('_', ' ')})"
    return f"{role} call {call['metric_key']} · {call.get('model')}{first} · {tokens} · {price}"


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
