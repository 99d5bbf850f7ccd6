"""The three queues that connect a runtime to its consumer and to its event agent.

Their items are described in ``agent_lab.application.protocol``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_lab.application.compact_queue import CompactQueue, SparseQueue
from agent_lab.application.event_agent import EventAgentRequest, EventBatchDone
from agent_lab.application.protocol import InputItem


class RuntimeQueues:
    """Queues of one runtime; inject your own to observe or bound them.

    * ``input`` — user turns (``ChatMessage`` or ``str``) and the event agent's ``tool``
      replies; put ``None`` to close a session.
    * ``output`` — the output protocol: one dict per message (``OutputMessage``).
      Typed ``Any`` until the turn engine's constructors return the protocol types
      (read it through ``DebugRuntime.session()`` or ``run()``, which hand out
      ``OutputMessage``).
    * ``events`` — ``EventAgentRequest`` batches for the event agent; made on first
      use unless given (a session without a ``dual_agent`` batch never needs it).

    The defaults are ``asyncio.Queue``s that allocate their bookkeeping only when it is
    needed: a ``CompactQueue`` for the output (about 1.7 KiB instead of 3.2), and for
    the input and events, which are empty most of the time, a ``SparseQueue`` (no
    deque at all while empty and nobody waits).
    """

    __slots__ = ("_events", "input", "output")

    def __init__(
        self,
        input: asyncio.Queue[InputItem | EventBatchDone] | None = None,  # noqa: A002
        output: asyncio.Queue[Any] | None = None,
        events: asyncio.Queue[EventAgentRequest] | None = None,
    ) -> None:
        self.input: asyncio.Queue[InputItem | EventBatchDone] = (
            input if input is not None else SparseQueue()
        )
        self.output: asyncio.Queue[Any] = output if output is not None else CompactQueue()
        self._events = events

    @property
    def events(self) -> asyncio.Queue[EventAgentRequest]:
        if self._events is None:
            self._events = SparseQueue()
        return self._events

    @events.setter
    def events(self, queue: asyncio.Queue[EventAgentRequest]) -> None:
        self._events = queue

    def drop_pending_events(self) -> None:
        """Drop the event requests nobody will answer (a turn that no longer waits)."""
        events = self._events
        while events is not None and not events.empty():
            events.get_nowait()

    def close_input_now(self) -> None:
        """Drop the input not read yet (a ``None`` too) and close it with a ``None``."""
        drop_pending(self.input)
        self.input.put_nowait(None)  # the queue was just emptied: it has room

    def __repr__(self) -> str:
        return (
            f"RuntimeQueues(input={self.input!r}, output={self.output!r}, events={self._events!r})"
        )


def drop_pending(queue: asyncio.Queue[Any]) -> None:
    """Drop what ``queue`` holds now, without waiting."""
    while not queue.empty():
        queue.get_nowait()
