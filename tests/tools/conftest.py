"""Every tools test keeps its data under its own temporary AGENT_LAB_HOME."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def agent_lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh data directory; search and corpus overrides from the environment cleared."""
    home = tmp_path / "agent-lab-home"
    monkeypatch.setenv("AGENT_LAB_HOME", str(home))
    monkeypatch.delenv("AGENT_LAB_SEARCH_URL", raising=False)
    monkeypatch.delenv("AGENT_LAB_CORPUS", raising=False)
    return home
