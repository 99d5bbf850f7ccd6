"""Rules and record shapes of the session store: pure functions, no I/O.

Ids, titles, JSON encoding of stored values, rendering of journal rows, and the
``usage_summary`` arithmetic. The in-memory store is the SQLite store on ``:memory:``,
so both share them by construction.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any, Final

import orjson

from agent_lab.domain.errors import SessionBusy, UsageError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.json_values import JsonTextList, json_default, json_text
from agent_lab.domain.messages import ChatMessage

TITLE_LIMIT: Final = 80
MODEL_CALL_KINDS: Final = ("chat", "argument_fallback", "argument_generation")
TOKEN_FIELDS: Final = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")

TurnFacts = tuple[Any, Any, Any, Any, Any, Any]
"""A turn's ``(status, wall_time_ms, round_count, user_message, failure_reason,
failure_message)``."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_id() -> str:
    return uuid.uuid4().hex


def checked_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not session_id.strip():
        raise UsageError(f"a session id must be a non-empty string, not {session_id!r}")
    return session_id


def session_title(title: str) -> str:
    """The first message with whitespace folded, cut to 80 characters (DESIGN.md §8)."""
    return " ".join(title.split())[:TITLE_LIMIT]


def claim_with_wait(
    try_claim: Callable[[], tuple[str | None, str]],
    session_id: str,
    wait_seconds: float,
    poll_seconds: float,
) -> str:
    """Call ``try_claim`` until it returns a token or ``wait_seconds`` have passed.

    Raises:
        SessionBusy: naming the holder ``try_claim`` reported last.
    """
    deadline = time.monotonic() + max(wait_seconds, 0.0)
    while True:
        token, holder = try_claim()
        if token is not None:
            return token
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SessionBusy(session_id, holder)
        time.sleep(min(poll_seconds, remaining))


def check_positive(value: float, name: str) -> None:
    if not value > 0 or math.isinf(value):
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")


def dumps(value: object, what: str) -> str:
    """JSON text of a stored value; a value JSON cannot hold is a ``UsageError``.

    The text of ``json_text`` (the same conversions), written by orjson: a list that
    kept its JSON texts (``JsonTextList``, e.g. provider chunks) is written as those
    texts, unchanged. What orjson refuses (keys that are not strings, lone surrogates,
    integers past 64 bits) is written by ``json_text`` as before; a float that is not
    finite, which JSON cannot hold, is written as ``null``.
    """
    try:
        return orjson.dumps(value, default=_orjson_default, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        return json_text(value, what)


_ORJSON_OPTIONS: Final = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
"""Dataclasses, dates and subclasses of the JSON types go to ``_orjson_default``, so they
become what ``json_text`` makes of them."""


def _orjson_default(value: object) -> object:
    if isinstance(value, JsonTextList):
        return orjson.Fragment(b"[" + b",".join(value.texts) + b"]")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return json_default(value)


def message_json(message: ChatMessage) -> str:
    return dumps(message.model_dump(), f"{message.role} message")


def check_unique_events(events: Sequence[ToolCallEvent]) -> None:
    seen: set[str] = set()
    for event in events:
        if event.id in seen:
            raise UsageError(f"tool call id {event.id!r} appears twice in one batch")
        seen.add(event.id)


def rendered_journal_message(
    stored_json: str, turn_index: int, created_at: str | None, state: str
) -> dict[str, Any]:
    """A journal row shown as a message by ``list_messages(include_pending=True)``."""
    message = json.loads(stored_json)
    return {
        "seq": None,
        "turn_index": turn_index,
        **{key: message[key] for key in ("role", "content", "name", "tool_call_id")},
        "tool_calls": message["tool_calls"],
        "created_at": created_at,
        "state": state,
    }


def tally(calls: Iterable[dict[str, Any]]) -> dict[str, int]:
    names = (*TOKEN_FIELDS, "model_calls", "tool_count", "fallback_count")
    totals = dict.fromkeys((*names, "unreported_usage_calls"), 0)
    for call in calls:
        for field in TOKEN_FIELDS:
            totals[field] += int(call[field])
        model_call = call["call_kind"] in MODEL_CALL_KINDS
        totals["model_calls"] += model_call
        totals["unreported_usage_calls"] += model_call and not call["usage_reported"]
        totals["tool_count"] += call["call_kind"] == "tool_execution"
        totals["fallback_count"] += call["call_kind"] == "argument_fallback"
    return totals


def summarize(calls: list[dict[str, Any]], turns: Mapping[int, TurnFacts]) -> dict[str, Any]:
    """``usage_summary``: the calls, per-turn totals and session totals (DESIGN.md §7)."""
    indexes = sorted(set(turns) | {call["turn_index"] for call in calls})
    rows = []
    for index in indexes:
        facts = turns.get(index, (None,) * 6)
        status, wall_time_ms, round_count, user_message, reason, message = facts
        rows.append(
            {
                "turn_index": index,
                "status": status,
                "turn_wall_time_ms": wall_time_ms,
                "round_count": round_count,
                **tally(call for call in calls if call["turn_index"] == index),
                "user_message": user_message,
                "failure_reason": reason,
                "failure_message": message,
            }
        )
    session = {
        **tally(calls),
        "turn_count": len(turns),
        "turn_wall_time_ms": sum(facts[1] or 0 for facts in turns.values()),
    }
    return {"calls": calls, "turns": rows, "session": session}
