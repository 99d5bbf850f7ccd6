"""The example in docs/testing.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


@pytest.mark.asyncio
async def test_testing_doc_example_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LAB_HOME", str(tmp_path))
    code = re.search(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), str(DOC), "exec"), namespace)
    await namespace["test_my_tool_is_called_and_answered"]()  # type: ignore[operator]


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
