"""The examples in docs/testing.md and docs/tools.md run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


TOOLS_DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


@pytest.mark.asyncio
async def test_tools_doc_example_runs_a_custom_tool_through_the_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENT_LAB_HOME", raising=False)
    blocks = re.findall(r"```python\n(.*?)```", TOOLS_DOC.read_text(), re.S)
    example = next(block for block in blocks if "DebugRuntime(client, registry=registry)" in block)
    namespace: dict[str, object] = {}
    exec(compile(example, str(TOOLS_DOC), "exec"), namespace)

    outputs = await namespace["main"](tmp_path / "home")  # type: ignore[operator]

    results = [m["message"] for m in outputs if m["type"] == "tool_result"]
    assert [r["tool_call_id"] for r in results] == ["call-1"]
    assert '"status": "shipped"' in results[0]["content"]
    assert "Order A-17 has shipped." in [m.get("content") for m in outputs]
    assert outputs[-1] == {"type": "done"}
