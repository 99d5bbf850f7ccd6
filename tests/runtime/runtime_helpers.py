"""Helpers shared by the runtime tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from agent_lab.application.queues import RuntimeQueues


async def collect(stream: AsyncIterator[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message async for message in stream]


async def read_until(
    queues: RuntimeQueues, stop_types: set[str], *, count: int = 1, seconds: float = 5.0
) -> list[dict[str, Any]]:
    """Read outputs until ``count`` messages of ``stop_types`` were seen."""
    outputs: list[dict[str, Any]] = []
    seen = 0
    while seen < count:
        message = await asyncio.wait_for(queues.output.get(), timeout=seconds)
        outputs.append(message)
        if message["type"] in stop_types:
            seen += 1
    return outputs


def business(outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [message for message in outputs if message["type"] != "audit"]


def audits(outputs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [m for m in outputs if m["type"] == "audit" and m["event"] == name]


def deltas(outputs: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in outputs if m["type"] == "message_delta"]
