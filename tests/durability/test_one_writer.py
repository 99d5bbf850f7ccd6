"""One writer per session, across runtimes and processes (DESIGN.md §9.7), and cancellation."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event


def _request(text_: str = "hello", mode: str = "dual_agent") -> DebugRunRequest:
    return DebugRunRequest(
        session_id="shared",
        user_message=text_,
        chat_agent=AgentParams(model="m"),
        tool_invocation_mode=mode,
    )


async def _until(queues: Any, types: set[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while not out or out[-1]["type"] not in types:
        out.append(await asyncio.wait_for(queues.output.get(), timeout=10))
    return out


@pytest.mark.asyncio
async def test_a_second_runtime_is_refused_while_the_first_drives_the_session(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    first = DebugRuntime(ScriptedChatClient([text("one")]), session_store=store)
    await _until(first.start_session(_request()), {"turn_completed"})

    second = DebugRuntime(ScriptedChatClient([text("two")]), session_store=store)
    refused = await _until(second.start_session(_request("intruder")), {"error"})
    assert refused[-1]["failure_reason"] == "session_busy"
    assert "shared" in refused[-1]["message"]

    await first.aclose()
    third = DebugRuntime(ScriptedChatClient([text("three")]), session_store=store)
    taken = await _until(third.start_session(_request("after close")), {"turn_completed"})
    await third.aclose()
    assert taken[-1]["type"] == "turn_completed"
    contents = [m["content"] for m in store.list_messages("shared")]
    assert contents == ["hello", "one", "after close", "three"]


@pytest.mark.asyncio
async def test_a_waiting_runtime_gets_the_session_when_the_first_closes(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    first = DebugRuntime(ScriptedChatClient([text("one")]), session_store=store)
    await _until(first.start_session(_request()), {"turn_completed"})
    waiting = DebugRuntime(
        ScriptedChatClient([text("two")]), session_store=store, claim_wait_seconds=5
    )
    queues = waiting.start_session(_request("queued"))
    await asyncio.sleep(0.2)
    await first.aclose()
    outputs = await _until(queues, {"turn_completed", "error"})
    await waiting.aclose()
    assert outputs[-1]["type"] == "turn_completed"


HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from agent_lab.application.contracts import AgentParams, DebugRunRequest
    from agent_lab.application.runtime import DebugRuntime
    from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
    from agent_lab.testing import ScriptedChatClient, text

    async def main():
        store = SQLiteSessionStore(sys.argv[1])
        runtime = DebugRuntime(ScriptedChatClient([text("held")]), session_store=store)
        queues = runtime.start_session(DebugRunRequest(
            session_id="shared", user_message="from the child",
            chat_agent=AgentParams(model="m")))
        while (await queues.output.get())["type"] != "turn_completed":
            pass
        print("holding", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


@pytest.mark.asyncio
async def test_another_process_is_refused_then_takes_over_at_once_after_a_kill(
    tmp_path: Path,
) -> None:
    db = tmp_path / "lab.sqlite3"
    SQLiteSessionStore(db).close()
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", HOLDER, str(db), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(child.stdout.readline(), timeout=30)
        assert line.decode().strip() == "holding"
        store = SQLiteSessionStore(db)
        refused = DebugRuntime(ScriptedChatClient([text("no")]), session_store=store)
        outputs = await _until(refused.start_session(_request("parent")), {"error"})
        assert outputs[-1]["failure_reason"] == "session_busy"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        await child.wait()
    runtime = DebugRuntime(ScriptedChatClient([text("mine now")]), session_store=store)
    outputs = await _until(runtime.start_session(_request("parent again")), {"turn_completed"})
    await runtime.aclose()
    assert outputs[-1]["type"] == "turn_completed"
    assert [m["content"] for m in store.list_messages("shared")][-2:] == [
        "parent again",
        "mine now",
    ]


@pytest.mark.asyncio
async def test_aclose_during_a_dual_batch_leaves_only_the_user_message(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()

    async def block(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await asyncio.sleep(3600)
        return {}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="block", description="Blocks.", parameters={"type": "object"}, handler=block
            )
        ]
    )
    request = _request("do it").model_copy(
        update={"event_agent": EventAgentParams(enabled_tools=["block"])}
    )
    runtime = DebugRuntime(
        ScriptedChatClient([[text_event("b1", "block")]]), registry=registry, session_store=store
    )
    runtime.start_session(request)
    await asyncio.wait_for(started.wait(), timeout=5)
    await runtime.aclose()

    assert [(m["role"], m["content"]) for m in store.list_messages("shared")] == [("user", "do it")]
    journal = store.list_batches("shared")
    assert journal[0]["state"] == "cancelled"
    # its handler had started: the effect may have happened, so it is unknown, not cancelled
    assert [call["state"] for call in journal[0]["calls"]] == ["unknown"]

    again = DebugRuntime(
        ScriptedChatClient([text("clean")]), registry=registry, session_store=store
    )
    outputs = await _until(again.start_session(_request("continue")), {"turn_completed", "error"})
    await again.aclose()
    assert outputs[-1]["type"] == "turn_completed"
