"""The live export: watch a runtime's output queue, send each turn when it ends.

``LiveTelemetry.queues()`` gives a runtime an output queue that shows every message to
an observer as it is put. The observer keeps the turn's audits; when the turn ends
(``turn_completed`` or ``error`` in a session, ``done`` or ``error`` in a one-shot run)
the runtime has already written the turn, so a worker thread reads the anchor and the
call metrics from the store, converts the streamed audits with the same converter as
the later export, and sends them. The session span follows at ``done`` (or when the
telemetry closes). Observing never blocks or fails the runtime.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.session_store import SessionStore
from agent_lab.infrastructure.telemetry.convert import ConvertOptions, turn_spans
from agent_lab.infrastructure.telemetry.export import StoredSession
from agent_lab.infrastructure.telemetry.record import Audit
from agent_lab.infrastructure.telemetry.spans import NS_PER_MS, SpanData

logger = logging.getLogger(__name__)

_TURN_ENDS = frozenset({"turn_completed", "error", "done"})


class SpanSink(Protocol):
    def export(self, spans: list[SpanData]) -> bool: ...
    def shutdown(self) -> None: ...


def failure_of(sink: SpanSink, default: str) -> str:
    """Why ``sink``'s last export failed, when it says (``OtlpSink.failure``), else
    ``default``."""
    failure = getattr(sink, "failure", None)
    return failure if isinstance(failure, str) and failure else default


class ObservedQueue(asyncio.Queue[Any]):
    """An output queue that shows each message to ``observe`` as it is put."""

    def __init__(self, observe: Any) -> None:
        super().__init__()
        self._observe = observe

    def put_nowait(self, item: Any) -> None:
        super().put_nowait(item)
        try:
            self._observe(item)
        except Exception:  # telemetry must never disturb the runtime
            logger.exception("telemetry observer failed")


class LiveTelemetry:
    """Exports the turns of every runtime built with ``queues()``.

    Args:
        sink: Where spans go (``OtlpSink``).
        store: The store the runtimes write to (anchors and call metrics).
        options: Content capture and prices.
    """

    def __init__(
        self, sink: SpanSink, store: SessionStore | None, options: ConvertOptions | None = None
    ) -> None:
        self.sink = sink
        self.store = store
        self.options = options or ConvertOptions()
        self._lock = threading.Lock()
        self._job_lock = threading.Lock()
        self._jobs: deque[Callable[[], None]] = deque()
        self._worker: asyncio.Task[None] | None = None
        self._sessions: list[_SessionWatch] = []
        self._reported: str | None = None
        """The export failure last reported: the same one is not reported again."""

    def queues(self) -> RuntimeQueues:
        """Queues for one runtime whose output is watched."""
        watch = _SessionWatch(self)
        self._sessions.append(watch)
        return RuntimeQueues(output=ObservedQueue(watch.observe))

    async def flush(self) -> None:
        """Wait until every export scheduled so far was sent."""
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    async def aclose(self) -> None:
        """Send open sessions' spans, finish pending exports and shut down.

        When the closing task is cancelled (Ctrl-C on a server), what is left is sent
        right here, blocking: the process is stopping and the spans must not be lost.
        """
        for watch in self._sessions:
            watch.finish_session()
        try:
            await self.flush()
        except asyncio.CancelledError:
            self._run_jobs()
            self.sink.shutdown()
            raise
        await asyncio.to_thread(self.sink.shutdown)

    def schedule(self, job: Callable[[], None]) -> None:
        """Run ``job`` (blocking) in a worker thread, after the jobs scheduled before it."""
        self._jobs.append(job)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    async def _drain(self) -> None:
        while self._jobs:
            await asyncio.to_thread(self._run_next)

    def _run_next(self) -> None:
        with self._job_lock:
            if self._jobs:
                _call(self._jobs.popleft())

    def _run_jobs(self) -> None:
        """The jobs left, here and now (after the one a worker thread may be running)."""
        with self._job_lock:
            while self._jobs:
                _call(self._jobs.popleft())

    def send(self, spans: list[SpanData]) -> None:
        """Export ``spans``; a failure is logged as one ``error:`` line, once until an
        export succeeds again."""
        with self._lock:
            if self.sink.export(spans):
                self._reported = None
                return
            failure = failure_of(self.sink, "the trace backend did not accept the spans")
            if failure != self._reported:
                self._reported = failure
                logger.error("error: %s", failure)


class _SessionWatch:
    """The observer of one runtime's output."""

    def __init__(self, owner: LiveTelemetry) -> None:
        self.owner = owner
        self.session_id: str | None = None
        self.turn: int | None = None
        self.open = False
        self.audits: list[Audit] = []
        self.first_seen_ns: int | None = None
        self.exported_turns = 0
        self.session_sent = False
        self.stored: StoredSession | None = None

    def observe(self, message: Mapping[str, Any]) -> None:
        kind = message.get("type")
        if kind == "session_started":
            self.session_id = message.get("session_id") or f"run-{uuid.uuid4().hex}"
        elif kind == "audit":
            self._audit(message)
        if kind in _TURN_ENDS:
            self._end_turn()
        if kind == "done":
            self.finish_session()

    def _audit(self, message: Mapping[str, Any]) -> None:
        event = str(message.get("event"))
        details = message.get("details") if isinstance(message.get("details"), Mapping) else {}
        assert isinstance(details, Mapping)
        if event == "session_started":
            self.turn = details.get("first_turn_index")
            self.open = True
            return
        if event == "turn_started":
            self.turn = details.get("turn_index")
            self.open = True
        if not self.open:
            return  # a session's closing audit, after its last turn was sent
        if not self.audits:
            elapsed = int(details.get("turn_elapsed_ms") or 0)
            self.first_seen_ns = time.time_ns() - elapsed * NS_PER_MS
        self.audits.append({"event": event, "details": dict(details)})

    def _end_turn(self) -> None:
        audits, self.audits = self.audits, []
        self.open = False
        turn, session_id = self.turn, self.session_id
        if not audits or not isinstance(turn, int) or session_id is None:
            return
        self.exported_turns += 1
        seen = self.first_seen_ns or time.time_ns()
        self.owner.schedule(lambda: self._export_turn(session_id, turn, audits, seen))

    def _export_turn(self, session_id: str, turn: int, audits: list[Audit], seen: int) -> None:
        stored = self._refreshed(session_id)
        if turn not in stored.anchors:  # no store: placed where the observer saw it
            stored.anchors[turn] = seen
            stored.turns[turn] = audits
        self.owner.send(turn_spans(stored.record(turn, audits), self.owner.options))

    def finish_session(self) -> None:
        if self.session_sent or not self.exported_turns or self.session_id is None:
            return
        self.session_sent = True
        session_id = self.session_id
        self.owner.schedule(lambda: self._export_session(session_id))

    def _export_session(self, session_id: str) -> None:
        root = self._refreshed(session_id).root_span()
        if root is not None:
            self.owner.send([root])

    def _refreshed(self, session_id: str) -> StoredSession:
        if self.stored is None:
            self.stored = StoredSession(session_id)
        if self.owner.store is not None:
            self.stored.refresh(self.owner.store)
        return self.stored


def _call(job: Callable[[], None]) -> None:
    try:
        job()
    except Exception:
        logger.exception("telemetry export failed")
