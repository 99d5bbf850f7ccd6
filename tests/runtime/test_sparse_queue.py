"""``SparseQueue``, the queue of a session's input and events: no deque while it is empty
and nobody waits, and otherwise the behaviour of ``asyncio.Queue``."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from agent_lab.application.compact_queue import CompactQueue, SparseQueue
from agent_lab.application.queues import RuntimeQueues


def _deques(queue: SparseQueue[int]) -> int:
    return sum(isinstance(part, deque) for part in (queue._queue, queue._getters))


@pytest.mark.asyncio
async def test_an_empty_sparse_queue_nobody_waits_on_holds_no_deque() -> None:
    queue: SparseQueue[int] = SparseQueue()
    assert _deques(queue) == 0 and queue.empty() and queue.qsize() == 0

    queue.put_nowait(1)
    queue.put_nowait(2)
    assert queue.qsize() == 2 and _deques(queue) == 1
    assert queue.get_nowait() == 1
    assert await queue.get() == 2
    assert _deques(queue) == 0

    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    assert _deques(queue) == 1  # the waiter's deque
    await queue.put(3)
    assert await getter == 3
    assert _deques(queue) == 0 and queue.empty()


@pytest.mark.asyncio
async def test_a_sparse_queue_hands_items_to_waiting_getters_in_order() -> None:
    queue: SparseQueue[int] = SparseQueue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await asyncio.sleep(0)
    for item in (1, 2, 3):
        queue.put_nowait(item)
    assert await asyncio.gather(*getters) == [1, 2, 3]
    assert _deques(queue) == 0


@pytest.mark.asyncio
async def test_a_woken_getter_whose_item_was_taken_waits_again() -> None:
    queue: SparseQueue[int] = SparseQueue()
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(1)  # wakes the getter ...
    assert queue.get_nowait() == 1  # ... but the item is taken before it runs
    await asyncio.sleep(0)
    assert not getter.done()
    queue.put_nowait(2)
    assert await asyncio.wait_for(getter, 1) == 2


@pytest.mark.asyncio
async def test_a_cancelled_getter_leaves_no_waiter_and_passes_its_wakeup_on() -> None:
    queue: SparseQueue[int] = SparseQueue()
    cancelled = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert _deques(queue) == 0

    first, second = asyncio.create_task(queue.get()), asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(1)  # wakes ``first``, which is cancelled before it takes the item
    first.cancel()
    assert await asyncio.wait_for(second, 1) == 1
    with pytest.raises(asyncio.CancelledError):
        await first
    assert _deques(queue) == 0


@pytest.mark.asyncio
async def test_a_sparse_queue_counts_unfinished_items_for_join() -> None:
    queue: SparseQueue[int] = SparseQueue()
    queue.put_nowait(1)
    joined = asyncio.create_task(queue.join())
    await asyncio.sleep(0)
    assert not joined.done()
    await queue.get()
    queue.task_done()
    await asyncio.wait_for(joined, 1)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", [CompactQueue, SparseQueue])
async def test_a_bounded_queue_makes_put_wait_for_room(kind: type[CompactQueue[int]]) -> None:
    queue = kind(maxsize=1)
    queue.put_nowait(1)
    with pytest.raises(asyncio.QueueFull):
        queue.put_nowait(2)
    putter = asyncio.create_task(queue.put(2))
    await asyncio.sleep(0)
    assert not putter.done()
    assert await queue.get() == 1
    await asyncio.wait_for(putter, 1)
    assert queue.get_nowait() == 2 and queue.empty()


def test_a_runtime_takes_its_input_and_events_on_sparse_queues() -> None:
    queues = RuntimeQueues()
    assert isinstance(queues.input, SparseQueue)
    assert isinstance(queues.events, SparseQueue)
    assert not isinstance(queues.output, SparseQueue)  # a stream of deltas: no own get()


@pytest.mark.asyncio
async def test_a_compact_queue_completes_an_item_when_it_is_taken() -> None:
    queue: CompactQueue[dict[str, int]] = CompactQueue()
    first, second, dropped = {"n": 1}, {"n": 2}, {"n": 3}
    queue.complete_when_taken(first, lambda: first.update(done=1))
    queue.put_nowait(first)
    queue.complete_when_taken(second, lambda: second.update(done=2))
    await queue.put(second)
    queue.complete_when_taken(dropped, lambda: dropped.update(done=3))
    queue.forget_completion(dropped)  # it was never put
    assert "done" not in first and "done" not in second  # nothing done while queued

    assert queue.get_nowait() == {"n": 1, "done": 1}
    assert await queue.get() == {"n": 2, "done": 2}
    queue.put_nowait(dropped)
    assert queue.get_nowait() == {"n": 3}


@pytest.mark.asyncio
async def test_a_sparse_queue_completes_an_item_when_it_is_taken() -> None:
    queue: SparseQueue[dict[str, int]] = SparseQueue()
    item = {"n": 1}
    queue.complete_when_taken(item, lambda: item.update(done=1))
    getter = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(item)
    assert await getter == {"n": 1, "done": 1}


@pytest.mark.asyncio
async def test_an_item_whose_completion_fails_still_goes_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    queue: CompactQueue[dict[str, int]] = CompactQueue()
    item = {"n": 1}

    def fail() -> None:
        raise ValueError("boom")

    queue.complete_when_taken(item, fail)
    queue.put_nowait(item)
    with caplog.at_level("ERROR", logger="agent_lab.application.runtime"):
        assert await queue.get() == {"n": 1}
    assert "completing a queued output failed" in caplog.text


@pytest.mark.asyncio
async def test_a_compact_queue_waits_and_wakes_its_getters_as_asyncio_queue_does() -> None:
    """``CompactQueue`` writes ``put``/``get`` out itself: the same hand-over, in order,
    for a getter robbed of its item and for a woken getter that is cancelled."""
    queue: CompactQueue[int] = CompactQueue()
    with pytest.raises(asyncio.QueueEmpty):
        queue.get_nowait()
    robbed = asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    queue.put_nowait(1)  # wakes the getter ...
    assert queue.get_nowait() == 1  # ... but the item is taken before it runs
    await asyncio.sleep(0)
    assert not robbed.done()
    await queue.put(2)
    assert await asyncio.wait_for(robbed, 1) == 2

    first, second = asyncio.create_task(queue.get()), asyncio.create_task(queue.get())
    await asyncio.sleep(0)
    await queue.put(3)  # wakes ``first``, which is cancelled before it takes the item
    first.cancel()
    assert await asyncio.wait_for(second, 1) == 3
    with pytest.raises(asyncio.CancelledError):
        await first
    assert queue.empty() and not queue._getters
    assert queue.qsize() == 0 and queue._unfinished_tasks == 3
