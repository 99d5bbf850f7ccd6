"""What a replay compares: each turn's visible text, events, tool results and rounds.

Both the recorded and the replayed session are read back through the same store API.
Volatile values (ids, timestamps, generated ids inside strings) are masked first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_lab.application.session_store import SessionStore

VOLATILE_KEYS = frozenset({"id", "created_at", "updated_at", "timestamp", "landed_at"})
_VOLATILE_VALUE = re.compile(r"\b(?:evt|call|cal|note|chatcmpl)[_-][0-9A-Za-z]{6,}\b")
_MAX_SHOWN = 160


@dataclass(frozen=True)
class TurnRecord:
    """What is compared of one turn."""

    turn_index: int
    status: str | None
    round_count: int | None
    text: str
    events: list[Any] = field(default_factory=list)
    tool_results: list[Any] = field(default_factory=list)


def normalize(value: Any, ignore: frozenset[str] = frozenset()) -> Any:
    """``value`` with volatile ids and timestamps replaced, JSON strings parsed.

    Keys named ``id``, ``*_id``, ``created_at``, ``updated_at``, ``timestamp`` (and
    ``ignore``) become ``"<volatile>"``; generated ids inside strings become ``<id>``.
    """
    if isinstance(value, dict):
        return {
            key: "<volatile>" if _volatile(key, ignore) else normalize(item, ignore)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [normalize(item, ignore) for item in value]
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                return normalize(orjson.loads(stripped), ignore)
            except orjson.JSONDecodeError:
                pass
        return _VOLATILE_VALUE.sub("<id>", value)
    return value


def _volatile(key: str, ignore: frozenset[str]) -> bool:
    return key in VOLATILE_KEYS or key.endswith("_id") or key in ignore


def turn_records(
    store: SessionStore, session_id: str, ignore: frozenset[str] = frozenset()
) -> list[TurnRecord]:
    """Read back every turn of a session in the form that is compared."""
    summary = store.usage_summary(session_id)
    texts: dict[int, str] = {}
    for message in store.list_messages(session_id):
        if message.get("role") == "assistant" and message.get("content"):
            index = int(message["turn_index"])
            texts[index] = texts.get(index, "") + str(message["content"])
    events: dict[int, list[Any]] = {}
    for audit in store.list_audit_logs(session_id):
        if audit.get("event") == "chat_event_detected":
            details = audit.get("details") or {}
            event = details.get("event") or {}
            entry = [details.get("round_index"), event.get("name"), event.get("arguments")]
            events.setdefault(int(audit.get("turn_index") or 0), []).append(
                normalize(entry, ignore)
            )
    results = _tool_results(store.list_batches(session_id), ignore)
    return [
        TurnRecord(
            turn_index=int(turn["turn_index"]),
            status=turn.get("status"),
            round_count=turn.get("round_count"),
            text=texts.get(int(turn["turn_index"]), ""),
            events=events.get(int(turn["turn_index"]), []),
            tool_results=results.get(int(turn["turn_index"]), []),
        )
        for turn in summary["turns"]
    ]


def _tool_results(
    batches: Iterable[Mapping[str, Any]], ignore: frozenset[str]
) -> dict[int, list[Any]]:
    results: dict[int, list[Any]] = {}
    for batch in batches:
        for call in batch.get("calls") or []:
            event = call.get("event") or {}
            result = call.get("result") or {}
            entry = [batch.get("round_index"), event.get("name"), call.get("state")]
            entry.append(normalize(result.get("content"), ignore))
            results.setdefault(int(batch.get("turn_index") or 0), []).append(entry)
    return results


def compare_turns(recorded: Sequence[TurnRecord], replayed: Sequence[TurnRecord]) -> list[str]:
    """Human-readable differences between two sessions' turns (empty when identical)."""
    differences: list[str] = []
    mine = {turn.turn_index: turn for turn in replayed}
    for turn in recorded:
        other = mine.pop(turn.turn_index, None)
        if other is None:
            differences.append(f"turn {turn.turn_index}: recorded, but not reached in the replay")
            continue
        differences += _turn_differences(turn, other)
    differences += [f"turn {index}: replayed, but not in the recording" for index in sorted(mine)]
    return differences


def _turn_differences(recorded: TurnRecord, replayed: TurnRecord) -> list[str]:
    where = f"turn {recorded.turn_index}"
    found = []
    for name in ("status", "round_count"):
        before, after = getattr(recorded, name), getattr(replayed, name)
        if before != after:
            found.append(f"{where}: {name.replace('_', ' ')} {before} → {after}")
    if recorded.text != replayed.text:
        found.append(f"{where}: visible text differs\n{_text_diff(recorded.text, replayed.text)}")
    if recorded.events != replayed.events:
        found.append(f"{where}: events {_shown(recorded.events)} → {_shown(replayed.events)}")
    for before, after in _pairs(recorded.tool_results, replayed.tool_results):
        if before != after:
            found.append(f"{where}: tool result {_shown(before)} → {_shown(after)}")
    return found


def _pairs(left: Sequence[Any], right: Sequence[Any]) -> Iterable[tuple[Any, Any]]:
    for index in range(max(len(left), len(right))):
        yield (
            left[index] if index < len(left) else None,
            right[index] if index < len(right) else None,
        )


def _text_diff(before: str, after: str) -> str:
    at = next(
        (i for i, (a, b) in enumerate(zip(before, after, strict=False)) if a != b),
        min(len(before), len(after)),
    )
    start = max(0, at - 40)
    return (
        f"    recorded: …{before[start : start + _MAX_SHOWN]!r}\n"
        f"    replayed: …{after[start : start + _MAX_SHOWN]!r}"
    )


def _shown(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def differing_result_keys(
    recorded: Sequence[TurnRecord], replayed: Sequence[TurnRecord]
) -> list[str]:
    """The keys inside tool-result contents whose values differ, sorted."""
    mine = {turn.turn_index: turn for turn in replayed}
    keys: set[str] = set()
    for turn in recorded:
        other = mine.get(turn.turn_index)
        if other is None:
            continue
        for before, after in _pairs(turn.tool_results, other.tool_results):
            keys |= _differing_keys(_content(before), _content(after))
    return sorted(keys)


def _content(entry: Any) -> Any:
    return entry[-1] if isinstance(entry, list) and entry else None


def _differing_keys(before: Any, after: Any) -> set[str]:
    if not isinstance(before, dict) or not isinstance(after, dict):
        return set()
    found: set[str] = set()
    for key in before.keys() | after.keys():
        left, right = before.get(key), after.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            found |= _differing_keys(left, right)
        elif left != right:
            found.add(str(key))
    return found
