"""Drives a runtime session one user turn at a time (chat, demo, compare, replay).

``SessionDriver`` opens a ``DebugRuntime.session()`` handle, submits user messages, and
iterates its output until each turn ends, handing every message to an observer and
measuring the visible TTFT: the time from submitting a user message to its first
``message_delta``, which is what the user of a voice or chat assistant waits for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Literal

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.protocol import ErrorMessage, OutputMessage
from agent_lab.application.runtime import DebugRuntime, RuntimeSession
from agent_lab.domain.errors import UsageError
from agent_lab.interfaces.cli.render import TurnTokens

_STOPPED: ErrorMessage = {"type": "error", "message": "the runtime stopped unexpectedly"}

TurnStatus = Literal["completed", "terminated", "failed", "cancelled"]
Observer = Callable[[OutputMessage], None]


@dataclass(frozen=True)
class TurnEnd:
    """How one submitted user turn ended."""

    turn_index: int | None
    status: TurnStatus
    round_count: int | None = None
    visible_ttft_ms: int | None = None
    error: ErrorMessage | None = None
    """The ``error`` output of a failed or cancelled turn."""
    session_over: bool = False
    """No further turn can be submitted (terminated, or the session failed to open)."""
    tokens: TurnTokens = field(default_factory=TurnTokens)
    """Every model call's tokens (chat and argument calls), as the stored turn has them."""

    def describe(self) -> str:
        """A short line such as ``✓ turn 2 · 1 round · first text after 310 ms · 590 tok
        (0 cached)``."""
        if self.status in ("failed", "cancelled"):
            message = (self.error["message"] if self.error else "") or self.status
            return f"  ✗ turn {self.turn_index} {self.status}: {message}"
        rounds = "" if self.round_count is None else f" · {self.round_count} round"
        rounds += "s" if self.round_count not in (None, 1) else ""
        ttft = ""
        if self.visible_ttft_ms is not None:
            ttft = f" · first text after {self.visible_ttft_ms} ms"
        ended = " · session ended" if self.status == "terminated" else ""
        return f"  ✓ turn {self.turn_index}{rounds}{ttft} · {self.tokens.describe()}{ended}"


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
        self._stack = AsyncExitStack()
        self._session: RuntimeSession | None = None
        self._submitted_at = 0.0
        self._started = False
        self._pending = False
        self._turn_open = False
        """A turn was submitted and its end not read (its caller may have given up)."""
        self._done = False

    @property
    def turn_running(self) -> bool:
        """A submitted turn has not ended yet."""
        return self._pending

    async def first_turn(self, request: DebugRunRequest) -> TurnEnd:
        """Start the session with ``request.user_message`` as its first turn."""
        if not request.user_message:
            raise UsageError("the first turn needs a user message")
        if self._session is not None:
            raise UsageError("the session has already started")
        self._submitted_at = time.perf_counter()
        self._session = await self._stack.enter_async_context(self.runtime.session(request))
        return await self._wait_turn(self._session)

    async def next_turn(self, text: str) -> TurnEnd:
        """Submit the next user message and wait until its turn ends."""
        if self._session is None or self._done:
            raise UsageError("the session is not running")
        self._submitted_at = time.perf_counter()
        await self._session.send(text)
        return await self._wait_turn(self._session)

    def cancel_turn(self) -> bool:
        """Cancel the turn in progress; returns whether one was running."""
        return self._session is not None and self._session.cancel_turn()

    async def aclose(self) -> None:
        """Close the session's input, observe its output down to ``done``, stop the runtime.

        A turn still running (its caller gave up waiting, e.g. on Ctrl-C) is cancelled
        rather than waited for.
        """
        session = self._session
        try:
            if session is not None:
                if session.running:
                    if self._turn_open:
                        session.cancel_turn()
                    await session.close()
                async for message in session:  # down to ``done``, after a terminate too
                    self._observe(message)
        finally:
            await self._stack.aclose()
            await self.runtime.aclose()

    async def _wait_turn(self, session: RuntimeSession) -> TurnEnd:
        self._pending = self._turn_open = True
        try:
            end = await self._pump(session)
        finally:
            self._pending = False
        self._turn_open = False
        return end

    async def _pump(self, session: RuntimeSession) -> TurnEnd:
        state = _TurnWatch(self._submitted_at)
        async for message in session:
            self._observe(message)
            if message["type"] == "session_started":
                self._started = True
                self.session_id = message.get("session_id")
            end = state.update(message, started=self._started)
            if end is not None:
                self._done = self._done or end.session_over
                return end
        # the session stopped without ending the turn (it cannot go on)
        self._observe(_STOPPED)
        self._done = True
        return TurnEnd(state.turn_index, "failed", error=_STOPPED, session_over=True)

    def _observe(self, message: OutputMessage) -> None:
        if message["type"] == "done":
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
        self.tokens = TurnTokens()

    def update(self, message: OutputMessage, *, started: bool) -> TurnEnd | None:
        if message["type"] == "message_delta":
            if self.ttft_ms is None and message["content"]:
                self.ttft_ms = round((time.perf_counter() - self.submitted_at) * 1000)
        elif message["type"] == "usage":
            self.tokens.observe(message)
        elif message["type"] == "turn_started":
            self.turn_index = message["turn_index"]
        elif message["type"] == "audit":
            self.tokens.observe(message)
            if message["event"] == "turn_completed":
                terminated = message["details"].get("status") == "terminated"
                self.status = "terminated" if terminated else self.status
        elif message["type"] == "turn_completed":
            return TurnEnd(
                self.turn_index,
                self.status,
                round_count=message["round_count"],
                visible_ttft_ms=self.ttft_ms,
                session_over=self.status == "terminated",
                tokens=self.tokens,
            )
        elif message["type"] == "error":
            cancelled = message.get("failure_reason") == "cancelled"
            status: TurnStatus = "cancelled" if cancelled else "failed"
            return TurnEnd(
                self.turn_index,
                status,
                visible_ttft_ms=self.ttft_ms,  # text shown before the failure counts
                error=message,
                session_over=not started,
                tokens=self.tokens,
            )
        elif message["type"] == "done":
            return TurnEnd(self.turn_index, self.status, session_over=True, tokens=self.tokens)
        return None
