"""Helpers of the web lab tests: an in-process client and a real uvicorn server."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from anyio.from_thread import BlockingPortal
from fastapi import FastAPI
from starlette.testclient import TestClient, WebSocketTestSession

from agent_lab.application.tools import ToolRegistry
from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import WebOptions, create_app

TERMINAL = ("turn_completed", "error")


def lab_settings(home: Path, **overrides: Any) -> LabSettings:
    """Settings of a lab on the simulated provider, with no artificial latency."""
    fields: dict[str, Any] = {
        "home": home,
        "simulated_ttft_ms": 0,
        "simulated_tokens_per_second": 0,
        **overrides,
    }
    return LabSettings(**fields)


def start_message(
    lab: Lab, text: str = "", *, mode: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A ``start`` command whose request is the lab's defaults plus ``text``."""
    request = lab.request(text).model_dump(mode="json", exclude={"session_id"})
    if mode is not None:
        request["tool_invocation_mode"] = mode
    return {"type": "start", "request": request, "resume_from": None, **extra}


def changed_start(lab: Lab, text: str, **changes: Any) -> dict[str, Any]:
    """``start_message(lab, text)`` with request fields replaced: a change named
    ``event_agent__enabled_tools`` sets ``request["event_agent"]["enabled_tools"]``."""
    message = start_message(lab, text)
    for path, value in changes.items():
        target = message["request"]
        *parents, leaf = path.split("__")
        for parent in parents:
            target = target[parent]
        target[leaf] = value
    return message


@contextlib.contextmanager
def in_process(
    settings: LabSettings,
    *,
    registry: ToolRegistry | None = None,
    token: str | None = None,
    options: WebOptions | None = None,
) -> Iterator[tuple[TestClient, Lab, FastAPI]]:
    """A ``TestClient`` whose event loop also runs the (open) lab."""
    lab = Lab(settings, registry=registry)
    app = create_app(lab, token=token, options=options)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        portal = portal_of(client)
        portal.call(lab.__aenter__)
        try:
            yield client, lab, app
        finally:
            portal.call(app.state.web.hub.aclose)
            portal.call(lab.__aexit__, None, None, None)


def portal_of(client: TestClient) -> BlockingPortal:
    """The event-loop portal of a ``TestClient`` inside its ``with`` block."""
    assert client.portal is not None, "the TestClient is not started"
    return client.portal


def receive_until(ws: WebSocketTestSession, *types: str, limit: int = 5000) -> list[dict[str, Any]]:
    """Frames (stream messages unwrapped with their offset) up to one of ``types``."""
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        frame = ws.receive_json()
        seen.append(frame)
        if kind_of(frame) in types:
            return seen
    raise AssertionError(f"no {types} in {limit} frames")


def kind_of(frame: dict[str, Any]) -> str:
    """The ``type`` of a control frame or of a stream frame's message."""
    message = frame.get("message")
    if isinstance(message, dict):
        return str(message.get("type"))
    return str(frame.get("type"))


def messages_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [frame["message"] for frame in frames if "offset" in frame]


@dataclass
class ServedLab:
    """A real uvicorn server on 127.0.0.1 running the web lab in its own thread."""

    port: int = 0
    lab: Lab | None = None
    server: uvicorn.Server | None = None
    loop: asyncio.AbstractEventLoop | None = None
    error: list[BaseException] = field(default_factory=list)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def call(self, coroutine: Any) -> Any:
        """Run a coroutine on the server's loop and return its result."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(30)


@contextlib.contextmanager
def served(
    settings: LabSettings,
    *,
    registry: ToolRegistry | None = None,
    token: str | None = None,
    options: WebOptions | None = None,
    ws_max_size: int = 16 * 1024 * 1024,
) -> Iterator[ServedLab]:
    """Serve the web lab with uvicorn on an ephemeral port until the block ends.

    ``ws_max_size`` is uvicorn's largest WebSocket message (``agent-lab serve``'s too).
    """
    served_lab = ServedLab()
    ready = threading.Event()

    async def main() -> None:
        async with Lab(settings, registry=registry) as lab:
            app = create_app(lab, token=token, options=options)
            config = uvicorn.Config(
                app, host="127.0.0.1", port=0, log_level="warning", ws_max_size=ws_max_size
            )
            server = uvicorn.Server(config)
            served_lab.lab, served_lab.server = lab, server
            served_lab.loop = asyncio.get_running_loop()
            task = asyncio.create_task(server.serve())
            while not server.started and not task.done():  # noqa: ASYNC110 (uvicorn has a flag)
                await asyncio.sleep(0.01)
            if server.started:
                served_lab.port = server.servers[0].sockets[0].getsockname()[1]
            ready.set()
            await task

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # surfaced to the test below
            served_lab.error.append(exc)
            ready.set()

    thread = threading.Thread(target=run, name="web-lab-server", daemon=True)
    thread.start()
    assert ready.wait(30), "server did not start"
    if served_lab.error or not served_lab.port:
        raise RuntimeError(f"server failed to start: {served_lab.error}")
    try:
        yield served_lab
    finally:
        assert served_lab.server is not None
        served_lab.server.should_exit = True
        thread.join(30)


def token_protocol(token: str) -> str:
    """The WebSocket subprotocol that carries ``token`` (next to ``agent-lab``)."""
    return "agent-lab.token." + base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
