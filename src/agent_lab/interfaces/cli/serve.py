"""``agent-lab serve`` (the web lab) and ``agent-lab simulate`` (the simulated provider)."""

from __future__ import annotations

import gc
import ipaddress
import secrets
import socket
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    fail,
    guard,
    open_lab,
    run_async,
    store_file_gone,
)
from agent_lab.interfaces.cli.flags import ENDPOINT_FLAGS, STORE_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import HostOption, PortOption, repeatable
from agent_lab.interfaces.settings import SIMULATED_MODEL

MAX_FRAME_BYTES = 16 * 1024 * 1024
"""The largest WebSocket message uvicorn reads (``agent_lab.interfaces.web.limits``)."""
MIN_TOKEN_CHARS = 16
"""Shortest --token accepted for a lab reachable from other machines."""
PUBLIC_ERROR_CHARS = 200
"""Provider error messages are cut to this length for a lab reachable from elsewhere."""
if TYPE_CHECKING:
    from agent_lab.interfaces.web.options import WebOptions

SIMULATE_DEFAULT_PORT = 8766
"""Not the web lab's 8765, so ``simulate`` and ``serve`` run side by side."""

SIMULATE_HELP = f"""Run the simulated OpenAI-compatible model server until Ctrl-C.

Point any OpenAI-compatible client (or `agent-lab run --base-url ...`) at it.

Examples:

  agent-lab simulate                          # http://127.0.0.1:{SIMULATE_DEFAULT_PORT}/v1

  agent-lab simulate --port 9000 --ttft-ms 800 --tps 20

  agent-lab simulate --ttft-ms 0 --tps 0      # as fast as possible
"""

SERVE_HELP = f"""Serve the web lab: run conversations, watch them live, browse sessions.

Binding a non-loopback --host requires a token of at least {MIN_TOKEN_CHARS} characters;
without --token one is generated and printed once. Clients of such a lab may only
point their sessions at the server's own endpoint and at those given with
--allow-endpoint (or `allow_endpoints` in the `\\[web]` table of the --config file).

Examples:

  agent-lab serve

  agent-lab serve --port 9000 --db /tmp/lab.sqlite3

  agent-lab serve --host 0.0.0.0 --token "$(openssl rand -hex 16)"

  agent-lab serve --host 0.0.0.0 --allow-endpoint https://api.openai.com/v1

  AGENT_LAB_DATABASE_URL=postgresql://lab@db/agent_lab agent-lab serve --workers 4
"""


def simulate(
    port: PortOption = SIMULATE_DEFAULT_PORT,
    host: HostOption = "127.0.0.1",
    ttft_ms: Annotated[
        float, typer.Option("--ttft-ms", min=0.0, help="Milliseconds to the first token.")
    ] = 300.0,
    tps: Annotated[
        float, typer.Option("--tps", min=0.0, help="Tokens per second (0: no pacing).")
    ] = 40.0,
) -> None:
    """Serve the simulated provider until interrupted (see ``SIMULATE_HELP``)."""
    from agent_lab.infrastructure.simulator.provider import (
        LatencyModel,
        SimulatedProvider,
        serve_forever,
    )

    with guard():
        provider = SimulatedProvider(LatencyModel(ttft_ms=ttft_ms, tokens_per_second=tps))
        serve_forever(host, port, provider=provider, on_ready=_announce_simulator)
    raise typer.Exit(EXIT_OK)


def _announce_simulator(base_url: str) -> None:
    typer.echo(f"simulated model listening on {base_url}")
    typer.echo("  use it from another shell:")
    for line in simulator_hints(base_url):
        typer.echo(f"    {line}")
    typer.echo("  press Ctrl-C to stop")


def simulator_hints(base_url: str) -> list[str]:
    """The shell lines that point ``agent-lab`` (or any OpenAI client) at the simulator."""
    return [
        f"export OPENAI_BASE_URL={base_url} OPENAI_API_KEY=not-needed"
        f" AGENT_LAB_MODEL={SIMULATED_MODEL}",
        "agent-lab run 'hello'",
    ]


