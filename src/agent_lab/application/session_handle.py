"""``RuntimeSession``: one multi-turn session behind an ``async with`` block.

For example::

    async with runtime.session(request) as session:
        async for message in session:          # the first turn is request.user_message
            if message["type"] == "turn_completed":
                break
        await session.send("and the second turn")
        await session.close()                  # no more turns after the ones sent
        async for message in session:          # the rest, down to ``done``
            ...

It is a thin layer over ``DebugRuntime.start_session()`` and its queues: the same turn
engine runs the turns. The block is left only once the runtime has stopped, its writer
claim released and every task it started finished, whatever happened inside it. A
plain exit after ``close()`` lets the turns already sent run to their end first; any
other exit (without ``close()``, by an exception, by a cancellation) ends the session
at once: the turn in progress and the turns not yet run are cancelled.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agent_lab.application._tasks import finish_even_if_cancelled
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.event_agent import EventBatchDone
from agent_lab.application.protocol import InputItem, OutputMessage
from agent_lab.application.queues import RuntimeQueues
from agent_lab.domain.errors import UsageError
from agent_lab.domain.messages import ChatMessage

if TYPE_CHECKING:
    from agent_lab.application.runtime import DebugRuntime


class RuntimeSession:
    """A running session: ``send()`` turns, iterate its output, ``close()`` it.

    Iterating yields every output message (``OutputMessage``, audits included) and ends
    when the session has ended and stopped: after ``done`` (the input was closed or a
    tool terminated the session), or after the ``error`` of a session that could not
    be opened (e.g. ``session_busy``). A failed turn's ``error`` does not end it.
    Only one consumer should iterate.
    """

    def __init__(self, runtime: DebugRuntime, request: DebugRunRequest) -> None:
        self._runtime = runtime
        self._request = request
        self._queues: RuntimeQueues | None = None
        self._task: asyncio.Task[None] | None = None
        self._backlog: deque[OutputMessage] = deque()
        self._input_closed = False
        self._ended = False
        self._latest_turn = 0
        self.session_id: str | None = request.session_id
        """The persisted session's id, once ``session_started`` has been read."""

    async def __aenter__(self) -> RuntimeSession:
        if self._task is not None:
            raise UsageError("a session handle can be entered only once")
        self._queues, self._task = self._runtime._launch_session(self._request)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            if exc_type is None and self._input_closed and not _being_cancelled():
                await self._drain()
            else:
                await self._wind_down()
        finally:  # interrupted while winding down: stop the runtime outright
            await finish_even_if_cancelled(self._stop())

    @property
    def running(self) -> bool:
        """The runtime still runs this session (it may have said ``done`` already)."""
        return self._task is not None and not self._task.done()

    async def send(self, message: str | ChatMessage) -> None:
        """Submit a user turn; it runs after the turn in progress, if any."""
        await self._open_input().put(message)

    def send_nowait(self, message: str | ChatMessage) -> None:
        """``send()`` without waiting (raises ``asyncio.QueueFull`` on a full bounded queue)."""
        self._open_input().put_nowait(message)

    def cancel_turn(self) -> bool:
        """Cancel the turn in progress (its ``error`` says ``cancelled``); the session goes on.

        Returns whether a turn was running.
        """
        return self.running and self._runtime.cancel_turn()

    async def close(self) -> None:
        """Accept no more turns: the ones already sent still run, then the session ends.

        The iteration goes on down to ``done``; a plain exit from the block after
        ``close()`` waits for those turns instead of cancelling them.
        """
        queues, _ = self._require()
        if not self._input_closed:
            self._input_closed = True
            await queues.input.put(None)

    def close_nowait(self) -> None:
        """``close()`` without waiting (raises ``asyncio.QueueFull`` on a full bounded queue)."""
        queues, _ = self._require()
        if not self._input_closed:
            queues.input.put_nowait(None)
            self._input_closed = True

    def __aiter__(self) -> RuntimeSession:
        return self

    async def __anext__(self) -> OutputMessage:
        if self._ended:
            raise StopAsyncIteration
        self._require()
        message = self._backlog.popleft() if self._backlog else await self._read_runtime()
        if message is None:
            self._ended = True
            raise StopAsyncIteration
        if message["type"] == "session_started" and "session_id" in message:
            self.session_id = message["session_id"]
        elif message["type"] == "turn_started":
            self._latest_turn = message["turn_index"]
        return message

    def _require(self) -> tuple[RuntimeQueues, asyncio.Task[None]]:
        if self._queues is None or self._task is None:
            raise UsageError("the session is not open; use `async with runtime.session(...)`")
        return self._queues, self._task

    def _open_input(self) -> asyncio.Queue[InputItem | EventBatchDone]:
        queues, task = self._require()
        if self._input_closed or task.done():
            raise UsageError("the session is closed")
        return queues.input

    async def _read_runtime(self) -> OutputMessage | None:
        """The next output message, or ``None`` once the runtime has stopped."""
        queues, task = self._require()
        return await next_output(queues.output, task, keep=self._backlog.append)

    async def _wind_down(self) -> None:
        """End the session now: drop unsent turns, close, cancel what still runs."""
        if self._queues is None or self._task is None or self._task.done():
            return
        _drop_pending(self._queues.input)  # a ``None`` from ``close()`` too, hence:
        self._input_closed = True
        self._queues.input.put_nowait(None)  # the queue was just emptied: it has room
        # Cancel each turn once: the running one now, and any turn that still starts
        # (buffered inside the engine) when its ``turn_started`` shows. What was said
        # before now tells which turn is running: the last one that started.
        latest = self._latest_turn
        output = self._queues.output
        while not output.empty():
            self._backlog.append(output.get_nowait())
        for said in self._backlog:
            if said["type"] == "turn_started":
                latest = max(latest, said["turn_index"])
        self._runtime.cancel_turn()
        while (message := await self._read_runtime()) is not None:
            if message["type"] == "turn_started" and message["turn_index"] > latest:
                latest = message["turn_index"]
                self._runtime.cancel_turn()
        self._backlog.clear()

    async def _drain(self) -> None:
        """Let the session end on its own; nobody reads what it still says."""
        self._backlog.clear()
        while await self._read_runtime() is not None:
            pass

    async def _stop(self) -> None:
        """Cancel the runtime's task if it still runs and wait for it to finish."""
        task = self._task
        if task is None:
            return
        self._ended = True
        if not task.done():
            await self._runtime.aclose()
        elif not task.cancelled() and task.exception() is not None:
            await task  # a crash of the runtime is never silent


