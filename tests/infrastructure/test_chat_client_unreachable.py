"""An endpoint that cannot be reached is said as a plain sentence naming the host, the
port and the likely cause, over both transports; the libraries' own words (``ssl:default``,
``[Errno 111]``, ``All connection attempts failed``) are kept for the audit only."""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest

from agent_lab.domain.errors import ProviderConnectionError
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import TRANSPORTS, Transport
from tests.infrastructure.conftest import Collect
from tests.infrastructure.test_chat_client_http import KEY, full_text

pytestmark = pytest.mark.parametrize("transport", TRANSPORTS)

INTERNALS = ("ssl:default", "Errno", "Connect call failed", "All connection attempts", "_ssl.c")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _unreachable(url: str, transport: Transport, collect: Collect) -> ProviderConnectionError:
    async with OpenAICompatibleChatClient(
        url,
        KEY,
        transport=transport,
        max_retries=0,
    ) as client:
        with pytest.raises(ProviderConnectionError) as info:
            await collect(client)
    error = info.value
    message = str(error)
    assert f"{url}/chat/completions" in message
    assert not [word for word in INTERNALS if word in message], message
    detail = getattr(error, "audit_detail", "")
    assert detail and detail not in message  # the libraries' words, for the audit
    assert KEY not in full_text(error) and KEY not in detail
    return error


@pytest.mark.asyncio
async def test_nothing_listening_names_the_host_and_port(
    transport: Transport, collect: Collect
) -> None:
    port = _free_port()
    error = await _unreachable(f"http://127.0.0.1:{port}/v1", transport, collect)

    assert f"nothing is listening on 127.0.0.1:{port} (connection refused)" in str(error)
    detail = str(getattr(error, "audit_detail", ""))
    assert "Connect call failed" in detail or "All connection attempts failed" in detail


@pytest.mark.asyncio
async def test_a_host_name_that_does_not_resolve_says_dns(
    transport: Transport, collect: Collect
) -> None:
    host = "no-such-host.localhost"  # a loopback name: the offline guard lets it be looked up
    try:
        socket.getaddrinfo(host, 80)
    except socket.gaierror:
        pass
    else:
        pytest.skip(f"this machine's resolver answers for {host}")
    error = await _unreachable(f"http://{host}:8080/v1", transport, collect)

    assert f"the host name {host} could not be resolved (DNS)" in str(error)


class _PlainHTTP(socketserver.BaseRequestHandler):
    """Answers whatever arrives (a TLS hello, here) as a plain HTTP server does."""

    def handle(self) -> None:
        self.request.recv(4096)
        self.request.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


@pytest.fixture
def plain_http() -> Iterator[int]:
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _PlainHTTP) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield int(server.server_address[1])
        server.shutdown()


@pytest.mark.asyncio
async def test_https_to_a_plain_http_server_says_it_does_not_speak_tls(
    transport: Transport, collect: Collect, plain_http: int
) -> None:
    url = f"https://127.0.0.1:{plain_http}/v1"
    error = await _unreachable(url, transport, collect)

    assert f"the TLS handshake with 127.0.0.1:{plain_http} failed" in str(error)
    assert "does not speak TLS (use http:// instead of https://?)" in str(error)
