"""What a session leaves behind and costs in memory: no reference cycles once it has
ended (so reference counting frees it, not a full garbage collection), and queues that
allocate their waiter bookkeeping only when it is needed."""

from __future__ import annotations

import asyncio
import gc
import threading
import tracemalloc
import weakref

import pytest
from runtime_helpers import read_until

from agent_lab.application import _persistence
from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.testing import InMemorySessionStore, ScriptedChatClient, text


def _request() -> DebugRunRequest:
    return DebugRunRequest(user_message="", chat_agent=AgentParams(model="m"))


@pytest.mark.asyncio
async def test_an_ended_session_is_freed_without_the_garbage_collector() -> None:
    runtime = DebugRuntime(ScriptedChatClient([text("Hi.")]), registry=ToolRegistry())
    queues = runtime.start_session(_request())
    await queues.input.put("Hello")
    await read_until(queues, {"turn_completed"})
    await queues.input.put(None)
    await read_until(queues, {"done"})
    await runtime.aclose()
    runner = weakref.ref(runtime._runner)  # type: ignore[arg-type]
    gc.disable()
    try:
        del runtime, queues
        assert runner() is None, "the session's objects are kept alive by a reference cycle"
    finally:
        gc.enable()


@pytest.mark.asyncio
async def test_compact_queue_allocates_less_than_asyncio_queue() -> None:
    def traced(factory: type[asyncio.Queue[int]]) -> int:
        gc.collect()
        tracemalloc.start()
        try:
            queues = [factory() for _ in range(200)]
            for queue in queues:
                queue.put_nowait(1)
                queue.get_nowait()
            return tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()

    # at least 1 KiB a queue less (the putters deque and the join() event's waiters)
    assert traced(CompactQueue) + 200 * 1024 < traced(asyncio.Queue)


@pytest.mark.asyncio
async def test_compact_queue_behaves_like_asyncio_queue() -> None:
    queue: CompactQueue[int] = CompactQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    await queue.put(1)
    assert await getter == 1

    cancelled = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    queue.put_nowait(2)
    assert await queue.get() == 2

    queue.task_done()  # the two items taken so far
    queue.task_done()
    queue.put_nowait(3)
    joined = asyncio.create_task(queue.join())
    await asyncio.sleep(0)
    assert not joined.done()
    queue.get_nowait()
    queue.task_done()
    await asyncio.wait_for(joined, 1)
    with pytest.raises(ValueError):
        queue.task_done()


@pytest.mark.asyncio
async def test_a_bounded_compact_queue_makes_put_wait_for_room() -> None:
    queue: CompactQueue[int] = CompactQueue(maxsize=1)
    queue.put_nowait(1)
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait(2)
    putter = asyncio.create_task(queue.put(2))
    await asyncio.sleep(0)
    assert not putter.done()
    assert queue.get_nowait() == 1
    await asyncio.wait_for(putter, 1)
    assert queue.get_nowait() == 2 and queue.empty()


class _CountingStore(InMemorySessionStore):
    def __init__(self) -> None:
        super().__init__()
        self.renewals = 0
        self.renewed_thrice = threading.Event()

    def renew_claim(self, session_id: str, token: str, *, lease_seconds: float = 30.0) -> None:
        self.renewals += 1
        if self.renewals >= 3:
            self.renewed_thrice.set()
        super().renew_claim(session_id, token, lease_seconds=lease_seconds)


@pytest.mark.asyncio
async def test_an_idle_session_keeps_renewing_its_claim_until_it_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_persistence, "LEASE_SECONDS", 0.06)  # a renewal every 20 ms
    store = _CountingStore()
    runtime = DebugRuntime(ScriptedChatClient([]), registry=ToolRegistry(), session_store=store)
    queues = runtime.start_session(_request().model_copy(update={"session_id": "s1"}))
    await read_until(queues, {"session_started"})
    # The session waits for input meanwhile; its lease is renewed (10 s: a hang guard).
    assert await asyncio.to_thread(store.renewed_thrice.wait, 10)
    await queues.input.put(None)
    await read_until(queues, {"done"})
    await runtime.aclose()
    after_close = store.renewals
    await asyncio.sleep(0.1)

    assert store.renewals == after_close
    assert store.get_session("s1") is not None
    claim = store.claim_session("s1", "another runtime")  # released at close: free now
    assert claim
