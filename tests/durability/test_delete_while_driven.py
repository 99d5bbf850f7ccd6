"""Deleting a session that ``agent-lab chat`` in another process drives (DESIGN.md §9.7).

A real ``chat`` subprocess streams a slow answer from a real SSE server while the web
lab (a real server on the same SQLite file) and the CLI try to delete its session:
both are refused, naming the chat, and nothing is deleted. A chat that was killed no
longer keeps its session. A chat whose session is deleted anyway (by a tool that
checks no claim) ends its turn with one classified ``error:`` line, no traceback.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Result, process_env
from tests.web.web_support import lab_settings, served

WORDS = ["Write-ahead ", "logging ", "keeps ", "every ", "commit ", "safe."]


def _slow_answer(pause: float) -> ScriptedResponse:
    """An answer whose words come ``pause`` seconds apart."""
    events = [{"choices": [{"index": 0, "delta": {"content": word}}]} for word in WORDS]
    return ScriptedResponse.sse(*events, pause=pause)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def provider() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer(fallback=_slow_answer(1.5)) as server:
        yield server


def _chat(home: Path, provider: SSETranscriptServer) -> subprocess.Popen[str]:
    env = process_env(
        home,
        OPENAI_BASE_URL=provider.base_url,
        OPENAI_API_KEY="test-key",
        AGENT_LAB_MODEL="m",
        AGENT_LAB_SIM_FAST=None,
    )
    command = [sys.executable, "-m", "agent_lab.interfaces.cli", "chat", "--mode", "dual_agent"]
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _mid_turn(chat: subprocess.Popen[str], home: Path) -> str:
    """Send the first line and read the chat's output until the answer streams; the
    session's id."""
    assert chat.stdin is not None and chat.stdout is not None
    chat.stdin.write("Tell me about write-ahead logging\n")
    chat.stdin.flush()
    seen = ""
    while WORDS[0].strip() not in seen:
        char = chat.stdout.read(1)
        assert char, f"the chat ended early: {seen!r}"
        seen += char
    with SQLiteSessionStore(home / "agent-lab.sqlite3") as store:
        (session,) = store.list_sessions()
    return str(session["id"])


def _finish(chat: subprocess.Popen[str], text: str = "/exit\n") -> Result:
    try:
        stdout, stderr = chat.communicate(text, timeout=120)
    finally:
        chat.kill()
    return Result(chat.returncode, stdout, stderr)


def _cli(home: Path, *args: str) -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "agent_lab.interfaces.cli", *args],
        capture_output=True,
        text=True,
        env=process_env(home),
        timeout=120,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def test_the_lab_and_the_cli_refuse_to_delete_a_session_a_chat_drives(
    home: Path, provider: SSETranscriptServer
) -> None:
    chat = _chat(home, provider)
    try:
        session_id = _mid_turn(chat, home)
        with served(lab_settings(home)) as lab:
            rest = httpx.delete(f"{lab.base_url}/api/sessions/{session_id}", trust_env=False)
            listed = httpx.get(f"{lab.base_url}/api/sessions/{session_id}", trust_env=False)
        deleted = _cli(home, "sessions", "delete", session_id, "--yes")
        pruned = _cli(home, "sessions", "prune", "--older-than", "0s", "--yes")
    finally:
        ended = _finish(chat)

    assert rest.status_code == 409
    assert "being driven by another runtime" in rest.json()["detail"]
    assert f"pid {chat.pid}" in rest.json()["detail"]
    assert listed.status_code == 200
    for refused in (deleted, pruned):
        assert refused.exit_code == 2, refused.stderr
        assert len(refused.error_lines) == 1, refused.stderr
        assert refused.error_lines[0].startswith("error: session ")
        assert f"pid {chat.pid}" in refused.error_lines[0]
    assert "deleted 0 session(s)" in pruned.stdout
    assert ended.exit_code == 0, ended.stderr
    assert ended.stderr == ""
    assert "✓ turn 1" in ended.stdout
    with SQLiteSessionStore(home / "agent-lab.sqlite3") as store:
        turns = [(turn["turn_index"], turn["status"]) for turn in store.list_turns(session_id)]
        contents = [message["content"] for message in store.list_messages(session_id)]
    assert turns == [(1, "completed")]
    assert contents == ["Tell me about write-ahead logging", "".join(WORDS)]


def test_a_session_whose_chat_was_killed_can_be_deleted(
    home: Path, provider: SSETranscriptServer
) -> None:
    chat = _chat(home, provider)
    try:
        session_id = _mid_turn(chat, home)
    finally:
        chat.kill()
        chat.communicate()
    with served(lab_settings(home)) as lab:
        rest = httpx.delete(f"{lab.base_url}/api/sessions/{session_id}", trust_env=False)
        gone = httpx.get(f"{lab.base_url}/api/sessions/{session_id}", trust_env=False)

    assert rest.status_code == 204
    assert gone.status_code == 404


def test_a_chat_whose_session_is_deleted_under_it_fails_with_one_error_line(
    home: Path, provider: SSETranscriptServer
) -> None:
    chat = _chat(home, provider)
    try:
        session_id = _mid_turn(chat, home)
        # What an older lab or a maintenance tool does: delete without looking at claims.
        raw = sqlite3.connect(home / "agent-lab.sqlite3", timeout=30)
        try:
            raw.execute("PRAGMA foreign_keys = ON")
            with raw:
                raw.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        finally:
            raw.close()
    finally:
        ended = _finish(chat, "")  # the failed turn ends the chat: its session is gone

    assert ended.exit_code == 2, ended.stderr
    assert "Traceback" not in ended.stderr
    assert len(ended.error_lines) == 1, ended.stderr
    assert ended.error_lines[0].startswith(
        "error: the session was deleted while this runtime was driving it: "
        f"session '{session_id}' no longer exists"
    )
    assert "internal" not in ended.stderr
