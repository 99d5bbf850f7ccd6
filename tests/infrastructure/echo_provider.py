"""A real OpenAI-compatible server on 127.0.0.1 that echoes each request's credentials.

It plays a provider (or a proxy in front of one) that repeats what it was sent: the
``Authorization`` value, the user and password of a ``Basic`` one, the request line and
every header. The first path segment picks the answer: ``/stream/...`` streams the echo
in an SSE content chunk and in an extra field of that chunk, ``/error/...`` puts it in
the message of a 401 JSON error body. Every request line and its headers are recorded.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["EchoProvider", "ReceivedRequest"]


@dataclass(frozen=True)
class ReceivedRequest:
    """One request the provider received."""

    method: str
    target: str
    """The request target as sent: path and query."""
    headers: dict[str, str]
    """Header names in lower case."""


def _basic_user(authorization: str) -> str:
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "basic":
        return ""
    try:
        return base64.b64decode(token, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return ""


def echo_text(request: ReceivedRequest) -> str:
    """What the provider says back: the credentials, the request line and the headers."""
    auth = request.headers.get("authorization", "")
    return (
        f"auth={auth} basic-user={_basic_user(auth)} request={request.method}"
        f" {request.target} headers={json.dumps(request.headers)}"
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Quiet: the tests read ``EchoProvider.requests``."""

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        if length:
            self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        request = ReceivedRequest(self.command, self.path, headers)
        self.server.record(request)
        text = echo_text(request)
        if self.path.startswith("/error/"):
            self._send(401, "application/json", {"error": {"message": f"denied: {text}"}})
            return
        delta = {"choices": [{"index": 0, "delta": {"content": text}}], "echo": text}
        finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        events = [json.dumps(delta), json.dumps(finish), "[DONE]"]
        body = "".join(f"data: {event}\n\n" for event in events)
        self._send(200, "text/event-stream", body)

    def _send(self, status: int, content_type: str, body: Any) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.received: list[ReceivedRequest] = []

    def record(self, request: ReceivedRequest) -> None:
        with self.lock:
            self.received.append(request)


class EchoProvider:
    """Serves in a background thread while used as a context manager."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        """``http://127.0.0.1:<port>``; add ``/stream/v1`` or ``/error/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[ReceivedRequest]:
        """A snapshot of the requests received so far."""
        with self._server.lock:
            return list(self._server.received)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
