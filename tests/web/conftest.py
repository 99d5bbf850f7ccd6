"""Every web lab test keeps its data under its own temporary AGENT_LAB_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_lab.interfaces.settings import LabSettings
from tests.web.web_support import lab_settings


@pytest.fixture(autouse=True)
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab-home"
    monkeypatch.setenv("AGENT_LAB_HOME", str(home))
    monkeypatch.delenv("AGENT_LAB_SEARCH_URL", raising=False)
    monkeypatch.delenv("AGENT_LAB_CORPUS", raising=False)
    return home


@pytest.fixture
def settings(lab_home: Path) -> LabSettings:
    return lab_settings(lab_home)
