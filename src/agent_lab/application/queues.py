"""The three queues that connect a runtime to its consumer and to its event agent.

Their items are described in ``agent_lab.application.protocol``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.event_agent import EventAgentRequest, EventBatchDone
from agent_lab.application.protocol import InputItem


def _input_queue() -> asyncio.Queue[InputItem | EventBatchDone]:
    return CompactQueue()


def _output_queue() -> asyncio.Queue[Any]:
    return CompactQueue()


def _events_queue() -> asyncio.Queue[EventAgentRequest]:
    return CompactQueue()


@dataclass
class RuntimeQueues:
    """Queues of one runtime; inject your own to observe or bound them.

    * ``input`` — user turns (``ChatMessage`` or ``str``) and the event agent's ``tool``
      replies; put ``None`` to close a session.
    * ``output`` — the output protocol: one dict per message (``OutputMessage``).
    * ``events`` — ``EventAgentRequest`` batches for the event agent.

    The defaults are ``CompactQueue``s: ``asyncio.Queue``s that allocate their waiter
    bookkeeping only when it is needed (about 1.7 KiB a queue instead of 3.2).
    """

    input: asyncio.Queue[InputItem | EventBatchDone] = field(default_factory=_input_queue)
    output: asyncio.Queue[Any] = field(default_factory=_output_queue)
    """Holds ``OutputMessage`` dicts; typed ``Any`` until the turn engine's constructors
    return the protocol types (read it through ``DebugRuntime.session()`` or ``run()``,
    which hand out ``OutputMessage``)."""
    events: asyncio.Queue[EventAgentRequest] = field(default_factory=_events_queue)
