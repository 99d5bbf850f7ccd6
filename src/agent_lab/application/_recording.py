"""The recorder port a turn writes through, how a turn ended, and the recorder of a
session without a store.

``SessionRecorder`` (``_persistence``) writes to a ``SessionStore``; without a store,
``NULL_RECORDER`` writes nothing and, from a session's first batch, its
``MemoryRecorder`` keeps only the effect ledger in memory, so the engine never asks
whether a store is attached.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agent_lab.application._recovery import NO_RECOVERY, KeptNote, MemoryLedger, Recovery
from agent_lab.application.events import idempotency_key
from agent_lab.application.session_store import (
    BatchIntent,
    CallMetric,
    CallStatus,
    SessionStore,
)
from agent_lab.domain.errors import AgentLabError, InternalError, PersistenceFailed
from agent_lab.domain.messages import ChatMessage


class Recorder(Protocol):
    """The durable writes a turn makes (``SessionRecorder``, or ``NullRecorder``)."""

    @property
    def persistent(self) -> bool:
        """True when writes reach a store (provider TTFT is then measured for it)."""
        ...

    @property
    def closes_with_answer(self) -> bool:
        """True when a turn's answer may be written with the turn's close, in the same
        transaction (``FinishedTurn.messages``): the store commits the close all or
        nothing, so a refused close leaves no half of it and is written again whole."""
        ...

    def add_audit(self, turn_index: int | None, event: str, details: dict[str, Any]) -> None: ...

    async def start_turn(self, index: int, user: ChatMessage, kept: KeptNote | None = None) -> None:
        """Finishes its write even when the caller is cancelled meanwhile (as do
        ``abandon_batch`` and ``close``): once ``turn_started`` is out, the turn is on
        record. A ``kept`` recovery note is written with the user's message, and the
        batches it reports are marked told in the same write."""
        ...

    async def append_messages(self, turn_index: int, messages: list[ChatMessage]) -> None: ...

    async def begin_batch(self, batch: BatchIntent) -> str: ...

    async def mark_dispatched(
        self, batch_id: str, event_id: str, arguments: dict[str, Any]
    ) -> None: ...

    async def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None: ...

    async def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None: ...

    async def abandon_batch(self, batch_id: str) -> None: ...

    async def unreported(self) -> Recovery:
        """Interrupted batches the model has not been told about (none without a store)."""
        ...

    async def finish_turn(self, turn: FinishedTurn) -> None:
        """Close the turn with its metrics and how it ended."""
        ...

    async def close(self) -> None: ...

    def stop_on_loss(self, task: asyncio.Task[Any] | None) -> None:
        """Cancel ``task`` once another runtime takes the session over (never without a
        store); ``None`` stops watching."""
        ...

    @property
    def lost_to(self) -> PersistenceFailed | None:
        """Why the session ended when its claim was lost; ``None`` while it holds."""
        ...


_OPAQUE_TOKEN = re.compile(
    r"(?<![A-Za-z0-9+/=_-])(?=[^A-Z\s]*[A-Z])(?=[^a-z\s]*[a-z])(?=[^0-9\s]*[0-9])"
    r"[A-Za-z0-9+/=_-]{20,}"
)
"""A run of 20 or more characters of the base64 alphabet mixing upper case, lower case
and digits: what an encoded credential looks like (paths and hex ids do not)."""


def kept_failure_message(failure: AgentLabError) -> str:
    """The failure's message as it is kept (audited and stored with the turn).

    The client masks a key it knows in every plain form, but a provider may echo it in
    another encoding (base64, hex): opaque tokens of 20 characters or more are kept as
    ``***``, so no credential reaches the store. What the user is shown live is
    unchanged.
    """
    return kept_text(str(failure))


def kept_text(text: str) -> str:
    """``text`` with opaque tokens kept as ``***`` (see ``kept_failure_message``)."""
    return _OPAQUE_TOKEN.sub("***", text)


@dataclass(frozen=True)
class FinishedTurn:
    """How a turn ended, as the recorder closes it (with its metrics, in one write)."""

    index: int
    metrics: list[CallMetric]
    status: str
    wall_time_ms: int
    round_count: int
    failure: AgentLabError | None = None
    """A failed or cancelled turn's failure: its reason and message are kept with it."""
    recovered: tuple[str, ...] = ()
    """Interrupted batches whose effects were reported to the model in this turn."""
    messages: tuple[ChatMessage, ...] = ()
    """The turn's answer, when it is written with the close (``closes_with_answer``)."""

    def write(self, store: SessionStore, session_id: str) -> None:
        """The close as store writes: the answer, batches reported, the metrics, then
        the turn's status and failure. Each is safe to repeat but the answer, which a
        recorder carries here only when the store commits them all or nothing."""
        failure = self.failure
        if self.messages:
            store.append_messages(session_id, self.index, list(self.messages))
        if self.recovered:
            store.mark_reported(list(self.recovered), self.index)
        if self.metrics:
            store.append_usages(session_id, self.metrics)
        store.complete_turn(
            session_id,
            self.index,
            status=self.status,
            wall_time_ms=self.wall_time_ms,
            round_count=self.round_count,
            failure_reason=failure.failure_reason if failure is not None else None,
            failure_message=kept_failure_message(failure) if failure is not None else None,
        )


