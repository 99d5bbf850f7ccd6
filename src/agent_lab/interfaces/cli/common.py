"""What every ``agent-lab`` command shares: options, settings, the lab, exit codes.

Exit codes: ``0`` ok, ``1`` a run failed, ``2`` a usage error (bad flag, unknown tool,
bad TOML, unknown session, unreachable endpoint, rejected API key), ``130``
interrupted. Every failure is one line on stderr, without a traceback; the API key is
never printed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

from agent_lab.application.contracts import ToolInvocationMode
from agent_lab.application.protocol import ErrorMessage
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.domain import errors
from agent_lab.interfaces.cli.options import ModeChoice
from agent_lab.interfaces.settings import LabSettings

if TYPE_CHECKING:
    from agent_lab.interfaces.lab import Lab

EXIT_OK = 0
EXIT_RUN_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
_PIPE_WIDTH = 120
CORRUPT_STORE_HINT = (
    "Keep a copy of that file, and start afresh with a new data directory "
    "(--home DIR or AGENT_LAB_HOME) or another database (--db FILE)"
)
NO_STORE_HINT = (
    "Nothing has been stored there yet, and this user may not create the store there: "
    "use a data directory this user may write (--home DIR or AGENT_LAB_HOME) or "
    "another database (--db FILE)"
)
MODES: tuple[ToolInvocationMode, ...] = ("dual_agent", "chat_agent_tools")


def mode_value(choice: ModeChoice | None) -> str | None:
    """The plain string of a ``--mode`` choice."""
    return None if choice is None else choice.value


class CommandFailed(Exception):
    """Ends a command with ``code`` after printing ``message`` as one line on stderr."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Stop the command with one error line and an exit code (usage error by default)."""
    raise CommandFailed(message, code)


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) folded to one space."""
    return " ".join(text.split())


def print_error(message: str) -> None:
    """Write ``error: <message>`` as a single line on stderr."""
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()


def describe_error(exc: errors.AgentLabError) -> tuple[int, str]:
    """The exit code and the one-line message for an error raised by a command."""
    if isinstance(exc, errors.ProviderHTTPError):
        return _http_failure(exc.status, str(exc))
    if isinstance(exc, errors.ProviderConnectionError):
        return EXIT_USAGE, f"{exc} (check --base-url or OPENAI_BASE_URL)"
    usage_errors = (
        errors.UsageError,
        errors.SessionNotFound,
        errors.SessionBusy,
        errors.StoreFormatError,
    )
    if isinstance(exc, errors.StoreFormatError):
        missing = str(exc).startswith("there is no session store")
        return EXIT_USAGE, f"{exc}. {NO_STORE_HINT if missing else CORRUPT_STORE_HINT}"
    if isinstance(exc, usage_errors):
        return EXIT_USAGE, str(exc)
    return EXIT_RUN_FAILED, str(exc)


_EXIT_CODES: dict[str, int] = {
    "usage": EXIT_USAGE,
    "run_failed": EXIT_RUN_FAILED,
    "interrupted": EXIT_INTERRUPTED,
}
_RUN_FAILURE_LINES: dict[str, str] = {"cancelled": "turn cancelled"}
"""Failures whose line replaces the runtime's message."""
_REFUSALS = {"provider_error:http_401": 401, "provider_error:http_403": 403}
"""Failures whose line says what to check, with the provider's own message."""
_RUN_FAILURE_HINTS: dict[str, str] = {
    "provider_error:unreachable": "check --base-url or OPENAI_BASE_URL",
    "provider_error:http_404": "check --base-url and --model",
}


def run_failure(message: ErrorMessage) -> tuple[int, str]:
    """The exit code and one-line message for an ``error`` output of a run.

    The code comes from the ``exit_class`` the error carries; a few reasons get the
    CLI's own wording or a hint about which flag to check.
    """
    text = str(message.get("message") or "the run failed")
    reason = str(message.get("failure_reason") or "")
    code = _EXIT_CODES.get(str(message.get("exit_class")), EXIT_RUN_FAILED)
    if reason in _RUN_FAILURE_LINES:
        return code, _RUN_FAILURE_LINES[reason]
    if reason in _REFUSALS:
        return code, _refusal_line(_REFUSALS[reason], text)
    if reason in _RUN_FAILURE_HINTS:
        return code, f"{text} ({_RUN_FAILURE_HINTS[reason]})"
    return code, text


def report_failure(message: ErrorMessage) -> int:
    """Print the one-line message of a run's ``error`` output; return its exit code."""
    code, line = run_failure(message)
    print_error(line)
    return code


def _http_failure(status: int, text: str) -> tuple[int, str]:
    if status in (401, 403):
        return EXIT_USAGE, _refusal_line(status, text)
    if status == 404:
        return EXIT_USAGE, f"{text} (check --base-url and --model)"
    return EXIT_RUN_FAILED, text


def _refusal_line(status: int, text: str) -> str:
    """The line for a 401 (the key) or a 403 (access), keeping the provider's message.

    ``text`` is the error's message, ``provider returned HTTP <status>: <message>``; the
    client has already masked every secret in it.
    """
    said = text.removeprefix(f"provider returned HTTP {status}:").strip()
    if status == 401:
        line = "the provider rejected the request (HTTP 401); check your API key"
        return f"{line} (the provider said: {said})" if said else line
    line = "the provider refused access (HTTP 403)"
    return f"{line}: {said}" if said else line


