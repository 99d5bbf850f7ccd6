"""The ``agent-lab`` command line: ``main`` is the console script's entry point.

Each command lives in its own module of this package; this one builds the typer app and turns
click's usage errors into one line on stderr (exit code 2).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any, NoReturn

import typer
from typer.core import TyperGroup

import agent_lab.interfaces.cli.chat as cli_chat
import agent_lab.interfaces.cli.compare_command as cli_compare
import agent_lab.interfaces.cli.config_command as cli_config
import agent_lab.interfaces.cli.demo as cli_demo
import agent_lab.interfaces.cli.local as cli_local
import agent_lab.interfaces.cli.replay_command as cli_replay
import agent_lab.interfaces.cli.run as cli_run
import agent_lab.interfaces.cli.serve as cli_serve
import agent_lab.interfaces.cli.sessions as cli_sessions
from agent_lab import __version__
from agent_lab.interfaces.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    CommandFailed,
    help_text,
    one_line,
    print_error,
)

APP_HELP = """Agent Lab: run, watch, persist, replay and compare real-time tool-calling agents.

Start with `agent-lab demo` (offline, no configuration). Point the lab at your own
OpenAI-compatible endpoint with --base-url/OPENAI_BASE_URL, --model and --api-key.

Settings, highest first: flags, --config FILE, ./agent-lab.toml,
$XDG_CONFIG_HOME/agent-lab/config.toml (default ~/.config), the environment, defaults.
`agent-lab config` shows the effective settings and where each came from.
"""


class OneLineErrors(TyperGroup):
    """A typer group whose usage errors are one line on stderr, with exit code 2."""

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> NoReturn:
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except (typer.Abort, KeyboardInterrupt):
            sys.stderr.write("error: interrupted\n")
            sys.exit(EXIT_INTERRUPTED)
        except CommandFailed as exc:
            print_error(str(exc))
            sys.exit(exc.code)
        except BrokenPipeError:  # e.g. `agent-lab run ... --json | head`
            _silence_stdout()
            sys.exit(1)
        except Exception as exc:
            sys.exit(_cli_error(exc))
        sys.exit(code if isinstance(code, int) else 0)


def _cli_error(exc: Exception) -> int:
    """Print a click/typer error as one line; re-raise anything else unexpected."""
    # Typer >= 0.29 vendors click, older versions use click itself: match by shape.
    exit_code = getattr(exc, "exit_code", None)
    if not isinstance(exit_code, int) or not hasattr(exc, "format_message"):
        return _internal_error(exc)
    context = getattr(exc, "ctx", None)
    path = context.command_path.split()[1:] if context is not None else []
    where = " ".join(["agent-lab", *path])
    if type(exc).__name__ == "NoArgsIsHelpError":
        text = str(exc.format_message())  # rich help was already printed while building it
        if text.strip():
            typer.echo(text)
        sys.stderr.write(f"error: missing command (see `{where} --help`)\n")
        return EXIT_USAGE
    message = one_line(str(exc.format_message()))
    if exit_code == EXIT_USAGE:
        message += f" (see `{where} --help`)"
    sys.stderr.write(f"error: {message}\n")
    return exit_code


def _silence_stdout() -> None:
    # Python flushes stdout at exit; a closed pipe would print one more error then.
    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _internal_error(exc: Exception) -> int:
    if os.environ.get("AGENT_LAB_DEBUG"):
        raise exc
    sys.stderr.write(f"error: internal error: {one_line(repr(exc))} (set AGENT_LAB_DEBUG=1)\n")
    return 1


def build_app() -> typer.Typer:
    """The ``agent-lab`` typer application with every command registered."""
    app = typer.Typer(
        cls=OneLineErrors,
        help=help_text(APP_HELP),
        rich_markup_mode="rich",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=True,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    app.command("demo", help=help_text(cli_demo.DEMO_HELP))(cli_demo.demo)
    app.command("run", help=help_text(cli_run.RUN_HELP))(cli_run.run)
    app.command("chat", help=help_text(cli_chat.CHAT_HELP))(cli_chat.chat)
    app.command("compare", help=help_text(cli_compare.COMPARE_HELP))(cli_compare.compare)
    app.add_typer(cli_sessions.build_sessions_app(), name="sessions")
    app.command("replay", help=help_text(cli_replay.REPLAY_HELP))(cli_replay.replay)
    app.command("simulate", help=help_text(cli_serve.SIMULATE_HELP))(cli_serve.simulate)
    app.command("serve", help=help_text(cli_serve.SERVE_HELP))(cli_serve.serve)
    app.add_typer(cli_local.build_local_app(), name="local")
    app.command("config", help=help_text(cli_config.CONFIG_HELP))(cli_config.show_config)
    return app


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"agent-lab {__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_show_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """Agent Lab's command line (the options here come before the command)."""


app = build_app()


def main() -> None:
    """Run the ``agent-lab`` command line (the console script)."""
    try:
        app(prog_name="agent-lab")
    except KeyboardInterrupt:  # Ctrl-C before the command took over
        sys.stderr.write("error: interrupted\n")
        sys.exit(EXIT_INTERRUPTED)
