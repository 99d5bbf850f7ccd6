"""Effect campaign: SIGKILL a process running sessions against the simulator with
side-effecting tools, restore each interrupted session and let it continue; no effect
whose result was recorded may run again (DESIGN.md §9.4).

Each session is one turn asking for three side effects (volume, calendar, note) in
either mode. After a kill, a new runtime restores the interrupted session and the user
repeats the request — the case where a model that cannot see what already happened
does it again. The figures, per call of the interrupted turn:

* ``repeated`` — its result was recorded, and the same action ran again after the
  restore (must be 0);
* ``unknown`` — dispatched without a recorded outcome, reported as outcome unknown
  (``unknown_repeated``: ran again anyway, must be 0);
* ``not_executed`` — journaled but never dispatched, reported as not executed (free
  to run after the restore: ``not_executed_run_after``);
* ``wrongly_cancelled`` — journaled ``cancelled`` although its effect is on disk
  (must be 0).

``AGENT_LAB_KILLS`` sets the number of kills (20 by default, CI's figure); the longer
run documented in docs/durability.md uses 130.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.simulator.provider import (
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.durability.effect_child import child_output, session_request
from tests.durability.effect_tools import (
    EFFECT_TOOLS,
    PROMPT,
    Effect,
    effect_registry,
    prepare_effects,
    read_effects,
)

CHILD = "tests.durability.effect_child"
ROOT = Path(__file__).parents[2]
KILLS = int(os.environ.get("AGENT_LAB_KILLS", "20"))
RECORDED = ("succeeded", "failed")


def _fixed_now() -> datetime:
    return datetime(2026, 7, 13, 12, 0, tzinfo=UTC)


class Campaign:
    def __init__(self, root: Path, base_url: str) -> None:
        self.db = root / "sessions.sqlite3"
        self.home = root / "home"
        self.effects = root / "effects.sqlite3"
        self.base_url = base_url
        self.totals: Counter[str] = Counter(
            dict.fromkeys(("repeated", "unknown_repeated", "wrongly_cancelled"), 0)
        )
        prepare_effects(self.effects)

    def start(self) -> None:
        """The zygote that forks one child per kill (see effect_child)."""
        self.zygote = subprocess.Popen(
            [sys.executable, "-m", CHILD, *map(str, (self.db, self.home, self.effects))]
            + [self.base_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self._read_zygote() == {"zygote": True}

    def stop(self) -> None:
        assert self.zygote.stdin is not None
        self.zygote.stdin.close()
        assert self.zygote.wait(timeout=30) == 0

    def _read_zygote(self) -> dict[str, Any]:
        assert self.zygote.stdout is not None
        line = self.zygote.stdout.readline()
        assert line, "the zygote died"
        record: dict[str, Any] = json.loads(line)
        return record

    def run_and_kill(self, seed: int, rng: random.Random) -> set[str]:
        """Fork a child, kill it at a random moment; the sessions it completed."""
        assert self.zygote.stdin is not None
        self.zygote.stdin.write(f"{seed}\n")
        self.zygote.stdin.flush()
        pid = self._read_zygote()["pid"]
        output = child_output(self.db, seed)
        while not output.exists() or not output.read_text():
            time.sleep(0.005)  # the child opens its store and says it is ready
        time.sleep(rng.uniform(0.0, 0.5))
        os.kill(pid, signal.SIGKILL)
        exited = self._read_zygote()
        assert exited["exited"] == pid and os.WIFSIGNALED(exited["status"]), exited
        assert os.WTERMSIG(exited["status"]) == signal.SIGKILL, exited
        lines = [json.loads(line) for line in output.read_text().splitlines()[1:]]
        return {line["session"] for line in lines}

    def interrupted_session(self, seed: int) -> tuple[dict[str, Any], int | None] | None:
        """The child's last session if the kill cut it off, and its running turn (none
        when the kill came before the turn was written)."""
        with SQLiteSessionStore(self.db) as store:
            mine = [s for s in store.list_sessions() if s["id"].startswith(f"e{seed}-")]
            latest = max(mine, key=lambda s: int(s["id"].rsplit("-s", 1)[1]), default=None)
            turns = [] if latest is None else store.list_turns(latest["id"])
        if latest is None or any(turn["status"] != "running" for turn in turns):
            self.totals["kills_between_sessions"] += 1
            return None
        if not turns:
            self.totals["kills_before_the_turn"] += 1
        return latest, (turns[-1]["turn_index"] if turns else None)

    async def restore(self, session: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
        """A new runtime on the session; the user asks again."""
        mode = session["config"]["tool_invocation_mode"]
        registry = effect_registry(self.home, self.effects, "after_restore", rng, pause=0.0)
        with SQLiteSessionStore(self.db) as store:
            async with OpenAICompatibleChatClient(self.base_url, max_retries=0) as client:
                runtime = DebugRuntime(client, registry=registry, session_store=store)
                request = session_request(session["id"], mode)
                return [dict(o) async for o in runtime.run(request)]

    def check(
        self, session: dict[str, Any], turn: int | None, outputs: list[dict[str, Any]]
    ) -> None:
        """Figures for the interrupted ``turn``'s calls; the restore ran the next turn."""
        session_id = session["id"]
        assert outputs[-1] == {"type": "done"}, outputs[-1]
        with SQLiteSessionStore(self.db) as store:
            batches = [b for b in store.list_batches(session_id) if b["turn_index"] == turn]
        effects = [e for e in read_effects(self.effects) if e.session == session_id]
        before = {e.key for e in effects if e.phase == "before_kill"}
        after = Counter(e.tool for e in effects if e.phase == "after_restore")
        calls = [call for batch in batches for call in batch["calls"]]
        self._count_journal(calls, before)
        reported = _started(outputs).get("recovered_calls", [])
        mode = session["config"]["tool_invocation_mode"]
        self._check_reported(calls, batches, reported, outputs, mode)
        effect_calls = [c for c in calls if c["event"]["name"] in EFFECT_TOOLS]
        for call in effect_calls:
            name = call["event"]["name"]
            if call["state"] in RECORDED and after[name]:
                self.totals["repeated"] += 1
            if call["state"] == "unknown" and after[name]:
                self.totals["unknown_repeated"] += 1
            if call["state"] == "cancelled" and after[name]:
                self.totals["not_executed_run_after"] += 1
        _check_each_action_done_once(effects, effect_calls, session_id)

    def _count_journal(self, calls: list[dict[str, Any]], before: set[str]) -> None:
        for call in calls:
            if call["event"]["name"] not in EFFECT_TOOLS:
                continue
            state, key = call["state"], call["idempotency_key"]
            self.totals[f"journal_{state}"] += 1
            if state == "cancelled" and key in before:
                self.totals["wrongly_cancelled"] += 1
            if state == "succeeded":
                assert key in before, ("succeeded without its effect", call)
            if state == "unknown":
                self.totals["unknown"] += 1
                self.totals["unknown_with_effect"] += key in before
            if state == "cancelled":
                self.totals["not_executed"] += 1

    def _check_reported(
        self,
        calls: list[dict[str, Any]],
        batches: list[dict[str, Any]],
        reported: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        mode: str,
    ) -> None:
        """Every call of the interrupted turn went back to the model, labelled, in one
        note (a committed batch in ``chat_agent_tools`` is in the transcript too)."""
        expected = {c["event"]["id"]: _reported_status(c["state"]) for c in calls}
        assert {r["event_id"]: r["status"] for r in reported} == expected
        restored_turn = _started(outputs)["first_turn_index"]
        assert all(b["reported_turn"] == restored_turn for b in batches), batches
        in_transcript = {
            c["event"]["id"]
            for b in batches
            if mode == "chat_agent_tools" and b["state"] == "committed"
            for c in b["calls"]
        }
        sent = next(a for a in _audits(outputs, "chat_agent_request"))["details"]["messages"]
        notes = [m for m in sent if '"recovered": true' in m["content"]]
        noted = {
            json.loads(line)["event_id"] for m in notes for line in m["content"].splitlines()[1:]
        }
        assert noted == set(expected), sent
        assert len(notes) == (1 if noted else 0), sent
        replies = {m.get("tool_call_id") for m in sent if m["role"] == "tool"}
        assert in_transcript <= replies, sent
        self.totals["restores_with_note"] += bool(notes)
        self.totals["restores_with_results_in_transcript"] += bool(in_transcript)
        for entry in reported:
            self.totals[f"reported_{entry['status']}"] += 1


