"""The session WebSocket ``/ws/sessions/{id}``: one ``Connection`` per socket.

The connection reads client commands (see ``protocol``), and one sender task drains
its bounded ``Outbox`` to the socket. Sessions live in the ``SessionHub``, so a
dropped socket never stops a session; the client reconnects and resumes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect

import agent_lab.interfaces.web.records as records
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.domain.errors import AgentLabError, SessionNotFound
from agent_lab.interfaces.web.frames import dropped_frame
from agent_lab.interfaces.web.guards import drop_queued, queued_turns
from agent_lab.interfaces.web.hub import (
    CLOSE_SLOW_CONSUMER,
    LiveSession,
    Outbox,
    SessionLive,
    SessionRefused,
    dumps,
)
from agent_lab.interfaces.web.limits import check_message_size
from agent_lab.interfaces.web.masking import Masker
from agent_lab.interfaces.web.protocol import (
    CancelCommand,
    CloseCommand,
    ConnectionOverride,
    DropQueuedCommand,
    ProtocolError,
    StartCommand,
    UserCommand,
    error_frame,
    parse_command,
)
from agent_lab.interfaces.web.security import chosen_protocol, socket_denial
from agent_lab.interfaces.web.start_checks import REFUSALS, checked_start, refusal_frame
from agent_lab.interfaces.web.state import WebState, web_state

logger = logging.getLogger(__name__)
_CLOSE_TIMEOUT_SECONDS = 10.0
"""How long a dropped slow consumer has to take the close frame (1008, behind the
frames its socket still holds): a browser that reads again within it learns to resume;
it is no longer subscribed, so the wait holds up nobody but its own connection."""
_COMMAND_BACKLOG = 64


async def session_socket(websocket: WebSocket, session_id: str) -> None:
    """Serve one client of session ``session_id`` until it disconnects."""
    state = web_state(websocket)
    await websocket.accept(subprotocol=chosen_protocol(websocket.headers))
    denial = socket_denial(websocket, state.token)
    if denial is not None:
        await websocket.close(code=denial)
        return
    if not session_id.strip() or len(session_id) > 200:
        await websocket.close(code=1008, reason="bad session id")
        return
    await Connection(websocket, state, session_id).serve()


class MaskedOutbox(Outbox):
    """An outbox that masks secrets in every frame it takes (see ``masking``)."""

    def __init__(self, maxsize: int, masker: Masker) -> None:
        super().__init__(maxsize)
        self.masker = masker

    def offer(self, text: str) -> bool:
        return super().offer(self.masker.frame(text))


class Connection:
    """One socket attached to (at most) one live session."""

    def __init__(self, websocket: WebSocket, state: WebState, session_id: str) -> None:
        self.websocket = websocket
        self.state = state
        self.session_id = session_id
        self.outbox = MaskedOutbox(state.options.send_buffer, state.masker)
        self.live: LiveSession | None = None
        self.pending: tuple[DebugRunRequest, ConnectionOverride | None] | None = None
        self.deleted = False
        self.shown_stored = False
        """A ``history`` frame showed this session as stored (so, gone later = deleted)."""
        self.client = websocket.client.host if websocket.client else "?"
        self._send_lock = asyncio.Lock()
        self._commands: asyncio.Queue[str | None] = asyncio.Queue(_COMMAND_BACKLOG)

    async def serve(self) -> None:
        """Read, execute commands and send until one stops or the outbox overflows.

        Commands run in their own task, in order; a disconnect ends the connection
        once the commands received before it have run.
        """
        reader = asyncio.create_task(self._receive_loop())
        tasks = {
            asyncio.create_task(self._command_loop()),
            asyncio.create_task(self._send_loop()),
            asyncio.create_task(self.outbox.dropped.wait()),
        }
        self.state.watchers.add(self.session_id, self._on_deleted)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.state.watchers.remove(self.session_id, self._on_deleted)
            if not self.state.hub.is_live(self.session_id):
                self.state.session_keys.pop(self.session_id, None)
            if self.live is not None:
                self.live.unsubscribe(self.outbox)
                if self.live.subscriber_count == 0:
                    drop_queued(self.live)  # nobody is left to see those turns
            for task in (reader, *tasks):
                task.cancel()
            # ``wait`` (unlike ``gather``) never re-raises a child's cancellation as ours.
            await asyncio.wait({reader, *tasks})
        _log_failures({reader, *tasks})
        if self.outbox.dropped.is_set():
            await self._close(CLOSE_SLOW_CONSUMER, "send buffer full; reconnect with resume_from")

    async def _receive_loop(self) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                await self._commands.put(None)  # the commands sent before still run
                return
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode("utf-8", "replace")
            await self._commands.put(text)

    async def _command_loop(self) -> None:
        while (text := await self._commands.get()) is not None:
            await self._handle(text)

    async def _send_loop(self) -> None:
        while True:
            text = await self.outbox.get()
            async with self._send_lock:
                await self.websocket.send_text(text)

    async def _handle(self, text: str) -> None:
        try:
            check_message_size(text)
            command = parse_command(text)
            if isinstance(command, StartCommand | UserCommand) and not self._within_rate():
                raise ProtocolError("rate limit: too many messages; wait a moment", "rate")
            match command:
                case StartCommand():
                    await self._start(command)
                case UserCommand():
                    await self._user(command.content)
                case CancelCommand():
                    self._cancel()
                case CloseCommand():
                    self._close_session()
                case DropQueuedCommand():
                    self._drop_queued("drop_queued")
        except REFUSALS as exc:
            self._control(refusal_frame(exc))
        except SessionRefused as exc:  # its runtime could not open the session (busy…)
            await self._refused(exc)
        except AgentLabError as exc:  # the session cannot start now (storage, endpoint…)
            self._control(error_frame(str(exc), reason=(exc.failure_reason, exc.exit_class)))

    async def _start(self, command: StartCommand) -> None:
        if self.live is not None and not self.live.ending:
            raise ProtocolError("already attached to this session; reconnect to resume")
        request = checked_start(self.state, command, self.session_id)
        live = self.state.hub.get(self.session_id)
        if live is not None:
            try:
                await self._attach(live, command.resume_from, command.stream_id)
                return
            except SessionRefused:  # its runtime could not open it: not live after all
                if request is not None and request.user_message.strip():
                    raise
        opening = request is None or not request.user_message.strip()
        if opening and self.state.watchers.was_deleted(self.session_id):
            self._on_deleted()  # a tab reopening a session deleted meanwhile
            return
        if request is None:
            raise ProtocolError("request: required to start a session that is not live", "request")
        if request.user_message.strip():
            await self._launch(request, command.connection, with_history=True)
            return
        self.pending = (request, command.connection)
        async with self._send_lock:
            await self._send(self._attached(live=False))
            await self._send_history(None)

    def _within_rate(self) -> bool:
        return self.state.rate.allow(self.client)

    def _on_deleted(self) -> None:
        self.deleted = True
        self.pending = None
        self._control({"type": "deleted", "session_id": self.session_id})

    async def _user(self, content: str) -> None:
        if self.deleted:
            raise ProtocolError("this session was deleted; start a new session", "session")
        if self.pending is not None:
            request, connection = self.pending
            update = {"user_message": content}
            # The store may have changed since the ``history`` frame of the opening
            # (another process ran a turn): the page is sent what the runtime restores.
            await self._launch(request.model_copy(update=update), connection, with_history=True)
            return
        if self.live is None or self.live.ending:
            raise ProtocolError("no live session here: send a start message to resume it")
        limit = self.state.options.queue_limit
        if queued_turns(self.live) >= limit:
            raise ProtocolError(
                f"queue full: {limit} messages already wait for the running turn", "queue"
            )
        self.live.submit(content)
        self._control({"type": "queued", "count": queued_turns(self.live)})

    def _cancel(self) -> None:
        accepted = self.live.cancel_turn() if self.live is not None else False
        self._control({"type": "cancelled", "accepted": accepted})

    def _close_session(self) -> None:
        if self.live is not None:
            self._drop_queued("close")
            self.live.close_input()
        self.pending = None

    def _drop_queued(self, reason: str) -> None:
        """Drop the waiting turns; every client is told which (``requested`` on the
        asking one's frame), so no page keeps showing them as queued."""
        frame = dropped_frame(drop_queued(self.live) if self.live is not None else [], reason)
        if self.live is not None and frame["count"]:
            self.live.broadcast(frame, skip=self.outbox)
        self._control({**frame, "requested": True})

    async def _launch(
        self, request: DebugRunRequest, connection: ConnectionOverride | None, *, with_history: bool
    ) -> None:
        if self.shown_stored and not await self._still_stored():
            self._on_deleted()  # by another process (CLI, another worker): no frame came
            raise ProtocolError("this session was deleted; start a new session", "session")
        async with self._send_lock:
            record = await self._read_history(None) if with_history else None
            key = connection.key() if connection is not None else None
            if key is not None:
                self.state.session_keys[self.session_id] = key
            self.outbox.masker = self.state.masker_for(self.session_id)
            try:
                self.live = await self.state.hub.start(request, self.outbox, connection)
            except SessionLive as exc:
                live = exc.live
            else:
                self.pending = None  # a request held for the first message is spent
                self.state.watchers.started(self.session_id)
                await self._send(self._attached(live=True))
                if with_history:
                    await self._send({"type": "history", "record": record, "before_turn": None})
                return
        await self._attach(live, None, None)
        self.pending = None
        live.submit(request.user_message)

    async def _attach(
        self, live: LiveSession, resume_from: int | None, stream_id: str | None
    ) -> None:
        await live.opened()  # one still opening: once its runtime has opened it (or refused)
        async with self._send_lock:
            with self.outbox.held():  # live frames wait behind the replay, not counted
                self.outbox.masker = self.state.masker_for(self.session_id)
                replay = live.subscribe(self.outbox, resume_from, stream_id)
                self.live = live
                await self._send(self._attached(live=True, resumed=replay.history_before is None))
                if replay.history_before is not None:
                    await self._send_history(replay.history_before, truncated=replay.truncated)
                for frame in replay.frames:
                    await self.websocket.send_text(self.outbox.masker.frame(frame.text))

    async def _refused(self, refusal: SessionRefused) -> None:
        """A start the runtime could not open: its error (never a turn's end: nothing
        was attached), then the session as stored now (another runtime's turn…)."""
        error = refusal.error
        reason = (error.get("failure_reason", "run_error"), error.get("exit_class", "run_failed"))
        async with self._send_lock:
            await self._send(error_frame(error["message"], reason=reason))
            with contextlib.suppress(AgentLabError):  # the error said enough
                record = await self._read_history(None)
                if record is not None:
                    await self._send({"type": "history", "record": record, "before_turn": None})

    async def _send_history(self, before_turn: int | None, *, truncated: bool = False) -> None:
        record = await self._read_history(before_turn)
        frame = {"type": "history", "record": record, "before_turn": before_turn}
        if truncated:
            frame["truncated"] = True
        await self._send(frame)

    async def _read_history(self, before_turn: int | None) -> dict[str, Any] | None:
        store = self.state.store()
        try:
            record = await asyncio.to_thread(
                records.session_record,
                store,
                self.session_id,
                before_turn=before_turn,
                prices=self.state.lab.prices,
            )
        except SessionNotFound:
            return None
        self.shown_stored = True
        return record

    async def _still_stored(self) -> bool:
        found = await asyncio.to_thread(self.state.store().get_session, self.session_id)
        return found is not None

    def _attached(self, *, live: bool, resumed: bool = False) -> dict[str, Any]:
        current = self.live
        return {
            "type": "attached",
            "session_id": self.session_id,
            "stream_id": self.state.hub.stream_id,
            "live": live,
            "resumed": resumed,
            "next_offset": current.next_offset if current is not None and live else None,
            "endpoint": self.state.masker.text(self.state.lab.endpoint_description),
        }

    def _control(self, frame: dict[str, Any]) -> None:
        self.outbox.offer(dumps(frame))

    async def _send(self, frame: dict[str, Any]) -> None:
        await self.websocket.send_text(self.outbox.masker.frame(dumps(frame)))

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect, OSError, TimeoutError):
            await asyncio.wait_for(
                self.websocket.close(code=code, reason=reason), _CLOSE_TIMEOUT_SECONDS
            )


_DISCONNECTS = (WebSocketDisconnect, OSError, asyncio.CancelledError)


def _log_failures(tasks: Iterable[asyncio.Task[Any]]) -> None:
    for task in tasks:
        failure = None if task.cancelled() else task.exception()
        if failure is not None and not isinstance(failure, _DISCONNECTS):
            logger.error("web lab connection failed", exc_info=failure)
