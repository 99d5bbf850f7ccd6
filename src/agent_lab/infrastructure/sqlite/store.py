"""``SQLiteSessionStore``: the durable ``SessionStore`` on one SQLite file.

For example::

    with SQLiteSessionStore("~/.agent_lab/sessions.sqlite3") as store:
        session_id = store.create_session("hello", config={})
        token = store.claim_session(session_id, owner="cli")

**Durability.** The file is in WAL mode. With ``synchronous="NORMAL"`` (the default) a
commit survives the process crashing or being killed (``SIGKILL``) at any point, but the
last few commits can be lost if the machine loses power or the OS crashes, because the
WAL is only synced at checkpoints. ``synchronous="FULL"`` syncs the WAL on every commit,
so commits also survive power loss, at the cost of one ``fsync`` per write (see
``bench/RESULTS.md``). Either way a transaction is all or nothing: a failed multi-row
write leaves no row behind.

**Concurrency.** The store holds one connection (``check_same_thread=False``) guarded
by a lock, so it can be shared by many sessions and called from worker threads. Other
stores or processes may use the same file: write transactions start with
``BEGIN IMMEDIATE`` and wait up to ``busy_timeout_ms`` for the write lock, after which
the write fails with ``PersistenceFailed("locked")``. One runtime drives a session at
a time through ``claim_session`` (a leased claim that a dead process loses at once on
the same machine).

**Errors.** No ``sqlite3`` exception leaves this module: failures become
``PersistenceFailed`` with a ``reason`` (``locked``, ``disk_full``, ``read_only``,
``corrupt``, ``unknown``); a file that is not a store, or has a newer schema, raises
``StoreFormatError`` and is left unchanged.

Timestamps (``created_at`` and friends) are ISO-8601 UTC strings with milliseconds;
claim expiry times are wall-clock epoch seconds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, get_args

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
from agent_lab.domain.errors import (
    PersistenceFailed,
    SessionBusy,
    SessionNotFound,
    StoreFormatError,
    UsageError,
)
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite.errors import (
    classify_os_error,
    map_open_errors,
    map_sqlite_errors,
)
from agent_lab.infrastructure.sqlite.schema import (
    SCHEMA_VERSION,
    check_file_header,
    migrate,
    read_version,
    rollback_quietly,
)

__all__ = ["SQLiteSessionStore", "Synchronous"]

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]
"""SQLite ``PRAGMA synchronous`` levels accepted by the store."""

_CLAIM_POLL_SECONDS: Final = 0.05
_CALL_STATUSES: Final = get_args(CallStatus)
_ABANDON_STATES: Final = ("cancelled", "failed")
_METRIC_FIELDS: Final = tuple(CallMetric.model_fields)
_MESSAGE_COLUMNS: Final = (
    "seq, turn_index, role, content, name, tool_call_id, tool_calls, created_at"
)


class SQLiteSessionStore:
    """Sessions, turns, transcript, audits, metrics, tool journal and claims in SQLite.

    Args:
        path: The store file; missing parent directories are created.
        busy_timeout_ms: How long a write waits for another writer's lock before it
            fails with ``PersistenceFailed("locked")``.
        synchronous: ``PRAGMA synchronous``; ``NORMAL`` survives process crashes,
            ``FULL`` also survives power loss (see the module docstring).
        read_only: Open the file for reading only (``mode=ro``); every write raises
            ``PersistenceFailed("read_only")``. The file must be a current store.
        max_size_bytes: Cap the file size (``PRAGMA max_page_count``); a write past the
            cap fails with ``PersistenceFailed("disk_full")`` as a full disk would.

    Raises:
        StoreFormatError: the file is not a store, belongs to another application, or
            has a newer schema; the file is left unchanged.
        PersistenceFailed: the file could not be opened or migrated, or its pages are
            damaged (``reason="corrupt"``).
        UsageError: an option is out of range.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: Synchronous = "NORMAL",
        read_only: bool = False,
        max_size_bytes: int | None = None,
    ) -> None:
        self._path = Path(path).expanduser()
        self._lock = threading.Lock()
        self._hostname = socket.gethostname()
        options = _Options(busy_timeout_ms, synchronous, read_only, max_size_bytes)
        options.validate()
        self._conn: sqlite3.Connection | None = _open(self._path, options)

    @property
    def path(self) -> Path:
        """The store file."""
        return self._path

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"SQLiteSessionStore({str(self._path)!r}, {state})"

    def __enter__(self) -> SQLiteSessionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; later calls raise ``UsageError``. Idempotent."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with map_sqlite_errors():
                    conn.close()

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
        with self._write() as conn:
            if _session_exists(conn, session_id):
                raise UsageError(f"session {session_id!r} already exists")
            _insert_session(conn, session_id, title, config_json)
        return session_id

    def ensure_session(self, session_id: str, title: str, config: dict[str, Any]) -> dict[str, Any]:
        """Create the session unless it exists (keeping its config); return it."""
        session_id = checked_id(session_id)
        config_json = dumps(config, "session config")
        with self._write() as conn:
            if not _session_exists(conn, session_id):
                _insert_session(conn, session_id, title, config_json)
            session = _select_session(conn, session_id)
        assert session is not None
        return session

    def get_session(self, session_id: str) -> dict[str, Any] | None:
        """Return the session summary dict, or ``None`` when there is no such session."""
        with self._read() as conn:
            return _select_session(conn, session_id)

    def list_sessions(self) -> list[dict[str, Any]]:
        """Return every session summary, newest first."""
        with self._read() as conn:
            rows = conn.execute(f"{_SESSION_SELECT} ORDER BY seq DESC").fetchall()
        return [_session_dict(row) for row in rows]

    def delete_session(self, session_id: str) -> None:
        """Delete the session and everything recorded for it.

        Raises:
            SessionNotFound: no session has that id.
        """
        with self._write() as conn:
            deleted = conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            if deleted.rowcount == 0:
                raise SessionNotFound(session_id)

    # --------------------------------------------------------------------- turns

    def next_turn_index(self, session_id: str) -> int:
        """Return one more than the highest recorded turn index (1 for a new session)."""
        with self._read() as conn:
            _require_session(conn, session_id)
            row = conn.execute(
                "SELECT coalesce(max(turn_index), 0) FROM turns WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        return int(row[0]) + 1

    def start_turn(
        self,
        session_id: str,
        turn_index: int,
        user_message: str,
        *,
        messages: list[ChatMessage] | None = None,
    ) -> None:
        """Record a running turn, and append ``messages`` (e.g. the user's) in the same
        transaction.

        Raises:
            UsageError: the turn already exists.
        """
        rows = [_message_fields(message) for message in messages or []]
        with self._write() as conn:
            _require_session(conn, session_id)
            if _turn_exists(conn, session_id, turn_index):
                raise UsageError(f"turn {turn_index} of session {session_id!r} already exists")
            now = now_iso()
            conn.execute(
                "INSERT INTO turns (session_id, turn_index, status, user_message, started_at)"
                " VALUES (?, ?, 'running', ?, ?)",
                (session_id, turn_index, user_message, now),
            )
            if rows:
                _insert_messages(conn, session_id, turn_index, rows)
            _touch(conn, session_id, now)

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
        with self._write() as conn:
            _require_session(conn, session_id)
            now = now_iso()
            updated = conn.execute(
                "UPDATE turns SET status = ?, wall_time_ms = ?, round_count = ?,"
                " completed_at = ? WHERE session_id = ? AND turn_index = ?",
                (status, wall_time_ms, round_count, now, session_id, turn_index),
            )
            if updated.rowcount == 0:
                raise UsageError(f"turn {turn_index} of session {session_id!r} was never started")
            _touch(conn, session_id, now)

    # ------------------------------------------------------- visible transcript

    def append_message(self, session_id: str, turn_index: int, message: ChatMessage) -> int:
        """Append one message to the visible transcript; return its ``seq``."""
        return self.append_messages(session_id, turn_index, [message])[0]

    def append_messages(
        self, session_id: str, turn_index: int, messages: list[ChatMessage]
    ) -> list[int]:
        """Append messages in one transaction; return their ``seq`` numbers."""
        rows = [_message_fields(message) for message in messages]
        with self._write() as conn:
            _require_session(conn, session_id)
            return _insert_messages(conn, session_id, turn_index, rows)

    def list_messages(self, session_id: str, include_pending: bool = False) -> list[dict[str, Any]]:
        """Return the visible transcript in order.

        Args:
            session_id: The session.
            include_pending: Also render the tool journal's uncommitted batches (their
                assistant message, then each landed result) after the committed
                messages. Every message then has a ``state`` key: ``committed`` or
                the batch's ``pending`` / ``cancelled`` / ``failed``.
        """
        with self._read() as conn:
            _require_session(conn, session_id)
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            messages = [_message_dict(row) for row in rows]
            if not include_pending:
                return messages
            for message in messages:
                message["state"] = "committed"
            return messages + _uncommitted_messages(conn, session_id)

    # ------------------------------------------------------- audits and metrics

    def append_audit(
        self, session_id: str, turn_index: int | None, event: str, details: dict[str, Any]
    ) -> int:
        """Append one audit record; return its id (increasing, usable as an offset)."""
        details_json = dumps(details, f"audit {event!r} details")
        with self._write() as conn:
            _require_session(conn, session_id)
            cursor = conn.execute(
                "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (session_id, turn_index, event, details_json, now_iso()),
            )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def append_audits(
        self, session_id: str, records: list[tuple[int | None, str, dict[str, Any]]]
    ) -> None:
        """Append ``(turn_index, event, details)`` records in one transaction."""
        now = now_iso()
        rows = [
            (session_id, turn, event, dumps(details, f"audit {event!r} details"), now)
            for turn, event, details in records
        ]
        with self._write() as conn:
            _require_session(conn, session_id)
            conn.executemany(
                "INSERT INTO audit_logs (session_id, turn_index, event, details, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def list_audit_logs(self, session_id: str, *, after_id: int = 0) -> list[dict[str, Any]]:
        """Return the session's audit records in insertion order.

        Args:
            session_id: The session.
            after_id: Only records whose ``id`` is greater (for tailing a live session).
        """
        with self._read() as conn:
            _require_session(conn, session_id)
            rows = conn.execute(
                "SELECT id, turn_index, event, details, created_at FROM audit_logs"
                " WHERE session_id = ? AND id > ? ORDER BY id",
                (session_id, after_id),
            ).fetchall()
        return [
            {
                "id": row[0],
                "turn_index": row[1],
                "event": row[2],
                "details": json.loads(row[3]),
                "created_at": row[4],
            }
            for row in rows
        ]

    def append_usage(self, session_id: str, metric: CallMetric) -> None:
        """Record one call metric; a metric with the same key replaces the old one."""
        self.append_usages(session_id, [metric])

    def append_usages(self, session_id: str, metrics: list[CallMetric]) -> None:
        """Record call metrics in one transaction (upsert by ``metric_key``).

        A replaced metric keeps its position and ``created_at``.
        """
        now = now_iso()
        rows = [_metric_row(session_id, metric, now) for metric in metrics]
        with self._write() as conn:
            _require_session(conn, session_id)
            conn.executemany(_UPSERT_METRIC, rows)

    def usage_summary(self, session_id: str) -> dict[str, Any]:
        """Return ``{"calls": [...], "turns": [...], "session": {...}}`` (DESIGN.md §7).

        ``model_calls`` counts chat, argument-fallback and argument-generation calls;
        ``tool_count`` counts tool executions; ``fallback_count`` counts
        argument fallbacks only.
        """
        with self._read() as conn:
            _require_session(conn, session_id)
            calls = _select_metrics(conn, session_id)
            turns = conn.execute(
                "SELECT turn_index, status, wall_time_ms, round_count, user_message"
                " FROM turns WHERE session_id = ? ORDER BY turn_index",
                (session_id,),
            ).fetchall()
        return summarize(calls, {row[0]: tuple(row[1:5]) for row in turns})

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

        In one transaction: the batch (with the assistant tool-call message, if
        given), one pending call per event in order, and the ``visible`` messages
        appended to the committed transcript.

        Raises:
            UsageError: two events share an id.
        """
        check_unique_events(events)
        batch_id = new_id()
        assistant_json = None if assistant is None else message_json(assistant)
        calls = [
            (batch_id, position, dumps(event.model_dump(), f"tool call {event.id!r}"), event.id)
            for position, event in enumerate(events)
        ]
        visible_rows = [_message_fields(message) for message in visible or []]
        with self._write() as conn:
            _require_session(conn, session_id)
            conn.execute(
                "INSERT INTO tool_batches (id, session_id, turn_index, round_index, scope,"
                " mode, state, assistant, created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                (
                    batch_id,
                    session_id,
                    turn_index,
                    round_index,
                    scope,
                    mode,
                    assistant_json,
                    now_iso(),
                ),
            )
            conn.executemany(
                "INSERT INTO tool_calls (batch_id, position, event, event_id, state)"
                " VALUES (?, ?, ?, ?, 'pending')",
                calls,
            )
            if visible_rows:
                _insert_messages(conn, session_id, turn_index, visible_rows)
        return batch_id

    def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        """Record one call's outcome durably (before it is shown to anyone).

        Raises:
            UsageError: unknown batch or event, a bad status, or the batch is no longer
                pending.
        """
        if status not in _CALL_STATUSES:
            raise UsageError(f"call status must be one of {_CALL_STATUSES}, not {status!r}")
        result_json = message_json(result)
        with self._write() as conn:
            _require_pending_batch(conn, batch_id, "record a result in")
            updated = conn.execute(
                "UPDATE tool_calls SET state = ?, result = ?, landed_at = ?"
                " WHERE batch_id = ? AND event_id = ?",
                (status, result_json, now_iso(), batch_id, event_id),
            )
            if updated.rowcount == 0:
                raise UsageError(f"tool batch {batch_id!r} has no call {event_id!r}")

    def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        """Append ``messages`` to the visible transcript and mark the batch committed.

        Raises:
            UsageError: unknown batch, or the batch is no longer pending.
        """
        rows = [_message_fields(message) for message in messages]
        with self._write() as conn:
            session_id, turn_index = _require_pending_batch(conn, batch_id, "commit")
            _insert_messages(conn, session_id, turn_index, rows)
            conn.execute(
                "UPDATE tool_batches SET state = 'committed', finished_at = ? WHERE id = ?",
                (now_iso(), batch_id),
            )

    def abandon_batch(self, batch_id: str, state: BatchState = "cancelled") -> None:
        """Mark a pending batch ``cancelled`` or ``failed``; its unfinished calls cancelled.

        Calls that already have a result keep it. A batch that is no longer pending is
        left as it is, so cleanup code may call this unconditionally.

        Raises:
            UsageError: unknown batch, or ``state`` is not ``cancelled`` / ``failed``.
        """
        if state not in _ABANDON_STATES:
            raise UsageError(f"a batch can be abandoned as {_ABANDON_STATES}, not {state!r}")
        with self._write() as conn:
            if _batch_state(conn, batch_id) == "pending":
                _abandon(conn, [batch_id], state, now_iso())

    def list_batches(self, session_id: str) -> list[dict[str, Any]]:
        """Return the session's tool journal, oldest batch first, each with its calls."""
        with self._read() as conn:
            _require_session(conn, session_id)
            return _select_batches(conn, session_id)

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

        A claim held by another token blocks until it expires, unless its process is
        known to be dead (same host, pid gone), in which case it is taken over at once.
        Taking a session cancels the tool batches a previous runtime left pending.

        Args:
            session_id: The session.
            owner: A label for the claimant, shown to whoever is refused.
            lease_seconds: How long the claim lasts without ``renew_claim``.
            wait_seconds: How long to wait for a busy session before giving up.

        Raises:
            SessionBusy: another live runtime still holds the session.
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
        """Extend the claim's lease (the claimant's heartbeat).

        Raises:
            SessionBusy: the token no longer holds the claim.
        """
        check_positive(lease_seconds, "lease_seconds")
        with self._write() as conn:
            _require_session(conn, session_id)
            updated = conn.execute(
                "UPDATE session_claims SET expires_at = ? WHERE session_id = ? AND token = ?",
                (time.time() + lease_seconds, session_id, token),
            )
            if updated.rowcount == 0:
                claim = _select_claim(conn, session_id)
                raise SessionBusy(session_id, _lost_claim_holder(claim))

    def release_claim(self, session_id: str, token: str) -> None:
        """Give the session up; does nothing when ``token`` no longer holds it."""
        with self._write() as conn:
            _require_session(conn, session_id)
            conn.execute(
                "DELETE FROM session_claims WHERE session_id = ? AND token = ?",
                (session_id, token),
            )

    def _try_claim(
        self, session_id: str, owner: str, lease_seconds: float
    ) -> tuple[str | None, str]:
        with self._write() as conn:
            _require_session(conn, session_id)
            claim = _select_claim(conn, session_id)
            now = time.time()
            if claim is not None and not self._claim_is_stale(claim, now):
                return None, claim.describe(now)
            token = new_id()
            pid = os.getpid()
            conn.execute(
                "INSERT OR REPLACE INTO session_claims (session_id, token, owner, pid,"
                " pid_started, hostname, claimed_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    session_id,
                    token,
                    owner,
                    pid,
                    _process_started(pid),
                    self._hostname,
                    now,
                    now + lease_seconds,
                ),
            )
            _abandon(conn, _pending_batch_ids(conn, session_id), "cancelled", now_iso())
            return token, ""

    def _claim_is_stale(self, claim: _Claim, now: float) -> bool:
        if claim.expires_at <= now:
            return True
        return claim.hostname == self._hostname and not _process_alive(claim.pid, claim.pid_started)

    # ---------------------------------------------------------------- plumbing

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise UsageError(f"the session store {str(self._path)!r} is closed")
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock, map_sqlite_errors():
            conn = self._connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                rollback_quietly(conn)
                raise

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self._lock, map_sqlite_errors():
            conn = self._connection()
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                rollback_quietly(conn)


# ---------------------------------------------------------------------- opening


@dataclasses.dataclass(frozen=True, slots=True)
class _Options:
    busy_timeout_ms: int
    synchronous: str
    read_only: bool
    max_size_bytes: int | None

    def validate(self) -> None:
        if self.busy_timeout_ms < 0:
            raise UsageError(f"busy_timeout_ms must be >= 0, not {self.busy_timeout_ms}")
        if self.synchronous.upper() not in get_args(Synchronous):
            raise UsageError(
                f"synchronous must be one of {get_args(Synchronous)}, not {self.synchronous!r}"
            )
        if self.max_size_bytes is not None and self.max_size_bytes <= 0:
            raise UsageError(f"max_size_bytes must be positive, not {self.max_size_bytes}")


def _open(path: Path, options: _Options) -> sqlite3.Connection:
    _prepare_path(path, options.read_only)
    check_file_header(path)
    with map_open_errors(path):
        conn = _connect(path, options)
        try:
            _configure(conn, path, options)
        except BaseException:
            conn.close()
            raise
    return conn


def _prepare_path(path: Path, read_only: bool) -> None:
    if read_only:
        if not path.is_file():
            raise StoreFormatError(f"there is no session store at {path}")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PersistenceFailed(
            classify_os_error(exc), f"cannot create the directory {path.parent}: {exc}"
        ) from exc


def _connect(path: Path, options: _Options) -> sqlite3.Connection:
    target: str | Path = path
    if options.read_only:
        target = f"{path.absolute().as_uri()}?mode=ro"
        if _on_read_only_mount(path):
            # No -shm can be created next to the file; read it as immutable media.
            target += "&immutable=1"
    return sqlite3.connect(
        target,
        timeout=options.busy_timeout_ms / 1000,
        isolation_level=None,
        check_same_thread=False,
        uri=options.read_only,
    )


def _on_read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _configure(conn: sqlite3.Connection, path: Path, options: _Options) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(options.busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys = ON")
    version = read_version(conn, path)  # before anything could write to the file
    if options.read_only:
        if version < SCHEMA_VERSION:
            raise StoreFormatError(
                f"{path} has session store schema version {version} and needs an upgrade "
                f"to {SCHEMA_VERSION}; open it once without read_only"
            )
        return
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {options.synchronous.upper()}")
    if version < SCHEMA_VERSION:  # an up-to-date file is opened without writing to it
        migrate(conn, path)
    if options.max_size_bytes is not None:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = max(1, options.max_size_bytes // page_size)
        conn.execute(f"PRAGMA max_page_count = {pages}")


# -------------------------------------------------------------- small helpers


# -------------------------------------------------------------- session rows


def _session_exists(conn: sqlite3.Connection, session_id: str) -> bool:
    row = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return row is not None


def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if not _session_exists(conn, session_id):
        raise SessionNotFound(session_id)


def _insert_session(conn: sqlite3.Connection, session_id: str, title: str, config: str) -> None:
    now = now_iso()
    conn.execute(
        "INSERT INTO sessions (id, title, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
        (session_id, session_title(title), config, now, now),
    )


def _touch(conn: sqlite3.Connection, session_id: str, now: str) -> None:
    conn.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))


_SESSION_SELECT = (
    "SELECT id, title, config, created_at, updated_at,"
    " (SELECT count(*) FROM turns WHERE session_id = sessions.id),"
    " (SELECT count(*) FROM messages WHERE session_id = sessions.id)"
    " FROM sessions"
)


def _select_session(conn: sqlite3.Connection, session_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"{_SESSION_SELECT} WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else _session_dict(row)


def _session_dict(row: Sequence[Any]) -> dict[str, Any]:
    config = json.loads(row[2])
    return {
        "id": row[0],
        "title": row[1],
        "config": config,
        "created_at": row[3],
        "updated_at": row[4],
        "turn_count": row[5],
        "message_count": row[6],
        "mode": config.get("tool_invocation_mode") if isinstance(config, dict) else None,
    }


def _turn_exists(conn: sqlite3.Connection, session_id: str, turn_index: int) -> bool:
    row = conn.execute(
        "SELECT 1 FROM turns WHERE session_id = ? AND turn_index = ?", (session_id, turn_index)
    ).fetchone()
    return row is not None


# -------------------------------------------------------------- message rows

_MessageFields = tuple[str, str, str | None, str | None, str]


def _message_fields(message: ChatMessage) -> _MessageFields:
    tool_calls = [call.model_dump() for call in message.tool_calls]
    return (
        message.role,
        message.content,
        message.name,
        message.tool_call_id,
        dumps(tool_calls, "tool calls"),
    )


def _insert_messages(
    conn: sqlite3.Connection, session_id: str, turn_index: int, rows: list[_MessageFields]
) -> list[int]:
    if not rows:
        return []
    last = conn.execute(
        "SELECT coalesce(max(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
    ).fetchone()[0]
    seqs = list(range(int(last) + 1, int(last) + 1 + len(rows)))
    now = now_iso()
    conn.executemany(
        "INSERT INTO messages (session_id, seq, turn_index, role, content, name,"
        " tool_call_id, tool_calls, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(session_id, seq, turn_index, *row, now) for seq, row in zip(seqs, rows, strict=True)],
    )
    _touch(conn, session_id, now)
    return seqs


def _message_dict(row: Sequence[Any]) -> dict[str, Any]:
    return {
        "seq": row[0],
        "turn_index": row[1],
        "role": row[2],
        "content": row[3],
        "name": row[4],
        "tool_call_id": row[5],
        "tool_calls": json.loads(row[6]),
        "created_at": row[7],
    }


def _uncommitted_messages(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    rendered: list[dict[str, Any]] = []
    batches = conn.execute(
        "SELECT id, turn_index, state, assistant, created_at FROM tool_batches"
        " WHERE session_id = ? AND state != 'committed' ORDER BY seq",
        (session_id,),
    ).fetchall()
    for batch_id, turn_index, state, assistant, created_at in batches:
        if assistant is not None:
            rendered.append(rendered_journal_message(assistant, turn_index, created_at, state))
        results = conn.execute(
            "SELECT result, landed_at FROM tool_calls"
            " WHERE batch_id = ? AND result IS NOT NULL ORDER BY position",
            (batch_id,),
        )
        rendered.extend(
            rendered_journal_message(result, turn_index, landed, state)
            for result, landed in results
        )
    return rendered


# -------------------------------------------------------------- metric rows

_UPSERT_METRIC = (
    "INSERT INTO call_metrics (session_id, "
    + ", ".join(_METRIC_FIELDS)
    + ", created_at) VALUES ("
    + ", ".join("?" for _ in range(len(_METRIC_FIELDS) + 2))
    + ") ON CONFLICT (session_id, metric_key) DO UPDATE SET "
    + ", ".join(f"{field} = excluded.{field}" for field in _METRIC_FIELDS)
)


def _metric_row(session_id: str, metric: CallMetric, now: str) -> tuple[Any, ...]:
    values = metric.model_dump()
    return (session_id, *(values[field] for field in _METRIC_FIELDS), now)


def _select_metrics(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    cursor = conn.execute(
        "SELECT " + ", ".join(_METRIC_FIELDS) + ", created_at FROM call_metrics"
        " WHERE session_id = ? ORDER BY id",
        (session_id,),
    )
    calls = [dict(zip((*_METRIC_FIELDS, "created_at"), row, strict=True)) for row in cursor]
    for call in calls:
        call["usage_reported"] = bool(call["usage_reported"])
    return calls


# -------------------------------------------------------------- tool journal rows


def _batch_state(conn: sqlite3.Connection, batch_id: str) -> str:
    row = conn.execute("SELECT state FROM tool_batches WHERE id = ?", (batch_id,)).fetchone()
    if row is None:
        raise UsageError(f"unknown tool batch {batch_id!r}")
    return str(row[0])


def _require_pending_batch(conn: sqlite3.Connection, batch_id: str, action: str) -> tuple[str, int]:
    row = conn.execute(
        "SELECT session_id, turn_index, state FROM tool_batches WHERE id = ?", (batch_id,)
    ).fetchone()
    if row is None:
        raise UsageError(f"unknown tool batch {batch_id!r}")
    if row[2] != "pending":
        raise UsageError(f"cannot {action} tool batch {batch_id!r}: it is already {row[2]}")
    return str(row[0]), int(row[1])


def _pending_batch_ids(conn: sqlite3.Connection, session_id: str) -> list[str]:
    rows = conn.execute(
        "SELECT id FROM tool_batches WHERE session_id = ? AND state = 'pending'", (session_id,)
    )
    return [str(row[0]) for row in rows]


def _abandon(conn: sqlite3.Connection, batch_ids: list[str], state: str, now: str) -> None:
    for batch_id in batch_ids:
        conn.execute(
            "UPDATE tool_batches SET state = ?, finished_at = ? WHERE id = ?",
            (state, now, batch_id),
        )
        conn.execute(
            "UPDATE tool_calls SET state = 'cancelled', landed_at = ?"
            " WHERE batch_id = ? AND result IS NULL",
            (now, batch_id),
        )


def _select_batches(conn: sqlite3.Connection, session_id: str) -> list[dict[str, Any]]:
    batches = conn.execute(
        "SELECT id, session_id, turn_index, round_index, scope, mode, state, assistant,"
        " created_at, finished_at FROM tool_batches WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()
    return [_batch_dict(conn, row) for row in batches]


def _batch_dict(conn: sqlite3.Connection, row: Sequence[Any]) -> dict[str, Any]:
    calls = conn.execute(
        "SELECT position, event, state, result, landed_at FROM tool_calls"
        " WHERE batch_id = ? ORDER BY position",
        (row[0],),
    )
    return {
        "id": row[0],
        "session_id": row[1],
        "turn_index": row[2],
        "round_index": row[3],
        "scope": row[4],
        "mode": row[5],
        "state": row[6],
        "assistant": None if row[7] is None else json.loads(row[7]),
        "created_at": row[8],
        "finished_at": row[9],
        "calls": [
            {
                "position": position,
                "event": json.loads(event),
                "state": state,
                "result": None if result is None else json.loads(result),
                "landed_at": landed_at,
            }
            for position, event, state, result, landed_at in calls
        ],
    }


# -------------------------------------------------------------- claims


@dataclasses.dataclass(frozen=True, slots=True)
class _Claim:
    token: str
    owner: str
    pid: int
    pid_started: str | None
    hostname: str
    expires_at: float

    def describe(self, now: float) -> str:
        left = max(0.0, self.expires_at - now)
        return f"{self.owner}, pid {self.pid} on {self.hostname}, lease ends in {left:.0f} s"


def _select_claim(conn: sqlite3.Connection, session_id: str) -> _Claim | None:
    row = conn.execute(
        "SELECT token, owner, pid, pid_started, hostname, expires_at FROM session_claims"
        " WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    return None if row is None else _Claim(*row)


def _lost_claim_holder(claim: _Claim | None) -> str:
    if claim is None:
        return "nobody holds it now: the claim was released or taken over"
    return claim.describe(time.time())


def _process_started(pid: int) -> str | None:
    """The process start time from ``/proc`` (Linux), to tell a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the parenthesised command name; starttime is field 22 overall.
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _process_state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[0] if fields else None


def _process_alive(pid: int, started: str | None) -> bool:
    """Whether ``pid`` on this host is still the live process that made the claim."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    if _process_state(pid) in {"Z", "X"}:
        return False  # killed, waiting to be reaped
    current = _process_started(pid)
    return started is None or current is None or current == started
