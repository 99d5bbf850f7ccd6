"""Smoke test of the benchmark suite: every benchmark's quick mode runs and yields numbers.

No timing is asserted (CI machines vary); this only keeps the benchmarks from rotting.
Run it alone with ``.venv/bin/python -m pytest tests/bench -q``.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # ``bench`` lives at the project root, next to ``src``

from bench.run_all import BENCHMARKS, runner  # noqa: E402


@pytest.mark.parametrize("name", list(BENCHMARKS))
def test_quick_mode_produces_numbers(name: str) -> None:
    report = runner(name)(True)

    assert report.markdown.strip()
    assert report.figures, f"{name} reported no figures"
    for key, value in report.figures.items():
        assert math.isfinite(value), f"{name}: {key} = {value}"
    for check in report.checks:
        assert check.value not in ("", "nan"), check


def test_the_documented_command_writes_a_report(tmp_path: Path) -> None:
    output = tmp_path / "RESULTS.md"
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--only", "turn", "--output", str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert completed.returncode == 0, completed.stderr
    text = output.read_text(encoding="utf-8")
    assert "## Machine" in text and "## Targets" in text and "Fixed cost per turn" in text


def test_a_partial_run_is_merged_into_the_results_file() -> None:
    from bench._merge import merge

    old = "\n".join(
        [
            "# Benchmark results",
            "## Machine",
            "- Date: old",
            "## Targets (1 of 2 met)",
            "| benchmark | metric | measured | target | verdict |",
            "|---|---|---|---|---:|",
            "| 1 delta | µs | 1 | ≤ 2 | met |",
            "| 3 turn | ms | 9 | ≤ 1 | **missed** |",
            "## 1. Delta",
            "old delta section",
            "## 3. Turn",
            "old turn section",
        ]
    )
    new = "\n".join(
        [
            "# Benchmark results",
            "## Machine",
            "- Date: new",
            "## Targets (1 of 1 met)",
            "| benchmark | metric | measured | target | verdict |",
            "|---|---|---|---|---:|",
            "| 3 turn | ms | 0.5 | ≤ 1 | met |",
            "## 3. Turn",
            "new turn section",
        ]
    )

    merged = merge(old, new)

    assert "old delta section" in merged and "new turn section" in merged
    assert "old turn section" not in merged and "- Date: new" in merged
    assert "| 1 delta | µs | 1 | ≤ 2 | met |" in merged
    assert "| 3 turn | ms | 0.5 | ≤ 1 | met |" in merged and "**missed**" not in merged
    assert "## Targets (2 of 2 met)" in merged
    assert merged.index("## 1. Delta") < merged.index("## 3. Turn")
