"""Drives a runtime session one user turn at a time (chat, demo, compare, replay).

``SessionDriver`` starts ``DebugRuntime.start_session()``, submits user messages, and
reads the output queue until each turn ends, handing every message to an observer and
measuring the visible TTFT: the time from submitting a user message to its first
``message_delta``, which is what the user of a voice or chat assistant waits for.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import UsageError

_POLL_SECONDS = 0.5
_STOP_GRACE_SECONDS = 10.0
_STOPPED: Mapping[str, Any] = {"type": "error", "message": "the runtime stopped unexpectedly"}

TurnStatus = Literal["completed", "terminated", "failed", "cancelled"]
Observer = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True)
class TurnEnd:
    """How one submitted user turn ended."""

    turn_index: int | None
    status: TurnStatus
    round_count: int | None = None
    visible_ttft_ms: int | None = None
    error: Mapping[str, Any] | None = None
    """The ``error`` output of a failed or cancelled turn."""
    session_over: bool = False
    """No further turn can be submitted (terminated, or the session failed to open)."""

    def describe(self) -> str:
        """A short line such as ``✓ turn 2 · 1 round · first text after 310 ms``."""
        if self.status in ("failed", "cancelled"):
            message = (self.error or {}).get("message") or self.status
            return f"  ✗ turn {self.turn_index} {self.status}: {message}"
        rounds = "" if self.round_count is None else f" · {self.round_count} round"
        rounds += "s" if self.round_count not in (None, 1) else ""
        ttft = ""
        if self.visible_ttft_ms is not None:
            ttft = f" · first text after {self.visible_ttft_ms} ms"
        ended = " · session ended" if self.status == "terminated" else ""
        return f"  ✓ turn {self.turn_index}{rounds}{ttft}{ended}"


@dataclass(frozen=True)
class TurnHooks:
    """Callbacks while scripted turns run (all optional)."""

    observer: Observer | None = None
    """Receives every output message."""
    before_turn: Callable[[str], None] | None = None
    """Receives each user message before it is submitted."""
    after_turn: Callable[[TurnEnd], None] | None = None


async def drive_turns(
    driver: SessionDriver, request: DebugRunRequest, turns: Sequence[str], hooks: TurnHooks
) -> list[TurnEnd]:
    """Run ``turns`` one after the other (the first is ``request.user_message``).

    Stops early when the session is over (a tool terminated it).
    """
    ends: list[TurnEnd] = []
    for index, text in enumerate(turns):
        if hooks.before_turn is not None:
            hooks.before_turn(text)
        end = await (driver.first_turn(request) if index == 0 else driver.next_turn(text))
        ends.append(end)
        if hooks.after_turn is not None:
            hooks.after_turn(end)
        if end.session_over:
            break
    return ends


class SessionDriver:
    """Runs a session turn by turn on one runtime.

    Args:
        runtime: A fresh runtime; the driver owns it and closes it in ``aclose()``.
        observer: Receives every output message, audits included.
    """

    def __init__(self, runtime: DebugRuntime, observer: Observer | None = None) -> None:
        self.runtime = runtime
        self.observer = observer
        self.session_id: str | None = None
        self._queues: RuntimeQueues | None = None
        self._submitted_at = 0.0
        self._started = False
        self._pending = False
        self._done = False

    @property
    def turn_running(self) -> bool:
        """A submitted turn has not ended yet."""
        return self._pending

    async def first_turn(self, request: DebugRunRequest) -> TurnEnd:
        """Start the session with ``request.user_message`` as its first turn."""
        if not request.user_message:
            raise UsageError("the first turn needs a user message")
        self._submitted_at = time.perf_counter()
        self._queues = self.runtime.start_session(request)
        return await self._wait_turn()

    async def next_turn(self, text: str) -> TurnEnd:
        """Submit the next user message and wait until its turn ends."""
        if self._queues is None or self._done:
            raise UsageError("the session is not running")
        self._submitted_at = time.perf_counter()
        await self._queues.input.put(text)
        return await self._wait_turn()

    async def aclose(self) -> None:
        """Close the session's input, drain its output to ``done`` and stop the runtime."""
        queues = self._queues
        if queues is not None and not self._done and self.runtime.running:
            await queues.input.put(None)
            while not self._done:
                message = await self._next_output(queues)
                if message is None:
                    break
                self._observe(message)
        await self._wait_stopped()
        await self.runtime.aclose()

    async def _wait_stopped(self) -> None:
        # After ``done`` the session still releases its writer claim; cancelling it
        # then (``aclose``) could leave the claim behind, so let it finish first. The
        # runtime offers nothing to await for that, hence the poll.
        deadline = time.monotonic() + _STOP_GRACE_SECONDS
        while self.runtime.running and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.01)

    async def _next_output(self, queues: RuntimeQueues) -> Mapping[str, Any] | None:
        """The next output message, or ``None`` once the runtime stopped without one."""
        getter = asyncio.ensure_future(queues.output.get())
        try:
            while True:
                done, _ = await asyncio.wait({getter}, timeout=_POLL_SECONDS)
                if done:
                    message: Mapping[str, Any] = getter.result()
                    return message
                if not self.runtime.running and queues.output.empty():
                    return None
        finally:
            getter.cancel()

    async def _wait_turn(self) -> TurnEnd:
        assert self._queues is not None
        self._pending = True
        try:
            return await self._pump(self._queues)
        finally:
            self._pending = False

    async def _pump(self, queues: RuntimeQueues) -> TurnEnd:
        state = _TurnWatch(self._submitted_at)
        while True:
            message = await self._next_output(queues) or _STOPPED
            self._observe(message)
            if message.get("type") == "session_started":
                self._started = True
                self.session_id = message.get("session_id")
            end = state.update(message, started=self._started)
            if end is not None:
                self._done = self._done or end.session_over
                return end

    def _observe(self, message: Mapping[str, Any]) -> None:
        if message.get("type") == "done":
            self._done = True
        if self.observer is not None:
            self.observer(message)


class _TurnWatch:
    """Folds one turn's output messages into its ``TurnEnd``."""

    def __init__(self, submitted_at: float) -> None:
        self.submitted_at = submitted_at
        self.turn_index: int | None = None
        self.status: TurnStatus = "completed"
        self.ttft_ms: int | None = None

    def update(self, message: Mapping[str, Any], *, started: bool) -> TurnEnd | None:
        kind = message.get("type")
        if kind == "message_delta" and self.ttft_ms is None and message.get("content"):
            self.ttft_ms = round((time.perf_counter() - self.submitted_at) * 1000)
        elif kind == "turn_started":
            self.turn_index = int(message["turn_index"])
        elif kind == "audit" and message.get("event") == "turn_completed":
            details = message.get("details") or {}
            self.status = "terminated" if details.get("status") == "terminated" else self.status
        elif kind == "turn_completed":
            return TurnEnd(
                self.turn_index,
                self.status,
                round_count=message.get("round_count"),
                visible_ttft_ms=self.ttft_ms,
                session_over=self.status == "terminated",
            )
        elif kind == "error":
            cancelled = message.get("failure_reason") == "cancelled"
            status: TurnStatus = "cancelled" if cancelled else "failed"
            return TurnEnd(self.turn_index, status, error=message, session_over=not started)
        elif kind == "done":
            return TurnEnd(self.turn_index, self.status, session_over=True)
        return None
