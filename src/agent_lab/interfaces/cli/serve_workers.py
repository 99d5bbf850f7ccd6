"""``agent-lab serve --workers N``: the web lab in N processes on one socket.

The parent binds the socket, prints the address once and supervises
(``agent_lab.interfaces.web.workers``); each worker opens its own lab (endpoint, tools,
store connection) and serves the web app on the shared socket.
"""

from __future__ import annotations

import gc
import os
import socket
from typing import TYPE_CHECKING

import typer

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.store_factory import is_postgres_url
from agent_lab.interfaces.cli.common import EXIT_OK, LabOptions, guard, open_lab, run_async

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
        run_async(lambda: _serve(sock, options, binding.token))
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None


async def _serve(sock: socket.socket, options: LabOptions, token: str | None) -> int:
    import uvicorn

    from agent_lab.interfaces.web import create_app

    async with open_lab(options.settings()) as lab:
        app = create_app(lab, token=token)
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        gc.collect()
        gc.freeze()  # as the single-process server: keep the collector off live sessions
        await server.serve(sockets=[sock])
    return EXIT_OK