@dataclass(frozen=True)
class RefusedStart:
    """A turn whose start the store refused (the disk was full, the file locked), written
    with the next write that succeeds, so the user's text does not vanish and its
    audits belong to a turn on record: its row with that text, closed as it ended (with
    the error the user saw). None of its messages joins the transcript: it never ran."""

    turn: FinishedTurn
    text: str

    def write(self, store: SessionStore, session_id: str) -> None:
        if any(row["turn_index"] == self.turn.index for row in store.list_turns(session_id)):
            return  # its start reached the store after all: its row is its own
        store.start_turn(session_id, self.turn.index, self.text, messages=[])
        replace(self.turn, messages=()).write(store, session_id)


class NullRecorder:
    """A session without a store before its first batch: every write succeeds and keeps
    nothing. It holds no state, so every such session shares ``NULL_RECORDER``; a
    session's first batch gives it a ``MemoryRecorder`` of its own
    (``SessionState.batch_recorder()``), and batch writes never reach this one."""

    __slots__ = ()
    persistent = False
    closes_with_answer = True  # nothing is written: no await for the answer

    def add_audit(self, turn_index: int | None, event: str, details: dict[str, Any]) -> None:
        return None

    async def start_turn(self, index: int, user: ChatMessage, kept: KeptNote | None = None) -> None:
        return None

    async def append_messages(self, turn_index: int, messages: list[ChatMessage]) -> None:
        return None

    async def begin_batch(self, batch: BatchIntent) -> str:
        raise _batch_without_ledger()

    async def mark_dispatched(
        self, batch_id: str, event_id: str, arguments: dict[str, Any]
    ) -> None:
        raise _batch_without_ledger()

    async def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        raise _batch_without_ledger()

    async def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        raise _batch_without_ledger()

    async def abandon_batch(self, batch_id: str) -> None:
        raise _batch_without_ledger()

    async def unreported(self) -> Recovery:
        return NO_RECOVERY  # no batch has run

    async def finish_turn(self, turn: FinishedTurn) -> None:
        return None

    async def close(self) -> None:
        return None

    def stop_on_loss(self, task: asyncio.Task[Any] | None) -> None:
        return None

    @property
    def lost_to(self) -> PersistenceFailed | None:
        return None


NULL_RECORDER = NullRecorder()


def _batch_without_ledger() -> InternalError:
    return InternalError("a batch was recorded without its session's MemoryRecorder")


class MemoryRecorder(NullRecorder):
    """A session without a store, from its first batch on: nothing durable is written;
    the batches' effect ledger lives on in memory, so a lost batch still reaches the
    next turn."""

    __slots__ = ("_ledger",)

    def __init__(self) -> None:
        self._ledger = MemoryLedger()

    async def begin_batch(self, batch: BatchIntent) -> str:
        keyed = [(event, idempotency_key(batch.scope, event.id)) for event in batch.events]
        self._ledger.open(batch.scope, batch.turn_index, batch.round_index, keyed)
        return batch.scope

    async def mark_dispatched(
        self, batch_id: str, event_id: str, arguments: dict[str, Any]
    ) -> None:
        self._ledger.dispatched(batch_id, event_id, arguments)

    async def record_result(
        self, batch_id: str, event_id: str, status: CallStatus, result: ChatMessage
    ) -> None:
        self._ledger.landed(batch_id, event_id, status, result)

    async def commit_batch(self, batch_id: str, messages: list[ChatMessage]) -> None:
        self._ledger.commit(batch_id)

    async def abandon_batch(self, batch_id: str) -> None:
        self._ledger.abandon(batch_id)

    async def start_turn(self, index: int, user: ChatMessage, kept: KeptNote | None = None) -> None:
        if kept is not None:
            self._ledger.reported(kept.batch_ids)

    async def unreported(self) -> Recovery:
        return self._ledger.unreported()

    async def finish_turn(self, turn: FinishedTurn) -> None:
        self._ledger.reported(turn.recovered)
