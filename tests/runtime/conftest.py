from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab-home"
    monkeypatch.setenv("AGENT_LAB_HOME", str(home))
    return home
