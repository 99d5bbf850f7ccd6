"""Pieces of the concurrency benchmark: stamped chunks, a recording output queue, and
the in-process simulated model.

A chunk's emission time travels in its JSON as ``"t"`` (``time.perf_counter()``, shared
by all processes on Linux). ``StampedClient`` wraps the real chat client and notes, for
each ``message_delta`` it passes on, the stamp of the raw chunk it came from;
``StampedOutput.put`` pops that stamp when the runtime puts the delta on the output
queue and records the delay.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from agent_lab.application.compact_queue import CompactQueue
from agent_lab.application.contracts import AgentParams
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream
from agent_lab.infrastructure.simulator.phrasing import plain_answer
from agent_lab.infrastructure.simulator.planner import Reply
from agent_lab.infrastructure.simulator.provider import LatencyModel
from agent_lab.infrastructure.simulator.wire import DONE, CompletionMeta, frames, sse


class StampedOutput(CompactQueue[Any]):
    """An output queue that records, per delta, the seconds since its chunk was emitted.

    It is the runtime's default output queue (``CompactQueue``) with ``put`` stamped, so
    a runtime session is measured as a server runs it (``DebugRuntime`` without injected
    queues); the floor puts its deltas on the same kind of queue.
    """

    def __init__(self, stamps: deque[float], delays: list[float]) -> None:
        super().__init__()
        self.stamps = stamps
        self.delays = delays

    async def put(self, item: Any) -> None:
        if item["type"] == "message_delta" and self.stamps:
            self.delays.append(time.perf_counter() - self.stamps.popleft())
        await super().put(item)


class StampedClient:
    """Passes a chat client's items through, queueing the stamp behind every delta."""

    def __init__(self, inner: Any, stamps: deque[float]) -> None:
        self.inner = inner
        self.stamps = stamps

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        stamp: float | None = None
        async for item in self.inner.stream_chat(messages, tools, params, tool_choice):
            if item.kind == "raw_chunk" and item.raw_chunk is not None:
                stamp = item.raw_chunk.get("t")
            elif item.kind == "message_delta" and stamp is not None:
                self.stamps.append(stamp)
            yield item


class InProcessSimClient:
    """The simulated model without HTTP: its frames, paced by its ``LatencyModel``.

    Each call schedules its frames with ``loop.call_at`` (one timer at a time, frames
    due together go out together, as the provider does); each frame is stamped, handed
    to the real chunk parser through a queue, and so crosses the event loop once, as a
    socket read would. Encoded frames are cached per answer text, so the simulated
    model itself costs a timer callback per chunk.
    """

    def __init__(self, latency: LatencyModel | None = None) -> None:
        self.latency = latency or LatencyModel()
        self.calls = 0
        self._encoded: dict[str, list[tuple[bytes, int]]] = {}

    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        self.calls += 1
        key = f"{self.calls}:{messages[-1].content}"
        body = self._frames(plain_answer(messages[-1].content, random.Random(key)))
        delays = self.latency.delays(key, [tokens for _, tokens in body])
        pipe: asyncio.Queue[bytes] = asyncio.Queue()
        emitter = _Emitter(pipe, [data for data, _ in body], delays)
        parser = ChunkStream(text_events=not tools, new_call_id=lambda: "call_sim")
        try:
            while (data := await pipe.get()) != DONE:
                for item in parser.feed(data):
                    yield item
            for item in parser.finish():
                yield item
        finally:
            emitter.cancel()

    def _frames(self, text: str) -> list[tuple[bytes, int]]:
        if text not in self._encoded:
            meta = CompletionMeta(id="chatcmpl-sim", created=0, model="agent-lab-sim")
            planned = frames(Reply(text), meta)
            self._encoded[text] = [(sse(f.chunk)[len(_OPEN) :], f.tokens) for f in planned]
        return self._encoded[text]


_OPEN = b"data: {"


class _Emitter:
    """Puts each frame on ``pipe`` when it is due, stamped with ``perf_counter``."""

    def __init__(self, pipe: asyncio.Queue[bytes], body: list[bytes], delays: list[float]) -> None:
        self.loop = asyncio.get_running_loop()
        self.pipe, self.body, self.delays = pipe, body, delays
        self.index, self.deadline = 0, self.loop.time()
        self.handle: asyncio.Handle | None = None
        self._schedule()

    def _schedule(self) -> None:
        self.deadline += self.delays[self.index]
        self.handle = self.loop.call_at(self.deadline, self._emit)

    def _emit(self) -> None:
        now = self.loop.time()
        while True:
            stamp = b'data: {"t":%.7f,' % time.perf_counter()
            self.pipe.put_nowait(stamp + self.body[self.index])
            self.index += 1
            if self.index == len(self.body):
                self.pipe.put_nowait(DONE)
                return
            if self.deadline + self.delays[self.index] > now:
                self._schedule()
                return
            self.deadline += self.delays[self.index]

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
