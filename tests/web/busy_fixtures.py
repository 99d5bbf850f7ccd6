"""Fixtures of the tests of a session another process drives: the scripted model the
holder and the lab share, and the lab's settings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing.sse_server import SSETranscriptServer
from tests.web.busy_holder import holder_answers
from tests.web.web_support import lab_settings

__all__ = ["model", "settings"]


@pytest.fixture
def model() -> Iterator[SSETranscriptServer]:
    with SSETranscriptServer(*holder_answers()) as server:
        yield server


@pytest.fixture
def settings(tmp_path: Path) -> LabSettings:
    return lab_settings(tmp_path / "home")
