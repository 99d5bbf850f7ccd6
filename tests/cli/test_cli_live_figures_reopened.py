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
from tests.cli.test_cli_turn_tokens import delta, usage

PRICES = '[prices."m-1"]\ninput_per_mtok = 2\noutput_per_mtok = 8\n'
SEARCH = {"query": "sqlite wal"}


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


def cached_usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    figures = usage(prompt, completion)
    figures["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return figures


def volume_call(call_id: str, value: int) -> dict[str, Any]:
    arguments = json.dumps({"mode": "absolute", "value": value})
    function = {"name": "device__volume__adjust", "arguments": arguments}
    call = {"index": 0, "id": call_id, "type": "function", "function": function}
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


CHIP = re.compile(r"\[(round \d+ · TTFT \d+ ms · \d+ ms) · (\d+) chat tok \((\d+) cached\)")


def test_sessions_show_gives_each_round_the_figures_its_live_chip_gave(
    cli_process: Invoke, home: Path
) -> None:
    answers = [
        ScriptedResponse.sse(
            delta("Setting it. "), volume_call("c-1", 500), cached_usage(90, 9, 64)
        ),
        ScriptedResponse.sse(delta("That volume is out of range."), cached_usage(140, 7, 128)),
    ]
    stdout = run_live(cli_process, home, *answers, chat=False)
    shown = reopened(cli_process, home, session_of(stdout)).splitlines()

    chips = CHIP.findall(stdout)
    assert [int(tokens) for _, tokens, _ in chips] == [99, 147]
    for header, tokens, cached in chips:  # the round's visible TTFT and wall time
        at = shown.index(header)
        call = next(line for line in shown[at:] if " call chat:" in line)
        assert f"· {tokens} tok ({cached} cached) ·" in call
    # the failed tool, with the reason its record keeps
    assert "  ⚡ device.volume.adjust c-1 failed (tool_failed:invalid_arguments)" in shown


def test_sessions_show_says_a_model_call_failed_and_why(cli_process: Invoke, home: Path) -> None:
    refused = ScriptedResponse.error(400, {"error": {"message": "context too long"}})
    config = home / "prices.toml"
    config.write_text(PRICES)
    with SSETranscriptServer(refused) as server:
        run = cli_process("run", "Hi", "--base-url", server.base_url, "--model", "m-1")
    assert run.exit_code == 1
    shown = reopened(cli_process, home, session_of(run.stdout))

    [line] = [line for line in shown.splitlines() if "chat call chat:1:1" in line]
    assert "· failed (provider_error:http_400) ·" in line
    assert "round 1\n" in shown  # no figure was measured for the round
