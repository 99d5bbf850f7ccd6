"""A child process that hangs in the middle of a persisted turn, for the parent to kill.

Usage: python -m tests.durability.interrupted_child DB MODE SESSION_ID POINT [TURNS]

The session first runs ``TURNS - 1`` ordinary turns (0 by default), then a turn whose
model asks for ``fast.op`` and ``pay.send`` (one call at a time). ``fast.op`` succeeds
(its result is in the effect ledger). Where the turn then hangs is ``POINT``:

* ``mid_batch`` — ``pay.send`` prints ``{"hung": "mid_batch"}`` and never returns: the
  batch is cut off, ``fast.op`` succeeded, ``pay.send`` is dispatched without an outcome;
* ``after_batch`` — ``pay.send`` succeeds too, the batch commits, and the model's
  follow-up call prints ``{"hung": "after_batch"}`` and never answers.

The parent reads that line and kills the process (SIGKILL): the turn's row is left
``running``, as a dead runtime leaves it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import StreamItem
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import FunctionChatClient, RecordedCall, text, text_event, tool_call

TOOLS = ["fast.op", "pay.send"]
PROMPT = "pay bob"


def _hang(point: str) -> asyncio.Event:
    print(json.dumps({"hung": point}), flush=True)
    return asyncio.Event()  # never set


def child_registry(point: str) -> ToolRegistry:
    async def fast(event: ToolCallEvent) -> dict[str, Any]:
        return {"tool": event.name, "ok": True}

    async def pay(event: ToolCallEvent) -> dict[str, Any]:
        if point == "mid_batch":
            await _hang(point).wait()
        return {"tool": event.name, "paid": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name=name,
                description=f"{name} (a side effect).",
                parameters={"type": "object", "properties": {}},
                handler=handler,
                timeout_seconds=None,
            )
            for name, handler in (("fast.op", fast), ("pay.send", pay))
        ]
    )


def child_model(mode: str, point: str) -> FunctionChatClient:
    asked = False

    async def reply(call: RecordedCall) -> list[StreamItem]:
        nonlocal asked
        said = [m.content for m in call.messages if m.role == "user" and m.name is None]
        if said[-1] != PROMPT:  # an ordinary turn
            return text("noted.")
        if not asked:  # (a restore's note about earlier calls may follow the prompt)
            asked = True
            if mode == "dual_agent":
                return [
                    *text("Paying now."),
                    text_event("e1", "fast.op"),
                    text_event("e2", "pay.send"),
                ]
            return [tool_call("c1", "fast.op"), tool_call("c2", "pay.send")]
        if point == "after_batch":  # the follow-up after the committed batch
            await _hang(point).wait()
        return text("paid.")

    return FunctionChatClient(reply)


def child_request(mode: str, session_id: str, message: str) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=message,
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=TOOLS, max_parallel_events=1),
        tool_invocation_mode=mode,
    )


async def main(db: Path, mode: str, session_id: str, point: str, turns: int) -> None:
    store = SQLiteSessionStore(db)
    runtime = DebugRuntime(
        child_model(mode, point), registry=child_registry(point), session_store=store
    )
    messages = [f"note {n}" for n in range(1, turns)] + [PROMPT]
    async with runtime.session(child_request(mode, session_id, messages[0])) as session:
        sent = 1
        async for output in session:
            if output["type"] in ("turn_completed", "error"):
                if sent == len(messages):
                    break
                await session.send(messages[sent])
                sent += 1
    raise SystemExit("the turn was not cut off")


if __name__ == "__main__":
    database, chosen_mode, session, where = sys.argv[1:5]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    asyncio.run(main(Path(database), chosen_mode, session, where, count))
