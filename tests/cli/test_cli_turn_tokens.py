"""The live turn figure of ``agent-lab run`` and ``agent-lab chat`` counts every model call
of the turn, the event agent's argument calls included, so it equals the turn's tokens in
``sessions show`` (real subprocesses, a real SSE server with usage on every call)."""

from __future__ import annotations

import json
import re
from typing import Any

from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke

SCHEDULE = {
    "title": "Design review",
    "start_at": "2031-05-06T10:00:00",
    "timezone": "Europe/Berlin",
}


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion}}


def tool_call(call_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    function = {"name": "calendar__schedule__create", "arguments": json.dumps(arguments)}
    call = {"index": 0, "id": call_id, "type": "function", "function": function}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


def dual_answers() -> list[ScriptedResponse]:
    """Chat (100+10) asks for the calendar, whose arguments one forced call (50+5)
    generates; its template confirms it, with no further model call."""
    return [
        ScriptedResponse.sse(
            delta("Booking it. "), delta("<event>calendar.schedule.create</event>"), usage(100, 10)
        ),
        ScriptedResponse.sse(tool_call("arg-1", SCHEDULE), usage(50, 5)),
    ]


def direct_answers() -> list[ScriptedResponse]:
    """Chat (100+10) calls the calendar itself; no argument call is made."""
    return [
        ScriptedResponse.sse(delta("Booking it. "), tool_call("call-1", SCHEDULE), usage(100, 10))
    ]


def stored_turn_tokens(cli_process: Invoke, stdout: str) -> str:
    """The ``tokens (cached)`` cell of turn 1 in ``sessions show`` of the run's session."""
    session_id = re.search(r"session ([0-9a-f]{32})", stdout)
    assert session_id is not None, stdout
    shown = cli_process("sessions", "show", session_id.group(1))
    assert shown.exit_code == 0, shown.stderr
    row = next(line for line in shown.stdout.splitlines() if re.match(r"│\s+1 │", line))
    return row.strip("│ ").split("│")[-1].strip()


def run_turn(cli_process: Invoke, mode: str, *answers: ScriptedResponse) -> tuple[str, int]:
    with SSETranscriptServer(*answers) as server:
        run = cli_process(
            "run",
            "Book a design review",
            "--mode",
            mode,
            "--base-url",
            server.base_url,
            "--model",
            "m-1",
        )
        calls = server.request_count
    assert run.exit_code == 0, run.stderr
    return run.stdout, calls


def test_run_turn_line_counts_the_argument_call_as_sessions_show_does(
    cli_process: Invoke,
) -> None:
    stdout, calls = run_turn(cli_process, "dual_agent", *dual_answers())

    assert calls == 2
    assert "Scheduled Design review" in stdout
    assert "110 chat tok (0 cached)" in stdout  # the round's line: its chat call
    assert "  turn · 165 tok (0 cached)" in stdout
    assert stored_turn_tokens(cli_process, stdout) == "165 (0)"


def test_run_turn_line_in_chat_agent_tools_is_the_chat_calls(cli_process: Invoke) -> None:
    stdout, calls = run_turn(cli_process, "chat_agent_tools", *direct_answers())

    assert calls == 1
    assert "  turn · 110 tok (0 cached)" in stdout
    assert stored_turn_tokens(cli_process, stdout) == "110 (0)"


def test_chat_turn_line_counts_the_argument_call_as_sessions_show_does(
    cli_process: Invoke,
) -> None:
    with SSETranscriptServer(*dual_answers()) as server:
        chat = cli_process(
            "chat",
            "--mode",
            "dual_agent",
            "--base-url",
            server.base_url,
            "--model",
            "m-1",
            input="Book a design review\n",
        )
    assert chat.exit_code == 0, chat.stderr

    [turn_line] = [line for line in chat.stdout.splitlines() if "✓ turn 1" in line]
    assert turn_line.endswith("· 165 tok (0 cached)")
    assert stored_turn_tokens(cli_process, chat.stdout) == "165 (0)"


def test_a_chat_call_without_usage_reads_not_reported_though_its_argument_call_reported(
    cli_process: Invoke,
) -> None:
    chat = ScriptedResponse.sse(
        delta("Booking it. "), delta("<event>calendar.schedule.create</event>")
    )
    arguments = ScriptedResponse.sse(tool_call("arg-1", SCHEDULE), usage(50, 5))
    stdout, calls = run_turn(cli_process, "dual_agent", chat, arguments)

    assert calls == 2
    assert "chat tokens not reported" in stdout
    [turn_line] = [line for line in stdout.splitlines() if line.startswith("  turn ·")]
    # live as stored: the same tokens, and that one call reported none
    assert turn_line == "  turn · 55 tok (0 cached), 1 call(s) not reported"
    assert stored_turn_tokens(cli_process, stdout) == "55 (0), 1 call(s) not reported"
