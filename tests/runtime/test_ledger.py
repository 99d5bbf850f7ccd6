"""The effect ledger with a real SQLite store (DESIGN.md §9.4): each call goes intent →
dispatched → outcome; a batch cut off leaves dispatched calls ``unknown`` and the others
``cancelled``; the next turn gives every effect back to the model, once, as a labelled
note in the mode's results format."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, text_event, tool_call
from tests.runtime.runtime_helpers import audits, read_until

MODES = ["dual_agent", "chat_agent_tools"]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}}


def _request(mode: str, session_id: str, message: str = "do both") -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=message,
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(
            enabled_tools=["effect"], max_event_loops=1, max_parallel_events=1
        ),
        tool_invocation_mode=mode,
    )


def _calls(mode: str, *ids: str) -> list[Any]:
    if mode == "dual_agent":
        return [text_event(call_id, "effect") for call_id in ids]
    return [tool_call(call_id, "effect", n=index) for index, call_id in enumerate(ids)]


def _journal(store: SQLiteSessionStore, session_id: str) -> list[dict[str, Any]]:
    return [call for batch in store.list_batches(session_id) for call in batch["calls"]]


def _resolver(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    return {"n": 7}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_each_call_is_dispatched_in_the_journal_before_its_handler_runs(
    tmp_path: Path, mode: str
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    seen: dict[str, list[str]] = {}

    def effect(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        seen[event.id] = [call["state"] for call in _journal(store, "s1")]
        return {"tool": "effect", "key": context.idempotency_key}

    registry = ToolRegistry(
        [ToolDefinition("effect", "Acts.", SCHEMA, effect, argument_resolver=_resolver)]
    )
    client = ScriptedChatClient([_calls(mode, "a", "b"), text("both done")])
    runtime = DebugRuntime(client, registry=registry, session_store=store)

    outputs = [o async for o in runtime.run(_request(mode, "s1"))]

    assert outputs[-1] == {"type": "done"}
    assert seen == {"a": ["dispatched", "pending"], "b": ["succeeded", "dispatched"]}
    scope = audits(outputs, "event_batch_started")[0]["details"]["scope"]
    journal = _journal(store, "s1")
    assert [c["state"] for c in journal] == ["succeeded", "succeeded"]
    assert [c["idempotency_key"] for c in journal] == [f"{scope}:a", f"{scope}:b"]
    assert [json.loads(c["result"]["content"])["key"] for c in journal] == [
        f"{scope}:a",
        f"{scope}:b",
    ]
    resolved = [{"n": 7}, {"n": 7}] if mode == "dual_agent" else [{"n": 0}, {"n": 1}]
    assert [c["arguments"] for c in journal] == resolved
    store.close()


def _blocking_registry(started: asyncio.Event) -> ToolRegistry:
    async def effect(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()  # cut off mid-effect
        return {}

    return ToolRegistry(
        [ToolDefinition("effect", "Acts.", SCHEMA, effect, argument_resolver=_resolver)]
    )


def _note(mode: str, messages: list[ChatMessage]) -> list[ChatMessage]:
    if mode == "dual_agent":
        return [m for m in messages if m.role == "user" and m.name == "event_agent"]
    return [m for m in messages if m.role == "system" and m.content.startswith("Recovered")]


def _note_lines(note: ChatMessage) -> list[dict[str, Any]]:
    return [json.loads(line) for line in note.content.splitlines()[1:]]


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_cut_off_batch_is_unknown_where_dispatched_and_reported_on_reconnect(
    tmp_path: Path, mode: str
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    first = DebugRuntime(
        ScriptedChatClient([_calls(mode, "a", "b")]),
        registry=_blocking_registry(started),
        session_store=store,
    )
    first.start_session(_request(mode, "s1"))
    await asyncio.wait_for(started.wait(), timeout=5)
    await first.aclose()

    assert [c["state"] for c in _journal(store, "s1")] == ["unknown", "cancelled"]

    client = ScriptedChatClient([text("the volume may have changed; shall I check?")])
    second = DebugRuntime(client, registry=_blocking_registry(asyncio.Event()), session_store=store)
    queues = second.start_session(_request(mode, "s1", "did it work?"))
    outputs = await read_until(queues, {"turn_completed", "error"})
    await second.aclose()

    assert outputs[-1]["type"] == "turn_completed", outputs[-1]
    sent = client.calls[0].messages
    (note,) = _note(mode, sent)
    assert sent.index(note) == len(sent) - 1, "the note follows the user's message"
    assert sent[-2] == ChatMessage(role="user", content="did it work?")
    lines = _note_lines(note)
    assert [(line["event_id"], line["status"]) for line in lines] == [
        ("a", "unknown"),
        ("b", "not_executed"),
    ]
    assert all(line["recovered"] for line in lines)
    assert lines[0]["note"] == "outcome unknown — check before repeating"
    assert lines[0]["arguments"] == ({"n": 7} if mode == "dual_agent" else {"n": 0})
    recovered = audits(outputs, "session_started")[0]["details"]["recovered_calls"]
    assert [(r["event_id"], r["status"]) for r in recovered] == [
        ("a", "unknown"),
        ("b", "not_executed"),
    ]
    assert [b["reported_turn"] for b in store.list_batches("s1")] == [2]
    store.close()


CRASHING_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    from agent_lab.domain.events import ToolCallEvent
    from agent_lab.domain.messages import ChatMessage
    from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

    store = SQLiteSessionStore(sys.argv[1])
    mode = sys.argv[2]
    store.ensure_session("s1", "crash", {"tool_invocation_mode": mode})
    store.claim_session("s1", "crashing-writer")
    store.start_turn("s1", 1, "do three things",
                     messages=[ChatMessage(role="user", content="do three things")])
    events = [ToolCallEvent(id=i, name="effect", arguments={}) for i in ("a", "b", "c")]
    assistant = None
    if mode == "chat_agent_tools":
        assistant = ChatMessage(role="assistant", content="", tool_calls=events)
    batch = store.begin_batch("s1", 1, 1, scope="s1:turn-1:round-1", mode=mode,
                              events=events, assistant=assistant)
    store.mark_dispatched(batch, "a", {"n": 1})
    store.record_result(batch, "a", "succeeded", ChatMessage(
        role="tool", content='{"tool": "effect", "done": 1}', name="effect",
        tool_call_id="a"))
    store.mark_dispatched(batch, "b", {"n": 2})
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


async def _after_crash(script: str, db: Path, mode: str) -> SQLiteSessionStore:
    """Run a writer ``script`` that kills itself with SIGKILL, then open its store."""
    crashed = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(db), mode, stderr=asyncio.subprocess.PIPE
    )
    _, stderr = await crashed.communicate()
    assert crashed.returncode == -9, stderr
    return SQLiteSessionStore(db)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_after_a_crash_the_recorded_effects_go_back_to_the_model_once(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "lab.sqlite3"
    store = await _after_crash(CRASHING_WRITER, db, mode)
    client = ScriptedChatClient([text("a is done; b may be; c never ran"), text("fine")])
    runtime = DebugRuntime(
        client, registry=_blocking_registry(asyncio.Event()), session_store=store
    )
    queues = runtime.start_session(_request(mode, "s1", "what happened?"))
    outputs = await read_until(queues, {"turn_completed", "error"})
    await queues.input.put("and now?")
    outputs += await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    assert [o["type"] for o in outputs if o["type"] in ("turn_completed", "error")] == [
        "turn_completed",
        "turn_completed",
    ]
    (note,) = _note(mode, client.calls[0].messages)
    lines = _note_lines(note)
    assert [(line["event_id"], line["status"]) for line in lines] == [
        ("a", "succeeded"),
        ("b", "unknown"),
        ("c", "not_executed"),
    ]
    assert lines[0]["result"] == {"tool": "effect", "done": 1}
    assert lines[1]["idempotency_key"] == "s1:turn-1:round-1:b"
    assert note.content.startswith(
        "EventAgent results:" if mode == "dual_agent" else "Recovered tool results:"
    )
    second = client.calls[1].messages
    assert _note(mode, second) == [note], "delivered once, then part of the conversation"
    assert [c["state"] for c in _journal(store, "s1")] == ["succeeded", "unknown", "cancelled"]
    store.close()

    reopened = SQLiteSessionStore(db)
    later = ScriptedChatClient([text("hello again")])
    again = DebugRuntime(
        later, registry=_blocking_registry(asyncio.Event()), session_store=reopened
    )
    outputs = [dict(o) async for o in again.run(_request(mode, "s1", "hi"))]
    assert outputs[-1] == {"type": "done"}
    assert "recovered_calls" not in audits(outputs, "session_started")[0]["details"]
    restored = later.calls[0].messages
    if mode == "dual_agent":  # only the visible history is restored (DESIGN.md §8)
        assert _note(mode, restored) == []
    else:  # stored with the turn it was told in: the conversation the live session had
        assert _note(mode, restored) == [note]
        told = next(i for i, m in enumerate(restored) if m.content == "what happened?")
        assert restored[told + 1] == note
    reopened.close()


CRASH_AFTER_COMMIT = textwrap.dedent(
    """
    import os, signal, sys
    from agent_lab.domain.events import ToolCallEvent
    from agent_lab.domain.messages import ChatMessage
    from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore

    store = SQLiteSessionStore(sys.argv[1])
    mode = sys.argv[2]
    store.ensure_session("s1", "crash", {"tool_invocation_mode": mode})
    store.claim_session("s1", "crashing-writer")
    store.start_turn("s1", 1, "do it", messages=[ChatMessage(role="user", content="do it")])
    events = [ToolCallEvent(id="a", name="effect", arguments={"n": 1})]
    assistant = None
    if mode == "chat_agent_tools":
        assistant = ChatMessage(role="assistant", content="", tool_calls=events)
    batch = store.begin_batch("s1", 1, 1, scope="s1:turn-1:round-1", mode=mode,
                              events=events, assistant=assistant)
    store.mark_dispatched(batch, "a", {"n": 1})
    result = ChatMessage(role="tool", content='{"tool": "effect", "done": 1}',
                         name="effect", tool_call_id="a")
    store.record_result(batch, "a", "succeeded", result)
    store.commit_batch(batch, [assistant, result] if assistant is not None else [])
    os.kill(os.getpid(), signal.SIGKILL)  # while the follow-up would stream
    """
)


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_committed_batch_of_a_dead_turn_is_noted_as_already_run(
    tmp_path: Path, mode: str
) -> None:
    db = tmp_path / "lab.sqlite3"
    store = await _after_crash(CRASH_AFTER_COMMIT, db, mode)
    client = ScriptedChatClient([text("it is done")])
    runtime = DebugRuntime(
        client, registry=_blocking_registry(asyncio.Event()), session_store=store
    )
    outputs = [dict(o) async for o in runtime.run(_request(mode, "s1", "did it work?"))]

    assert outputs[-1] == {"type": "done"}, outputs[-1]
    sent = client.calls[0].messages
    results = [m.tool_call_id for m in sent if m.role == "tool"]
    # the restored transcript holds the batch in chat_agent_tools (only the visible
    # history in dual_agent); in both, the note after the new message says it ran
    assert results == (["a"] if mode == "chat_agent_tools" else [])
    (note,) = _note(mode, sent)
    assert sent[-1] == note
    assert [(line["event_id"], line["status"]) for line in _note_lines(note)] == [
        ("a", "succeeded")
    ]
    assert "interrupted while its tools ran" not in note.content
    assert [b["reported_turn"] for b in store.list_batches("s1")] == [2]
    store.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_a_cancelled_turns_effects_reach_the_next_turn_of_the_session(
    tmp_path: Path, mode: str
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([_calls(mode, "a", "b"), text("a may have run")])
    runtime = DebugRuntime(client, registry=_blocking_registry(started), session_store=store)
    queues = runtime.start_session(_request(mode, "s1"))
    await asyncio.wait_for(started.wait(), timeout=5)
    assert runtime.cancel_turn()
    outputs = await read_until(queues, {"turn_completed", "error"})
    await queues.input.put("so?")
    outputs += await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    (note,) = _note(mode, client.calls[1].messages)
    assert [(line["event_id"], line["status"]) for line in _note_lines(note)] == [
        ("a", "unknown"),
        ("b", "not_executed"),
    ]
    turn_two = [a for a in audits(outputs, "turn_started") if a["details"]["turn_index"] == 2]
    assert [r["status"] for r in turn_two[0]["details"]["recovered_calls"]] == [
        "unknown",
        "not_executed",
    ]
    store.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_without_a_store_a_cancelled_turns_effects_still_reach_the_next_turn(
    mode: str,
) -> None:
    started = asyncio.Event()
    client = ScriptedChatClient([_calls(mode, "a", "b"), text("a may have run"), text("ok")])
    runtime = DebugRuntime(client, registry=_blocking_registry(started))
    queues = runtime.start_session(_request(mode, "unused").model_copy(update={"session_id": None}))
    await asyncio.wait_for(started.wait(), timeout=5)
    assert runtime.cancel_turn()
    await read_until(queues, {"turn_completed", "error"})
    await queues.input.put("so?")
    await read_until(queues, {"turn_completed", "error"})
    await queues.input.put("and now?")
    await read_until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    (note,) = _note(mode, client.calls[1].messages)
    assert [(line["event_id"], line["status"]) for line in _note_lines(note)] == [
        ("a", "unknown"),
        ("b", "not_executed"),
    ]
    assert _note(mode, client.calls[2].messages) == [note], "given once"


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
async def test_one_store_less_sessions_lost_effects_never_reach_another_session(
    mode: str,
) -> None:
    request = _request(mode, "unused").model_copy(update={"session_id": None})

    async def cut_off(runtime: DebugRuntime, started: asyncio.Event) -> Any:
        queues = runtime.start_session(request)
        await asyncio.wait_for(started.wait(), timeout=5)
        assert runtime.cancel_turn()
        await read_until(queues, {"turn_completed", "error"})
        return queues

    first_started = asyncio.Event()
    first = DebugRuntime(
        ScriptedChatClient([_calls(mode, "a", "b")]), registry=_blocking_registry(first_started)
    )
    await cut_off(first, first_started)

    second_started = asyncio.Event()
    second_client = ScriptedChatClient([_calls(mode, "x", "y"), text("x may have run")])
    second = DebugRuntime(second_client, registry=_blocking_registry(second_started))
    queues = await cut_off(second, second_started)
    await queues.input.put("so?")
    await read_until(queues, {"turn_completed", "error"})
    await second.aclose()
    await first.aclose()

    (note,) = _note(mode, second_client.calls[1].messages)
    assert [(line["event_id"], line["status"]) for line in _note_lines(note)] == [
        ("x", "unknown"),
        ("y", "not_executed"),
    ]
