"""Every command line the product prints as advice works when run as written.

The hints run in a real shell (bash) with the installed ``agent-lab`` on ``PATH`` and
none of the caller's endpoint settings. Left out: ``agent-lab serve`` (a server that
would bind the fixed port 8765) and the hints of ``agent-lab local serve`` (they need
the ``local`` extra; tests/local_llm covers that server).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from cli_helpers import process_env

BIN = Path(sys.executable).parent


def shell(
    command: str, home: Path, cwd: Path, **env: str | None
) -> subprocess.CompletedProcess[str]:
    environment = process_env(home, **env)
    environment["PATH"] = f"{BIN}{os.pathsep}{environment.get('PATH', '')}"
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=120,
    )


def test_the_simulators_quick_start_works_as_printed(home: Path, tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_lab", "simulate", "--port", "0", "--ttft-ms", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    try:
        assert process.stdout is not None
        printed = []
        while not printed or "Ctrl-C" not in printed[-1]:
            printed.append(process.stdout.readline())
        hints = [line.strip() for line in printed if line.startswith("    ")]
        assert any(line.startswith("export ") for line in hints), printed
        assert hints[-1] == "agent-lab run 'hello'"

        result = shell("\n".join(hints), home, tmp_path, AGENT_LAB_SIM_FAST=None)

        assert result.returncode == 0, result.stdout + result.stderr
        base_url = printed[0].split("listening on ")[1].strip()
        assert f"model agent-lab-sim at {base_url}" in result.stdout  # not the built-in one
        assert "assistant›" in result.stdout
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)


def test_the_demos_next_steps_work_as_printed(home: Path, tmp_path: Path) -> None:
    other_home = tmp_path / "elsewhere"
    demo = shell(f"agent-lab demo --fast --home {other_home}", home, tmp_path)
    assert demo.returncode == 0, demo.stderr
    session_id = re.findall(r"session ([0-9a-f]{32})", demo.stdout)[0]
    steps = demo.stdout.split("Open them with:")[1].splitlines()
    commands = [line.split("#")[0].strip() for line in steps if line.strip()]
    assert [c.split()[1] for c in commands] == ["sessions", "replay", "serve"]

    for command in commands[:2]:
        written = command.replace(" ID", f" {session_id}")
        result = shell(written, home, tmp_path)
        assert result.returncode == 0, (written, result.stdout, result.stderr)
        assert session_id in result.stdout


def test_the_hint_of_an_unknown_session_error_works_as_printed(home: Path, tmp_path: Path) -> None:
    result = shell("agent-lab sessions show nope", home, tmp_path)
    assert result.returncode == 2
    suggested = re.findall(r"`([^`]+)`", result.stderr)

    assert suggested == ["agent-lab sessions list"]
    assert shell(suggested[0], home, tmp_path).returncode == 0