def _reported_status(state: str) -> str:
    return {"cancelled": "not_executed", "dispatched": "unknown"}.get(state, state)


def _check_each_action_done_once(
    effects: list[Effect], effect_calls: list[dict[str, Any]], session_id: str
) -> None:
    """After the restore each requested action has happened (or may have) exactly once."""
    done = Counter(e.tool for e in effects)
    unknown_without_effect = Counter(
        c["event"]["name"] for c in effect_calls if c["state"] == "unknown"
    )
    for tool in EFFECT_TOOLS:
        assert done[tool] + unknown_without_effect[tool] >= 1, (session_id, tool, effects)
        assert done[tool] <= 1, (session_id, tool, effects)


def _started(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(a["details"] for a in _audits(outputs, "session_started"))


def _audits(outputs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [o for o in outputs if o["type"] == "audit" and o["event"] == name]


@pytest.mark.slow
@pytest.mark.timeout(max(120, KILLS * 5))
def test_no_recorded_effect_runs_again_after_a_kill(tmp_path: Path) -> None:
    provider = SimulatedProvider(LatencyModel.instant(), seed=0, clock=_fixed_now)
    rng = random.Random(20261201)
    with SimulatedProviderServer(provider) as server:
        campaign = Campaign(tmp_path, server.base_url)
        campaign.start()
        for seed in range(KILLS):
            completed = campaign.run_and_kill(seed, rng)
            campaign.totals["kills"] += 1
            campaign.totals["completed_sessions"] += len(completed)
            interrupted = campaign.interrupted_session(seed)
            if interrupted is None:
                continue
            session, turn = interrupted
            campaign.totals[f"restored_{session['config']['tool_invocation_mode']}"] += 1
            outputs = asyncio.run(campaign.restore(session, rng))
            campaign.check(session, turn, outputs)
        campaign.stop()
    totals = campaign.totals
    print(f"effect campaign: {json.dumps(dict(sorted(totals.items())))}")
    assert totals["kills"] == KILLS
    assert totals["repeated"] == 0
    assert totals["unknown_repeated"] == 0
    assert totals["wrongly_cancelled"] == 0
    assert totals["restored_dual_agent"] and totals["restored_chat_agent_tools"]
    assert totals["restores_with_note"] > 0
    assert PROMPT
