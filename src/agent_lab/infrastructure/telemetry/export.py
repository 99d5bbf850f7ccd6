"""Spans from what the store kept: a whole session, or the turns a live export ends.

The store's audit rows give each turn's audits and its anchor; its call metrics give
tokens, latencies and argument calls. ``sessions export --format otlp`` sends
``session_spans``; the live export converts the audits it saw stream with the same
``turn_spans`` and the same anchors and metrics from the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application.session_store import SessionStore
from agent_lab.infrastructure.telemetry.convert import (
    ConvertOptions,
    session_span,
    turn_end,
    turn_spans,
)
from agent_lab.infrastructure.telemetry.record import Audit, TurnRecord, anchors, turns_of
from agent_lab.infrastructure.telemetry.spans import NS_PER_MS, SpanData


@dataclass
class StoredSession:
    """What the store holds about a session, read incrementally (``after_id``)."""

    session_id: str
    title: str = ""
    mode: str = "dual_agent"
    anchors: dict[int, int] = field(default_factory=dict)
    turns: dict[int, list[Audit]] = field(default_factory=dict)
    calls: list[Mapping[str, Any]] = field(default_factory=list)
    last_audit_id: int = 0

    def refresh(self, store: SessionStore) -> None:
        """Read what was added since the last refresh (blocking: use a worker thread)."""
        session = store.get_session(self.session_id) or {}
        self.title = str(session.get("title") or "")
        self.mode = str(session.get("mode") or self.mode)
        rows = store.list_audit_logs(self.session_id, after_id=self.last_audit_id)
        if rows:
            self.last_audit_id = int(rows[-1]["id"])
        for turn, start in anchors(rows).items():
            self.anchors[turn] = min(self.anchors.get(turn, start), start)
        for turn, audits in turns_of(rows).items():
            self.turns.setdefault(turn, []).extend(audits)
        self.calls = list(store.usage_summary(self.session_id).get("calls") or [])

    def record(self, turn_index: int, audits: Sequence[Audit] | None = None) -> TurnRecord:
        """A turn's record; ``audits`` (the streamed ones) replace the stored ones."""
        return TurnRecord(
            session_id=self.session_id,
            turn_index=turn_index,
            mode=self.mode,
            started_ns=self.anchors.get(turn_index, 0),
            audits=list(audits if audits is not None else self.turns.get(turn_index, [])),
            calls=[call for call in self.calls if call.get("turn_index") == turn_index],
        )

    def root_span(self) -> SpanData | None:
        """The session span, from the first stored turn's start to the last one's end."""
        if not self.anchors:
            return None
        bounds = [
            (start, start + turn_end(self.record(turn)) * NS_PER_MS)
            for turn, start in self.anchors.items()
        ]
        return session_span(
            self.session_id,
            title=self.title,
            mode=self.mode,
            start_ns=min(start for start, _ in bounds),
            end_ns=max(end for _, end in bounds),
            turn_count=len(bounds),
        )


def session_spans(
    store: SessionStore, session_id: str, options: ConvertOptions | None = None
) -> list[SpanData]:
    """Every span of a stored session: the session span, then each turn's tree."""
    stored = StoredSession(session_id)
    stored.refresh(store)
    root = stored.root_span()
    spans = [root] if root is not None else []
    for turn in sorted(stored.anchors):
        spans += turn_spans(stored.record(turn), options)
    return spans
