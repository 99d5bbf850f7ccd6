"""``agent-lab serve --workers N``: the web lab in N processes on one socket.

The parent binds the socket, prints the address once and supervises
(``agent_lab.interfaces.web.workers``); each worker opens its own lab (endpoint, tools,
store connection) and serves the web app on the shared socket.

Sessions hand over between workers through the store's claims: a live session with
no client and no turn running is closed after ``IDLE_SECONDS`` (releasing its claim),
and a runtime that finds its session claimed by another live worker waits up to
``HANDOFF_WAIT_SECONDS`` for the claim before answering ``session_busy``. So a browser
that reconnects to another worker continues its session there within seconds.
"""

from __future__ import annotations

import dataclasses
import os
import socket
from typing import TYPE_CHECKING, Final

import typer

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.store_factory import is_postgres_url
from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    guard,
    open_lab,
    run_async,
)
from agent_lab.interfaces.cli.lab_options import LabOptions

IDLE_SECONDS: Final = 5.0
"""How long a worker keeps a session no client watches (one process: 300 s)."""
HANDOFF_WAIT_SECONDS: Final = IDLE_SECONDS + 10.0
"""How long a runtime waits for another worker to release the session."""

if TYPE_CHECKING:
    from agent_lab.interfaces.cli.serve import Binding


def serve_in_workers(
    sock: socket.socket, workers: int, options: LabOptions, binding: Binding
) -> int:
    """Supervise ``workers`` processes serving the web lab on ``sock``."""
    from agent_lab.interfaces.web.workers import serve_workers

    with guard():
        settings = options.settings()
        if settings.local:
            raise ConfigError("--workers cannot share one --local model; use --base-url")
        location = settings.store_location()
        kind = "PostgreSQL" if is_postgres_url(location) else f"SQLite file {location}"
    typer.echo(f"{workers} workers sharing the {kind} store")
    if binding.generated:
        typer.echo(f"access token (shown once): {binding.token}")
    typer.echo(f"web lab on {binding.url(sock.getsockname()[1])}  (Ctrl-C to stop)")
    return serve_workers(_worker_main, sock, workers, options, binding, on_event=typer.echo)


def _worker_main(sock: socket.socket, index: int, options: LabOptions, binding: Binding) -> None:
    """One worker: its own lab and uvicorn server on the shared socket."""
    os.environ["AGENT_LAB_WORKER"] = str(index)
    try:
        run_async(lambda: _serve(sock, options, binding))
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None


async def _serve(sock: socket.socket, options: LabOptions, binding: Binding) -> int:
    from agent_lab.interfaces.cli.serve import serve_app
    from agent_lab.interfaces.web import create_app
    from agent_lab.interfaces.web.options import WebOptions

    web = dataclasses.replace(binding.options or WebOptions(), idle_seconds=IDLE_SECONDS)
    async with open_lab(options.settings()) as lab:
        lab.runtime_options["claim_wait_seconds"] = HANDOFF_WAIT_SECONDS
        app = create_app(lab, token=binding.token, options=web)
        await serve_app(app, sock)
    return EXIT_OK
