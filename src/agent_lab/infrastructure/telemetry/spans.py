"""Spans as plain data: what the converter produces and the exporters send.

Ids are derived from the session id and the span's place in the turn record, so the
same record always yields the same trace: the live export and a later
``sessions export --format otlp`` produce identical spans.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int]
Attributes = Mapping[str, AttributeValue]
SpanKind = Literal["internal", "client"]
StatusCode = Literal["unset", "ok", "error"]

NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True)
class SpanData:
    """One finished span; times are Unix nanoseconds."""

    trace_id: int
    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Attributes
    kind: SpanKind = "internal"
    status: StatusCode = "unset"
    status_message: str | None = None
    events: tuple[SpanEvent, ...] = ()


class SpanOutcome(TypedDict, total=False):
    """The fields of a ``SpanData`` that have defaults."""

    kind: SpanKind
    status: StatusCode
    status_message: str | None
    events: tuple[SpanEvent, ...]


def trace_id_of(session_id: str) -> int:
    """The trace of a session (128 bits, never zero)."""
    return _digest(f"agent-lab/trace/{session_id}", 16)


def span_id_of(session_id: str, path: str) -> int:
    """The span at ``path`` (e.g. ``turn-2/round-1/chat``) of a session (64 bits)."""
    return _digest(f"agent-lab/span/{session_id}/{path}", 8)


def _digest(text: str, size: int) -> int:
    value = int.from_bytes(hashlib.sha256(text.encode()).digest()[:size], "big")
    return value or 1
