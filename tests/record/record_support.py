"""Helpers for the turn-record tests: scripted SSE answers, runs, record comparison."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.pricing import PriceTable
from agent_lab.application.record import LiveRecords, TurnRecord, session_records
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ArgumentResolver, ToolDefinition, ToolRegistry
from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse

BUILTIN_TOOLS = [
    "device.volume.adjust",
    "calendar.schedule.create",
    "knowledge.web.search",
    "handoff_note",
    "session.terminate",
]
PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)
USAGE = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def answer(text: str, *, usage: dict[str, int] | None = None) -> ScriptedResponse:
    """A streamed text answer, then usage."""
    return ScriptedResponse.sse(
        _chunk({"role": "assistant", "content": text}),
        _chunk({}, "stop"),
        {"choices": [], "usage": usage or USAGE},
    )


def with_events(text: str, *names: str) -> ScriptedResponse:
    """Dual mode: text and one inline event block naming ``names``."""
    return answer(f"{text} {EVENT_BLOCK_START}{', '.join(names)}{EVENT_BLOCK_END}")


def tool_calls(*calls: tuple[str, str, dict[str, Any]]) -> ScriptedResponse:
    """Direct mode: provider tool calls ``(id, name, arguments)``."""
    fragments = [
        {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        for index, (call_id, name, arguments) in enumerate(calls)
    ]
    return ScriptedResponse.sse(
        _chunk({"role": "assistant", "tool_calls": fragments}),
        _chunk({}, "tool_calls"),
        {"choices": [], "usage": USAGE},
    )


def request(
    mode: str,
    tools: Sequence[str],
    message: str = PROMPT,
    *,
    model: str = "agent-lab-sim",
    session_id: str | None = None,
) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=message,
        chat_agent=AgentParams(model=model),
        event_agent=EventAgentParams(enabled_tools=list(tools)),
        tool_invocation_mode=mode,
    )


async def run_once(
    base_url: str,
    database: Path,
    run_request: DebugRunRequest,
    registry: ToolRegistry,
    *,
    prices: PriceTable | None = None,
) -> tuple[list[dict[str, Any]], LiveRecords, str]:
    """One turn through a real client and runtime on a real SQLite file.

    Returns the outputs, the records folded live from them, and the session id.
    """
    live = LiveRecords(prices=prices)
    outputs: list[dict[str, Any]] = []
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        with SQLiteSessionStore(database) as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            async for output in runtime.run(run_request):
                outputs.append(dict(output))
                live.feed(output)
    session_id = next(o["session_id"] for o in outputs if o.get("session_id"))
    return outputs, live, session_id


async def cancelled_session(
    base_url: str,
    database: Path,
    registry: ToolRegistry,
    run_request: DebugRunRequest,
    *,
    when: Callable[[dict[str, Any], list[dict[str, Any]]], bool],
    prices: PriceTable | None = None,
) -> tuple[list[dict[str, Any]], LiveRecords, str]:
    """A persisted session whose turn is cancelled once ``when(output, outputs)``; then
    its input is closed and its outputs drained. Returns them, the records folded live
    from them and the session id."""
    live = LiveRecords(prices=prices)
    outputs: list[dict[str, Any]] = []
    cancelled = False
    async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
        with SQLiteSessionStore(database) as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            async with runtime.session(run_request) as session:
                async for output in session:
                    outputs.append(dict(output))
                    live.feed(output)
                    if not cancelled and when(outputs[-1], outputs):
                        assert runtime.cancel_turn()
                        cancelled = True
                    if output["type"] == "error":
                        break
                await session.close()
                async for output in session:
                    outputs.append(dict(output))
                    live.feed(output)
    session_id = next(o["session_id"] for o in outputs if o.get("session_id"))
    return outputs, live, session_id


def reopened(
    database: Path, session_id: str, *, prices: PriceTable | None = None
) -> list[TurnRecord]:
    """The session's records read back from a freshly opened store."""
    with SQLiteSessionStore(database) as store:
        return session_records(
            store.list_audit_logs(session_id),
            session_id=session_id,
            turns=store.list_turns(session_id),
            prices=prices,
        )


def assert_same_records(live: Sequence[TurnRecord], stored: Sequence[TurnRecord]) -> None:
    """Field by field: the same turns, and each field of each turn equal."""
    assert [r.turn_index for r in live] == [r.turn_index for r in stored]
    for mine, theirs in zip(live, stored, strict=True):
        for name in TurnRecord.model_fields:
            assert getattr(mine, name) == getattr(theirs, name), (
                f"turn {mine.turn_index}: field {name!r} differs"
            )
        assert mine.model_dump(mode="json") == theirs.model_dump(mode="json")


def spoken(outputs: Sequence[dict[str, Any]]) -> str:
    return "".join(o["content"] for o in outputs if o["type"] == "message_delta")


def tool_results(outputs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Each shown tool result's payload, by call id."""
    return {
        o["message"]["tool_call_id"]: json.loads(o["message"]["content"])
        for o in outputs
        if o["type"] == "tool_result"
    }


def stored_anywhere(database: Path, text: str) -> bool:
    """Whether ``text`` is in the database file or any file beside it (WAL, journal)."""
    needle = text.encode()
    return any(needle in file.read_bytes() for file in database.parent.glob(database.name + "*"))


def notes_tool(
    ran: list[dict[str, Any]] | None = None, resolver: ArgumentResolver | None = None
) -> ToolRegistry:
    """One ``notes_add`` tool taking a string ``note`` (noted in ``ran``); without a
    ``resolver`` its arguments take a forced argument call."""

    def add(event: Any) -> dict[str, Any]:
        if ran is not None:
            ran.append(dict(event.arguments))
        return {"tool": "notes_add", "kept": event.arguments["note"]}

    return ToolRegistry(
        [
            ToolDefinition(
                name="notes_add",
                description="Keep a note.",
                parameters={
                    "type": "object",
                    "properties": {"note": {"type": "string"}},
                    "required": ["note"],
                },
                handler=add,
                argument_resolver=resolver,
            )
        ]
    )
