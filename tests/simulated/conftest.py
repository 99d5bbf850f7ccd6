"""Fixtures: a real simulated provider on 127.0.0.1 and an HTTP client pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest
import pytest_asyncio

from agent_lab.infrastructure.simulator.provider import (
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)

FIXED_NOW = datetime(2026, 7, 13, 12, 0, tzinfo=UTC)
"""A Monday; ``tomorrow`` is 2026-07-14."""


def fixed_clock() -> datetime:
    return FIXED_NOW


@pytest.fixture
def clock() -> Callable[[], datetime]:
    """Always ``FIXED_NOW``."""
    return fixed_clock


@pytest.fixture
def provider() -> SimulatedProvider:
    return SimulatedProvider(LatencyModel.instant(), seed=0, clock=fixed_clock)


@pytest.fixture
def server(provider: SimulatedProvider) -> Iterator[SimulatedProviderServer]:
    with SimulatedProviderServer(provider) as running:
        yield running


@pytest_asyncio.fixture
async def http(server: SimulatedProviderServer) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
        yield client
