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
from agent_lab.interfaces.web.hub import (
    CLOSE_SLOW_CONSUMER,
    LiveSession,
    Outbox,
    SessionLive,
    dumps,
)
from agent_lab.interfaces.web.protocol import (
    CancelCommand,
    CloseCommand,
    ConnectionOverride,
    ProtocolError,
    StartCommand,
    UserCommand,
    error_frame,
    parse_command,
    run_request,
)
from agent_lab.interfaces.web.security import socket_denial
from agent_lab.interfaces.web.state import WebState, web_state

logger = logging.getLogger(__name__)
_CLOSE_TIMEOUT_SECONDS = 2.0
_COMMAND_BACKLOG = 64


async def session_socket(websocket: WebSocket, session_id: str) -> None:
    """Serve one client of session ``session_id`` until it disconnects."""
    state = web_state(websocket)
    await websocket.accept()
    denial = socket_denial(websocket, state.token)
    if denial is not None:
        await websocket.close(code=denial)
        return
    if not session_id.strip() or len(session_id) > 200:
        await websocket.close(code=1008, reason="bad session id")
        return
    await Connection(websocket, state, session_id).serve()


class Connection:
    """One socket attached to (at most) one live session."""

    def __init__(self, websocket: WebSocket, state: WebState, session_id: str) -> None:
        self.websocket = websocket
        self.state = state
        self.session_id = session_id
        self.outbox = Outbox(state.options.send_buffer)
        self.live: LiveSession | None = None
        self.pending: tuple[DebugRunRequest, ConnectionOverride | None] | None = None
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
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if self.live is not None:
                self.live.unsubscribe(self.outbox)
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
            command = parse_command(text)
            match command:
                case StartCommand():
                    await self._start(command)
                case UserCommand():
                    await self._user(command.content)
                case CancelCommand():
                    self._cancel()
                case CloseCommand():
                    self._close_session()
        except ProtocolError as exc:
            self._control(error_frame(str(exc)))
        except AgentLabError as exc:
            self._control(error_frame(f"{type(exc).__name__}: {exc}"))

    async def _start(self, command: StartCommand) -> None:
        if self.live is not None and not self.live.ending:
            raise ProtocolError("already attached to this session; reconnect to resume")
        request = run_request(command, self.session_id) if command.request else None
        live = self.state.hub.get(self.session_id)
        if live is not None:
            await self._attach(live, command.resume_from, command.stream_id)
            return
        if request is None:
            raise ProtocolError("request: required to start a session that is not live")
        if request.user_message.strip():
            await self._launch(request, command.connection, with_history=True)
            return
        self.pending = (request, command.connection)
        async with self._send_lock:
            await self._send(self._attached(live=False))
            await self._send_history(None)

    async def _user(self, content: str) -> None:
        if self.pending is not None:
            request, connection = self.pending
            update = {"user_message": content}
            await self._launch(request.model_copy(update=update), connection, with_history=False)
            self.pending = None
            return
        if self.live is None or self.live.ending:
            raise ProtocolError("no live session here: send a start message to resume it")
        self.live.submit(content)

    def _cancel(self) -> None:
        accepted = self.live.cancel_turn() if self.live is not None else False
        self._control({"type": "cancelled", "accepted": accepted})

    def _close_session(self) -> None:
        if self.live is not None:
            self.live.close_input()
        self.pending = None

    async def _launch(
        self, request: DebugRunRequest, connection: ConnectionOverride | None, *, with_history: bool
    ) -> None:
        async with self._send_lock:
            record = await self._read_history(None) if with_history else None
            try:
                self.live = await self.state.hub.start(request, self.outbox, connection)
            except SessionLive as exc:
                live = exc.live
            else:
                await self._send(self._attached(live=True))
                if with_history:
                    await self._send({"type": "history", "record": record, "before_turn": None})
                return
        await self._attach(live, None, None)
        live.submit(request.user_message)

    async def _attach(
        self, live: LiveSession, resume_from: int | None, stream_id: str | None
    ) -> None:
        async with self._send_lock:
            replay = live.subscribe(self.outbox, resume_from, stream_id)
            self.live = live
            await self._send(self._attached(live=True, resumed=replay.history_before is None))
            if replay.history_before is not None:
                await self._send_history(replay.history_before, truncated=replay.truncated)
            for frame in replay.frames:
                await self.websocket.send_text(frame.text)

    async def _send_history(self, before_turn: int | None, *, truncated: bool = False) -> None:
        record = await self._read_history(before_turn)
        frame = {"type": "history", "record": record, "before_turn": before_turn}
        if truncated:
            frame["truncated"] = True
        await self._send(frame)

    async def _read_history(self, before_turn: int | None) -> dict[str, Any] | None:
        store = self.state.store()
        try:
            return await asyncio.to_thread(
                records.session_record, store, self.session_id, before_turn=before_turn
            )
        except SessionNotFound:
            return None

    def _attached(self, *, live: bool, resumed: bool = False) -> dict[str, Any]:
        current = self.live
        return {
            "type": "attached",
            "session_id": self.session_id,
            "stream_id": self.state.hub.stream_id,
            "live": live,
            "resumed": resumed,
            "next_offset": current.next_offset if current is not None and live else None,
            "endpoint": self.state.lab.endpoint_description,
        }

    def _control(self, frame: dict[str, Any]) -> None:
        self.outbox.offer(dumps(frame))

    async def _send(self, frame: dict[str, Any]) -> None:
        await self.websocket.send_text(dumps(frame))

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
