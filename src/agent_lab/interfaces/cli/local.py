"""``agent-lab local serve``: the bundled small model behind llama.cpp's server.

The server is `agent_lab.infrastructure.local_llm.LocalModelServer` (loopback only).
The command prints its base URL and model name, keeps it running until SIGINT or
SIGTERM, and then stops it. The ``--local`` flag of ``demo``, ``run``, ``chat``,
``compare`` and ``serve`` starts the same server for the duration of one command.
"""

from __future__ import annotations

import signal
import time
from types import FrameType
from typing import TYPE_CHECKING, Annotated

import typer

from agent_lab.domain.errors import ConfigError
from agent_lab.interfaces.cli.common import EXIT_OK, EXIT_RUN_FAILED, fail, guard, help_text
from agent_lab.interfaces.cli.options import PortOption

if TYPE_CHECKING:
    from agent_lab.infrastructure.local_llm import LocalModelServer

LOCAL_DEFAULT_PORT = 8767
"""Next to ``serve`` (8765) and ``simulate`` (8766), so all three can run at once."""

LOCAL_HELP = """Run the bundled small model offline (needs the 'local' extra).

Install the extra with: pip install 'agent-lab\\[local]'. See docs/local-model.md for
what the 135M model can and cannot do.

Examples:

  agent-lab local serve --port 8767
"""

LOCAL_SERVE_HELP = f"""Serve the bundled small model through llama.cpp's OpenAI-compatible server.

It listens on loopback only and runs until Ctrl-C (SIGINT) or SIGTERM, then stops the
server. Point any OpenAI-compatible client, or `agent-lab run --base-url ... --model
...`, at the printed address. `--local` on demo, run, chat, compare and serve starts
the same server for one command instead.

Examples:

  agent-lab local serve                       # http://127.0.0.1:{LOCAL_DEFAULT_PORT}/v1

  agent-lab local serve --port 9000

  agent-lab local serve --port 0 --chat-format none
"""

_POLL_S = 0.5
_LOG_TAIL_CHARS = 400
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def build_local_app() -> typer.Typer:
    """The ``local`` sub-command group."""
    app = typer.Typer(help=help_text(LOCAL_HELP), no_args_is_help=True)
    app.command("serve", help=help_text(LOCAL_SERVE_HELP))(serve_local)
    return app


def serve_local(
    port: PortOption = LOCAL_DEFAULT_PORT,
    host: Annotated[str, typer.Option("--host", help="Loopback interface to bind.")] = "127.0.0.1",
    chat_format: Annotated[
        str,
        typer.Option(
            "--chat-format",
            help="llama.cpp chat format; 'none' uses the template stored in the model file.",
        ),
    ] = "chatml-function-calling",
    threads: Annotated[
        int | None,
        typer.Option("--threads", min=1, help="Generation threads (default: llama.cpp's choice)."),
    ] = None,
) -> None:
    """Serve the bundled model until interrupted (see ``LOCAL_SERVE_HELP``)."""
    from agent_lab.infrastructure import local_llm

    with guard():
        if not local_llm.is_local_extra_installed():
            raise ConfigError(local_llm.LOCAL_INSTALL_HINT)
        server = local_llm.LocalModelServer(
            host=host,
            port=port,
            chat_format=None if chat_format.lower() == "none" else chat_format,
            n_threads=threads,
        )
        typer.echo("starting llama.cpp's server on the bundled model")
        _serve_until_stopped(server)
    raise typer.Exit(EXIT_OK)


def _serve_until_stopped(server: LocalModelServer) -> None:
    previous = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    try:
        for signum in _STOP_SIGNALS:
            signal.signal(signum, _raise_stopped)
        server.start()
        _announce(server)
        while server.running:
            time.sleep(_POLL_S)
        tail = _log_tail(server)
        fail(f"the llama.cpp server stopped unexpectedly; last output: {tail}", EXIT_RUN_FAILED)
    except _Stopped:
        typer.echo("stopping the local model server")
    finally:
        for signum in _STOP_SIGNALS:  # a second Ctrl-C must not leave the server behind
            signal.signal(signum, signal.SIG_IGN)
        try:
            server.close()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


def _announce(server: LocalModelServer) -> None:
    typer.echo(f"local model {server.model} listening on {server.base_url}")
    typer.echo(f"  chat format: {server.chat_format or 'the model file template'}")
    typer.echo(f"  agent-lab run --base-url {server.base_url} --model {server.model} 'hello'")
    typer.echo("  press Ctrl-C to stop")


def _log_tail(server: LocalModelServer) -> str:
    try:
        text = server.log_path.read_text(errors="replace") if server.log_path else ""
    except OSError:
        text = ""
    return text.strip()[-_LOG_TAIL_CHARS:] or "(empty)"


class _Stopped(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM (a BaseException, like Ctrl-C)."""


def _raise_stopped(signum: int, frame: FrameType | None) -> None:
    for stop_signal in _STOP_SIGNALS:  # stop once; later signals are ignored
        signal.signal(stop_signal, signal.SIG_IGN)
    raise _Stopped
