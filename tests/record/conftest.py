from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_lab.infrastructure.simulator.provider import (
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)
from agent_lab.testing.sse_server import SSETranscriptServer


@pytest.fixture(autouse=True)
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab-home"
    monkeypatch.setenv("AGENT_LAB_HOME", str(home))
    return home


@pytest.fixture
def simulator() -> Iterator[SimulatedProviderServer]:
    """The simulated provider on 127.0.0.1, answering at once, with a fixed clock."""
    fixed = datetime(2026, 7, 13, 12, 0, tzinfo=UTC)
    provider = SimulatedProvider(LatencyModel.instant(), seed=0, clock=lambda: fixed)
    with SimulatedProviderServer(provider) as running:
        yield running


@pytest.fixture
def sse_server() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer() as server:
        yield server
