"""The three queues that connect a runtime to its consumer and to its event agent."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


def _queue() -> asyncio.Queue[Any]:
    return asyncio.Queue()


@dataclass
class RuntimeQueues:
    """Queues of one runtime; inject your own to observe or bound them.

    * ``input`` — user turns (``ChatMessage`` or ``str``) and the event agent's ``tool``
      replies; put ``None`` to close a session.
    * ``output`` — the output protocol: one dict per message.
    * ``events`` — ``EventAgentRequest`` batches for the event agent.
    """

    input: asyncio.Queue[Any] = field(default_factory=_queue)
    output: asyncio.Queue[Any] = field(default_factory=_queue)
    events: asyncio.Queue[Any] = field(default_factory=_queue)
