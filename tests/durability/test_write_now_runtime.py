"""The runtime's writes on the event loop (``write_now``), and the worker thread they
fall back to: a lock held by another connection, a large write, a full file.

The store is the real SQLite store; a subclass only notes on which thread each call of
a write ran (the loop's, or a worker's).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.queues import RuntimeQueues
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.messages import StreamItem
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient
from tests.durability.test_storage_faults import _model, _registry, _request, _until

WRITES = ("ensure_session", "start_turn", "append_messages", "open_batch", "complete_turn")


class ThreadNotingStore(SQLiteSessionStore):
    """The real store; ``threads[name]`` lists the thread of each call of ``name``.
    Its notes never block, so it keeps the store's writes on the loop."""

    WRITES_NOW = True

    def __init__(self, path: Path, **options: Any) -> None:
        super().__init__(path, **options)
        self.threads: dict[str, list[int]] = defaultdict(list)
        for name in WRITES:
            setattr(self, name, self._noting(name, getattr(self, name)))

    def _noting(self, name: str, write: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.threads[name].append(threading.get_ident())
            return write(*args, **kwargs)

        return call


def _hold(path: Path) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
async def test_with_nothing_in_the_way_every_write_runs_on_the_loop(
    tmp_path: Path, mode: str
) -> None:
    store = ThreadNotingStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(_model(mode), registry=_registry([]), session_store=store)
    queues = runtime.start_session(_request(mode))
    first = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert first[-1]["type"] == "turn_completed", first[-1]
    loop_thread = threading.get_ident()
    for name in WRITES:
        assert store.threads[name], f"{name} was never called"
        assert set(store.threads[name]) == {loop_thread}, name
    store.close()


class _Ticker:
    """Counts 10 ms ticks of the loop: a loop held up by a write does not tick."""

    def __init__(self) -> None:
        self.ticks = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.ticks += 1
            await asyncio.sleep(0.01)

    def stop(self) -> None:
        self._task.cancel()


async def _after_one_turn(
    tmp_path: Path, *, busy_timeout_ms: int
) -> tuple[ThreadNotingStore, DebugRuntime, RuntimeQueues]:
    """A dual_agent session on a fresh store whose first turn has ended."""
    store = ThreadNotingStore(tmp_path / "lab.sqlite3", busy_timeout_ms=busy_timeout_ms)
    runtime = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=store)
    queues = runtime.start_session(_request("dual_agent"))
    await _until(queues, {"turn_completed", "error"})
    return store, runtime, queues


@pytest.mark.asyncio
async def test_a_held_lock_is_waited_for_in_a_worker_thread_and_fails_as_locked(
    tmp_path: Path,
) -> None:
    store, runtime, queues = await _after_one_turn(tmp_path, busy_timeout_ms=500)
    holder = _hold(store.path)
    ticker = _Ticker()
    try:
        await queues.input.put("second turn")
        before = ticker.ticks
        second = await _until(queues, {"turn_completed", "error"})
        waited = ticker.ticks - before
    finally:
        ticker.stop()
        holder.execute("ROLLBACK")
        holder.close()
    error = second[-1]
    assert error["type"] == "error", error
    assert error["failure_reason"] == "session_persistence_failed:locked"
    assert "busy" in error["message"].lower()
    assert waited >= 3, "the loop stopped while the write waited for the lock"
    assert store.threads["start_turn"] == [threading.get_ident()]  # turn 2 never began

    await queues.input.put("third turn")
    third = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert third[-1]["type"] == "turn_completed", third[-1]
    store.close()


@pytest.mark.asyncio
async def test_a_lock_released_while_the_worker_waits_lets_the_turn_complete(
    tmp_path: Path,
) -> None:
    store, runtime, queues = await _after_one_turn(tmp_path, busy_timeout_ms=10_000)
    holder = _hold(store.path)
    ticker = _Ticker()
    await queues.input.put("second turn")
    before = ticker.ticks
    await asyncio.sleep(0.3)  # the worker waits for the lock meanwhile; the loop runs
    assert ticker.ticks - before >= 3, "the loop stopped while the write waited for the lock"
    assert queues.output.empty() or all(
        queues.output.get_nowait()["type"] not in {"turn_completed", "error"}
        for _ in range(queues.output.qsize())
    )
    assert len(store.threads["start_turn"]) == 1  # the second is still waiting
    holder.execute("ROLLBACK")
    holder.close()
    second = await _until(queues, {"turn_completed", "error"})
    ticker.stop()
    await runtime.aclose()
    assert second[-1]["type"] == "turn_completed", second[-1]
    assert store.threads["start_turn"][-1] != threading.get_ident()
    assert [m["content"] for m in store.list_messages("faulty") if m["role"] == "user"] == [
        "first turn",
        "second turn",
    ]
    store.close()


