"""Real turns for the telemetry tests: the simulated provider over HTTP, the real client,
runtime and SQLite store; the tools keep their state under the test's directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import build_default_tool_registry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.telemetry.spans import SpanData
from agent_lab.infrastructure.tool_backends.backends import local_backends

PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)
TOOLS = [
    "device.volume.adjust",
    "calendar.schedule.create",
    "knowledge.web.search",
    "handoff_note",
    "session.terminate",
]
API_KEY = "sk-telemetry-test-secret-0123456789"


@dataclass
class Turn:
    session_id: str
    outputs: list[dict[str, Any]]


def request(mode: str, message: str = PROMPT) -> DebugRunRequest:
    return DebugRunRequest(
        user_message=message,
        chat_agent=AgentParams(model="agent-lab-sim"),
        event_agent=EventAgentParams(enabled_tools=TOOLS),
        tool_invocation_mode=mode,
    )


async def run_turn(
    client: OpenAICompatibleChatClient,
    store: SQLiteSessionStore,
    home: Path,
    mode: str,
    *,
    queues: RuntimeQueues | None = None,
    message: str = PROMPT,
) -> Turn:
    """One ``run()`` turn; its session id and outputs."""
    registry = build_default_tool_registry(local_backends(home))
    runtime = DebugRuntime(client, registry=registry, session_store=store, queues=queues)
    outputs = [dict(output) async for output in runtime.run(request(mode, message))]
    session_id = next(str(o["session_id"]) for o in outputs if o.get("session_id"))
    return Turn(session_id, outputs)


async def run_session(
    client: OpenAICompatibleChatClient,
    store: SQLiteSessionStore,
    home: Path,
    mode: str,
    messages: Sequence[str],
    *,
    queues: RuntimeQueues | None = None,
) -> Turn:
    """A ``start_session()`` with one turn per message, closed at the end."""
    registry = build_default_tool_registry(local_backends(home))
    runtime = DebugRuntime(client, registry=registry, session_store=store, queues=queues)
    running = runtime.start_session(request(mode, messages[0]))
    outputs: list[dict[str, Any]] = []
    pending = list(messages[1:])
    while True:
        output = await running.output.get()
        outputs.append(output)
        if output["type"] in ("turn_completed", "error"):
            await running.input.put(pending.pop(0) if pending else None)
        if output["type"] == "done":
            break
    await runtime.aclose()
    session_id = next(str(o["session_id"]) for o in outputs if o.get("session_id"))
    return Turn(session_id, outputs)


def by_name(spans: Sequence[SpanData], name: str) -> list[SpanData]:
    return [span for span in spans if span.name == name]


def one(spans: Sequence[SpanData], name: str) -> SpanData:
    found = by_name(spans, name)
    assert len(found) == 1, f"{name}: {len(found)} spans"
    return found[0]


def children(spans: Sequence[SpanData], parent: SpanData) -> list[str]:
    """The names of ``parent``'s children, in start order (then name)."""
    kids = [span for span in spans if span.parent_id == parent.span_id]
    return [span.name for span in sorted(kids, key=lambda span: (span.start_ns, span.name))]
