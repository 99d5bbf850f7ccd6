"""``DebugRuntime``: the public entry point that runs turns and sessions.

For example::

    runtime = DebugRuntime(client, session_store=store)
    async for message in runtime.run(request):
        print(message)

    async with runtime.session(request) as session:
        await session.send("and now the weather")
        async for message in session:
            ...

``run()`` yields one turn's output protocol until ``done`` or ``error``; ``session()``
runs a multi-turn session behind a handle (see ``RuntimeSession``); ``start()`` and
``start_session()`` are the lower-level forms that hand out the queues themselves;
``aclose()`` ends what the runtime runs (the running turn cancelled, the session
finished as usual) and awaits everything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

from agent_lab.application._metrics import tool_metrics
from agent_lab.application._session_runner import SessionRunner
from agent_lab.application._tasks import being_cancelled
from agent_lab.application.contracts import DebugRunRequest, check_runnable
from agent_lab.application.events import EventBatchResult
from agent_lab.application.loop_lag import LoopLagMonitor, monitor_for
from agent_lab.application.ports import ChatClient, Clock
from agent_lab.application.protocol import TERMINAL_TYPES, OutputMessage
from agent_lab.application.queues import RuntimeQueues, drop_pending
from agent_lab.application.session_handle import RuntimeSession, next_output
from agent_lab.application.session_store import SessionStore
from agent_lab.application.tools import ToolRegistry, shared_default_tool_registry
from agent_lab.domain.errors import UsageError

__all__ = ["CLOSE_GRACE_SECONDS", "TERMINAL_TYPES", "DebugRuntime", "RuntimeSession"]

CLOSE_GRACE_SECONDS = 5.0
"""How long ``aclose()`` lets the orderly end take before it cancels outright."""


class DebugRuntime:
    """Runs a chat agent and its tools against one conversation at a time.

    Args:
        chat_client: The model port (``OpenAICompatibleChatClient`` or a test double).
        registry: Tools; the built-in registry by default.
        session_store: Persist sessions here; without one, nothing is persisted.
        queues: Inject the three queues, e.g. to observe or bound them.
        clock: Monotonic seconds; ``time.perf_counter`` by default.
        claim_wait_seconds: How long to wait for a session another runtime drives.
    """

    def __init__(
        self,
        chat_client: ChatClient,
        *,
        registry: ToolRegistry | None = None,
        session_store: SessionStore | None = None,
        queues: RuntimeQueues | None = None,
        clock: Clock | None = None,
        claim_wait_seconds: float = 0.0,
    ) -> None:
        self.chat_client = chat_client
        self._registry = registry if registry is not None else shared_default_tool_registry()
        self._own_registry = registry is not None
        """``False`` while the runtime runs with the process's shared default registry."""
        self.session_store = session_store
        self.queues = queues if queues is not None else RuntimeQueues()
        self.clock: Clock = clock or time.perf_counter
        self.claim_wait_seconds = claim_wait_seconds
        self._runner: SessionRunner | None = None
        self._task: asyncio.Task[None] | None = None
        self._lag: LoopLagMonitor | None = None

    @property
    def registry(self) -> ToolRegistry:
        """The tools; by default the built-in ones, shared by the runtimes that run with
        them until this property is read (this runtime's own copy from then on)."""
        if not self._own_registry:
            self._registry, self._own_registry = self._registry.copy(), True
        return self._registry

    @registry.setter
    def registry(self, registry: ToolRegistry) -> None:
        self._registry, self._own_registry = registry, True

    def start(self, request: DebugRunRequest) -> RuntimeQueues:
        """Run one turn in the background; read its output from the returned queues."""
        return self._launch(request, one_shot=True)

    def start_session(self, request: DebugRunRequest) -> RuntimeQueues:
        """Run turns from ``queues.input`` until it is closed or a tool terminates."""
        return self._launch(request, one_shot=False)

    def session(self, request: DebugRunRequest) -> RuntimeSession:
        """A session handle; it starts on ``async with`` and is ended on leaving it.

        ``request.user_message``, when given, is the first turn.
        """
        return RuntimeSession(self, request)

    async def run(self, request: DebugRunRequest) -> AsyncGenerator[OutputMessage, None]:
        """Run one turn, yielding every output message until ``done`` or ``error``.

        A consumer that stops early (``break``, an exception) ends the turn as
        ``aclose()`` does; a cancelled one stops it outright, without waiting.
        """
        queues = self.start(request)
        task = self._task
        assert task is not None
        finished = False
        try:
            while not finished:
                message = await next_output(queues.output, task, keep=_discard)
                if message is None:  # stopped without a last word: it crashed
                    await self.aclose()  # raises what it crashed with
                    break
                finished = message["type"] in TERMINAL_TYPES
                yield message
        finally:
            if finished:
                await self._wait_for_tasks()
            else:  # the consumer stopped early: end the turn too; nobody reads the rest
                try:  # a cancelled consumer stops waiting at once: no orderly end then
                    await self.aclose(grace_seconds=0 if being_cancelled() else CLOSE_GRACE_SECONDS)
                finally:
                    drop_pending(queues.output)

    def _end_now(self) -> None:
        """Start ending what runs, in order (``aclose()``, a session handle's early exit)."""
        if self._runner is not None and self.running:
            self._runner.end_now()

    def cancel_turn(self) -> bool:
        """Cancel the turn in progress (its batch is journaled as cancelled)."""
        return self._runner.cancel_turn() if self._runner is not None else False

    def _cancel_unstarted(self, sent: int) -> bool:
        """A session handle's ``cancel_turn()`` between turns: cancel the next of the
        ``sent`` turns as it starts (see ``SessionRunner.cancel_unstarted``)."""
        runner = self._runner
        return runner is not None and self.running and runner.cancel_unstarted(sent)

    def _reads_input(self) -> bool:
        """The session still reads its input (a turn sent now either runs or is reported)."""
        return self._runner is not None and self.running and self._runner.reading

    @property
    def running(self) -> bool:
        """The session or run this runtime started has not stopped yet."""
        return self._task is not None and not self._task.done()

    def stats(self) -> dict[str, Any]:
        """Process-wide figures of the event loop this runtime last ran on.

        ``loop_lag``: ``max_ms`` (the worst stall since the loop's monitor started),
        ``stalls_over_20ms``, ``beats`` and ``last_ms`` (docs/runtime.md).
        """
        monitor = self._lag
        if monitor is None:
            with contextlib.suppress(RuntimeError):
                monitor = monitor_for()
        empty = {"max_ms": 0.0, "stalls_over_20ms": 0, "beats": 0, "last_ms": 0.0}
        return {"loop_lag": monitor.stats().as_dict() if monitor is not None else empty}

    async def aclose(self, *, grace_seconds: float = CLOSE_GRACE_SECONDS) -> None:
        """End what this runtime runs, in order, and wait for it to stop.

        A session ends the way leaving its ``session()`` block early does (turns sent
        but not started are dropped, the running turn is cancelled: its open calls are
        closed as cancelled, it is persisted as ``cancelled`` and its ``error`` says
        ``cancelled``; then ``session_finished`` and ``done``); a ``run()`` ends with
        that ``error``. The writer claim is released. Whoever reads the output sees
        all of it; should the output queue be bounded, somebody must read it.

        Should that orderly end not be over within ``grace_seconds`` (a store that
        hangs, a bounded output queue nobody reads), or ``aclose()`` itself be
        cancelled, the runtime's task is cancelled outright instead: it still stops
        and releases its claim, but the turn it ran stays ``running`` until the next
        runtime to open the session closes it as ``interrupted``.

        Raises:
            Exception: what the runtime crashed with, if it crashed.
        """
        task = self._task
        if task is None:
            return
        try:
            if not task.done():
                self._end_now()
                await asyncio.wait({task}, timeout=grace_seconds)
        finally:
            if not task.done():  # the orderly end hung, or this call is being cancelled
                task.cancel()
                await asyncio.wait({task})
            # A task already done is not waited for: ``asyncio.wait`` on it would still
            # cost two trips through the loop (and their objects) per closed session.
            if self._task is task:
                self._task = None
        if not task.cancelled():
            task.result()  # a crash of the runtime is never silent

    async def wait_closed(self) -> None:
        """Wait until the session has ended on its own (done, error, or terminated)."""
        task = self._task
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _wait_for_tasks(self) -> None:
        await self.wait_closed()

    def _launch_session(self, request: DebugRunRequest) -> tuple[RuntimeQueues, asyncio.Task[None]]:
        """``start_session()`` for a ``RuntimeSession``, which also needs the task."""
        queues = self._launch(request, one_shot=False)
        assert self._task is not None
        return queues, self._task

    def _launch(self, request: DebugRunRequest, *, one_shot: bool) -> RuntimeQueues:
        if self.running:
            raise UsageError("this runtime is already running a session; use another runtime")
        check_runnable(request, self._registry.names(), one_shot=one_shot)
        self._runner = SessionRunner(
            request,
            client=self.chat_client,
            registry=self._registry,
            queues=self.queues,
            clock=self.clock,
            store=self.session_store,
            one_shot=one_shot,
            claim_wait_seconds=self.claim_wait_seconds,
        )
        self._task = asyncio.create_task(self._runner.run())
        self._lag = monitor_for()  # the runner beats it while it runs
        return self.queues

    def _append_persisted_tool_metrics(
        self,
        session_id: str,
        turn_index: int,
        round_index: int,
        batch: EventBatchResult,
    ) -> None:
        """Persist one ``tool_execution`` metric per logical result of a batch."""
        if self.session_store is None:
            return
        metrics = tool_metrics(batch, turn_index=turn_index, round_index=round_index)
        self.session_store.append_usages(session_id, metrics)


def _discard(message: OutputMessage) -> None:
    """A message taken while ``run()`` is being torn down has nobody to go to."""
