"""``agent-lab serve --workers 2`` on PostgreSQL: a worker killed mid-turn loses nothing."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import psycopg
import pytest
from scale_support import WorkerLab, messages_until, start

from agent_lab.infrastructure.postgres.store import PostgresSessionStore

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


def _wait_for(predicate: object, what: str, timeout: float = 60) -> None:
    assert callable(predicate)
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.05)


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
            start(first, request, "Set the volume to 20, then tell me about the weather.")
            messages_until(first, "tool_result")  # the tool batch is committed next

            def batch_committed() -> bool:
                return any(b["state"] == "committed" for b in store.list_batches(session_id))

            _wait_for(batch_committed, "the tool batch to commit")
            committed = store.list_messages(session_id)
            turns = store.list_turns(session_id)
            assert turns[0]["status"] == "running"  # mid-turn: the answer is still streaming
            victim = _claim_pid(database_url, session_id)
            assert victim is not None
            os.kill(victim, signal.SIGKILL)

        with lab.socket(session_id) as second:  # whichever worker the kernel picks
            start(second, request, "What is the volume now?")
            frames = messages_until(second, "turn_completed", "error")
        assert frames[-1]["type"] == "turn_completed", frames[-1]

        final = store.list_messages(session_id)
        assert final[: len(committed)] == committed  # every committed row, unchanged
        assert [m["role"] for m in committed] == ["user", "assistant", "tool"]
        assert final[len(committed)]["content"] == "What is the volume now?"
        assert final[-1]["role"] == "assistant" and final[-1]["content"]
        assert [t["status"] for t in store.list_turns(session_id)][1:] == ["completed"]
        holder = _claim_pid(database_url, session_id)
        assert holder not in (None, victim)
    finally:
        store.close()
        output = lab.stop()
    assert f"(pid {victim}) ended with signal 9; replacing it" in output
