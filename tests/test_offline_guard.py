"""The suite's offline guard: loopback works, any other host fails loudly."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from tests.offline_site import sitecustomize as offline

UNROUTABLE = "192.0.2.1"  # TEST-NET-1: never a real host


@pytest.fixture
def expect_blocked() -> Iterator[list[str]]:
    """The attempts a test makes on purpose, taken off the record the suite checks."""
    before = len(offline.violations)
    blocked: list[str] = []
    yield blocked
    blocked.extend(offline.violations[before:])
    del offline.violations[before:]
    assert blocked, "the guard let the attempt through"


def test_a_connect_to_another_host_is_refused(expect_blocked: list[str]) -> None:
    with pytest.raises(ConnectionRefusedError, match="blocked network access to '192.0.2.1'"):
        socket.create_connection((UNROUTABLE, 80), timeout=1)


def test_a_name_lookup_of_another_host_is_refused(expect_blocked: list[str]) -> None:
    with pytest.raises(ConnectionRefusedError, match="example.com"):
        socket.getaddrinfo("example.com", 443)


@pytest.mark.asyncio
async def test_asyncio_and_httpx_are_refused(expect_blocked: list[str]) -> None:
    with pytest.raises(ConnectionRefusedError, match="blocked network access"):
        await asyncio.open_connection(UNROUTABLE, 80)
    async with httpx.AsyncClient() as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://{UNROUTABLE}:8080/")
    assert "192.0.2.1" in offline.violations[-1]


def test_a_swallowed_refusal_is_still_on_the_record(expect_blocked: list[str]) -> None:
    with contextlib.suppress(OSError):  # code under test that hides the error
        socket.create_connection(("example.org", 80), timeout=1)
    assert any("example.org" in line for line in offline.violations)


def test_loopback_still_works() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("localhost", port), timeout=5) as client:
            peer, _ = server.accept()
            client.sendall(b"ping")
            assert peer.recv(4) == b"ping"
            peer.close()


def test_python_subprocesses_inherit_the_guard() -> None:
    code = f"import socket; socket.create_connection(({UNROUTABLE!r}, 80), timeout=1)"
    result = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "NetworkBlocked" in result.stderr
    assert "blocked network access to '192.0.2.1'" in result.stderr


@pytest.mark.parametrize(
    ("host", "local"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("::ffff:127.0.0.1", True),
        ("0.0.0.0", True),
        ("localhost", True),
        ("api.localhost", True),
        (None, True),
        ("10.0.0.1", False),
        ("169.254.169.254", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_what_counts_as_this_machine(host: str | None, local: bool) -> None:
    assert offline.is_local_host(host) is local
