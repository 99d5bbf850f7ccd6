"""Live sessions of the web lab: runtimes owned by the server, not by any socket.

A ``LiveSession`` runs one ``DebugRuntime.session()`` handle and a pump task that
iterates its output (plus each turn's record as it grows: ``record_frames``), stamps
every message with a per-session ``offset``, keeps the last frames in a bounded replay
buffer and fans each frame out to the subscribed connections (``frames.py``). Fan-out
never waits: every connection has a bounded ``Outbox``; when one is full, that
connection is dropped and the session goes on.

A session is live once its runtime has opened it: ``SessionHub.start`` returns
then, and raises ``SessionRefused`` when the runtime could not open it (another
runtime drives it, the store failed); nothing of a refused session is published.

A reconnecting client either resumes from its last offset (when the replay buffer
still holds everything after it) or receives the stored history of the completed
turns plus the replay of the turn in progress. See ``docs/web-lab.md``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Callable
from contextlib import AsyncExitStack

from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.pricing import PriceTable
from agent_lab.application.protocol import ErrorMessage, OutputMessage
from agent_lab.application.record import TurnRecord
from agent_lab.application.runtime import DebugRuntime, RuntimeSession
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.web.clients import own_client
from agent_lab.interfaces.web.frames import (
    CLOSE_SLOW_CONSUMER,
    Frame,
    Outbox,
    Replay,
    TurnRecordFrame,
    UserMessageFrame,
    dropped_frame,
    dumps,
)
from agent_lab.interfaces.web.opening import STOPPED, SessionLive, SessionRefused
from agent_lab.interfaces.web.options import WebOptions
from agent_lab.interfaces.web.protocol import ConnectionOverride
from agent_lab.interfaces.web.record_frames import RecordFeed
from agent_lab.interfaces.web.resume import ResumePoint, resume_point

__all__ = ["CLOSE_SLOW_CONSUMER", "Frame", "LiveSession", "Outbox", "Replay", "SessionHub"]
__all__ += ["SessionLive", "SessionRefused", "dumps"]


class LiveSession:
    """One running session: its runtime, replay buffer, subscribers and pump."""

    def __init__(
        self,
        session_id: str,
        runtime: DebugRuntime,
        *,
        stream_id: str,
        first_offset: int,
        first_turn: int,
        options: WebOptions,
        owned_client: OpenAICompatibleChatClient | None = None,
        prices: PriceTable | None = None,
        left_open: list[TurnRecord] | None = None,
    ) -> None:
        self.session_id = session_id
        self._records = RecordFeed(prices, left_open)
        self.runtime = runtime
        self.stream_id = stream_id
        self._options = options
        self._owned_client = owned_client
        self._buffer: deque[Frame] = deque(maxlen=options.replay_limit)
        self._subscribers: set[Outbox] = set()
        self._pending_users: deque[str] = deque()
        self._next_offset = first_offset
        self._boundary_turn = first_turn
        self._replay_from = first_offset
        self._turn: int | None = None
        self._last_activity = time.monotonic()
        self._stack = AsyncExitStack()
        self._session: RuntimeSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._on_closed: Callable[[LiveSession], None] | None = None
        self._closed = asyncio.Event()
        self._opened = asyncio.Event()
        self._refusal: ErrorMessage | None = None
        self._finished = False
        self._ending = False

    @property
    def next_offset(self) -> int:
        return self._next_offset

    @property
    def subscriber_count(self) -> int:
        """How many connections receive this session's frames."""
        return len(self._subscribers)

    @property
    def ending(self) -> bool:
        """The runtime said ``done`` (or stopped); no new turns will run."""
        return self._ending or self._closed.is_set()

    @property
    def turn_running(self) -> bool:
        return self._turn is not None

    async def start(
        self, request: DebugRunRequest, on_closed: Callable[[LiveSession], None]
    ) -> None:
        """Open the runtime session and start the pump that publishes its output."""
        if request.user_message:
            self._pending_users.append(request.user_message)
        self._on_closed = on_closed
        try:
            self._session = await self._stack.enter_async_context(self.runtime.session(request))
        except BaseException:  # it never opened: nothing to finish but the session's client
            self._finished = True
            self._closed.set()
            self._settle_opening()
            await self._close_owned_client()
            raise
        self._task = asyncio.create_task(self._pump(self._session))

    async def opened(self) -> None:
        """Wait until the runtime has opened the session (claimed and loaded it).

        Raises:
            SessionRefused: it could not; the session has ended, nothing was published.
        """
        await self._opened.wait()
        if self._refusal is not None:
            raise SessionRefused(self._refusal)

    def subscribe(self, outbox: Outbox, resume_from: int | None, stream_id: str | None) -> Replay:
        """Register ``outbox`` for live frames and return what it must be sent first."""
        self._subscribers.add(outbox)
        self._last_activity = time.monotonic()
        if self._can_resume(resume_from, stream_id):
            assert resume_from is not None
            return Replay([frame for frame in self._buffer if frame.offset > resume_from], None)
        frames = [frame for frame in self._buffer if frame.offset >= self._replay_from]
        oldest = self._buffer[0].offset if self._buffer else self._next_offset
        return Replay(frames, self._boundary_turn, truncated=oldest > self._replay_from)

    def unsubscribe(self, outbox: Outbox) -> None:
        self._subscribers.discard(outbox)
        self._last_activity = time.monotonic()
        self._arm_idle_timer()

    def submit(self, content: str) -> None:
        """Queue a user turn (it runs after the turn in progress, if any)."""
        assert self._session is not None
        self._session.send_nowait(content)
        self._pending_users.append(content)
        self._last_activity = time.monotonic()

    def broadcast(self, frame: dict[str, object], *, skip: Outbox | None = None) -> None:
        """Offer a control frame to every connection (but ``skip``)."""
        for outbox in list(self._subscribers - {skip} if skip else self._subscribers):
            outbox.offer(dumps(frame))

    def cancel_turn(self) -> bool:
        """Cancel the turn in progress; the session goes on."""
        return self._session is not None and self._session.cancel_turn()

    def close_input(self) -> None:
        """Ask the runtime to end the session after the turns already submitted."""
        if self._session is not None and self._session.running:
            self._session.close_nowait()

    async def aclose(self) -> None:
        """End the session now (turns in progress are cancelled) and wait until it stopped."""
        task = self._task
        if task is not None:
            task.cancel()
            await asyncio.wait({task})
        await self._finish()  # in case the pump was cancelled before it began
        await self.wait_closed()

    async def wait_closed(self) -> None:
        await self._closed.wait()

    def _can_resume(self, resume_from: int | None, stream_id: str | None) -> bool:
        if resume_from is None or (stream_id is not None and stream_id != self.stream_id):
            return False
        oldest = self._buffer[0].offset if self._buffer else self._next_offset
        return oldest - 1 <= resume_from < self._next_offset

    async def _pump(self, session: RuntimeSession) -> None:
        try:
            async for message in session:  # ends once the session has ended and stopped
                if not self._opened.is_set():
                    if message["type"] == "error":  # before anything else: it never opened
                        self._refusal = message
                        break
                    self._opened.set()
                self._publish(message)
                # Let the connections' senders run between frames, so a burst of
                # output does not overflow buffers that are being drained.
                await asyncio.sleep(0)
        finally:
            await self._finish()

    async def _finish(self) -> None:
        """Leave the session (its claim released), then detach every connection; once."""
        if self._finished:
            return
        self._finished = True
        self._ending = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        try:
            await self._stack.aclose()
            await self._close_owned_client()
        finally:
            if self._opened.is_set():
                self._detach_all()
            self._subscribers.clear()  # a refused start was never attached: no notice
            self._closed.set()
            self._settle_opening()
            if self._on_closed is not None:
                self._on_closed(self)

    def _settle_opening(self) -> None:
        """A session that ends before it opened was refused (or stopped while opening)."""
        if not self._opened.is_set() and self._refusal is None:
            self._refusal = STOPPED
        self._opened.set()

    async def _close_owned_client(self) -> None:
        if self._owned_client is not None:
            await asyncio.shield(self._owned_client.aclose())

    def _detach_all(self) -> None:
        if self._pending_users:  # submitted, never started: the session ended first
            self.broadcast(dropped_frame(list(self._pending_users), "session_ended"))
            self._pending_users.clear()
        self.broadcast({"type": "detached", "session_id": self.session_id})
        self._subscribers.clear()

    def _idle(self) -> bool:
        return not (self._subscribers or self._turn is not None or self._pending_users)

    def _arm_idle_timer(self) -> None:
        """Close the session once it has been idle for ``idle_seconds`` (checked then)."""
        limit = self._options.idle_seconds
        if limit is None or self._finished or not self._idle():
            return
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        delay = max(0.0, self._last_activity + limit - time.monotonic())
        self._idle_timer = asyncio.get_running_loop().call_later(delay, self._on_idle_timer)

    def _on_idle_timer(self) -> None:
        self._idle_timer = None
        limit = self._options.idle_seconds
        if limit is None or not self._idle():
            return  # re-armed when the last client leaves or the turn ends
        if time.monotonic() - self._last_activity >= limit:
            self.close_input()
        else:
            self._arm_idle_timer()

    def _publish(self, message: OutputMessage) -> None:
        if message["type"] == "audit" and message["event"] == "turn_started":
            turn_index = message["details"].get("turn_index")
            content = self._pending_users.popleft() if self._pending_users else ""
            self._emit({"type": "user_message", "turn_index": turn_index, "content": content})
            self._turn = turn_index if isinstance(turn_index, int) else self._boundary_turn
        frame = self._emit(message)
        for record in self._records.after(message):
            self._emit(record)
        kind = message["type"]
        if kind in ("turn_completed", "error") and self._turn is not None:
            self._boundary_turn = self._turn + 1
            self._replay_from = frame.offset + 1
            self._turn = None
            self._arm_idle_timer()
        elif kind == "done":
            self._ending = True

    def _emit(self, message: OutputMessage | UserMessageFrame | TurnRecordFrame) -> Frame:
        frame = Frame(self._next_offset, dumps({"offset": self._next_offset, "message": message}))
        self._next_offset += 1
        self._buffer.append(frame)
        self._last_activity = time.monotonic()
        for outbox in list(self._subscribers):
            if not outbox.offer(frame.text):
                self._subscribers.discard(outbox)
        return frame


