"""Durable writes of one session through the ``SessionStore`` port, off the event loop.

Writes run one at a time, in the order the session makes them, in a worker thread;
or, when the store offers ``write_now`` (the SQLite store with ``synchronous`` ``OFF``
or ``NORMAL``), on the loop itself when the store can make the write without waiting
for anything, and it is small (``NOW_CHARS``, ``NOW_RAW_BYTES``). A write the store declines
(``NotNow``: nothing was written) goes to the worker thread as usual, so what waits,
waits there, and every failure is classified there.
Audits are buffered and flushed with the next durable write (and at turn end), so the
trail costs no extra round trip; when the store's class offers ``atomic_writes()`` (the
SQLite store does) the audits and the write they precede commit in one transaction.
Any store failure surfaces as ``PersistenceFailed``.

A session without a store gets a ``NullRecorder`` (``_recording``): the same calls,
writing nothing, so the engine never asks whether a store is attached.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

from agent_lab.application._claim_lease import ClaimLease
from agent_lab.application._opening import claim_waiting, open_stored
from agent_lab.application._recording import FinishedTurn, RefusedStart
from agent_lab.application._recovery import KeptNote, Recovery, recovery_from_batches
from agent_lab.application._restore import StoredSession, request_snapshot
from agent_lab.application._store_access import (
    NOW_CHARS,
    NOW_RAW_BYTES,
    chars_of,
    grouping,
    raw_bytes,
    write_failure,
    writing_now,
)
from agent_lab.application._tasks import finish_even_if_cancelled
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.session_store import (
    BatchIntent,
    CallStatus,
    NotNow,
    SessionStore,
)
from agent_lab.domain.errors import (
    PersistenceFailed,
    StoreError,
)
from agent_lab.domain.messages import ChatMessage

T = TypeVar("T")
BufferedAudits = list[tuple[int | None, str, dict[str, Any]]]
"""Audits waiting for the next write: ``(turn_index, event, details)``."""

_HOST = socket.gethostname()


class SessionRecorder:
    """Writes one session's turns, transcript, journal, metrics and audits."""

    persistent = True

    def __init__(
        self, store: SessionStore, session_id: str, *, claim_wait_seconds: float = 0.0
    ) -> None:
        self.store = store
        self.session_id = session_id
        self._atomic = grouping(store)
        self.closes_with_answer = self._atomic is not contextlib.nullcontext  # all or nothing
        self._now = writing_now(store)
        self._carried = 0
        """Characters of the messages of the last write (its audits are still buffered)."""
        self._raw_bytes = 0
        """Bytes of provider chunks in the buffered audits (``raw_bytes``)."""
        self._audits: BufferedAudits = []
        self._lease = ClaimLease(store, session_id)
        self._claim_wait = claim_wait_seconds
        self._started: set[int] = set()
        """Turns on record and not closed yet."""
        self._unclosed: tuple[FinishedTurn | RefusedStart, ...] = ()
        """Turns whose close the store refused: closed before the next turn starts."""
        self._refused: dict[int, str] = {}  # turns whose start was refused: the user's text

    async def _call(
        self,
        function: Callable[..., T],
        *args: Any,
        chars: int = 0,
        shielded: bool = False,
        **kwargs: Any,
    ) -> T:
        """Buffered audits, then ``function(*args, **kwargs)``; ``chars`` is the size of
        the messages it writes. On the loop when the store can, else in a worker thread
        (``shielded``: a cancellation meanwhile lets that write finish first)."""
        small = self._small(chars)
        audits = self._take_audits()
        work = partial(function, *args, **kwargs)
        if self._now is not None and small:
            try:
                return self._now.write_now(partial(self._grouped, audits, work))
            except NotNow:
                pass  # nothing was written: the usual way decides
        thread = asyncio.to_thread(self._write, audits, work)
        return await (finish_even_if_cancelled(thread) if shielded else thread)

    def _grouped(self, audits: BufferedAudits, work: Callable[[], T]) -> T:
        """The audits, then the write (the body of one ``write_now`` or ``_write``)."""
        if audits:
            self.store.append_audits(self.session_id, audits)
        return work()

    def _write(self, audits: BufferedAudits, work: Callable[[], T], *, grouped: bool = True) -> T:
        """Buffered audits, then ``work``: one transaction when ``grouped`` and the
        store groups writes."""
        atomic = self._atomic if grouped else contextlib.nullcontext
        try:
            try:
                with atomic():
                    return self._grouped(audits, work)
            except Exception:
                if audits and atomic is not contextlib.nullcontext:
                    self._keep_audits(audits)  # they went down with the write
                raise
        except Exception as exc:
            failure = write_failure(self.store, self.session_id, exc)
            if failure is exc:
                raise
            raise failure from exc

    def _keep_audits(self, audits: BufferedAudits) -> None:
        """Best effort: the trail of a failed write is kept, as when it went first."""
        with contextlib.suppress(Exception):
            self.store.append_audits(self.session_id, audits)

    def add_audit(self, turn_index: int | None, event: str, details: dict[str, Any]) -> None:
        self._audits.append((turn_index, event, details))
        self._raw_bytes += raw_bytes(details)

    def _take_audits(self) -> BufferedAudits:
        audits, self._audits, self._raw_bytes = self._audits, [], 0
        return audits

    def _small(self, chars: int) -> bool:
        """Whether a write of ``chars`` (with the buffered audits) may run on the loop;
        call before ``_take_audits``."""
        small = chars + self._carried <= NOW_CHARS and self._raw_bytes <= NOW_RAW_BYTES
        self._carried = chars
        return small

    async def open(self, request: DebugRunRequest, title: str) -> StoredSession:
        """Create the session if new, claim it (one writer), and read it back.

        All in one trip to the worker thread: a session's setup costs one hand-off,
        not four. A claim that may wait (``claim_wait_seconds``) is tried again until it
        wins, each try in the worker thread, the pauses on the loop (``claim_waiting``),
        so closing the runtime ends the wait at once.
        """
        snapshot = request_snapshot(request)
        owner = f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

        small = self._small(0)
        audits = self._take_audits()
        grouped = self._claim_wait <= 0  # a session seen in the transaction that claims it
        open_session = partial(
            open_stored, self.store, self.session_id, title, snapshot, owner, grouped=grouped
        )
        open_waiting = partial(open_session, now=False)
        try:
            if self._now is not None and grouped and small:
                with contextlib.suppress(NotNow):
                    work = partial(self._grouped, audits, partial(open_session, now=True))
                    stored, self._lease.token = self._now.write_now(work)
                    return stored
            if not grouped:
                opened = await claim_waiting(
                    lambda first: self._write(audits if first else [], open_waiting),
                    self._claim_wait,
                    kept=self._keep_claim,
                )
                stored, self._lease.token = opened
                return stored
            stored, self._lease.token = await asyncio.to_thread(self._write, audits, open_waiting)
        finally:
            self._lease.keep_renewing()
        return stored

    def _keep_claim(self, opened: tuple[StoredSession, str]) -> None:
        self._lease.token = opened[1]  # won by a try that ended after a cancellation

    def stop_on_loss(self, task: asyncio.Task[Any] | None) -> None:
        """Cancel ``task`` once the claim is lost (no task waits for the loss)."""
        self._lease.stop_on_loss(task)

    @property
    def lost_to(self) -> PersistenceFailed | None:
        return self._lease.lost_to

    async def start_turn(self, index: int, user: ChatMessage, kept: KeptNote | None = None) -> None:
        """The turn, its user message and a ``kept`` recovery note (its batches marked
        told), after any close the store refused before, in one transaction (finished
        if cancelled)."""
        note = kept.message if kept is not None else None
        messages = [user] if note is None else [user, note]
        unclosed = self._unclosed

        def write() -> None:
            for turn in unclosed:
                turn.write(self.store, self.session_id)
            self.store.start_turn(self.session_id, index, user.content, messages=messages)
            if kept is not None and kept.batch_ids:
                self.store.mark_reported(list(kept.batch_ids), index)

        def started() -> None:
            self._unclosed = self._unclosed[len(unclosed) :]
            self._started.add(index)

        chars = 2 * len(user.content) + chars_of(messages[1:])
        try:
            await self._write_and_settle(write, chars=chars, settled=started)
        except PersistenceFailed:
            self._refused[index] = user.content  # recorded as it ended, once a write works
            raise

    async def append_messages(self, turn_index: int, messages: list[ChatMessage]) -> None:
        if messages:
            await self._call(
                self.store.append_messages,
                self.session_id,
                turn_index,
                messages,
                chars=chars_of(messages),
            )

    async def begin_batch(self, batch: BatchIntent) -> str:
        return await self._call(
            self.store.open_batch,
            self.session_id,
            batch,
            chars=chars_of(batch.visible)
            + (len(batch.assistant.content) if batch.assistant else 0),
        )

    async def mark_dispatched(
        self, batch_id: str, event_id: str, arguments: dict[str, Any]
    ) -> None:
        """Durable right before the call's handler runs (the ledger's dispatched step)."""
        await self._call(self.store.mark_dispatched, batch_id, event_id, arguments)

    async def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        await self._call(
            self.store.record_result, batch_id, event_id, status, result, chars=len(result.content)
        )

    async def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        await self._call(self.store.commit_batch, batch_id, messages, chars=chars_of(messages))

    async def abandon_batch(self, batch_id: str) -> None:
        """Best effort (finished if cancelled): the journal keeps the batch as cancelled,
        never as succeeded."""
        with contextlib.suppress(StoreError):
            await self._call(self.store.abandon_batch, batch_id, "cancelled", shielded=True)

    async def unreported(self) -> Recovery:
        batches = await self._call(self.store.list_unreported_batches, self.session_id)
        return recovery_from_batches(batches)

    async def finish_turn(self, turn: FinishedTurn) -> None:
        """Write the turn's metrics and close it, in one trip to the store; a failed or
        cancelled turn keeps its ``failure`` (reason and message) with it. A close the
        store refuses (the disk is full) is kept and written before the next turn
        starts, or when the session closes, so its row never stays ``running``."""
        if turn.index not in self._started:  # its start was refused: not on record yet
            if (text := self._refused.pop(turn.index, None)) is not None:
                self._unclosed = (*self._unclosed, RefusedStart(turn, text))
            return
        self._started.discard(turn.index)
        self._unclosed = (*self._unclosed, turn)
        try:
            await self._close_unclosed()
        except PersistenceFailed as exc:  # the turn now ends with this error: keep it so
            if turn.failure is None:
                failed = replace(turn, status="failed", failure=exc)
                self._unclosed = tuple(failed if t is turn else t for t in self._unclosed)
            raise

    async def _close_unclosed(self) -> None:
        unclosed = self._unclosed

        def write() -> None:
            for turn in unclosed:
                turn.write(self.store, self.session_id)

        def closed() -> None:
            self._unclosed = self._unclosed[len(unclosed) :]

        chars = sum(chars_of(list(t.messages)) for t in unclosed if isinstance(t, FinishedTurn))
        await self._write_and_settle(write, chars=chars, settled=closed)

    async def _write_and_settle(
        self, write: Callable[[], None], *, chars: int, settled: Callable[[], None]
    ) -> None:
        """``write``, then ``settled()`` to note that it is on record, both finished even
        if the caller is cancelled meanwhile. A close carries the turn's answer, which is
        not safe to write twice: a close that reached the store is never kept as
        unwritten (and written again) because a cancellation came before the note."""

        async def write_then_settle() -> None:
            await self._call(write, chars=chars)
            settled()

        await finish_even_if_cancelled(write_then_settle())

    async def flush(self) -> None:
        """Write buffered audits now (best effort: audits never fail a turn)."""
        if self._audits:
            with contextlib.suppress(StoreError):
                await self._call(lambda: None)

    async def close(self) -> None:
        """Flush audits and give up the writer claim in one write, which finishes even
        if the caller is cancelled meanwhile (on the loop it has nothing to wait for).
        A turn whose close was refused is tried once more first (best effort)."""
        if self._unclosed:
            with contextlib.suppress(StoreError):
                await finish_even_if_cancelled(self._close_unclosed())
        if self._lease.stop_timer() or self._lease.token is None:
            await finish_even_if_cancelled(self._close_after_renewal())
            return
        token = self._lease.take()
        assert token is not None
        small = self._small(0)
        audits = self._take_audits()
        if self._now is not None and small:
            with contextlib.suppress(NotNow):
                release = partial(self.store.release_claim, self.session_id, token)
                self._now.write_now(partial(self._grouped, audits, release))
                return
        await finish_even_if_cancelled(asyncio.to_thread(self._flush_and_release, audits, token))

    async def _close_after_renewal(self) -> None:
        """``close`` while a lease renewal is being written, or without a claim."""
        token = await self._lease.stop()
        if token is None:
            await self.flush()
            return
        await asyncio.to_thread(self._flush_and_release, self._take_audits(), token)

    def _flush_and_release(self, audits: BufferedAudits, token: str) -> None:
        """Best effort both: audits never fail a turn, and a lost claim is gone anyway.
        One transaction when the store groups writes; the release is tried on its own
        when that fails."""
        try:
            self._write(audits, partial(self.store.release_claim, self.session_id, token))
            return
        except StoreError:
            pass
        with contextlib.suppress(StoreError):
            self.store.release_claim(self.session_id, token)
