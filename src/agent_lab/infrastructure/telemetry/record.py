"""A turn's record as the converter reads it: its audits, its call metrics, its anchor.

Audits carry turn-relative times (``details.turn_elapsed_ms``); the anchor is the
turn's start as Unix nanoseconds, taken from the stored audit rows (their write time
less their offset, the earliest of them), so the live and the later export place the
turn at the same instant.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Unpack

from agent_lab.infrastructure.telemetry.spans import (
    NS_PER_MS,
    Attributes,
    SpanData,
    SpanOutcome,
    span_id_of,
    trace_id_of,
)

if TYPE_CHECKING:
    from agent_lab.infrastructure.telemetry.convert import ConvertOptions

Audit = Mapping[str, Any]
"""``{"event": name, "details": {...}}``, as on the output queue or in the store."""

_ROUND_OF_SCOPE = re.compile(r":round-(\d+)$")
TURN_AUDITS = frozenset({"session_started", "turn_started", "turn_completed", "session_finished"})


@dataclass(frozen=True)
class TurnRecord:
    """Everything the converter needs about one turn."""

    session_id: str
    turn_index: int
    mode: str
    started_ns: int
    audits: Sequence[Audit]
    calls: Sequence[Mapping[str, Any]] = ()
    """The turn's call metrics (``usage_summary()["calls"]`` rows), when a store has them."""

    @property
    def trace_id(self) -> int:
        return trace_id_of(self.session_id)

    def span_id(self, path: str) -> int:
        return span_id_of(self.session_id, f"turn-{self.turn_index}/{path}")

    def at(self, elapsed_ms: int | float) -> int:
        """Unix nanoseconds of a turn-relative offset."""
        return self.started_ns + round(elapsed_ms * NS_PER_MS)

    def span(
        self,
        span: int | str,
        parent_id: int | None,
        name: str,
        start_ms: float,
        end_ms: float,
        attributes: Attributes,
        **outcome: Unpack[SpanOutcome],
    ) -> SpanData:
        """A span of this turn: ``span`` is its id or its ``span_id`` path, times turn-relative."""
        span_id = self.span_id(span) if isinstance(span, str) else span
        start_ns, end_ns = self.at(start_ms), self.at(end_ms)
        return SpanData(
            self.trace_id, span_id, parent_id, name, start_ns, end_ns, attributes, **outcome
        )

    def metric(self, key: str) -> Mapping[str, Any] | None:
        return _metrics_by_key(self.calls).get(key)

    def unfinished_call(self, round_index: int) -> Mapping[str, Any] | None:
        """What the turn's close measured of the chat call of ``round_index`` it ended
        in the middle of (``unfinished_call``: ``visible_ttft_ms`` and ``call``)."""
        for audit in self.audits:
            if audit.get("event") in ("turn_completed", "session_finished"):
                cut = details(audit).get("unfinished_call")
                if isinstance(cut, Mapping) and cut.get("round_index") == round_index:
                    return cut
        return None


@dataclass
class RoundAudits:
    """One round's audits by name (repeated ones, e.g. ``chat_event_detected``, listed)."""

    index: int
    first: dict[str, Audit] = field(default_factory=dict)
    all: dict[str, list[Audit]] = field(default_factory=dict)

    def add(self, audit: Audit) -> None:
        name = str(audit["event"])
        self.first.setdefault(name, audit)
        self.all.setdefault(name, []).append(audit)

    def get(self, name: str) -> Mapping[str, Any] | None:
        audit = self.first.get(name)
        return details(audit) if audit is not None else None

    def every(self, name: str) -> list[Mapping[str, Any]]:
        return [details(audit) for audit in self.all.get(name, [])]


def details(audit: Audit) -> Mapping[str, Any]:
    value = audit.get("details")
    return value if isinstance(value, Mapping) else {}


def elapsed(audit_details: Mapping[str, Any] | None) -> int | None:
    if audit_details is None:
        return None
    value = audit_details.get("turn_elapsed_ms")
    return int(value) if isinstance(value, int | float) else None


def offset(audit_details: Mapping[str, Any] | None, default: int) -> int:
    """``elapsed``, or ``default`` when the audit is missing."""
    value = elapsed(audit_details)
    return default if value is None else value


def mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def round_of(audit_details: Mapping[str, Any]) -> int | None:
    """The round an audit belongs to: its ``round_index``, else its batch scope's."""
    value = audit_details.get("round_index")
    if isinstance(value, int):
        return value
    match = _ROUND_OF_SCOPE.search(str(audit_details.get("scope") or ""))
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class RoundView:
    """What every span builder of a round reads: the turn's record, the round's audits
    and the conversion options."""

    record: TurnRecord
    audits: RoundAudits
    options: ConvertOptions


def rounds_of(audits: Iterable[Audit]) -> list[RoundAudits]:
    """The turn's rounds in order, each with its audits."""
    rounds: dict[int, RoundAudits] = {}
    for audit in audits:
        if audit.get("event") in TURN_AUDITS:
            continue
        index = round_of(details(audit))
        if index is not None:
            rounds.setdefault(index, RoundAudits(index)).add(audit)
    return [rounds[index] for index in sorted(rounds)]


def _metrics_by_key(calls: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {str(call.get("metric_key")): call for call in calls}


def anchors(rows: Iterable[Mapping[str, Any]]) -> dict[int, int]:
    """Each turn's start (Unix ns) from stored audit rows: ``created_at - elapsed``, earliest."""
    found: dict[int, int] = {}
    for row in rows:
        turn = row.get("turn_index")
        offset = elapsed(details(row))
        if not isinstance(turn, int) or offset is None or not row.get("created_at"):
            continue
        written = _iso_ns(str(row["created_at"]))
        start = written - offset * NS_PER_MS
        found[turn] = min(found.get(turn, start), start)
    return found


def turns_of(rows: Iterable[Mapping[str, Any]]) -> dict[int, list[Audit]]:
    """Stored audit rows grouped by turn, in order."""
    turns: dict[int, list[Audit]] = {}
    for row in rows:
        turn = row.get("turn_index")
        if isinstance(turn, int):
            turns.setdefault(turn, []).append({"event": row["event"], "details": details(row)})
    return turns


def _iso_ns(text: str) -> int:
    moment = datetime.fromisoformat(text)
    return round(moment.timestamp() * 1_000_000) * 1_000
