"""Fixtures: a real simulated provider on 127.0.0.1, a client with an API key, a store."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.simulator.provider import (
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.telemetry.phoenix_server import phoenix_server
from tests.telemetry.telemetry_support import API_KEY


@pytest.fixture
def server() -> Iterator[SimulatedProviderServer]:
    with SimulatedProviderServer(SimulatedProvider(LatencyModel.instant(), seed=0)) as running:
        yield running


@pytest_asyncio.fixture
async def client(server: SimulatedProviderServer) -> AsyncIterator[OpenAICompatibleChatClient]:
    async with OpenAICompatibleChatClient(server.base_url, api_key=API_KEY, max_retries=0) as c:
        yield c


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteSessionStore]:
    with SQLiteSessionStore(tmp_path / "sessions.sqlite3") as opened:
        yield opened


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Phoenix server for every ``phoenix`` test of the run (it starts in ~30 s)."""
    with phoenix_server(tmp_path_factory.mktemp("phoenix")) as url:
        yield url
