"""``InMemorySessionStore``: the ``SessionStore`` port in process memory, for tests.

It behaves like ``agent_lab.infrastructure.sqlite_store.SQLiteSessionStore`` (the same
dicts, ordering, errors, JSON round trips, journal and claim rules; one behaviour suite
runs against both) but keeps nothing after the process ends and never fails for
storage reasons. Every method is atomic: input is checked and encoded before anything
changes. It is thread-safe; claims work between runtimes of one process.

For example::

    store = InMemorySessionStore()
    runtime = DebugRuntime(client, session_store=store)
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Final, get_args

from agent_lab.application._store_records import (
    check_positive,
    check_unique_events,
    checked_id,
    claim_with_wait,
    dumps,
    message_json,
    new_id,
    now_iso,
    rendered_journal_message,
    session_title,
    summarize,
)
from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.session_store import BatchState, CallMetric, CallStatus
from agent_lab.domain.errors import SessionBusy, SessionNotFound, UsageError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

__all__ = ["InMemorySessionStore"]

_CLAIM_POLL_SECONDS: Final = 0.05
_CALL_STATUSES: Final = get_args(CallStatus)
_ABANDON_STATES: Final = ("cancelled", "failed")


@dataclasses.dataclass
class _Turn:
    user_message: str
    started_at: str
    status: str = "running"
    wall_time_ms: int | None = None
    round_count: int | None = None
    completed_at: str | None = None


@dataclasses.dataclass
class _Call:
    event: str
    event_id: str
    state: str = "pending"
    result: str | None = None
    landed_at: str | None = None


@dataclasses.dataclass
class _Batch:
    id: str
    session_id: str
    turn_index: int
    round_index: int
    scope: str
    mode: str
    assistant: str | None
    created_at: str
    calls: list[_Call]
    state: str = "pending"
    finished_at: str | None = None


@dataclasses.dataclass(frozen=True)
class _Claim:
    token: str
    owner: str
    pid: int
    hostname: str
    expires_at: float

    def describe(self, now: float) -> str:
        left = max(0.0, self.expires_at - now)
        return f"{self.owner}, pid {self.pid} on {self.hostname}, lease ends in {left:.0f} s"


@dataclasses.dataclass
class _Session:
    id: str
    title: str
    config: str
    created_at: str
    updated_at: str
    turns: dict[int, _Turn] = dataclasses.field(default_factory=dict)
    messages: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    audits: list[tuple[int, int | None, str, str, str]] = dataclasses.field(default_factory=list)
    metrics: dict[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    batches: list[_Batch] = dataclasses.field(default_factory=list)
    claim: _Claim | None = None


class InMemorySessionStore:
    """A ``SessionStore`` that lives in memory; same behaviour as the SQLite store."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._batches: dict[str, _Batch] = {}
        self._audit_ids = itertools.count(1)
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemorySessionStore({len(self._sessions)} sessions)"

    def __enter__(self) -> InMemorySessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Refuse further calls with ``UsageError``. Idempotent; the data is kept."""
        with self._lock:
            self._closed = True

    # ------------------------------------------------------------------ sessions

    def create_session(
        self, title: str, config: dict[str, Any], session_id: str | None = None
    ) -> str:
        """Create a session and return its id (a fresh uuid4 hex when not given).

        Raises:
            UsageError: a session with ``session_id`` already exists.
        """
        session_id = new_id() if session_id is None else checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._locked():
            if session_id in self._sessions:
                raise UsageError(f"session {session_id!r} already exists")
            self._insert_session(session_id, title, config_json)
        return session_id

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._locked():
            session = self._sessions.get(session_id)
            if session is None:
                session = self._insert_session(session_id, title, config_json)
            return _session_dict(session)

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Return the session summary dict, or ``None`` when there is no such session."""
        with self._locked():
            session = self._sessions.get(session_id)
            return None if session is None else _session_dict(session)

    def list_sessions(self) -> list[dict[str, Any]]:
        """Return every session summary, newest first."""
        with self._locked():
            return [_session_dict(session) for session in reversed(self._sessions.values())]

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything recorded for it.

        Raises:
            SessionNotFound: no session has that id.
        """
        with self._locked():
            session = self._session(session_id)
            for batch in session.batches:
                del self._batches[batch.id]
            del self._sessions[session_id]

    # --------------------------------------------------------------------- turns

    def next_turn_index(self, session_id: str) -> int:
        """Return one more than the highest recorded turn index (1 for a new session)."""
        with self._locked():
            return max(self._session(session_id).turns, default=0) + 1

    def start_turn(
        self,
        session_id: str,
        turn_index: int,
        user_message: str,
        *,
        messages: list[ChatMessage] | None = None,
    ) -> None:
        """Record a running turn and append ``messages`` with it, atomically.

        Raises:
            UsageError: the turn already exists.
        """
        encoded = [message_json(message) for message in messages or []]
        with self._locked():
            session = self._session(session_id)
            if turn_index in session.turns:
                raise UsageError(f"turn {turn_index} of session {session_id!r} already exists")
            now = now_iso()
            session.turns[turn_index] = _Turn(user_message=user_message, started_at=now)
            session.updated_at = now
            _append(session, turn_index, encoded)

    def complete_turn(
        self,
        session_id: str,
        turn_index: int,
        *,
        status: str = "completed",
        wall_time_ms: int | None = None,
        round_count: int | None = None,
    ) -> None:
        """Set a turn's final status, wall time and round count.

        Raises:
            UsageError: the turn was never started.
        """
        with self._locked():
            session = self._session(session_id)
            turn = session.turns.get(turn_index)
            if turn is None:
                raise UsageError(f"turn {turn_index} of session {session_id!r} was never started")
            now = now_iso()
            turn.status, turn.wall_time_ms, turn.round_count = status, wall_time_ms, round_count
            turn.completed_at = session.updated_at = now

    # ------------------------------------------------------- visible transcript

    def append_message(self, session_id: str, turn_index: int, message: ChatMessage) -> int:
        """Append one message to the visible transcript; return its ``seq``."""
        return self.append_messages(session_id, turn_index, [message])[0]

    def append_messages(
        self, session_id: str, turn_index: int, messages: list[ChatMessage]
    ) -> list[int]:
        """Append messages atomically; return their ``seq`` numbers."""
        encoded = [message_json(message) for message in messages]
        with self._locked():
            return _append(self._session(session_id), turn_index, encoded)

    def list_messages(self, session_id: str, include_pending: bool = False) -> list[dict[str, Any]]:
        """Return the visible transcript in order (see ``SQLiteSessionStore``)."""
        with self._locked():
            session = self._session(session_id)
            messages = [_copy(message) for message in session.messages]
            if not include_pending:
                return messages
            for message in messages:
                message["state"] = "committed"
            return messages + list(_uncommitted_messages(session.batches))

    # ------------------------------------------------------- audits and metrics

    def append_audit(
        self, session_id: str, turn_index: int | None, event: str, details: dict[str, Any]
    ) -> int:
        """Append one audit record; return its id (increasing, usable as an offset)."""
        details_json = dumps(details, f"audit {event!r} details")
        with self._locked():
            session = self._session(session_id)
            audit_id = next(self._audit_ids)
            session.audits.append((audit_id, turn_index, event, details_json, now_iso()))
            return audit_id

    def append_audits(
        self, session_id: str, records: list[tuple[int | None, str, dict[str, Any]]]
    ) -> None:
        """Append ``(turn_index, event, details)`` records atomically."""
        encoded = [
            (turn, event, dumps(details, f"audit {event!r} details"))
            for turn, event, details in records
        ]
        with self._locked():
            session = self._session(session_id)
            now = now_iso()
            session.audits.extend(
                (next(self._audit_ids), turn, event, details, now)
                for turn, event, details in encoded
            )

    def list_audit_logs(self, session_id: str, *, after_id: int = 0) -> list[dict[str, Any]]:
        """Return the session's audit records in insertion order, ``id > after_id``."""
        with self._locked():
            audits = list(self._session(session_id).audits)
        return [
            {
                "id": audit_id,
                "turn_index": turn,
                "event": event,
                "details": json.loads(details),
                "created_at": created_at,
            }
            for audit_id, turn, event, details, created_at in audits
            if audit_id > after_id
        ]

    def append_usage(self, session_id: str, metric: CallMetric) -> None:
        """Record one call metric; a metric with the same key replaces the old one."""
        self.append_usages(session_id, [metric])

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        """Record call metrics atomically (upsert by ``metric_key``).

        A replaced metric keeps its position and ``created_at``.
        """
        encoded = [(metric.metric_key, metric.model_dump_json()) for metric in metrics]
        with self._locked():
            session = self._session(session_id)
            now = now_iso()
            for key, metric_json in encoded:
                created_at = session.metrics.get(key, ("", now))[1]
                session.metrics[key] = (metric_json, created_at)

    def usage_summary(self, session_id: str) -> dict[str, Any]:
        """Return ``{"calls": [...], "turns": [...], "session": {...}}`` (DESIGN.md §7)."""
        with self._locked():
            session = self._session(session_id)
            calls = [
                {**json.loads(metric_json), "created_at": created_at}
                for metric_json, created_at in session.metrics.values()
            ]
            turns = {
                index: (turn.status, turn.wall_time_ms, turn.round_count, turn.user_message)
                for index, turn in sorted(session.turns.items())
            }
        return summarize(calls, turns)

    # --------------------------------------------------------- tool-batch journal

    def begin_batch(
        self,
        session_id: str,
        turn_index: int,
        round_index: int,
        *,
        scope: str,
        mode: ToolInvocationMode,
        events: list[ToolCallEvent],
        assistant: ChatMessage | None = None,
        visible: list[ChatMessage] | None = None,
    ) -> str:
        """Journal a tool batch as pending before any of its tools runs; return its id.

        Raises:
            UsageError: two events share an id.
        """
        check_unique_events(events)
        calls = [
            _Call(event=dumps(event.model_dump(), f"tool call {event.id!r}"), event_id=event.id)
            for event in events
        ]
        assistant_json = None if assistant is None else message_json(assistant)
        visible_json = [message_json(message) for message in visible or []]
        with self._locked():
            session = self._session(session_id)
            batch = _Batch(
                id=new_id(),
                session_id=session_id,
                turn_index=turn_index,
                round_index=round_index,
                scope=scope,
                mode=mode,
                assistant=assistant_json,
                created_at=now_iso(),
                calls=calls,
            )
            session.batches.append(batch)
            self._batches[batch.id] = batch
            _append(session, turn_index, visible_json)
            return batch.id

    def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        """Record one call's outcome.

        Raises:
            UsageError: unknown batch or event, a bad status, or the batch is no longer
                pending.
        """
        if status not in _CALL_STATUSES:
            raise UsageError(f"call status must be one of {_CALL_STATUSES}, not {status!r}")
        result_json = message_json(result)
        with self._locked():
            batch = self._pending_batch(batch_id, "record a result in")
            call = next((call for call in batch.calls if call.event_id == event_id), None)
            if call is None:
                raise UsageError(f"tool batch {batch_id!r} has no call {event_id!r}")
            call.state, call.result, call.landed_at = status, result_json, now_iso()

    def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        """Append ``messages`` to the visible transcript and mark the batch committed.

        Raises:
            UsageError: unknown batch, or the batch is no longer pending.
        """
        encoded = [message_json(message) for message in messages]
        with self._locked():
            batch = self._pending_batch(batch_id, "commit")
            _append(self._sessions[batch.session_id], batch.turn_index, encoded)
            batch.state, batch.finished_at = "committed", now_iso()

    def abandon_batch(self, batch_id: str, state: BatchState = "cancelled") -> None:
        """Mark a pending batch ``cancelled`` or ``failed``; its unfinished calls cancelled.

        Raises:
            UsageError: unknown batch, or ``state`` is not ``cancelled`` / ``failed``.
        """
        if state not in _ABANDON_STATES:
            raise UsageError(f"a batch can be abandoned as {_ABANDON_STATES}, not {state!r}")
        with self._locked():
            batch = self._batch(batch_id)
            if batch.state == "pending":
                _abandon(batch, state, now_iso())

    def list_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's tool journal, oldest batch first, each with its calls."""
        with self._locked():
            return [_batch_dict(batch) for batch in self._session(session_id).batches]

    # --------------------------------------------------------- one writer per session

    def claim_session(
        self,
        session_id: str,
        owner: str,
        *,
        lease_seconds: float = 30.0,
        wait_seconds: float = 0.0,
    ) -> str:
        """Become the one runtime that drives the session; return the claim token.

        Raises:
            SessionBusy: another runtime holds an unexpired claim.
            SessionNotFound: no session has that id.
        """
        check_positive(lease_seconds, "lease_seconds")
        return claim_with_wait(
            lambda: self._try_claim(session_id, owner, lease_seconds),
            session_id,
            wait_seconds,
            _CLAIM_POLL_SECONDS,
        )

    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None:
        """Extend the claim's lease.

        Raises:
            SessionBusy: the token no longer holds the claim.
        """
        check_positive(lease_seconds, "lease_seconds")
        with self._locked():
            session = self._session(session_id)
            claim = session.claim
            if claim is None or claim.token != token:
                raise SessionBusy(session_id, _lost_claim_holder(claim))
            session.claim = dataclasses.replace(claim, expires_at=time.time() + lease_seconds)

    def release_claim(self, session_id: str, token: str) -> None:
        """Give the session up; does nothing when ``token`` no longer holds it."""
        with self._locked():
            session = self._session(session_id)
            if session.claim is not None and session.claim.token == token:
                session.claim = None

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        with self._locked():
            session = self._session(session_id)
            now = time.time()
            if session.claim is not None and session.claim.expires_at > now:
                return None, session.claim.describe(now)
            token = new_id()
            session.claim = _Claim(
                token, owner, os.getpid(), socket.gethostname(), now + lease_seconds
            )
            stamp = now_iso()
            for batch in session.batches:
                if batch.state == "pending":
                    _abandon(batch, "cancelled", stamp)
            return token, ""

    # ---------------------------------------------------------------- plumbing

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            if self._closed:
                raise UsageError("the in-memory session store is closed")
            yield

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(session_id)
        return session

    def _insert_session(self, session_id: str, title: str, config: str) -> _Session:
        now = now_iso()
        session = _Session(session_id, session_title(title), config, now, now)
        self._sessions[session_id] = session
        return session

    def _batch(self, batch_id: str) -> _Batch:
        batch = self._batches.get(batch_id)
        if batch is None:
            raise UsageError(f"unknown tool batch {batch_id!r}")
        return batch

    def _pending_batch(self, batch_id: str, action: str) -> _Batch:
        batch = self._batch(batch_id)
        if batch.state != "pending":
            raise UsageError(
                f"cannot {action} tool batch {batch_id!r}: it is already {batch.state}"
            )
        return batch


