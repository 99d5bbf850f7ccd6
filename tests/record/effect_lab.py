"""Helpers of the browser tests of cut-off batches: two side-effecting tools, a lab on a
scripted model, and a child process that dies in the middle of a batch.

Run as ``python -m tests.record.effect_lab DB BASE_URL MODE SESSION_ID``: the child starts
one persisted turn whose batch runs one call at a time: the first succeeds (its result
is in the effect ledger), the second kills the process (SIGKILL) as soon as it runs, so
it is dispatched with no outcome.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.record import LiveRecords
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import ScriptedResponse
from tests.record.record_support import tool_calls, with_events

TOOLS = ["door.lock", "lights.on"]
PROMPT = "Lock the front door and turn on the hall lights"
SCHEMA = {"type": "object", "properties": {"where": {"type": "string"}}}
REPO = Path(__file__).resolve().parents[2]


def effect_registry(effect: Callable[[], Any]) -> ToolRegistry:
    """``door.lock`` and ``lights.on``; each runs ``effect`` (its handler)."""

    def resolve(event: Any, context: Any) -> dict[str, Any]:
        return {"where": "front" if event.name == "door.lock" else "hall"}

    async def handler(event: Any) -> dict[str, Any]:
        await effect()
        return {"tool": event.name, "done": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name=name,
                description=f"{name} (a side effect).",
                parameters=SCHEMA,
                handler=handler,
                argument_resolver=resolve,
                timeout_seconds=None,
            )
            for name in TOOLS
        ]
    )


def blocking_registry(started: threading.Event) -> ToolRegistry:
    """Tools that signal ``started`` and then never finish (until cancelled)."""

    async def effect() -> None:
        started.set()
        await asyncio.Event().wait()

    return effect_registry(effect)


def batch_answer(mode: str) -> ScriptedResponse:
    """The model's first round: both tools, in the mode's way of calling them."""
    if mode == "dual_agent":
        return with_events("On it.", *TOOLS)
    door = ("call_door", "door.lock", {"where": "front"})
    return tool_calls(door, ("call_hall", "lights.on", {}))


def effect_settings(home: Path, base_url: str, mode: str) -> LabSettings:
    """A lab on the scripted model with the two tools, one call at a time."""
    return LabSettings(
        home=home,
        base_url=base_url,
        model="scripted",
        mode=mode,
        tools=list(TOOLS),
        max_parallel_events=1,
        max_retries=0,
    )


def crash_mid_batch(database: Path, base_url: str, mode: str, session_id: str) -> None:
    """Run the child that dies in the middle of its batch on ``database``."""
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.record.effect_lab",
            str(database),
            base_url,
            mode,
            session_id,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr


async def cancel_mid_batch(
    base_url: str, database: Path, mode: str, then: str | None = "Did it work?"
) -> tuple[LiveRecords, str]:
    """A session whose first turn is cancelled while its first tool runs, then (unless
    ``then`` is ``None``) a second turn ``then``; returns the records folded live from
    its output, and its id."""
    started = threading.Event()
    live = LiveRecords()
    turns = 1 if then is None else 2
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        with SQLiteSessionStore(database) as store:
            runtime = DebugRuntime(client, registry=blocking_registry(started), session_store=store)
            async with runtime.session(session_request(mode, None)) as session:
                async for output in session:
                    live.feed(output)
                    if output["type"] == "audit" and output["event"] == "event_batch_started":
                        await asyncio.to_thread(started.wait, 10)
                        assert runtime.cancel_turn()
                    if output["type"] in ("turn_completed", "error"):
                        turns -= 1
                        if not turns or then is None:
                            break
                        await session.send(then)
                await session.close()
                async for output in session:
                    live.feed(output)
    return live, live.records()[0].session_id or ""


def session_request(mode: str, session_id: str | None, message: str = PROMPT) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=message,
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=TOOLS, max_parallel_events=1),
        tool_invocation_mode=mode,
    )


async def _die_mid_batch(db: Path, base_url: str, mode: str, session_id: str) -> None:
    calls = 0

    async def effect() -> None:  # the first call runs; the second kills the process
        nonlocal calls
        calls += 1
        if calls == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    store = SQLiteSessionStore(db)
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        runtime = DebugRuntime(client, registry=effect_registry(effect), session_store=store)
        async for _ in runtime.run(session_request(mode, session_id)):
            pass
    raise SystemExit("the batch was not cut off")


if __name__ == "__main__":
    database, url, chosen_mode, session = sys.argv[1:5]
    asyncio.run(_die_mid_batch(Path(database), url, chosen_mode, session))