@pytest.mark.asyncio
async def test_a_large_write_goes_to_a_worker_thread(tmp_path: Path) -> None:
    store = ThreadNotingStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=store)
    queues = runtime.start_session(_request("dual_agent"))
    await _until(queues, {"turn_completed", "error"})
    await queues.input.put("long " * 20_000)
    second = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert second[-1]["type"] == "turn_completed", second[-1]
    loop_thread = threading.get_ident()
    assert store.threads["start_turn"][0] == loop_thread
    assert store.threads["start_turn"][-1] != loop_thread  # never tried on the loop
    assert len(store.threads["start_turn"]) == 2
    store.close()


@pytest.mark.asyncio
async def test_a_full_file_fails_the_write_as_disk_full_after_the_loop_tried_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lab.sqlite3"
    SQLiteSessionStore(path).close()
    first_store = ThreadNotingStore(path)
    runtime = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=first_store)
    queues = runtime.start_session(_request("dual_agent"))
    await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    first_store.close()
    SQLiteSessionStore(path).close()  # checkpointed: the file holds everything
    store = ThreadNotingStore(path, max_size_bytes=path.stat().st_size + 8192)
    runtime = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=store)
    queues = runtime.start_session(
        _request("dual_agent").model_copy(update={"user_message": "x" * 30_000})
    )
    first = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    error = first[-1]
    assert error["type"] == "error", error
    assert error["failure_reason"] == "session_persistence_failed:disk_full"
    loop_thread = threading.get_ident()
    first_try, usual = store.threads["start_turn"][-2:]
    assert first_try == loop_thread and usual != loop_thread
    store.close()


@pytest.mark.asyncio
async def test_a_session_with_history_is_read_back_in_a_worker_thread(tmp_path: Path) -> None:
    store = ThreadNotingStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=store)
    queues = runtime.start_session(_request("dual_agent"))
    await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()

    again = DebugRuntime(_model("dual_agent"), registry=_registry([]), session_store=store)
    queues = again.start_session(_request("dual_agent").model_copy(update={"user_message": "more"}))
    second = await _until(queues, {"turn_completed", "error"})
    await again.aclose()
    assert second[-1]["type"] == "turn_completed", second[-1]
    loop_thread = threading.get_ident()
    # new: on the loop; resumed: tried on the loop (declined: it has history), then a worker
    assert store.threads["ensure_session"][0] == loop_thread
    assert store.threads["ensure_session"][1:] == [loop_thread, store.threads["ensure_session"][2]]
    assert store.threads["ensure_session"][2] != loop_thread
    users = [m["content"] for m in store.list_messages("faulty") if m["role"] == "user"]
    assert users == ["first turn", "more"]
    store.close()


@pytest.mark.asyncio
async def test_an_answer_with_many_provider_bytes_is_written_in_a_worker_thread(
    tmp_path: Path,
) -> None:
    chunk = b'{"choices":[{"index":0,"delta":{"content":"word "}}],"pad":"%s"}' % (b"p" * 400)
    count = 800  # ~330 KiB of provider bytes: past NOW_RAW_BYTES, though 4,000 characters
    items = [StreamItem.raw_response_chunk(json.loads(chunk), chunk) for _ in range(count)] + [
        StreamItem.message_delta("word " * count)
    ]
    store = ThreadNotingStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(ScriptedChatClient([items]), session_store=store)
    request = DebugRunRequest(
        session_id="bytes", user_message="hi", chat_agent=AgentParams(model="m")
    )
    queues = runtime.start_session(request)
    first = await _until(queues, {"turn_completed", "error"})
    await runtime.aclose()
    assert first[-1]["type"] == "turn_completed", first[-1]
    loop_thread = threading.get_ident()
    assert store.threads["start_turn"] == [loop_thread]
    assert len(store.threads["append_messages"]) == 1  # never tried on the loop
    assert store.threads["append_messages"][0] != loop_thread
    (response,) = [a for a in store.list_audit_logs("bytes") if a["event"] == "chat_agent_response"]
    assert response["details"]["raw_chunks"] == [json.loads(chunk)] * count
    store.close()