async def next_output(
    output: asyncio.Queue[Any],
    task: asyncio.Task[None],
    *,
    keep: Callable[[OutputMessage], None],
) -> OutputMessage | None:
    """The next message of ``output``, or ``None`` once ``task`` stopped and it is empty.

    No polling: it waits for whichever comes first, a message or the end of the task.
    When the caller is cancelled meanwhile, a message already taken goes to ``keep``.
    Every message is taken with ``get()``, so an injected queue sees each one go.
    """
    if output.empty() and not task.done():
        getter: asyncio.Task[OutputMessage] = asyncio.ensure_future(output.get())
        try:
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            taken = await _settle(getter)
            if taken is not None:
                keep(taken)
            raise
        taken = await _settle(getter)
        if taken is not None:
            return taken
    if output.empty():
        return None  # the task stopped and everything it said has been read
    message: OutputMessage = await output.get()  # at once: it holds a message
    return message


async def _settle(getter: asyncio.Task[OutputMessage]) -> OutputMessage | None:
    """Stop a pending ``get()``; return the message it took, if it took one."""
    if not getter.done():
        getter.cancel()
        await asyncio.wait({getter})
    return None if getter.cancelled() else getter.result()


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _drop_pending(queue: asyncio.Queue[Any]) -> None:
    while not queue.empty():
        queue.get_nowait()
