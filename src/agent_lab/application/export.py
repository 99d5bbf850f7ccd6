"""The one export schema of a session (``export_version`` 1): session, turns, transcript
and turn records, the same from every interface.

``build_export`` is pure: it takes the store's rows. ``export_session`` reads them
through the ``SessionStore`` port (synchronously: call it from a worker thread when an
event loop is running). ``SessionExport.model_dump(mode="json")`` is the JSON document;
amounts of money are decimal strings, ``null`` when unknown. The schema is documented in
``docs/runtime.md`` ("Exports").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_lab.application.pricing import PriceTable
from agent_lab.application.record import RECORD_VERSION, CostSummary, TurnRecord, session_records
from agent_lab.application.record.reading import unrecovered_turn_rows
from agent_lab.application.session_store import ClaimListing, SessionStore
from agent_lab.domain.errors import SessionNotFound

EXPORT_VERSION: Literal[1] = 1


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ExportedSession(_Row):
    session_id: str
    title: str
    mode: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    config: dict[str, Any] = Field(default_factory=dict)
    """The session's config snapshot (the request without its turn fields; no secrets)."""


class ExportedTurn(_Row):
    turn_index: int
    status: str | None = None
    user_message: str | None = None
    wall_time_ms: int | None = None
    round_count: int | None = None
    failure_reason: str | None = None
    failure_message: str | None = None
    started_at: str | None = None
    completed_at: str | None = None


class ExportedMessage(_Row):
    """One message of the stored (visible) transcript."""

    seq: int | None = None
    turn_index: int
    role: str
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    created_at: str | None = None


class SessionExport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    export_version: Literal[1] = EXPORT_VERSION
    record_version: Literal[1] = RECORD_VERSION
    session: ExportedSession
    turns: list[ExportedTurn]
    messages: list[ExportedMessage]
    records: list[TurnRecord]
    cost: CostSummary
    """The session's cost: the turns' costs summed (unknown when any call is)."""


def build_export(
    session: Mapping[str, Any],
    turns: Iterable[Mapping[str, Any]],
    messages: Iterable[Mapping[str, Any]],
    audits: Iterable[Mapping[str, Any]],
    *,
    prices: PriceTable | None = None,
    stopped: bool = False,
    ledger: Iterable[Mapping[str, Any]] = (),
) -> SessionExport:
    """The export of one session from its stored rows; ``stopped`` and ``ledger`` as
    in ``session_records`` (a turn row still ``running`` reads as its record then)."""
    turn_rows: list[Mapping[str, Any]] = list(turns)
    session_id = str(session["id"])
    records = session_records(
        audits,
        session_id=session_id,
        turns=turn_rows,
        prices=prices,
        stopped=stopped,
        ledger=ledger,
    )
    if stopped:
        turn_rows = list(unrecovered_turn_rows(turn_rows, records))
    return SessionExport(
        session=ExportedSession.model_validate({**session, "session_id": session_id}),
        turns=[ExportedTurn.model_validate(dict(row)) for row in turn_rows],
        messages=[ExportedMessage.model_validate(dict(row)) for row in messages],
        records=records,
        cost=session_cost(records),
    )


def export_session(
    store: SessionStore, session_id: str, *, prices: PriceTable | None = None
) -> SessionExport:
    """Read one session through the store port and export it.

    A turn still open in a session no live runtime holds (its process died) reads as
    interrupted, not yet recovered, and its calls as the effect ledger has them.

    Raises:
        SessionNotFound: no such session.
    """
    session = store.get_session(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    stopped = not_held(store, session_id)
    return build_export(
        session,
        store.list_turns(session_id),
        store.list_messages(session_id),
        store.list_audit_logs(session_id),
        prices=prices,
        stopped=stopped,
        ledger=store.list_batches(session_id) if stopped else (),
    )


def not_held(store: SessionStore, session_id: str) -> bool:
    """No live runtime (of any process) holds the session now, as far as the store can
    tell (a store that cannot list claims is taken as holding it)."""
    return isinstance(store, ClaimListing) and session_id not in store.live_claims()


def read_turn_record(
    store: SessionStore, session_id: str, turn_index: int, *, prices: PriceTable | None = None
) -> TurnRecord | None:
    """One turn's record through the store port, reading that turn's audits only;
    ``None`` when the session has no such turn."""
    turns = [row for row in store.list_turns(session_id) if row["turn_index"] == turn_index]
    audits = store.list_audit_logs(session_id, turn_index=turn_index)
    records = session_records(audits, session_id=session_id, turns=turns, prices=prices)
    return records[0] if records else None


def session_cost(records: Sequence[TurnRecord]) -> CostSummary:
    """The turns' costs added up, in total and by role; unknown parts stay unknown."""
    known = sum((r.cost.known_usd for r in records), Decimal(0))
    unpriced = sum(r.cost.unpriced_calls for r in records)
    roles = {role for r in records for role in r.cost.by_role}
    by_role: dict[str, Decimal | None] = {}
    for role in sorted(roles):
        parts = [r.cost.by_role.get(role, Decimal(0)) for r in records]
        known_parts = [p for p in parts if p is not None]
        by_role[role] = sum(known_parts, Decimal(0)) if len(known_parts) == len(parts) else None
    return CostSummary(
        total_usd=None if unpriced else known,
        known_usd=known,
        unpriced_calls=unpriced,
        by_role=by_role,
    )
