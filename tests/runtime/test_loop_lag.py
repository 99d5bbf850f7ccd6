"""The loop-lag monitor: one heartbeat per event loop while runtimes run; stalls show
in ``DebugRuntime.stats()`` and in each round's ``chat_round_finished.loop_lag_ms``."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from runtime_helpers import audits, read_until

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.loop_lag import monitor_for
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolRegistry
from agent_lab.domain.messages import StreamItem
from agent_lab.testing import FunctionChatClient, RecordedCall

BLOCK_SECONDS = 0.08


def _request() -> DebugRunRequest:
    return DebugRunRequest(user_message="", chat_agent=AgentParams(model="m"))


async def _blocking_model(call: RecordedCall) -> AsyncIterator[StreamItem]:
    await asyncio.sleep(0.03)  # let the heartbeat's next beat fall due
    time.sleep(BLOCK_SECONDS)  # noqa: ASYNC251 - holds the loop, as a blocking call would
    yield StreamItem.message_delta("Sorry, that took a while.")


@pytest.mark.asyncio
async def test_a_blocked_loop_shows_in_stats_and_in_the_round_audit() -> None:
    runtime = DebugRuntime(FunctionChatClient(_blocking_model), registry=ToolRegistry())
    queues = runtime.start_session(_request())
    await queues.input.put("Hello")
    outputs = await read_until(queues, {"turn_completed"})

    (finished,) = audits(outputs, "chat_round_finished")
    lag = runtime.stats()["loop_lag"]
    # The block outlasts the 10 ms beat interval by far, so a beat fell due during it
    # and ran at least (block - interval) late: a lower bound, not a speed target.
    assert finished["details"]["loop_lag_ms"] >= (BLOCK_SECONDS - 0.02) * 1000
    assert lag["max_ms"] >= (BLOCK_SECONDS - 0.02) * 1000
    assert lag["stalls_over_20ms"] >= 1
    await queues.input.put(None)
    await read_until(queues, {"done"})
    await runtime.aclose()


@pytest.mark.asyncio
async def test_the_heartbeat_runs_only_while_a_runtime_runs() -> None:
    monitor = monitor_for()
    runtime = DebugRuntime(FunctionChatClient(_blocking_model), registry=ToolRegistry())
    queues = runtime.start_session(_request())
    await asyncio.sleep(0.05)
    beats = monitor.stats().beats
    assert beats > 0
    await queues.input.put(None)
    await read_until(queues, {"done"})
    await runtime.aclose()
    await asyncio.sleep(0)
    idle = monitor.stats().beats
    await asyncio.sleep(0.05)
    assert monitor.stats().beats == idle
