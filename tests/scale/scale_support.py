"""Helpers of the scale tests: a multi-worker web lab in a subprocess, and its sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from websockets.sync.client import connect
from websockets.sync.connection import Connection


class WorkerLab:
    """``agent-lab serve --workers N`` on a free port, stopped with Ctrl-C (SIGINT)."""

    def __init__(self, home: Path, workers: int, env: dict[str, str], *args: str) -> None:
        command = [sys.executable, "-m", "agent_lab.interfaces.cli", "serve", "--port", "0"]
        environ = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        environ.update(env, AGENT_LAB_HOME=str(home))
        self.process = subprocess.Popen(
            [*command, "--workers", str(workers), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=environ,
        )
        self.lines: list[str] = []
        self.base = self._read_address()
        # The lab's output is drained all along: a full pipe would block its workers'
        # logging, and so the workers themselves.
        self._drain = threading.Thread(target=self._read_rest, daemon=True)
        self._drain.start()
        self._wait_ready()

    def _read_rest(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def _read_address(self) -> str:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"serve ended: {''.join(self.lines)}")
            self.lines.append(line)
            if "web lab on " in line:
                return line.split("web lab on ")[1].split()[0].rstrip("/")

    def _wait_ready(self) -> None:
        for _ in range(300):
            try:
                httpx.get(f"{self.base}/api/sessions", timeout=5, trust_env=False)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the web lab never answered")

    def defaults(self) -> dict[str, Any]:
        answer = httpx.get(f"{self.base}/api/defaults", timeout=10, trust_env=False)
        request: dict[str, Any] = answer.json()["request"]
        return request

    def socket(self, session_id: str) -> Connection:
        ws = self.base.replace("http://", "ws://")
        return connect(f"{ws}/ws/sessions/{session_id}", open_timeout=20)

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self._drain.join(timeout=30)
        return "".join(self.lines)


def start(socket: Connection, request: dict[str, Any], message: str) -> None:
    socket.send(json.dumps({"type": "start", "request": {**request, "user_message": message}}))


def messages_until(socket: Connection, *types: str, timeout: float = 120) -> list[Any]:
    """Stream messages (control frames and outputs) until one of ``types`` arrives."""
    seen: list[Any] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        frame = json.loads(socket.recv(timeout=deadline - time.monotonic()))
        # Stream frames are {"offset", "message"}; control frames (attached, history,
        # error) are the message itself.
        message = frame["message"] if "offset" in frame else frame
        seen.append(message)
        if message.get("type") in types:
            return seen
    raise AssertionError(f"none of {types} arrived: {[m.get('type') for m in seen]}")
