"""``agent-lab run``: one turn with live streaming output (or JSON lines)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agent_lab.application.contracts import DebugRunRequest, ToolInvocationMode
from agent_lab.application.protocol import DoneMessage, ErrorMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import SessionNotFound
from agent_lab.interfaces.cli.common import (
    EXIT_OK,
    FILE_REPLACED,
    as_mode,
    check_store_file,
    fail,
    notice,
    on_interrupt,
    open_lab,
    report_failure,
    require_session,
    run_async,
    stdout_console,
)
from agent_lab.interfaces.cli.flags import STORE_FLAGS, TURN_FLAGS, lab_flags
from agent_lab.interfaces.cli.lab_options import LabOptions
from agent_lab.interfaces.cli.options import AuditOption, JsonOption
from agent_lab.interfaces.cli.render import ConversationRenderer, JsonLinesWriter
from agent_lab.interfaces.cli.session_mode import continued_mode
from agent_lab.interfaces.cli.session_show import turn_cost_note

if TYPE_CHECKING:
    from agent_lab.interfaces.lab import Lab

SessionOption = Annotated[
    str | None,
    typer.Option("--session", help="Continue this persisted session.", show_default=False),
]

RUN_HELP = """Run one user turn and stream the answer, events, tool results and round stats.

Without --base-url (or OPENAI_BASE_URL) the built-in simulated model answers, offline.
The session is persisted; continue it with --session ID.

Examples:

  agent-lab run "Turn the volume down to 20"

  agent-lab run "Schedule a call tomorrow at 3pm" --mode chat_agent_tools --json

  agent-lab run "And remind me what we said" --session 3f2a   # a unique id prefix

  git diff | agent-lab run -                  # the message from stdin

  agent-lab run --file question.txt

  agent-lab run "Hi" --base-url http://127.0.0.1:8000/v1 --model qwen2.5 --tool handoff_note
"""


_HOW = (
    "give it as an argument, as - to read stdin, or with --file PATH (see `agent-lab run --help`)"
)

FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file",
        "-f",
        help="Read the user message from this file (any size).",
        dir_okay=False,
        show_default=False,
    ),
]


@lab_flags(
    "message",
    "file",
    *TURN_FLAGS,
    "config",
    "session",
    *STORE_FLAGS,
    "as_json",
    "audit",
    "local",
    "otel",
)
def run(
    options: LabOptions,
    message: Annotated[
        str | None,
        typer.Argument(help="The user message; - reads it from stdin.", show_default=False),
    ] = None,
    file: FileOption = None,
    session: SessionOption = None,
    as_json: JsonOption = False,
    audit: AuditOption = False,
) -> None:
    """Run one user turn with live streaming output (see ``RUN_HELP``)."""
    text = read_message(message, file)
    run_async(lambda: _run(options, text, session, as_json=as_json, audit=audit))


def read_message(message: str | None, file: Path | None) -> str:
    """The user message: the argument, stdin for ``-``, or the ``--file`` contents.

    Raises:
        CommandFailed: no message, both a message and ``--file``, an unreadable file, or
            an empty message (a usage error, exit code 2).
    """
    if message is not None and file is not None:
        fail("give the message or --file, not both")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"cannot read {file}: {_reason(exc)}")
    elif message == "-":
        text = sys.stdin.read()
    elif message is None:
        fail(f"missing the message; {_HOW}")
    else:
        text = message
    if not text.strip():
        fail(f"the message is empty; {_HOW}")
    return text


def _reason(exc: Exception) -> str:
    return str(getattr(exc, "strerror", None) or exc)


async def _run(
    options: LabOptions, message: str, session_id: str | None, *, as_json: bool, audit: bool
) -> int:
    async with open_lab(options.settings()) as lab:
        request, mode_note = build_request(lab, options, message, session_id)
        sink: JsonLinesWriter | ConversationRenderer
        if as_json:
            sink = JsonLinesWriter(sys.stdout, audits=audit)
        else:
            sink = ConversationRenderer(stdout_console(), show_audits=audit)
            notice(sink.console, lab.endpoint_description)
            if mode_note:
                notice(sink.console, mode_note)
        last = await stream_turn(lab.runtime(), request, sink)
        if isinstance(sink, ConversationRenderer):
            sink.end_line()
            if last["type"] == "done" or sink.turn_tokens.reported:
                sink.note(f"  turn · {sink.turn_tokens.describe()}")
            await print_turn_cost(lab, sink, sink.session_id)
        code = EXIT_OK if last["type"] == "done" else report_failure(last)
        reported = last["type"] == "error" and last.get("failure_reason") == FILE_REPLACED
        gone = await check_store_file(lab, reported=reported)
    return code if gone is None else gone


async def print_turn_cost(
    lab: Lab, renderer: ConversationRenderer, session_id: str | None, turn_index: int | None = None
) -> None:
    """A stored turn's cost (per role) under its conversation; the session's last turn
    by default. Nothing without a session or a store, or when the turn made no call."""
    if session_id is None or lab.store is None:
        return
    try:
        note = await asyncio.to_thread(
            turn_cost_note, lab.store, session_id, lab.prices, turn_index
        )
    except SessionNotFound:
        return  # deleted meanwhile: the turn's own error says so
    if note:
        renderer.note(note)


def build_request(
    lab: Lab, options: LabOptions, message: str, session_id: str | None
) -> tuple[DebugRunRequest, str | None]:
    """The request of a turn, and the note saying which mode a continued session runs
    in (its last turn's unless --mode is given)."""
    session_id, mode, note = resolve_session(lab, options, session_id)
    return lab.request(message, session_id=session_id, mode=mode), note


def resolve_session(
    lab: Lab, options: LabOptions, session_id: str | None
) -> tuple[str | None, ToolInvocationMode | None, str | None]:
    """The full id of the session to continue (given by its id or a unique prefix;
    ``None`` starts a new one), the mode of its turns (--mode, else the mode its last
    turn ran in: ``session_mode``) and a note that says which mode that is.

    Raises:
        CommandFailed: no such session, or an ambiguous prefix.
        ConfigError: not a known mode.
    """
    mode = as_mode(options.mode)
    if session_id is None or mode is not None:
        full_id = None if session_id is None else str(require_session(lab, session_id)["id"])
        return full_id, mode, None
    session = require_session(lab, session_id)
    assert lab.store is not None
    chosen = continued_mode(lab.store, session)
    return str(session["id"]), chosen.mode, chosen.note(str(session["id"]))


async def stream_turn(
    runtime: DebugRuntime,
    request: DebugRunRequest,
    sink: JsonLinesWriter | ConversationRenderer,
) -> DoneMessage | ErrorMessage:
    """Run one turn, render every output, and return the final ``done`` or ``error``.

    The first Ctrl-C cancels the turn through ``runtime.cancel_turn()``; a second one
    stops waiting at once.
    """
    main = asyncio.current_task()
    interrupts = 0

    def interrupt() -> None:
        nonlocal interrupts
        interrupts += 1
        if interrupts > 1 or not runtime.cancel_turn():
            assert main is not None
            main.cancel()

    last: DoneMessage | ErrorMessage = {"type": "error", "message": "the run ended without output"}
    try:
        with on_interrupt(interrupt):
            async for output in runtime.run(request):
                sink.render(output)
                if output["type"] == "done" or output["type"] == "error":
                    last = output
    except asyncio.CancelledError:
        if main is not None:
            main.uncancel()
        return {
            "type": "error",
            "message": "interrupted",
            "failure_reason": "cancelled",
            "exit_class": "interrupted",
        }
    finally:
        await runtime.aclose()
    return last
