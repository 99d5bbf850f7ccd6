"""``agent-lab sessions show``: turns with tool calls, failures and cost; ``--explain``."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke, Result

SCHEDULE = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then look up SQLite WAL"
)


def _session_of(stdout: str) -> str:
    return str(json.loads(stdout.splitlines()[0])["session_id"])


@pytest.fixture
def dual_session(cli_process: Invoke) -> str:
    result = cli_process("run", SCHEDULE, "--json", "--mode", "dual_agent")
    assert result.exit_code == 0, result.stderr
    return _session_of(result.stdout)


def test_show_lists_each_tool_call_with_arguments_status_and_result(
    cli_process: Invoke,
) -> None:
    run = cli_process("run", "Set the volume to 30", "--json", "--mode", "chat_agent_tools")
    assert run.exit_code == 0, run.stderr

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    assert "⚡ device.volume.adjust" in out and "succeeded" in out
    assert '"value": 30' in out and "(resolved by model)" in out  # the model's arguments
    assert 'result: {"tool": "device.volume.adjust"' in out
    assert "policy silent_success" in out


def test_show_says_how_dual_agent_arguments_were_resolved(
    cli_process: Invoke, dual_session: str
) -> None:
    shown = cli_process("sessions", "show", dual_session)

    assert shown.exit_code == 0, shown.stderr
    assert "⚡ calendar.schedule.create" in shown.stdout
    assert "resolved by argument generation: generation:1:1:" in shown.stdout
    assert "argument generation call generation:1:1:" in shown.stdout


def test_show_names_the_reason_and_message_of_a_failed_turn(cli_process: Invoke) -> None:
    with SSETranscriptServer() as server:
        server.add(ScriptedResponse.error(400, {"error": {"message": "model is sleeping"}}))
        run = cli_process("run", "Hello", "--json", "--base-url", server.base_url, "--model", "m-1")
    session_id = _session_of(run.stdout)

    shown = cli_process("sessions", "show", session_id)

    assert run.exit_code != 0
    assert shown.exit_code == 0, shown.stderr
    assert "turn 1 · failed" in shown.stdout
    assert "✗ provider_error" in shown.stdout and "model is sleeping" in shown.stdout


def test_explain_names_an_answer_shown_but_cut_off_before_it_was_stored(
    cli_process: Invoke,
) -> None:
    half = {"choices": [{"index": 0, "delta": {"content": "The bridge was "}}]}
    with SSETranscriptServer() as server:
        server.add(ScriptedResponse.sse(half, done=False, abort=True))
        run = cli_process("run", "Hello", "--json", "--base-url", server.base_url, "--model", "m-1")
    session_id = _session_of(run.stdout)

    shown = cli_process("sessions", "show", session_id)
    explained = cli_process("sessions", "show", session_id, "--explain")

    assert run.exit_code != 0
    assert "turn 1 · failed" in shown.stdout and "The bridge was" in shown.stdout
    assert explained.exit_code == 0, explained.stderr
    assert "shown but not stored (round 1): The bridge was" in explained.stdout


def test_cost_is_unknown_without_a_price_never_zero(cli_process: Invoke, dual_session: str) -> None:
    shown = cli_process("sessions", "show", dual_session)

    assert "unknown (unpriced model)" in shown.stdout
    assert "session cost: unknown (3 calls unpriced)" in shown.stdout
    assert "$0" not in shown.stdout


def test_cost_from_a_config_price_per_call_turn_and_session_split_by_role(
    cli_process: Invoke, home: Path
) -> None:
    config = home / "lab.toml"
    config.write_text(
        '[agent_lab]\nmode = "dual_agent"\n\n'
        '[prices."agent-lab-sim"]\ninput_per_mtok = 1000\noutput_per_mtok = 2000\n'
    )
    run = cli_process("run", SCHEDULE, "--json", "--config", str(config))
    assert run.exit_code == 0, run.stderr
    session_id = _session_of(run.stdout)
    exported = json.loads(
        cli_process("sessions", "export", session_id, "--config", str(config)).stdout
    )
    [record] = exported["records"]
    calls = {call["metric_key"]: call for call in record["model_calls"]}
    chat = calls["chat:1:1"]
    expected = chat["usage"]["prompt_tokens"] * 1000 + chat["usage"]["completion_tokens"] * 2000
    assert float(chat["cost"]["amount_usd"]) == pytest.approx(expected / 1_000_000)

    shown = cli_process("sessions", "show", session_id, "--config", str(config))

    assert shown.exit_code == 0, shown.stderr
    assert "unknown" not in shown.stdout.split("turns\n")[0]
    assert "argument generation $" in shown.stdout and "chat $" in shown.stdout
    assert "session cost: $" in shown.stdout
    # The turn record splits by every role; only the roles that made calls cost anything,
    # and only those are named in the shown split.
    by_role = record["cost"]["by_role"]
    spent = {role for role, amount in by_role.items() if amount is not None and float(amount)}
    assert spent >= {"chat", "argument_generation"} and "argument_fallback" not in spent
    assert "argument fallback" not in shown.stdout


def test_explain_shows_three_columns_and_names_the_differences(
    cli_process: Invoke, dual_session: str
) -> None:
    explained = cli_process("sessions", "show", dual_session, "--explain")

    assert explained.exit_code == 0, explained.stderr
    out = explained.stdout
    for column in ("what the model saw", "what is stored", "what the user was shown"):
        assert column in out
    assert "chat_agent_request (round 1)" in out and "event_agent_request" in out
    assert "batch round 1 committed" in out
    # the event agent's results note goes to the model but is not in the transcript
    assert "≠ sent to the model but not in the transcript (event_agent)" in out


def test_show_marks_the_calls_of_a_cut_off_batch_uncertain(cli_process: Invoke, home: Path) -> None:
    import asyncio

    from tests.record.effect_lab import batch_answer, cancel_mid_batch
    from tests.record.record_support import answer

    with SSETranscriptServer() as server:
        server.add(batch_answer("dual_agent"), answer("The door may be locked."))
        _, session_id = asyncio.run(
            cancel_mid_batch(server.base_url, home / "agent-lab.sqlite3", "dual_agent")
        )

    shown = cli_process("sessions", "show", session_id)

    assert shown.exit_code == 0, shown.stderr
    out = shown.stdout
    assert "turn 1 · cancelled" in out
    assert "⚡ door.lock" in out
    assert "uncertain: outcome unknown — check before repeating" in out
    assert "uncertain: not executed — the interruption came before it started" in out
    assert "⚠ recovered door.lock" in out and "(turn 1 round 1)" in out


def _turns_table_rows(out: str) -> dict[int, list[str]]:
    """The cells of each row of the ``turns`` table, by turn index."""
    rows: dict[int, list[str]] = {}
    for line in out.split("\nturns\n", 1)[1].splitlines():
        if line.startswith("└"):
            break  # the end of the table
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if line.startswith("│") and cells[0].isdigit():
            rows[int(cells[0])] = cells
    return rows


def test_show_lists_a_turn_killed_mid_batch_as_failed_in_its_turns_table(
    cli_process: Invoke, home: Path
) -> None:
    import asyncio

    from tests.durability.interrupted_support import kill_mid_turn, restore

    database = home / "agent-lab.sqlite3"
    kill_mid_turn(database, "dual_agent", "killed", "mid_batch")
    asyncio.run(restore(database, "dual_agent", "killed", "did it go through?"))

    shown = cli_process("sessions", "show", "killed")

    assert shown.exit_code == 0, shown.stderr
    assert "turn 1 · failed" in shown.stdout
    assert "✗ interrupted: the runtime running this turn stopped" in shown.stdout
    rows = _turns_table_rows(shown.stdout)
    assert (rows[1][1], rows[2][1]) == ("failed", "completed")


def _cost_parts(line: str) -> tuple[Decimal, dict[str, Decimal]]:
    """``$1.58 — chat $1.28 · argument generation $0.299`` as its total and its parts."""
    total, _, split = line.partition(" — ")
    parts: dict[str, Decimal] = {}
    for part in split.split(" · "):
        name, _, amount = part.rpartition(" ")
        parts[name] = Decimal(amount.removeprefix("$"))
    return Decimal(total.removeprefix("$")), parts


def test_turn_cost_parts_add_up_to_the_total_as_in_run(cli_process: Invoke, home: Path) -> None:
    config = home / "lab.toml"
    config.write_text('[prices."agent-lab-sim"]\ninput_per_mtok = 1000\noutput_per_mtok = 2000\n')
    run = cli_process("run", SCHEDULE, "--mode", "dual_agent", "--config", str(config))
    assert run.exit_code == 0, run.stderr
    session_id = run.stdout.split("session ", 1)[1].split()[0]
    [run_cost] = [
        line.split("cost: ", 1)[1] for line in run.stdout.splitlines() if "cost: " in line
    ]

    shown = cli_process("sessions", "show", session_id, "--config", str(config))

    assert shown.exit_code == 0, shown.stderr
    assert "follow-up call chat:1:2" in shown.stdout  # the chat agent spoke again after tools
    [turn_cost] = [
        line.split("turn cost: ", 1)[1]
        for line in shown.stdout.splitlines()
        if "turn cost: " in line
    ]
    assert turn_cost == run_cost  # the same parts, named alike, as `run` printed
    total, parts = _cost_parts(turn_cost)
    assert set(parts) == {"chat", "argument generation"}  # chat = first calls and follow-ups
    assert sum(parts.values()) == pytest.approx(total, rel=Decimal("0.01"))  # 3 digits shown
    exported = json.loads(
        cli_process("sessions", "export", session_id, "--config", str(config)).stdout
    )
    by_role = {
        role: Decimal(v or 0) for role, v in exported["records"][0]["cost"]["by_role"].items()
    }
    exact = by_role["chat"] + by_role["argument_generation"] + by_role["argument_fallback"]
    assert exact == Decimal(exported["records"][0]["cost"]["total_usd"])


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_show_gives_the_arguments_text_of_a_call_that_was_not_valid_json(
    cli_process: Invoke,
) -> None:
    broken = {"index": 0, "id": "call_1", "type": "function"}
    broken["function"] = {"name": "device__volume__adjust", "arguments": '{"mode": "abs'}
    with SSETranscriptServer() as server:
        server.add(
            ScriptedResponse.sse(
                _chunk({"role": "assistant", "content": "Ok."}),
                _chunk({"tool_calls": [broken]}),
                _chunk({}, "tool_calls"),
            ),
            ScriptedResponse.sse(_chunk({"content": "Done."})),
        )
        run = cli_process(
            "run", "Set the volume", "--json", "--mode", "chat_agent_tools",
            "--base-url", server.base_url, "--model", "m-1",
        )  # fmt: skip
    assert run.exit_code == 0, run.stderr

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert 'arguments: {"mode": "abs (not valid JSON, as the model wrote them)' in shown.stdout
    assert "arguments: {} (resolved by model)" not in shown.stdout


def test_show_separates_the_chat_text_from_a_template_confirmation(cli_process: Invoke) -> None:
    run = cli_process(
        "run", "Schedule a review with Dana tomorrow at 2pm Europe/Berlin", "--json",
        "--mode", "chat_agent_tools",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    [said] = [line for line in shown.stdout.splitlines() if "assistant›" in line]
    assert "Dana. Scheduled Review with Dana for " in said
    assert ".Scheduled" not in said


def _forced_call(arguments: str) -> ScriptedResponse:
    """A forced argument call for ``device.volume.adjust`` with ``arguments`` as written."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "device__volume__adjust", "arguments": arguments}
    return ScriptedResponse.sse(_chunk({"tool_calls": [call]}), _chunk({}, "tool_calls"))