def run_async(
    main: Callable[[], Coroutine[Any, Any, int]], *, interrupted: int = EXIT_INTERRUPTED
) -> NoReturn:
    """The CLI's single ``asyncio.run``: runs ``main`` and exits with its code.

    A Ctrl-C that reaches this far (e.g. while the lab starts) ends the command with
    ``interrupted``: 130 with an ``error: interrupted`` line, or quietly for ``0``.
    """
    try:
        with guard():
            code = asyncio.run(main())
    except KeyboardInterrupt:
        if interrupted != EXIT_OK:
            print_error("interrupted")
        raise typer.Exit(interrupted) from None
    raise typer.Exit(code)


@contextmanager
def guard() -> Iterator[None]:
    """Turn ``CommandFailed`` and ``AgentLabError`` into one stderr line and an exit."""
    try:
        yield
    except CommandFailed as exc:
        print_error(str(exc))
        raise typer.Exit(exc.code) from None
    except errors.AgentLabError as exc:
        code, line = describe_error(exc)
        print_error(line)
        raise typer.Exit(code) from None


def help_text(text: str) -> str:
    """Unwrap the hard-wrapped paragraphs of a help text; indented lines stay as they are."""
    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        lines = paragraph.splitlines()
        if any(line.startswith("  ") for line in lines):
            paragraphs.append(paragraph)
        else:
            paragraphs.append(" ".join(line.strip() for line in lines))
    return "\n\n".join(paragraphs)


def stdout_console() -> Console:
    """A console on the current stdout (created per command, never at import).

    Piped output is laid out 120 columns wide (``COLUMNS`` overrides it), so tables
    keep whole session ids.
    """
    width = None if isatty(sys.stdout) or os.environ.get("COLUMNS") else _PIPE_WIDTH
    return Console(file=sys.stdout, highlight=False, soft_wrap=True, width=width)


def isatty(stream: object) -> bool:
    """``stream`` is a terminal (``False`` for anything without a working ``isatty``)."""
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def notice(console: Console, text: str) -> None:
    """A dim one-line remark, e.g. which model endpoint is in use.

    Remarks go to the human-readable output, never to stderr (which carries only the
    error line) nor into ``--json`` output.
    """
    console.print(text, style="dim", markup=False)


def as_mode(value: object) -> ToolInvocationMode | None:
    """A tool-invocation mode from a flag or a stored session (``None`` when unset).

    Raises:
        ConfigError: not a known mode.
    """
    if value is None or value == "":
        return None
    for mode in MODES:
        if value == mode:
            return mode
    raise errors.ConfigError(f"unknown mode {value!r} (use {' or '.join(MODES)})")


def tool_registry(data_dir: Path) -> ToolRegistry:
    """The built-in tools keeping their state (notes, calendar, volume) in ``data_dir``."""
    from agent_lab.infrastructure.tool_backends.backends import local_backends

    return build_default_tool_registry(local_backends(data_dir))


@contextmanager
def scratch_registry() -> Iterator[ToolRegistry]:
    """Built-in tools on a fresh, temporary data directory (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="agent-lab-tools-") as directory:
        yield tool_registry(Path(directory))


def check_local_extra(settings: LabSettings) -> None:
    """Fail with the install hint when ``--local`` is asked without the extra.

    Raises:
        ConfigError: the ``local`` extra is not installed.
    """
    if not settings.local:
        return
    from agent_lab.infrastructure.local_llm import LOCAL_INSTALL_HINT, is_local_extra_installed

    if not is_local_extra_installed():
        raise errors.ConfigError(LOCAL_INSTALL_HINT)


@asynccontextmanager
async def open_lab(settings: LabSettings) -> AsyncIterator[Lab]:
    """Open a ``Lab`` whose tools keep their state in the lab's data directory."""
    from agent_lab.interfaces.lab import Lab

    check_local_extra(settings)
    async with Lab(settings, registry=tool_registry(settings.lab_home())) as lab:
        yield lab


@contextmanager
def on_interrupt(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` on Ctrl-C (SIGINT) inside the block, in the running loop."""
    loop = asyncio.get_running_loop()
    try:
        loop.add_signal_handler(signal.SIGINT, callback)
    except (NotImplementedError, RuntimeError, ValueError):
        yield  # not the main thread, or no signals here: Ctrl-C keeps its default
        return
    try:
        yield
    finally:
        loop.remove_signal_handler(signal.SIGINT)


FILE_REPLACED = "session_persistence_failed:file_replaced"
"""The failure of a write that found the store file at its path deleted or replaced."""


async def check_store_file(lab: Lab, *, reported: bool) -> int | None:
    """``store_file_gone``, in a worker thread (it may copy the store)."""
    return await asyncio.to_thread(store_file_gone, lab, reported=reported)


def store_file_gone(lab: Lab, *, reported: bool) -> int | None:
    """``EXIT_RUN_FAILED``, after its error line, when the store file was deleted or
    replaced while the command ran (what the store held is then saved to a copy the line
    names: what the command saved is not at the path); ``None`` when it was not, or when
    a turn's error already ``reported`` it. Blocking."""
    check = getattr(lab.store, "check_file", None)
    replaced = None if check is None else check()
    if replaced is None or reported:
        return None
    print_error(str(replaced.failure()))
    return EXIT_RUN_FAILED


def require_session(lab: Lab, session_id: str) -> dict[str, Any]:
    """The persisted session with this id or unique id prefix, or a usage error."""
    from agent_lab.interfaces.cli.session_ids import find_session

    assert lab.store is not None
    return find_session(lab.store, session_id)
