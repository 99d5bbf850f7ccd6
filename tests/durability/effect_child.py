"""Child processes for the effect campaign: persisted one-turn sessions against the
simulator, with side-effecting tools.

Usage: python -m tests.durability.effect_child DB_PATH HOME EFFECTS_PATH BASE_URL

The process is a *zygote*: it imports everything and warms a model call up once, then
for each seed read from stdin it forks a child, prints ``{"pid": …}``, waits for the
child (the parent kills it) and prints ``{"exited": …, "status": …}``. A child writes
``{"ready": true}`` and then one JSON line per completed session (``{"session",
"mode"}``) to ``OUT_DIR/child-SEED.jsonl``, where ``OUT_DIR`` is the directory of
``DB_PATH``. Forking keeps each kill cheap: a fresh interpreter would spend seconds on
imports before the first session.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from pathlib import Path
from typing import TextIO

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.durability.effect_tools import PROMPT, TOOLS, effect_registry


def session_request(session_id: str | None, mode: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=PROMPT,
        chat_agent=AgentParams(model="agent-lab-sim"),
        event_agent=EventAgentParams(enabled_tools=TOOLS, max_event_loops=2),
        tool_invocation_mode=mode,
    )


def child_output(db: Path, seed: int) -> Path:
    return db.parent / f"child-{seed}.jsonl"


def _say(out: TextIO, record: dict[str, object]) -> None:
    out.write(json.dumps(record) + "\n")
    out.flush()  # in the kernel now: a SIGKILL loses nothing already written


async def warm_up(base_url: str) -> None:
    """One model call without a store: the first call of a process pays for imports."""
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        request = session_request(None, "chat_agent_tools").model_copy(
            update={"user_message": "hello"}
        )
        _ = [o async for o in DebugRuntime(client).run(request)]


async def sessions(db: Path, home: Path, effects: Path, base_url: str, seed: int) -> None:
    rng = random.Random(seed)
    store = SQLiteSessionStore(db)
    registry = effect_registry(home, effects, "before_kill", rng)
    with child_output(db, seed).open("w") as out:
        async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
            _say(out, {"ready": True})
            for index in range(10_000):
                mode = "dual_agent" if (seed + index) % 2 else "chat_agent_tools"
                session_id = f"e{seed}-s{index}"
                runtime = DebugRuntime(client, registry=registry, session_store=store)
                outputs = [o async for o in runtime.run(session_request(session_id, mode))]
                if outputs[-1]["type"] != "done":
                    raise SystemExit(f"unexpected end: {outputs[-1]}")
                _say(out, {"session": session_id, "mode": mode})


def zygote(db: Path, home: Path, effects: Path, base_url: str) -> None:
    asyncio.run(warm_up(base_url))  # leaves no thread behind, so forking is safe
    _say(sys.stdout, {"zygote": True})
    for line in sys.stdin:
        seed = int(line)
        pid = os.fork()
        if pid == 0:
            try:
                asyncio.run(sessions(db, home, effects, base_url, seed))
            finally:
                os._exit(1)
        _say(sys.stdout, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        _say(sys.stdout, {"exited": pid, "status": status})


if __name__ == "__main__":
    db, home, effects, base_url = sys.argv[1:5]
    zygote(Path(db), Path(home), Path(effects), base_url)