def _dual_volume_run(
    cli_process: Invoke, forced: ScriptedResponse, *flags: str
) -> tuple[Result, list[Any]]:
    """``run "Set it."`` in dual_agent: the chat agent names the volume tool, whose
    resolver finds no level, so ``forced`` answers the argument call; then a follow-up.
    The run and the request bodies the provider got."""
    block = f"{EVENT_BLOCK_START}device.volume.adjust{EVENT_BLOCK_END}"
    with SSETranscriptServer() as server:
        server.add(
            ScriptedResponse.sse(_chunk({"role": "assistant", "content": f"Ok. {block}"})),
            forced,
            ScriptedResponse.sse(_chunk({"content": "That did not work."}, "stop")),
        )
        run = cli_process(
            "run", "Set it.", "--json", "--mode", "dual_agent", "--tool", "device.volume.adjust",
            "--base-url", server.base_url, "--model", "m-1", *flags,
        )  # fmt: skip
        bodies = [request.json() for request in server.requests]
    assert run.exit_code == 0, run.stderr
    return run, bodies


def test_show_gives_the_text_a_dual_agent_argument_call_wrote_when_not_valid_json(
    cli_process: Invoke,
) -> None:
    """The volume resolver finds no level in "Set it."; the forced fallback call writes
    broken JSON: the tool fails saying so, and ``show`` gives the text as written."""

    run, _ = _dual_volume_run(cli_process, _forced_call('{"mode": "abs'))

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert 'arguments: {"mode": "abs (not valid JSON, as the model wrote them)' in shown.stdout
    assert "invalid arguments: not valid JSON" in shown.stdout
    assert "is a required property" not in shown.stdout


