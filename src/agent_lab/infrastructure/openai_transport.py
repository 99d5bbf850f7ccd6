"""The HTTP client the chat client gives the openai SDK: ``httpx`` or ``aiohttp``.

The SDK makes every request either way (authentication, retries, its timeouts); the
transport decides how the bytes travel:

* ``"aiohttp"`` (the default): an ``httpx`` client whose transport is an ``aiohttp``
  connection pool (``openai_compat.aiohttp_transport``). Reads cost far less CPU, which
  is what decides how many concurrent streams one process can hold
  (``bench/bench_transport.py``), and the pool has no per-request scan of its
  connections.
* ``"httpx"``: the SDK's own ``httpx`` client over ``httpcore``.

Both keep the SDK's connection defaults (up to 1,000 connections, 5 s keep-alive) and one
TLS context for the process: loading the CA bundle takes 30-100 ms and holds the GIL, so
it happens once, at import.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
from typing import Literal, get_args

import httpx
import openai

from agent_lab.domain.errors import ConfigError

Transport = Literal["httpx", "aiohttp"]
"""How the chat client's requests travel."""
TRANSPORTS: tuple[Transport, ...] = get_args(Transport)
DEFAULT_TRANSPORT: Transport = "aiohttp"

_MAX_CONNECTIONS = 1000
_KEEPALIVE_EXPIRY = 5.0
_FIRST_REQUEST_MODULES = ("anyio._backends._asyncio", "httpcore._backends.anyio")
"""Modules httpx/anyio import lazily on the first request (about 50 ms on the loop)."""
for _module in _FIRST_REQUEST_MODULES:
    with contextlib.suppress(ImportError):
        importlib.import_module(_module)

TLS_CONTEXT = httpx.create_ssl_context()
"""The TLS context of every HTTP client this module builds."""


def check_transport(transport: str) -> Transport:
    """``transport`` as a ``Transport``, if it is one and can be used here.

    Raises:
        ConfigError: An unknown transport, or ``"aiohttp"`` without the package (a
            dependency, missing only from a broken install).
    """
    if transport not in TRANSPORTS:
        names = ", ".join(repr(name) for name in TRANSPORTS)
        raise ConfigError(f"unknown HTTP transport {transport!r}: choose one of {names}")
    if transport == "aiohttp" and importlib.util.find_spec("aiohttp") is None:
        raise ConfigError(
            "the aiohttp transport needs the aiohttp package: pip install aiohttp,"
            " or choose transport = 'httpx'"
        )
    return transport


def new_http_client(transport: Transport, timeout: httpx.Timeout) -> httpx.AsyncClient:
    """A client for the SDK's ``http_client=``; blocking work (imports): call it off the loop.

    Raises:
        ConfigError: ``"aiohttp"`` without the package.
    """
    if transport == "httpx":
        return openai.DefaultAsyncHttpxClient(verify=TLS_CONTEXT, timeout=timeout)
    check_transport(transport)
    from agent_lab.infrastructure.openai_compat.aiohttp_transport import AiohttpTransport

    pool = AiohttpTransport(
        ssl_context=TLS_CONTEXT,
        max_connections=_MAX_CONNECTIONS,
        keepalive_expiry=_KEEPALIVE_EXPIRY,
    )
    # trust_env=False: aiohttp reads the proxy variables itself, httpx must not mount
    # transports of its own for them.
    return httpx.AsyncClient(
        transport=pool, timeout=timeout, follow_redirects=True, trust_env=False
    )
