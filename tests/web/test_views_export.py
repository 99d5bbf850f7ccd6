"""One export schema: the CLI and the web lab export the same session identically."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.web.web_support import lab_settings, served

SCRUBBED = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENT_LAB_MODEL", "AGENT_LAB_DB")


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update(AGENT_LAB_HOME=str(home), AGENT_LAB_SIM_FAST="1", XDG_CONFIG_HOME=str(home / "xdg"))
    return subprocess.run(
        [sys.executable, "-m", "agent_lab.interfaces.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_cli_and_web_exports_are_byte_for_byte_the_same(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = _cli(home, "run", "Set the volume to 30 and look up SQLite WAL", "--json")
    assert first.returncode == 0, first.stderr
    session_id = json.loads(first.stdout.splitlines()[0])["session_id"]
    second = _cli(
        home,
        "run",
        "Now schedule lunch tomorrow at noon",
        "--session",
        session_id,
        "--mode",
        "chat_agent_tools",
    )
    assert second.returncode == 0, second.stderr

    cli_json = _cli(home, "sessions", "export", session_id).stdout
    cli_jsonl = _cli(home, "sessions", "export", session_id, "--format", "jsonl").stdout
    with served(lab_settings(home)) as srv:
        web_json = httpx.get(f"{srv.base_url}/api/sessions/{session_id}/export").text
        web_jsonl = httpx.get(
            f"{srv.base_url}/api/sessions/{session_id}/export", params={"format": "jsonl"}
        ).text

    assert json.loads(cli_json) == json.loads(web_json)  # key for key
    assert cli_json == web_json  # and byte for byte
    assert cli_jsonl == web_jsonl
    document = json.loads(web_json)
    assert sorted(document) == [
        "cost",
        "export_version",
        "messages",
        "record_version",
        "records",
        "session",
        "turns",
    ]
    assert {json.loads(line)["kind"] for line in web_jsonl.splitlines()} == {
        "session",
        "turn",
        "message",
        "record",
        "cost",
    }
    assert [r["turn_index"] for r in document["records"]] == [1, 2]
