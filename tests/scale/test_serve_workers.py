"""``agent-lab serve --workers 2`` on PostgreSQL: a worker killed mid-turn loses nothing."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from tests.scale.scale_support import WorkerLab, messages_until, start

pytestmark = pytest.mark.scale

CONFIG = """
[agent_lab]
mode = "chat_agent_tools"
simulated_ttft_ms = 20.0
simulated_tokens_per_second = 4.0
"""


def _claim_pid(url: str, session_id: str) -> int | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pid FROM session_claims WHERE session_id = %s", (session_id,)
        ).fetchone()
    return None if row is None else int(row[0])


def test_a_worker_killed_mid_turn_loses_nothing_and_the_other_resumes_the_session(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(CONFIG)
    lab = WorkerLab(tmp_path, 2, {"AGENT_LAB_DATABASE_URL": database_url}, "--config", str(config))
    store = PostgresSessionStore(database_url)
    try:
        request = lab.defaults()
        session_id = uuid.uuid4().hex
        with lab.socket(session_id) as first:
            start(first, request, "Set the volume to 20.")
            messages_until(first, "turn_completed")
            first.send(
                json.dumps({"type": "user", "content": "Tell me a story about a lighthouse."})
            )
            messages_until(first, "message_delta")  # turn 2 is streaming its answer
            victim = _claim_pid(database_url, session_id)
            assert victim is not None
            os.kill(victim, signal.SIGKILL)
        committed = store.list_messages(session_id)  # all it ever committed
        assert [t["status"] for t in store.list_turns(session_id)] == ["completed", "running"]
        assert [m["role"] for m in committed] == ["user", "assistant", "tool", "user"]

        with lab.socket(session_id) as second:  # whichever worker the kernel picks
            start(second, request, "What is the volume now?")
            frames = messages_until(second, "turn_completed", "error")
        assert frames[-1]["type"] == "turn_completed", frames[-1]

        final = store.list_messages(session_id)
        assert final[: len(committed)] == committed  # every committed row, unchanged
        assert final[len(committed)]["content"] == "What is the volume now?"
        assert final[-1]["role"] == "assistant" and final[-1]["content"]
        assert [t["status"] for t in store.list_turns(session_id)][2:] == ["completed"]
        holder = _claim_pid(database_url, session_id)
        assert holder not in (None, victim)
    finally:
        store.close()
        output = lab.stop()
    assert f"(pid {victim}) ended with signal 9; replacing it" in output


FAST = """
[agent_lab]
mode = "chat_agent_tools"
simulated_ttft_ms = 0.0
simulated_tokens_per_second = 0.0
"""


def test_a_browser_reconnecting_to_another_live_worker_continues_its_session_there(
    tmp_path: Path, database_url: str
) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(FAST)
    lab = WorkerLab(tmp_path, 2, {"AGENT_LAB_DATABASE_URL": database_url}, "--config", str(config))
    store = PostgresSessionStore(database_url)
    try:
        request = lab.defaults()
        session_id = uuid.uuid4().hex
        with lab.socket(session_id) as first:
            start(first, request, "Set the volume to 20.")
            frames = messages_until(first, "turn_completed")
        first_worker = next(f["stream_id"] for f in frames if f.get("type") == "attached")
        holder = _claim_pid(database_url, session_id)
        committed = store.list_messages(session_id)

        # The kernel picks the worker; reconnect until the other one answers, slowly
        # enough to stay within the lab's rate limit for one client (30 starts a second).
        reply: list[Any] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            with lab.socket(session_id) as socket:
                start(socket, request, "")
                attached = messages_until(socket, "attached", "error")[-1]
                assert attached["type"] == "attached", attached
                if attached["stream_id"] == first_worker:
                    time.sleep(0.05)
                    continue
                assert attached["live"] is False  # not live here: the stored history follows
                history = messages_until(socket, "history")[-1]
                assert len(history["record"]["messages"]) == len(committed)
                socket.send(json.dumps({"type": "user", "content": "What is the volume now?"}))
                reply = messages_until(socket, "turn_completed", "error")
                break
        assert reply, "every connection landed on the first worker"
        assert reply[-1]["type"] == "turn_completed", reply[-1]

        assert holder is not None
        os.kill(holder, 0)  # the first worker is alive: it handed the session over
        assert _claim_pid(database_url, session_id) not in (None, holder)
        final = store.list_messages(session_id)
        assert final[: len(committed)] == committed
        assert final[len(committed)]["content"] == "What is the volume now?"
    finally:
        store.close()
        lab.stop()
