"""A child process for the kill campaign: persisted multi-turn sessions with tools.

Usage: python kill_child.py DB_PATH EFFECTS_PATH SEED

It prints one JSON line per completed turn ({"session", "turn", "mode"}) after the
runtime reported ``turn_completed`` — the parent kills it at a random moment.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem, TokenUsage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import FunctionChatClient, RecordedCall

TURNS_PER_SESSION = 3


def effect_registry(effects_path: Path, rng: random.Random) -> ToolRegistry:
    """A tool whose effect is a row in its own database, durable before it returns."""

    def write_effect(event: ToolCallEvent) -> dict[str, Any]:
        time.sleep(rng.uniform(0.0, 0.02))
        connection = sqlite3.connect(effects_path, timeout=10)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=FULL")
            with connection:
                connection.execute("INSERT OR IGNORE INTO effects(call_id) VALUES (?)", (event.id,))
        finally:
            connection.close()
        return {"tool": event.name, "effect": event.id}

    return ToolRegistry(
        [
            ToolDefinition(
                name="effect.write",
                description="Writes an effect record.",
                parameters={"type": "object"},
                handler=write_effect,
            )
        ]
    )


def scripted_model(session_id: str, mode: str) -> FunctionChatClient:
    counter = {"calls": 0}

    def reply(call: RecordedCall) -> list[StreamItem]:
        counter["calls"] += 1
        n = counter["calls"]
        last = call.messages[-1]
        usage = StreamItem.usage_item(
            TokenUsage(prompt_tokens=5, completion_tokens=2, total_tokens=7)
        )
        if last.role == "user" and last.name != "event_agent":
            ids = [f"{session_id}-c{n}-{i}" for i in range(2)]
            if mode == "dual_agent":
                items = [
                    StreamItem.text_event(ToolCallEvent(id=i, name="effect.write")) for i in ids
                ]
            else:
                items = [
                    StreamItem.provider_tool_call(ToolCallEvent(id=i, name="effect.write"))
                    for i in ids
                ]
            return [StreamItem.message_delta(f"working {n}"), *items, usage]
        return [StreamItem.message_delta(f"done {n}"), usage]

    return FunctionChatClient(reply)


async def run_session(
    store: SQLiteSessionStore, effects: Path, session_id: str, mode: str, rng: random.Random
) -> None:
    request = DebugRunRequest(
        session_id=session_id,
        user_message="turn 1",
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=["effect.write"], max_event_loops=1),
        tool_invocation_mode=mode,
    )
    runtime = DebugRuntime(
        scripted_model(session_id, mode),
        registry=effect_registry(effects, rng),
        session_store=store,
    )
    queues = runtime.start_session(request)
    turn = 1
    while turn <= TURNS_PER_SESSION:
        message = await queues.output.get()
        if message["type"] == "error":
            raise SystemExit(f"unexpected error: {message}")
        if message["type"] != "turn_completed":
            continue
        print(json.dumps({"session": session_id, "turn": turn, "mode": mode}), flush=True)
        turn += 1
        await queues.input.put(f"turn {turn}" if turn <= TURNS_PER_SESSION else None)
    await runtime.aclose()


async def main(db_path: Path, effects: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteSessionStore(db_path)
    print(json.dumps({"ready": True}), flush=True)
    for index in range(10_000):
        mode = "dual_agent" if (seed + index) % 2 else "chat_agent_tools"
        await run_session(store, effects, f"k{seed}-s{index}", mode, rng)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
