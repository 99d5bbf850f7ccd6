"""The simulated provider in its own process, stamping every chunk it sends.

    python bench/_sim_server.py [ttft_ms] [tokens_per_second]   # prints the base URL

Serves ``SimulatedProvider`` (300 ms to first token, 40 tokens/s by default) with
uvicorn until stdin closes. A small ASGI wrapper rewrites every ``data: {`` of a body
write to ``data: {"t":<time.perf_counter()>,``, the moment the chunk leaves the
provider. ``perf_counter`` is ``CLOCK_MONOTONIC`` on Linux, shared by all processes of
the machine, so the client can subtract it from its own readings.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from agent_lab.infrastructure.simulator.provider import (
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)

_OPEN = b"data: {"


def stamping(app: Any) -> Any:
    """Wraps an ASGI app so each SSE event carries its send time in ``"t"``."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        async def stamped(message: Any) -> None:
            body = message.get("body") if message["type"] == "http.response.body" else None
            if body:
                now = b'data: {"t":%.7f,' % time.perf_counter()
                message = {**message, "body": body.replace(_OPEN, now)}
            await send(message)

        await app(scope, receive, stamped)

    return wrapped


def main() -> None:
    ttft = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    rate = float(sys.argv[2]) if len(sys.argv) > 2 else 40.0
    provider = SimulatedProvider(LatencyModel(ttft_ms=ttft, tokens_per_second=rate))
    provider.app = stamping(provider.app)
    with SimulatedProviderServer(provider) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # the parent closes our stdin to stop us


if __name__ == "__main__":
    main()