@lab_flags(
    "host",
    "port",
    "token",
    "allow_endpoint",
    *ENDPOINT_FLAGS,
    "config",
    *STORE_FLAGS,
    "local",
    "otel",
    "workers",
)
def serve(
    options: LabOptions,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8765,
    token: Annotated[
        str | None,
        typer.Option("--token", help="Require this access token.", show_default=False),
    ] = None,
    allow_endpoint: Annotated[
        list[str] | None,
        repeatable("--allow-endpoint", "A provider base URL clients may use (repeatable)."),
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Worker processes sharing the store.")
    ] = 1,
) -> None:
    """Serve the web lab (see ``SERVE_HELP``)."""
    with guard():
        create_app = _web_app_factory()
        check_token(token, host)
        endpoints = [*(allow_endpoint or []), *_config_endpoints(options.config)]
    generated = token is None and not is_loopback(host)
    if generated:
        token = secrets.token_urlsafe(24)
    binding = Binding(host, port, token, generated, web_options(host, endpoints))
    if workers > 1:
        from agent_lab.interfaces.cli.serve_workers import serve_in_workers

        with _bind(host, port) as sock:
            raise typer.Exit(serve_in_workers(sock, workers, options, binding))
    # Ctrl-C is how a server is meant to stop: exit code 0
    run_async(lambda: _serve(options, create_app, binding), interrupted=EXIT_OK)


def _web_app_factory() -> Callable[..., Any]:
    try:
        from agent_lab.interfaces.web import create_app
    except ImportError as exc:
        fail(f"the web lab is not available in this installation ({exc})")
    return create_app


def check_token(token: str | None, host: str) -> None:
    """Refuse an empty token, and a short one for a lab other machines can reach."""
    if token is None:
        return
    if not token.strip():
        fail("--token must not be empty (leave it out on loopback, or generate one)")
    if not is_loopback(host) and len(token) < MIN_TOKEN_CHARS:
        fail(
            f"--token is too short for --host {host}: use at least {MIN_TOKEN_CHARS} "
            "characters (for example `openssl rand -hex 16`), or leave it out to have one "
            "generated"
        )


def web_options(host: str, endpoints: list[str]) -> WebOptions:
    """The web lab's options: off loopback, an endpoint allowlist and short errors."""
    from agent_lab.interfaces.web import WebOptions

    if is_loopback(host):
        return WebOptions(allowed_endpoints=tuple(endpoints) if endpoints else None)
    return WebOptions(allowed_endpoints=tuple(endpoints), error_chars=PUBLIC_ERROR_CHARS)


def _config_endpoints(config: Path | None) -> list[str]:
    """``allow_endpoints`` of the ``[web]`` table of the settings file, if any."""
    if config is None or not config.is_file():
        return []
    try:
        table = tomllib.loads(config.read_text(encoding="utf-8")).get("web", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []  # reported by the settings loader
    endpoints = table.get("allow_endpoints", []) if isinstance(table, dict) else []
    if not isinstance(endpoints, list) or not all(isinstance(url, str) for url in endpoints):
        fail(f"{config}: [web] allow_endpoints must be a list of URLs")
    return list(endpoints)


def is_loopback(host: str) -> bool:
    """``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Binding:
    """Where the web lab listens, and its token (``generated`` ones are printed once)."""

    host: str
    port: int
    token: str | None
    generated: bool
    options: WebOptions | None = None

    def url(self, port: int) -> str:
        """The page's address; a generated token rides in the fragment."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        fragment = f"#token={self.token}" if self.generated and self.token else ""
        return f"http://{host}:{port}/{fragment}"


async def _serve(options: LabOptions, create_app: Callable[..., Any], binding: Binding) -> int:
    with _bind(binding.host, binding.port) as sock:
        return await _serve_on(sock, options, create_app, binding)


async def _serve_on(
    sock: socket.socket, options: LabOptions, create_app: Callable[..., Any], binding: Binding
) -> int:
    from agent_lab.interfaces.web.masking import Masker

    async with open_lab(options.settings()) as lab:
        app = create_app(lab, token=binding.token, options=binding.options)
        typer.echo(Masker().text(lab.endpoint_description))  # no URL credentials
        if binding.generated:
            typer.echo(f"access token (shown once): {binding.token}")
        typer.echo(f"web lab on {binding.url(sock.getsockname()[1])}  (Ctrl-C to stop)")
        try:
            await serve_app(app, sock)
        finally:  # also when Ctrl-C stops the server: say where its turns went
            gone = store_file_gone(lab, reported=False)
    return EXIT_OK if gone is None else gone


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")


async def serve_app(app: Any, sock: socket.socket) -> None:
    """Serve the web lab's ``app`` on ``sock`` with uvicorn until it is stopped."""
    import uvicorn

    # Messages up to MAX_FRAME_BYTES are read, so one over the lab's own limits is
    # answered with an error frame naming the field; larger ones are closed (1009).
    config = uvicorn.Config(app, log_level="warning", lifespan="on", ws_max_size=MAX_FRAME_BYTES)
    server = uvicorn.Server(config)
    # Everything built so far lives as long as the server: keep it out of the
    # collector's full passes, which otherwise stall every live session (bench 4).
    gc.collect()
    gc.freeze()
    await server.serve(sockets=[sock])
