"""``DebugRuntime.aclose()`` from another task ends a live session in order: the running
turn is cancelled (its calls closed as cancelled, its row ``cancelled``, its ``error``
says ``cancelled``), the session is finished (``session_finished``, ``done``) and its
claim released, so another runtime takes the session over at once."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text, tool_call
from agent_lab.testing.sse_server import Pause, ScriptedResponse, SSETranscriptServer
from tests.runtime.runtime_helpers import Output, audits, business

SESSION = "closing"
CANCELLED = {"failure_reason": "cancelled", "exit_class": "interrupted"}


def _request(
    message: str = "set the volume to 30", *, session_id: str | None = SESSION
) -> DebugRunRequest:
    return DebugRunRequest(
        session_id=session_id,
        user_message=message,
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["wait"], max_event_loops=2),
        tool_invocation_mode="chat_agent_tools",
    )


def _waiting_registry(started: asyncio.Event) -> ToolRegistry:
    """A ``wait`` tool that blocks until it is cancelled."""

    async def wait(event: ToolCallEvent) -> dict[str, Any]:
        started.set()
        await asyncio.Event().wait()
        return {"waited": True}

    definition = ToolDefinition(
        name="wait", description="Waits.", parameters={"type": "object"}, handler=wait
    )
    return ToolRegistry([definition])


def _chunk(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}


def _stalled_stream() -> ScriptedResponse:
    """A real SSE answer that sends its first words, then stalls for a minute."""
    words = ScriptedResponse.sse(_chunk("Setting "), _chunk("it."))
    return ScriptedResponse(chunks=(words.chunks[0], Pause(60.0), *words.chunks[1:]))


async def _close_when(runtime: DebugRuntime, ready: asyncio.Event) -> None:
    await ready.wait()
    await runtime.aclose()


async def _read_closing(
    runtime: DebugRuntime,
    stream: AsyncIterator[OutputMessage],
    ready: asyncio.Event,
    *,
    ready_on: str | None = None,
) -> list[Output]:
    """Read ``stream`` to its end while another task calls ``aclose()`` once ``ready``
    is set (by the consumer on the first ``ready_on`` message, or by a tool)."""
    closer = asyncio.create_task(_close_when(runtime, ready))
    seen: list[Output] = []
    async for message in stream:
        seen.append(message)
        if message["type"] == ready_on:
            ready.set()
    await closer
    assert ready.is_set(), "the session ended before aclose() was called"
    return seen


def _turns(store: SQLiteSessionStore, session_id: str = SESSION) -> list[tuple[Any, ...]]:
    rows = store.list_turns(session_id)
    return [(row["turn_index"], row["status"], row["failure_reason"]) for row in rows]


def _stored_events(store: SQLiteSessionStore, session_id: str = SESSION) -> list[str]:
    return [audit["event"] for audit in store.list_audit_logs(session_id)]


def _ends_cancelled_then_done(outputs: list[Output]) -> None:
    """The running turn's ``error`` (cancelled), then ``session_finished`` and ``done``."""
    *_, error, done = business(outputs)
    assert error["type"] == "error"
    assert {key: error[key] for key in CANCELLED} == CANCELLED
    assert done == {"type": "done"}
    assert outputs[-2]["type"] == "audit" and outputs[-2]["event"] == "session_finished"
    (finished,) = audits(outputs, "turn_completed")
    assert finished["details"]["status"] == "cancelled"


async def _second_runtime_claims(store: SQLiteSessionStore) -> None:
    """Another runtime (no claim wait) takes the session over and runs a turn in it."""
    second = DebugRuntime(
        ScriptedChatClient([text("here again")]),
        registry=_waiting_registry(asyncio.Event()),
        session_store=store,
    )
    async with second.session(_request("still there?")) as session:
        async for message in session:
            assert message["type"] != "error", message
            if message["type"] == "turn_completed":
                break


