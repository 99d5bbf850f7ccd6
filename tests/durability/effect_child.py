"""A child process for the effect campaign: persisted one-turn sessions against the
simulator, with side-effecting tools.

Usage: python effect_child.py DB_PATH HOME EFFECTS_PATH BASE_URL SEED

Prints ``{"ready": true}`` once set up, then one JSON line per completed session
(``{"session", "mode"}``); the parent kills it at a random moment.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
from pathlib import Path

from effect_tools import PROMPT, TOOLS, effect_registry

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore


def session_request(session_id: str | None, mode: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=PROMPT,
        chat_agent=AgentParams(model="agent-lab-sim"),
        event_agent=EventAgentParams(enabled_tools=TOOLS, max_event_loops=2),
        tool_invocation_mode=mode,  # type: ignore[arg-type]
    )


async def main(db: Path, home: Path, effects: Path, base_url: str, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteSessionStore(db)
    registry = effect_registry(home, effects, "before_kill", rng)
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        # the first call of a process pays for imports: not where kills should land
        warm_up = session_request(None, "chat_agent_tools").model_copy(
            update={"user_message": "hello"}
        )
        _ = [o async for o in DebugRuntime(client, registry=registry).run(warm_up)]
        print(json.dumps({"ready": True}), flush=True)
        for index in range(10_000):
            mode = "dual_agent" if (seed + index) % 2 else "chat_agent_tools"
            session_id = f"e{seed}-s{index}"
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            outputs = [o async for o in runtime.run(session_request(session_id, mode))]
            if outputs[-1]["type"] != "done":
                raise SystemExit(f"unexpected end: {outputs[-1]}")
            print(json.dumps({"session": session_id, "mode": mode}), flush=True)


if __name__ == "__main__":
    db, home, effects, base_url, seed = sys.argv[1:6]
    asyncio.run(main(Path(db), Path(home), Path(effects), base_url, int(seed)))
