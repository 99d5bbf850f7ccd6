"""Kill campaign: SIGKILL a process running persisted sessions at random moments, then
check the database from a new process (DESIGN.md §9.6).

``AGENT_LAB_KILLS`` sets the number of kills (50 by default, CI's figure); the longer run
documented in docs/durability.md uses 500.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application._modes import restore_history
from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text

CHILD = Path(__file__).with_name("kill_child.py")
KILLS = int(os.environ.get("AGENT_LAB_KILLS", "50"))


def _prepare_effects(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("CREATE TABLE IF NOT EXISTS effects(call_id TEXT PRIMARY KEY)")
    connection.commit()
    connection.close()


def _run_and_kill(db: Path, effects: Path, seed: int, rng: random.Random) -> list[dict[str, Any]]:
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(db), str(effects), str(seed)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    ready = child.stdout.readline()
    assert '"ready"' in ready, child.stderr.read() if child.stderr else ready
    time.sleep(rng.uniform(0.0, 0.6))
    os.kill(child.pid, signal.SIGKILL)
    out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _check_database(db: Path, effects: Path, completed: list[dict[str, Any]]) -> dict[str, int]:
    store = SQLiteSessionStore(db)
    try:
        counts = {"sessions": 0, "batches": 0, "succeeded_calls": 0}
        effect_ids = {
            row[0] for row in sqlite3.connect(effects).execute("SELECT call_id FROM effects")
        }
        for done in completed:
            turn_rows = [
                m for m in store.list_messages(done["session"]) if m["turn_index"] == done["turn"]
            ]
            assert turn_rows[0]["role"] == "user", (done, turn_rows)
            assert turn_rows[-1]["role"] == "assistant", (done, turn_rows)
            assert turn_rows[-1]["content"].startswith("done"), (done, turn_rows)
        for session in store.list_sessions():
            counts["sessions"] += 1
            records = store.list_messages(session["id"])
            mode = session["config"]["tool_invocation_mode"]
            if mode == "chat_agent_tools":
                # no partial batch is visible: the committed transcript itself is valid
                OpenAICompatibleChatClient._validate_tool_transcript(None, _as_messages(records))
            OpenAICompatibleChatClient._validate_tool_transcript(
                None, restore_history(records, mode)
            )
            for batch in store.list_batches(session["id"]):
                counts["batches"] += 1
                state_key = f"batches_{batch['state']}"
                counts[state_key] = counts.get(state_key, 0) + 1
                for call in batch["calls"]:
                    if call["state"] == "succeeded":
                        counts["succeeded_calls"] += 1
                        assert call["event"]["id"] in effect_ids, (batch, call)
        return counts
    finally:
        store.close()


def _as_messages(records: list[dict[str, Any]]) -> list[Any]:
    from agent_lab.application._transcript import message_from_record

    return [message_from_record(record) for record in records]


async def _reconnect(db: Path, session_id: str, mode: str) -> list[dict[str, Any]]:
    store = SQLiteSessionStore(db)
    client = ScriptedChatClient([text("reconnected")])
    request = DebugRunRequest(
        session_id=session_id,
        user_message="after the crash",
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=[], max_event_loops=0),
        tool_invocation_mode=mode,  # type: ignore[arg-type]
    )

    runtime = DebugRuntime(client, session_store=store)
    queues = runtime.start_session(request)
    outputs: list[dict[str, Any]] = []
    while not any(m["type"] in {"turn_completed", "error"} for m in outputs):
        outputs.append(await asyncio.wait_for(queues.output.get(), timeout=10))
    await runtime.aclose()
    OpenAICompatibleChatClient._validate_tool_transcript(None, client.calls[0].messages)
    store.close()
    return outputs


@pytest.mark.slow
@pytest.mark.timeout(max(120, KILLS * 3))
def test_sigkill_at_random_moments_loses_nothing_committed(tmp_path: Path) -> None:
    db = tmp_path / "campaign.sqlite3"
    effects = tmp_path / "effects.sqlite3"
    _prepare_effects(effects)
    rng = random.Random(20261130)
    totals = {"kills": 0, "completed_turns": 0, "sessions": 0, "batches": 0, "succeeded_calls": 0}
    for seed in range(KILLS):
        completed = _run_and_kill(db, effects, seed, rng)
        totals["kills"] += 1
        totals["completed_turns"] += len(completed)
        counts = _check_database(db, effects, completed)
        unfinished = sum(
            v for k, v in counts.items() if k in ("batches_pending", "batches_cancelled")
        )
        totals["kills_leaving_unfinished_batch_total"] = unfinished
        store = SQLiteSessionStore(db)
        in_progress = [s for s in store.list_sessions() if s["id"].startswith(f"k{seed}-")]
        store.close()
        for session in in_progress[:1]:
            outputs = asyncio.run(
                _reconnect(db, session["id"], session["config"]["tool_invocation_mode"])
            )
            assert outputs[-1]["type"] == "turn_completed", outputs[-1]
    totals.update(counts)
    print(f"kill campaign: {json.dumps(totals)}")
    assert totals["kills"] == KILLS
    assert totals["completed_turns"] > 0
    assert totals["succeeded_calls"] > 0