@pytest.mark.asyncio
async def test_aclose_while_the_chat_streams_cancels_the_turn_and_finishes_the_session(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    with SSETranscriptServer(_stalled_stream()) as server:
        async with OpenAICompatibleChatClient(server.base_url, api_key="k") as client:
            runtime = DebugRuntime(client, registry=ToolRegistry([]), session_store=store)
            request = _request().model_copy(update={"event_agent": EventAgentParams()})
            async with runtime.session(request) as session:
                outputs = await _read_closing(
                    runtime, session, asyncio.Event(), ready_on="message_delta"
                )
            assert not runtime.running
    _ends_cancelled_then_done(outputs)
    assert [m.get("content") for m in business(outputs) if m["type"] == "message_delta"] == [
        "Setting "
    ]
    calls = store.usage_summary(SESSION)["calls"]
    assert [(call["call_kind"], call["status"]) for call in calls] == [("chat", "cancelled")]
    assert _turns(store) == [(1, "cancelled", "cancelled")]
    assert _stored_events(store)[-2:] == ["turn_completed", "session_finished"]
    await _second_runtime_claims(store)
    assert _turns(store) == [(1, "cancelled", "cancelled"), (2, "completed", None)]


@pytest.mark.asyncio
async def test_aclose_during_a_tool_batch_cancels_the_turn_and_finishes_the_session(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(client, registry=_waiting_registry(started), session_store=store)
    async with runtime.session(_request()) as session:
        outputs = await _read_closing(runtime, session, started)
    assert not runtime.running
    _ends_cancelled_then_done(outputs)
    assert _turns(store) == [(1, "cancelled", "cancelled")]
    (batch,) = store.list_batches(SESSION)
    assert batch["state"] == "cancelled"  # closed, not left open for a restore to find
    assert [call["state"] for call in batch["calls"]] == ["unknown"]  # its handler ran
    assert _stored_events(store)[-2:] == ["turn_completed", "session_finished"]
    await _second_runtime_claims(store)
    assert _turns(store)[1:] == [(2, "completed", None)]


@pytest.mark.asyncio
async def test_aclose_between_turns_finishes_the_session(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(
        ScriptedChatClient([text("Done.")]),
        registry=_waiting_registry(asyncio.Event()),
        session_store=store,
    )
    async with runtime.session(_request()) as session:
        outputs = await _read_closing(runtime, session, asyncio.Event(), ready_on="turn_completed")
    assert not runtime.running
    assert [m["type"] for m in business(outputs)][-2:] == ["turn_completed", "done"]
    assert outputs[-2]["type"] == "audit" and outputs[-2]["event"] == "session_finished"
    assert _turns(store) == [(1, "completed", None)]
    assert _stored_events(store)[-2:] == ["turn_completed", "session_finished"]
    await _second_runtime_claims(store)
    assert _turns(store)[1:] == [(2, "completed", None)]


@pytest.mark.asyncio
async def test_aclose_of_a_session_that_ran_no_turn_finishes_it(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(
        ScriptedChatClient([]), registry=_waiting_registry(asyncio.Event()), session_store=store
    )
    await runtime.aclose()  # nothing runs yet: nothing to do
    queues = runtime.start_session(_request(""))
    assert (await queues.output.get())["event"] == "session_started"
    await runtime.aclose()
    await runtime.aclose()  # once is enough
    assert not runtime.running
    rest = [queues.output.get_nowait() for _ in range(queues.output.qsize())]
    assert [(m["type"], m.get("event")) for m in rest] == [
        ("session_started", None),
        ("audit", "session_finished"),
        ("done", None),
    ]
    assert _turns(store) == []
    assert _stored_events(store) == ["session_started", "session_finished"]
    await _second_runtime_claims(store)
    assert _turns(store) == [(1, "completed", None)]


@pytest.mark.asyncio
async def test_aclose_ends_a_start_session_turn_the_same_way(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(client, registry=_waiting_registry(started), session_store=store)
    queues: RuntimeQueues = runtime.start_session(_request())
    await started.wait()
    await runtime.aclose()  # nobody reads meanwhile: the output queue keeps it all
    assert not runtime.running
    outputs = [queues.output.get_nowait() for _ in range(queues.output.qsize())]
    _ends_cancelled_then_done(outputs)
    assert _turns(store) == [(1, "cancelled", "cancelled")]
    await _second_runtime_claims(store)


@pytest.mark.asyncio
async def test_aclose_during_run_ends_it_with_the_cancelled_error(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(client, registry=_waiting_registry(started), session_store=store)
    outputs = await _read_closing(runtime, runtime.run(_request(session_id=None)), started)
    assert not runtime.running
    *_, finished, error = outputs
    assert error["type"] == "error"
    assert {key: error[key] for key in CANCELLED} == CANCELLED
    assert finished["type"] == "audit" and finished["event"] == "session_finished"
    (opened,) = [m for m in outputs if m["type"] == "session_started"]
    assert _turns(store, opened["session_id"]) == [(1, "cancelled", "cancelled")]


@pytest.mark.asyncio
async def test_an_orderly_end_that_cannot_finish_falls_back_to_cancelling(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    output: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)  # bounded, and nobody reads it
    runtime = DebugRuntime(
        client,
        registry=_waiting_registry(started),
        session_store=store,
        queues=RuntimeQueues(output=output),
    )
    runtime.start_session(_request())
    await started.wait()
    while not output.full():  # what the orderly end would say has no room
        output.put_nowait({"type": "filler"})
    await runtime.aclose(grace_seconds=0.2)
    assert not runtime.running
    assert _turns(store) == [(1, "running", None)]  # as documented: left to the next runtime
    await _second_runtime_claims(store)  # the claim was released all the same
    assert _turns(store)[0] == (1, "failed", "interrupted")


@pytest.mark.asyncio
async def test_a_runtime_cancelled_from_outside_still_stops(tmp_path: Path) -> None:
    """As when the event loop shuts down: every task is cancelled, the runtime's too."""
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    started = asyncio.Event()
    client = ScriptedChatClient([[tool_call("w1", "wait")]])
    runtime = DebugRuntime(client, registry=_waiting_registry(started), session_store=store)
    runtime.start_session(_request())
    await started.wait()
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    assert not runtime.running
    await _second_runtime_claims(store)


@pytest.mark.asyncio
@pytest.mark.parametrize("one_shot", [True, False])
async def test_a_turn_that_starts_after_aclose_was_called_is_cancelled_as_it_starts(
    tmp_path: Path, one_shot: bool
) -> None:
    """``aclose()`` before the runtime even opened the session: its first turn still
    starts (it is on record), and is cancelled at its first wait, the model request."""
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    with SSETranscriptServer(ScriptedResponse.sse(_chunk("never said"))) as server:
        async with OpenAICompatibleChatClient(server.base_url, api_key="k") as client:
            runtime = DebugRuntime(
                client, registry=_waiting_registry(asyncio.Event()), session_store=store
            )
            request = _request(session_id=None if one_shot else SESSION)
            queues = runtime.start(request) if one_shot else runtime.start_session(request)
            await runtime.aclose()
    outputs = [queues.output.get_nowait() for _ in range(queues.output.qsize())]
    assert "message_delta" not in [m["type"] for m in outputs]
    if one_shot:
        *_, finished, error = outputs
        assert finished["type"] == "audit" and finished["event"] == "session_finished"
    else:
        _ends_cancelled_then_done(outputs)
        error = business(outputs)[-2]
    assert {key: error[key] for key in CANCELLED} == CANCELLED
    (opened,) = [m for m in outputs if m["type"] == "session_started"]
    assert _turns(store, opened["session_id"]) == [(1, "cancelled", "cancelled")]


@pytest.mark.asyncio
async def test_leaving_run_early_cancels_its_turn_and_leaves_nothing_for_the_next_run(
    tmp_path: Path,
) -> None:
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    answer = ScriptedResponse.sse(_chunk("Next."))
    with SSETranscriptServer(_stalled_stream(), answer) as server:
        async with OpenAICompatibleChatClient(server.base_url, api_key="k") as client:
            runtime = DebugRuntime(
                client, registry=_waiting_registry(asyncio.Event()), session_store=store
            )
            first: list[Output] = []
            async with contextlib.aclosing(runtime.run(_request(session_id=None))) as stream:
                async for message in stream:
                    first.append(message)
                    if message["type"] == "message_delta":
                        break  # the model is still streaming
            assert not runtime.running
            second = [message async for message in runtime.run(_request(session_id=None))]
    (opened,) = [m for m in first if m["type"] == "session_started"]
    assert _turns(store, opened["session_id"]) == [(1, "cancelled", "cancelled")]
    assert _stored_events(store, opened["session_id"])[-1] == "session_finished"
    assert second[0]["type"] == "audit" and second[0]["event"] == "session_started"
    assert [m["type"] for m in business(second)] == [
        "session_started",
        "message_delta",
        "round_stats",
        "done",
    ]


def _claim_waiting_runtime(store: SQLiteSessionStore) -> DebugRuntime:
    """A runtime that waits up to a minute for a session another runtime holds."""
    return DebugRuntime(
        ScriptedChatClient([text("never asked")]),
        registry=_waiting_registry(asyncio.Event()),
        session_store=store,
        claim_wait_seconds=60,
    )


@pytest.mark.asyncio
async def test_aclose_while_a_session_waits_for_its_claim_stops_the_wait_and_claims_nothing(
    tmp_path: Path,
) -> None:
    """A session waiting for a claim another runtime holds (``claim_wait_seconds``) is
    ended by ``aclose()`` without waiting out the grace: it ends, as a session that
    could not open does, with one ``error`` (cancelled) and nothing stored; its wait
    stops, so when the holder lets go the closed runtime does not take the session
    (nobody could, until its lease ran out) and a third runtime claims it at once."""
    path = tmp_path / "lab.sqlite3"
    holder = SQLiteSessionStore(path)
    holder.create_session("waiting", {}, session_id=SESSION)
    token = holder.claim_session(SESSION, "the holder")
    store = SQLiteSessionStore(path)
    runtime = _claim_waiting_runtime(store)
    io = runtime.start_session(_request())
    await asyncio.sleep(0.3)  # the session is waiting for the holder's claim
    closing = asyncio.create_task(runtime.aclose(grace_seconds=60))
    done, _ = await asyncio.wait([closing], timeout=20)  # the grace is not waited out
    holder.release_claim(SESSION, token)
    await asyncio.sleep(0.3)  # a wait still polling would claim the session now
    third = SQLiteSessionStore(path).claim_session(SESSION, "the third runtime")

    assert done == {closing}, "aclose() waited for the claim wait or its grace"
    outputs = [io.output.get_nowait() for _ in range(io.output.qsize())]
    assert [m["type"] for m in outputs] == ["error"]  # no session_started: never opened
    assert {key: outputs[0][key] for key in CANCELLED} == CANCELLED
    assert third and _turns(store) == [] and runtime.running is False


class _SlowClaims(SQLiteSessionStore):
    """Each claim waits for ``go`` first: a try at the claim still in flight."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.trying, self.go = threading.Event(), threading.Event()

    def claim_session(self, session_id: str, owner: str, **options: Any) -> str:
        self.trying.set()
        self.go.wait(30)
        return super().claim_session(session_id, owner, **options)


@pytest.mark.asyncio
async def test_a_claim_won_by_a_try_that_ends_after_aclose_is_released(tmp_path: Path) -> None:
    """``aclose()`` while a try at the claim is in flight: the try finishes, and the
    claim it won is given back, so the session is not held by a closed runtime."""
    store = _SlowClaims(tmp_path / "lab.sqlite3")
    runtime = _claim_waiting_runtime(store)
    io = runtime.start_session(_request())
    await asyncio.to_thread(store.trying.wait, 10)
    closing = asyncio.create_task(runtime.aclose(grace_seconds=60))
    await asyncio.sleep(0.1)
    store.go.set()
    await asyncio.wait_for(closing, 20)

    outputs = [io.output.get_nowait() for _ in range(io.output.qsize())]
    assert [m["type"] for m in outputs] == ["error"]
    assert {key: outputs[0][key] for key in CANCELLED} == CANCELLED
    assert store.live_claims() == {}  # released: another runtime may take it at once
