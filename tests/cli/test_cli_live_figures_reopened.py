"""What ``agent-lab run`` and ``chat`` print live about a turn is what ``sessions show``
prints once the session is reopened: the turn's cost line and its token figure, also
when some of its calls reported no usage (real subprocesses, a real SSE server, a real
SQLite file)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke

PRICES = '[prices."m-1"]\ninput_per_mtok = 2\noutput_per_mtok = 8\n'
SEARCH = {"query": "sqlite wal"}


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion}}


def search_call(call_id: str) -> dict[str, Any]:
    function = {"name": "knowledge__web__search", "arguments": json.dumps(SEARCH)}
    call = {"index": 0, "id": call_id, "type": "function", "function": function}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


def half_reported() -> list[ScriptedResponse]:
    """The chat call (100+10, reported) searches; its follow-up reports no usage."""
    return [
        ScriptedResponse.sse(delta("Looking. "), search_call("call-1"), usage(100, 10)),
        ScriptedResponse.sse(delta("Nothing found.")),
    ]


def session_of(stdout: str) -> str:
    found = re.search(r"session ([0-9a-f]{32})", stdout)
    assert found is not None, stdout
    return found.group(1)


def run_live(cli_process: Invoke, home: Path, *answers: ScriptedResponse, chat: bool) -> str:
    config = home / "prices.toml"
    config.write_text(PRICES)
    common = ["--mode", "chat_agent_tools", "--model", "m-1", "--config", str(config)]
    with SSETranscriptServer(*answers) as server:
        if chat:
            args = ["chat", *common, "--base-url", server.base_url]
            done = cli_process(*args, input="Search for sqlite wal\n")
        else:
            args = ["run", "Search for sqlite wal", *common, "--base-url", server.base_url]
            done = cli_process(*args)
        assert server.request_count == len(answers)
    assert done.exit_code == 0, done.stderr
    return done.stdout


def reopened(cli_process: Invoke, home: Path, session_id: str) -> str:
    shown = cli_process("sessions", "show", session_id, "--config", str(home / "prices.toml"))
    assert shown.exit_code == 0, shown.stderr
    return shown.stdout


def cost_line(stdout: str, prefix: str) -> str:
    [line] = [line.strip() for line in stdout.splitlines() if line.strip().startswith(prefix)]
    return line.removeprefix(prefix).strip()


def stored_turn_tokens(shown: str) -> str:
    row = next(line for line in shown.splitlines() if re.match(r"│\s+1 │", line))
    return row.strip("│ ").split("│")[-1].strip()


def test_run_prints_the_turn_cost_sessions_show_prints(cli_process: Invoke, home: Path) -> None:
    stdout = run_live(cli_process, home, *half_reported(), chat=False)
    shown = reopened(cli_process, home, session_of(stdout))

    live = cost_line(stdout, "cost:")
    assert live == cost_line(shown, "turn cost:")
    # the priced chat call is known, the follow-up without usage is not
    assert live == "≥ $0.000280 (1 call unpriced) — chat unknown"


def test_chat_prints_the_turn_cost_sessions_show_prints(cli_process: Invoke, home: Path) -> None:
    stdout = run_live(cli_process, home, *half_reported(), chat=True)
    shown = reopened(cli_process, home, session_of(stdout))

    assert cost_line(stdout, "cost:") == cost_line(shown, "turn cost:")


def test_run_turn_line_says_a_call_reported_no_usage(cli_process: Invoke, home: Path) -> None:
    stdout = run_live(cli_process, home, *half_reported(), chat=False)
    shown = reopened(cli_process, home, session_of(stdout))

    assert "  turn · 110 tok (0 cached), 1 call(s) not reported" in stdout
    assert stored_turn_tokens(shown) == "110 (0), 1 call(s) not reported"


def test_chat_turn_line_says_a_call_reported_no_usage(cli_process: Invoke, home: Path) -> None:
    stdout = run_live(cli_process, home, *half_reported(), chat=True)

    [turn_line] = [line for line in stdout.splitlines() if "✓ turn 1" in line]
    assert turn_line.endswith("· 110 tok (0 cached), 1 call(s) not reported")
