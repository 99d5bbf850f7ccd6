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

from agent_lab.application._tasks import being_cancelled, finish_even_if_cancelled
from agent_lab.application.contracts import DebugRunRequest, check_text
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
            if exc_type is None and self._input_closed and not being_cancelled():
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
        """Submit a user turn; it runs after the turn in progress, if any.

        Raises:
            InvalidRequest: the message is not valid Unicode (a lone surrogate).
        """
        check_text("message", message)
        await self._open_input().put(message)

    def send_nowait(self, message: str | ChatMessage) -> None:
        """``send()`` without waiting (raises ``asyncio.QueueFull`` on a full bounded queue)."""
        check_text("message", message)
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
        """End the session now, as ``DebugRuntime.aclose()`` does; nobody reads the rest."""
        if self._queues is None or self._task is None or self._task.done():
            return
        self._input_closed = True
        self._runtime._end_now()
        await self._drain()

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
        if not task.done():  # the orderly end was cut short: no second one, stop it outright
            await self._runtime.aclose(grace_seconds=0)
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
