"""What the event agent sends back: typed replies on its own channel.

``ReplyChannel`` carries, per call that reaches its handler, a ``DispatchNotice`` (the
runtime resolves its ``durable`` future once the call is journaled as dispatched, and
only then does the handler run); one ``ToolReply`` per call (``durable`` resolved once
the reply is stored); and then an ``EventBatchDone`` with the outcome.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass
from typing import Any, Literal, TypeAlias

from agent_lab.application._metrics import ModelCall
from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.events import EventBatchResult, EventResult
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage


@dataclass(frozen=True)
class ArgumentCall:
    """A forced-tool-choice call made for one event."""

    event_id: str
    event_name: str
    fallback: bool
    """True when a resolver existed but its arguments did not fit the schema."""
    call: ModelCall


@dataclass(eq=False)
class Resolving:
    """How far one event of a batch got with its arguments, kept up to date by the event
    agent, so that a turn ending in the middle of its batch (cancelled, failed, out of
    time) still records the argument call it made or had open, and the arguments."""

    scope: str
    event_id: str
    event_name: str
    call: ArgumentCall | None = None
    """The forced argument call, once it was sent (its figures grow as it streams)."""
    entry: dict[str, Any] | None = None
    """The resolution's audit entry (``event_agent_response``), once resolved."""
    failures: tuple[dict[str, Any], ...] = ()
    """Its argument failures' audit entries, once resolved."""


@dataclass(frozen=True)
class ArgumentFailure:
    """Why arguments could not be resolved or generated for one event."""

    event_id: str
    event_name: str
    stage: Literal["resolver", "generation"]
    """``resolver`` (it raised; the model is asked instead) or ``generation`` (the forced
    call failed; the event fails with this cause)."""
    cause: str

    def audit_entry(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class EventAgentOutcome:
    batch: EventBatchResult
    argument_calls: tuple[ArgumentCall, ...] = ()
    results_message: ChatMessage | None = None
    """The ``event_agent`` message for the chat agent, if it needs one."""
    failure: BaseException | None = None


@dataclass(frozen=True)
class ToolReply:
    """One reply of a batch; the runtime resolves ``durable`` once it is stored."""

    scope: str
    result: EventResult
    message: ChatMessage
    durable: asyncio.Future[None]


@dataclass(frozen=True)
class DispatchNotice:
    """A call about to reach its handler; it runs once the runtime resolves ``durable``
    (a failed resolution keeps it from running)."""

    scope: str
    event: ToolCallEvent
    """The call with its resolved arguments."""
    durable: asyncio.Future[None]


@dataclass(frozen=True)
class EventBatchDone:
    """Sent after the last reply of a batch."""

    scope: str
    outcome: EventAgentOutcome


EventAgentReply: TypeAlias = DispatchNotice | ToolReply | EventBatchDone


class ReplyChannel:
    """The event agent's typed channel back to the turn engine (one per session).

    ``wire`` (``queues.input``) receives each ``tool`` reply as the public record.
    """

    def __init__(self, wire: asyncio.Queue[Any] | None = None) -> None:
        self._items: asyncio.Queue[EventAgentReply] = CompactQueue()
        self._wire = wire

    async def reply(self, scope: str, result: EventResult) -> None:
        """Send one reply and wait until the runtime made it durable (or refused)."""
        message = result.tool_message()
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._wire is not None:
            await self._wire.put(message)
        await self._items.put(ToolReply(scope, result, message, durable))
        await durable

    async def dispatching(self, scope: str, event: ToolCallEvent) -> None:
        """Announce a call and wait until the runtime journaled it (or refused: raises)."""
        durable: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await self._items.put(DispatchNotice(scope, event, durable))
        await durable

    async def done(self, scope: str, outcome: EventAgentOutcome) -> None:
        await self._items.put(EventBatchDone(scope, outcome))

    async def receive(self) -> EventAgentReply:
        return await self._items.get()

    def clear(self) -> None:
        """Forget replies of a batch nobody waits for any more (a cancelled turn)."""
        while not self._items.empty():
            item = self._items.get_nowait()
            if isinstance(item, ToolReply | DispatchNotice) and not item.durable.done():
                item.durable.cancel()
