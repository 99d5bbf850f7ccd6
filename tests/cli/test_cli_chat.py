"""``agent-lab chat``: piped turns, resume, /exit, and Ctrl-C cancelling a turn."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke, process_env


def test_chat_runs_piped_lines_as_turns_of_one_session(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    result = cli("chat", input="Turn the volume down to 15\nSearch for SQLite WAL\n")

    assert result.exit_code == 0, result.stderr
    assert "you› Turn the volume down to 15" in result.stdout
    assert "you› Search for SQLite WAL" in result.stdout
    assert "✓ turn 1" in result.stdout and "✓ turn 2" in result.stdout
    opened = store()
    [session] = opened.list_sessions()
    assert session["title"] == "Turn the volume down to 15"
    summary = opened.usage_summary(session["id"])
    assert [turn["turn_index"] for turn in summary["turns"]] == [1, 2]
    assert result.error_lines == []


def test_chat_resumes_a_session_and_stops_at_exit(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    assert cli("chat", input="Make it louder\n").exit_code == 0
    [session] = store().list_sessions()

    result = cli("chat", "--session", session["id"], input="Search for BM25\n/exit\nNever sent\n")

    assert result.exit_code == 0, result.stderr
    assert "Never sent" not in result.stdout
    turns = store().usage_summary(session["id"])["turns"]
    assert [(turn["turn_index"], turn["user_message"]) for turn in turns] == [
        (1, "Make it louder"),
        (2, "Search for BM25"),
    ]


def test_chat_ends_when_a_tool_terminates_the_session(cli: Invoke) -> None:
    result = cli("chat", input="Goodbye!\nStill there?\n")

    assert result.exit_code == 0, result.stderr
    assert "the session has ended" in result.stdout
    assert "Still there?" not in result.stdout


def test_chat_with_empty_input_does_nothing(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    result = cli("chat", input="")

    assert result.exit_code == 0
    assert store().list_sessions() == []


def test_chat_unknown_session_is_a_usage_error(cli: Invoke) -> None:
    result = cli("chat", "--session", "nope", input="hi\n")

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "unknown session id" in result.stderr


def test_chat_in_a_real_process_with_piped_stdin(cli_process: Invoke) -> None:
    result = cli_process("chat", "--mode", "chat_agent_tools", input="Volume up by 5\nBye\n")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("✓ turn") == 2


def test_ctrl_c_cancels_the_running_turn_and_the_chat_goes_on(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "slow.toml"
    # The answer would take ten minutes: only a cancelled turn lets the chat end in time.
    config.write_text("simulated_ttft_ms = 600000\nsimulated_tokens_per_second = 0\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "chat", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home, AGENT_LAB_SIM_FAST=None),
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("Tell me about write-ahead logging\n")
    process.stdin.flush()
    _wait_for_line(process, "session ")
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()

    assert process.returncode == 0, stderr
    assert "turn cancelled" in stdout
    assert "Traceback" not in stderr


def _wait_for_line(process: subprocess.Popen[str], prefix: str) -> None:
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith(prefix):
            return
    raise AssertionError(f"no line starting with {prefix!r}")


def test_a_second_ctrl_c_at_the_prompt_quits(home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    try:
        _wait_for_line(process, "simulated model")
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0  # stdin is still open: Ctrl-C ended it
    finally:
        process.kill()
        stdout, stderr = process.communicate()
    assert "press Ctrl-C again" in stdout
    assert stderr == ""
