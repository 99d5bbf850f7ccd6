"""``agent-lab run`` against an endpoint where nothing listens: one plain error line
naming the host, the port and the likely cause; the libraries' words are in the audit;
the key is nowhere."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from agent_lab.infrastructure.openai_transport import TRANSPORTS
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.cli.cli_helpers import Invoke

SECRET = "sk-test-DO-NOT-PRINT-7373"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_nothing_listening_is_one_plain_line_and_the_detail_is_audited(
    cli_process: Invoke, home: Path, store: Callable[[], SQLiteSessionStore], transport: str
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"

    ran = cli_process(
        "run", "hello", "--base-url", url, "--model", "m", "--transport", transport,
        OPENAI_API_KEY=SECRET,
    )  # fmt: skip

    plain = (
        f"cannot reach the provider at {url}/chat/completions: nothing is listening on "
        f"127.0.0.1:{port} (connection refused): is the server running?"
    )
    assert ran.exit_code == 2
    assert ran.error_lines == [f"error: {plain} (check --base-url or OPENAI_BASE_URL)"]
    opened = store()
    (session,) = opened.list_sessions()
    audits = opened.list_audit_logs(session["id"])
    (closing_audit,) = [a for a in audits if a["details"].get("failure_detail")]
    detail = closing_audit["details"]["failure_detail"]
    assert "Connect call failed" in detail or "All connection attempts failed" in detail
    assert opened.list_turns(session["id"])[0]["failure_message"] == plain
    with closing(sqlite3.connect(home / "agent-lab.sqlite3")) as raw:
        dumped = "\n".join(raw.iterdump())
    assert SECRET not in dumped and SECRET not in ran.stdout + ran.stderr
