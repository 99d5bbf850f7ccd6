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
