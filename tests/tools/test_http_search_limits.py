"""The HTTP search backend stays on its endpoint: redirects, metadata hosts, size and time.

Real HTTP servers on 127.0.0.1 play the endpoint; a second one plays the host a
redirect points at, and records whether anything reached it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from agent_lab.application.builtin_tools import builtin_tool_definitions
from agent_lab.application.tools import ToolOutcome, ToolRegistry
from agent_lab.domain.errors import ConfigError
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.infrastructure.tool_backends.http_search import HttpSearchBackend

RESULTS = {"results": [{"title": "WAL", "content": "Write-ahead log.", "url": "https://x/wal"}]}


class Server:
    """A tiny HTTP server whose answers are set per path by the test."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.routes: dict[str, Any] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                server.paths.append(path)
                route = server.routes.get(path, (200, json.dumps(RESULTS).encode(), {}))
                with contextlib.suppress(OSError):  # the client gave up
                    if callable(route):
                        route(self)
                    else:
                        self._answer(*route)

            def _answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def endpoint() -> Iterator[Server]:
    server = Server()
    yield server
    server.close()


@pytest.fixture
def elsewhere() -> Iterator[Server]:
    server = Server()
    server.routes["/latest/meta-data"] = (200, b'{"results": [{"title": "SECRET"}]}', {})
    yield server
    server.close()


async def search(url: str, **options: Any) -> ToolOutcome:
    backends = dataclasses.replace(local_backends(), search=HttpSearchBackend(url, **options))
    registry = ToolRegistry(builtin_tool_definitions(backends))
    event = ToolCallEvent(id="c-1", name="knowledge.web.search", arguments={"query": "wal"})
    return await registry.run(event)


def redirect(location: str) -> tuple[int, bytes, dict[str, str]]:
    return (302, b"", {"Location": location})


@pytest.mark.asyncio
@pytest.mark.parametrize("host", ["localhost", "127.0.0.2"])
async def test_a_redirect_to_another_host_is_not_followed(
    endpoint: Server, elsewhere: Server, host: str
) -> None:
    endpoint.routes["/search"] = redirect(f"http://{host}:{elsewhere.port}/latest/meta-data")

    outcome = await search(f"{endpoint.base}/search")

    assert outcome.payload["error"] == (
        f"tool handler failed: search backend {endpoint.base}/search "
        "redirected to another host; not followed"
    )
    assert elsewhere.paths == []
    assert "SECRET" not in json.dumps(outcome.payload)


@pytest.mark.asyncio
async def test_a_redirect_to_another_port_of_the_same_address_is_not_followed(
    endpoint: Server, elsewhere: Server
) -> None:
    endpoint.routes["/search"] = redirect(f"{elsewhere.base}/latest/meta-data")

    outcome = await search(f"{endpoint.base}/search")

    assert "redirected to another host" in outcome.payload["error"]
    assert elsewhere.paths == []


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]/x",
        "http://metadata.google.internal/",
    ],
)
async def test_a_redirect_to_a_metadata_address_is_refused(endpoint: Server, location: str) -> None:
    endpoint.routes["/search"] = redirect(location)

    outcome = await search(f"{endpoint.base}/search")

    assert "redirected to another host; not followed" in outcome.payload["error"]


@pytest.mark.asyncio
async def test_a_redirect_within_the_endpoint_is_followed(endpoint: Server) -> None:
    endpoint.routes["/search"] = redirect("/v2/search?format=json&q=wal")

    outcome = await search(f"{endpoint.base}/search")

    assert outcome.ok, outcome.payload
    assert [hit["title"] for hit in outcome.payload["results"]] == ["WAL"]
    assert endpoint.paths == ["/search", "/v2/search"]


@pytest.mark.asyncio
async def test_a_redirect_loop_ends_with_an_error(endpoint: Server) -> None:
    endpoint.routes["/search"] = redirect("/search")

    outcome = await search(f"{endpoint.base}/search")

    assert "redirected more than 3 times" in outcome.payload["error"]
    assert len(endpoint.paths) == 4


def test_a_metadata_endpoint_is_refused_when_configured() -> None:
    with pytest.raises(ConfigError, match="link-local or metadata"):
        HttpSearchBackend("http://169.254.169.254/latest/meta-data")


@pytest.mark.asyncio
async def test_an_answer_larger_than_the_cap_is_refused(endpoint: Server) -> None:
    endpoint.routes["/big"] = (200, b" " * 5000 + json.dumps(RESULTS).encode(), {})

    outcome = await search(f"{endpoint.base}/big", max_response_bytes=4096)

    assert outcome.payload["error"] == (
        f"tool handler failed: search backend {endpoint.base}/big answered more than 4096 bytes"
    )


def chunked_without_length(handler: BaseHTTPRequestHandler) -> None:
    handler.protocol_version = "HTTP/1.1"
    handler.send_response(200)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.send_header("Connection", "close")
    handler.end_headers()
    for _ in range(10):
        piece = b" " * 1000
        handler.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    handler.wfile.write(b"0\r\n\r\n")


@pytest.mark.asyncio
async def test_an_answer_without_a_length_is_cut_at_the_cap(endpoint: Server) -> None:
    endpoint.routes["/chunked"] = chunked_without_length

    outcome = await search(f"{endpoint.base}/chunked", max_response_bytes=4096)

    assert outcome.payload["error"].endswith("answered more than 4096 bytes")


def drip(handler: BaseHTTPRequestHandler) -> None:
    body = json.dumps(RESULTS).encode()
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    for byte in body:  # one byte every 50 ms: no single read ever times out
        handler.wfile.write(bytes([byte]))
        handler.wfile.flush()
        time.sleep(0.05)


@pytest.mark.asyncio
async def test_a_slow_drip_does_not_extend_the_time_cap(endpoint: Server) -> None:
    endpoint.routes["/drip"] = drip

    outcome = await search(f"{endpoint.base}/drip", timeout=0.5)

    assert outcome.payload["error"] == (
        f"tool handler failed: search backend {endpoint.base}/drip did not answer within 0.5s"
    )
