"""The example in docs/testing.md runs as written, under pytest in strict asyncio mode."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def test_testing_doc_example_passes_under_pytest_strict_mode(tmp_path: Path) -> None:
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None
    (tmp_path / "test_example.py").write_text(code.group(1), encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\nasyncio_mode = strict\n", encoding="utf-8")
    env = {**os.environ, "AGENT_LAB_HOME": str(tmp_path / "home")}

    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "1 passed" in completed.stdout