# ---------------------------------------------------------------------- helpers


def _copy(value: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(value))
    return copied


def _session_dict(session: _Session) -> dict[str, Any]:
    config = json.loads(session.config)
    return {
        "id": session.id,
        "title": session.title,
        "config": config,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "turn_count": len(session.turns),
        "message_count": len(session.messages),
        "mode": config.get("tool_invocation_mode") if isinstance(config, dict) else None,
    }


def _append(session: _Session, turn_index: int, encoded: list[str]) -> list[int]:
    if not encoded:
        return []
    now = now_iso()
    first = session.messages[-1]["seq"] + 1 if session.messages else 1
    seqs = list(range(first, first + len(encoded)))
    for seq, encoded_message in zip(seqs, encoded, strict=True):
        message = json.loads(encoded_message)
        session.messages.append(
            {"seq": seq, "turn_index": turn_index, **message, "created_at": now}
        )
    session.updated_at = now
    return seqs


def _uncommitted_messages(batches: Iterable[_Batch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        if batch.state == "committed":
            continue
        if batch.assistant is not None:
            yield rendered_journal_message(
                batch.assistant, batch.turn_index, batch.created_at, batch.state
            )
        for call in batch.calls:
            if call.result is not None:
                yield rendered_journal_message(
                    call.result, batch.turn_index, call.landed_at, batch.state
                )


def _abandon(batch: _Batch, state: str, now: str) -> None:
    batch.state, batch.finished_at = state, now
    for call in batch.calls:
        if call.result is None:
            call.state, call.landed_at = "cancelled", now


def _batch_dict(batch: _Batch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "session_id": batch.session_id,
        "turn_index": batch.turn_index,
        "round_index": batch.round_index,
        "scope": batch.scope,
        "mode": batch.mode,
        "state": batch.state,
        "assistant": None if batch.assistant is None else json.loads(batch.assistant),
        "created_at": batch.created_at,
        "finished_at": batch.finished_at,
        "calls": [
            {
                "position": position,
                "event": json.loads(call.event),
                "state": call.state,
                "result": None if call.result is None else json.loads(call.result),
                "landed_at": call.landed_at,
            }
            for position, call in enumerate(batch.calls)
        ],
    }


def _lost_claim_holder(claim: _Claim | None) -> str:
    if claim is None:
        return "nobody holds it now: the claim was released or taken over"
    return claim.describe(time.time())