class SessionHub:
    """Every live session of one server process, keyed by session id."""

    def __init__(self, lab: Lab, options: WebOptions | None = None) -> None:
        self.lab = lab
        self.options = options or WebOptions()
        self.stream_id = uuid.uuid4().hex[:16]
        """Identifies this process's offsets; a client from another one gets history."""
        self._live: dict[str, LiveSession] = {}
        self._next_offsets: dict[str, int] = {}
        self._lock = asyncio.Lock()

    def get(self, session_id: str) -> LiveSession | None:
        """The live session, unless it is absent or already ending."""
        live = self._live.get(session_id)
        return None if live is None or live.ending else live

    def is_live(self, session_id: str) -> bool:
        return session_id in self._live

    def live_ids(self) -> set[str]:
        return set(self._live)

    async def start(
        self,
        request: DebugRunRequest,
        outbox: Outbox,
        connection: ConnectionOverride | None = None,
    ) -> LiveSession:
        """Start a runtime for ``request.session_id`` with ``outbox`` subscribed, and
        return the session once the runtime has opened it.

        Raises:
            SessionLive: the session is already live (attach to it instead).
            SessionRefused: the runtime could not open it (``session_busy``…).
            ConfigError: the connection override is not a usable endpoint.
        """
        session_id = request.session_id
        assert session_id is not None
        async with self._lock:
            existing = self._live.get(session_id)
            if existing is not None and not existing.ending:
                raise SessionLive(existing)
            if existing is not None:
                await existing.wait_closed()
            resumed = await asyncio.to_thread(resume_point, self.lab, session_id)
            live = self._new_session(session_id, resumed, connection)
            live.subscribe(outbox, None, None)
            self._live[session_id] = live
            try:
                await live.start(request, self._forget)
            except BaseException:
                self._forget(live)
                raise
        try:  # outside the lock: claiming may wait for another runtime (``--workers``)
            await live.opened()
        except BaseException:
            live.unsubscribe(outbox)
            raise
        return live

    async def aclose(self) -> None:
        """Stop every live session (server shutdown)."""
        sessions = list(self._live.values())
        await asyncio.gather(*(live.aclose() for live in sessions))

    def _new_session(
        self, session_id: str, resumed: ResumePoint, connection: ConnectionOverride | None
    ) -> LiveSession:
        client = own_client(self.lab, connection)
        if client is None:
            runtime = self.lab.runtime()
        else:
            telemetry = self.lab.telemetry  # a session's own endpoint is exported too
            queues = telemetry.queues() if telemetry is not None else None
            runtime = DebugRuntime(
                client, registry=self.lab.registry, session_store=self.lab.store, queues=queues
            )
        return LiveSession(
            session_id,
            runtime,
            stream_id=self.stream_id,
            first_offset=self._next_offsets.get(session_id, 0),
            first_turn=resumed.first_turn,
            options=self.options,
            owned_client=client,
            prices=self.lab.prices,
            left_open=resumed.left_open,
        )

    def _forget(self, live: LiveSession) -> None:
        self._next_offsets[live.session_id] = live.next_offset
        if self._live.get(live.session_id) is live:
            del self._live[live.session_id]
