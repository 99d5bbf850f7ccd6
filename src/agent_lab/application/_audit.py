"""The audit trail: turn-relative timestamps, logging, output and the store buffer."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from agent_lab.application import _outputs
from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.ports import Clock

logger = logging.getLogger("agent_lab.application.runtime")


class AuditSink(Protocol):
    def add_audit(self, turn_index: int | None, event: str, details: dict[str, Any]) -> None: ...


class _NoSink:
    def add_audit(self, turn_index: int | None, event: str, details: dict[str, Any]) -> None:
        return None


_NO_SINK = _NoSink()


class Auditor:
    """Emits audits for one session; every audit reads the clock once unless given ``now``.

    ``turn_elapsed_ms`` is measured from the current turn's origin and never decreases
    within a turn.
    """

    def __init__(self, clock: Clock, output: asyncio.Queue[Any]) -> None:
        self.clock = clock
        self._output_queue = output
        self._completes_on_take = isinstance(output, CompactQueue)
        self._origin = 0.0
        self._last_elapsed = 0
        self.turn_index: int | None = None
        self.session_id: str | None = None
        self.sink: AuditSink = _NO_SINK
        """Where audits are kept (the session's recorder when a store is attached)."""

    @property
    def output(self) -> asyncio.Queue[Any]:
        return self._output_queue

    def begin_turn(self, origin: float, turn_index: int | None) -> None:
        self._origin = origin
        self._last_elapsed = 0
        self.turn_index = turn_index

    async def emit(
        self,
        event: str,
        details: dict[str, Any],
        *,
        now: float | None = None,
        complete: Callable[[], object] | None = None,
    ) -> float:
        """Audit ``event``; returns the clock reading it was stamped with.

        ``complete()`` fills in what ``details`` still lacks. It runs when the audit is
        taken from the output queue when that is a ``CompactQueue`` and no store keeps
        the audit (so what it makes lives only while the consumer holds the message),
        and here, before the audit goes anywhere, otherwise.
        """
        queue, sink = self._output_queue, self.sink
        deferred = self._completes_on_take and sink is _NO_SINK
        if complete is not None and not deferred:
            complete()
        if now is None:
            now = self.clock()
        # ``_outputs.elapsed_ms`` written out (ten audits a turn): never negative, and
        # never less than the turn's last audit.
        elapsed = round((now - self._origin) * 1000)
        if elapsed < self._last_elapsed:
            elapsed = self._last_elapsed
        self._last_elapsed = elapsed
        details["turn_elapsed_ms"] = elapsed
        if logger.isEnabledFor(logging.INFO):  # no record (nor its extra dict) otherwise
            logger.info(
                "%s",
                event,
                extra={
                    "audit_event": event,
                    "session_id": self.session_id,
                    "turn_index": self.turn_index,
                },
            )
        if sink is not _NO_SINK:
            sink.add_audit(self.turn_index, event, details)
        message = _outputs.audit(event, details)
        if complete is None or not deferred:
            await queue.put(message)
            return now
        assert isinstance(queue, CompactQueue)
        queue.complete_when_taken(message, complete)
        try:
            await queue.put(message)
        except BaseException:
            queue.forget_completion(message)
            raise
        return now