@pytest.mark.parametrize(("configured", "sent"), [(None, 0.0), (1.0, 1.0)])
def test_the_event_agents_argument_calls_use_the_configured_event_temperature(
    cli_process: Invoke, tmp_path: Path, configured: float | None, sent: float
) -> None:
    """Reasoning models (OpenAI's o-series) accept only their default temperature: the
    event agent's forced calls take ``event_temperature``, the chat calls ``temperature``."""
    config = tmp_path / "lab.toml"
    lines = ["temperature = 1.0"] + ([f"event_temperature = {configured}"] if configured else [])
    config.write_text("\n".join(lines) + "\n")
    valid = '{"mode": "absolute", "value": 20}'
    _, bodies = _dual_volume_run(cli_process, _forced_call(valid), "--config", str(config))

    forced_calls = [body for body in bodies if body.get("tool_choice")]
    assert [body["temperature"] for body in forced_calls] == [sent]
    chat_calls = [body for body in bodies if not body.get("tool_choice")]
    assert {body["temperature"] for body in chat_calls} == {1.0}


def test_show_lists_a_call_of_a_round_that_failed_as_not_run(cli_process: Invoke) -> None:
    """The tool call streamed whole (and was shown live), then the stream went bad: the
    round failed before its batch, and ``show`` says the call never ran."""
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "handoff_note", "arguments": '{"message": "cheese is ready"}'}
    with SSETranscriptServer() as server:
        server.add(
            ScriptedResponse.sse(
                _chunk({"role": "assistant", "content": "Noting."}),
                _chunk({"tool_calls": [call]}),
                _chunk({}, "tool_calls"),
                "{oops",
                done=False,
            )
        )
        run = cli_process(
            "run", "Please note: cheese is ready", "--json", "--mode", "chat_agent_tools",
            "--tool", "handoff_note", "--base-url", server.base_url, "--model", "m-1",
        )  # fmt: skip
    assert run.exit_code == 1, run.stderr

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert "⚡ handoff_note call_1 not run" in shown.stdout


def test_show_says_a_calls_provider_ttft_spans_its_retries(cli_process: Invoke) -> None:
    """The first attempt gets HTTP 500, the SDK retries: the call's provider TTFT runs
    from the first request, so ``show`` says it covers two attempts."""
    failed = ScriptedResponse.error(500, {"error": {"message": "overloaded"}})
    answered = ScriptedResponse.sse(_chunk({"role": "assistant", "content": "Hi."}, "stop"))
    with SSETranscriptServer(failed, answered) as server:
        run = cli_process(
            "run", "Hello", "--json", "--mode", "chat_agent_tools",
            "--base-url", server.base_url, "--model", "m-1",
        )  # fmt: skip
    assert run.exit_code == 0, run.stderr

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert re.search(
        r"chat call chat:1:1 · m-1 · provider TTFT \d+ ms over 2 attempts", shown.stdout
    )


def test_show_says_an_event_whose_argument_call_failed_got_none_and_never_ran(
    cli_process: Invoke,
) -> None:
    refused = ScriptedResponse.error(400, {"error": {"message": "tool_choice is not supported"}})
    run, _ = _dual_volume_run(cli_process, refused)

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert "arguments: none (argument generation failed: fallback:1:1:evt_" in shown.stdout
    assert re.search(r"policy \w+ · not run", shown.stdout)
    assert "resolved by argument" not in shown.stdout


def test_show_says_a_call_whose_tool_never_ran_was_not_run_instead_of_a_latency(
    cli_process: Invoke,
) -> None:
    """The forced argument call writes broken JSON: the volume tool is never called, so
    the call has no latency to show."""
    run, _ = _dual_volume_run(cli_process, _forced_call('{"mode": "abs'))

    shown = cli_process("sessions", "show", _session_of(run.stdout))

    assert shown.exit_code == 0, shown.stderr
    assert "policy silent_success · not run" in shown.stdout
    assert not re.search(r"policy silent_success · \d+ ms", shown.stdout)
