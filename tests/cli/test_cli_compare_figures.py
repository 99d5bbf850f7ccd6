"""``agent-lab compare`` figures against a scripted SSE provider: unreported usage,
unpriced turns, failed turns that showed text and cold turns read as the record has
them, in the table and in ``--json`` alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke, Result

SCENARIO = """
name = "plain"
description = "Turns answered with text only, no tools."
turns = [{turns}]
"""

PRICES = '[prices."m-1"]\ninput_per_mtok = 1\noutput_per_mtok = 4\n'
"""110 tokens (100 in, 10 out) cost $0.00014."""

MODES = ("dual_agent", "chat_agent_tools")


def delta(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion}
    return {"choices": [], "usage": {**counts, "total_tokens": prompt + completion}}


REPORTED = ScriptedResponse.sse(delta("Hi there."), usage(100, 10))
NO_USAGE = ScriptedResponse.sse(delta("Hi again."))
"""A provider that sends no usage at all for this call."""
CUT = ScriptedResponse.sse(delta("Hello there, "), done=False, abort=True)
"""Text is shown, then the stream breaks off: the turn fails."""
REJECTED = ScriptedResponse.error(400, {"error": {"message": "bad request"}})
"""The turn fails before any text (HTTP 400 is not retried)."""


def compare(
    cli: Invoke, home: Path, answers: list[ScriptedResponse], *flags: str, turns: int = 2
) -> Result:
    """``agent-lab compare`` of a ``turns``-turn scenario against ``answers`` (one per
    call, sessions in the campaign's order), priced by ``PRICES``."""
    scenario = home / "plain.toml"
    names = ", ".join(f'"Turn {index}."' for index in range(1, turns + 1))
    scenario.write_text(SCENARIO.format(turns=names), encoding="utf-8")
    config = home / "prices.toml"
    config.write_text(PRICES, encoding="utf-8")
    with SSETranscriptServer(*answers) as server:
        return cli(
            "compare",
            str(scenario),
            *("--base-url", server.base_url, "--model", "m-1", "--config", str(config)),
            *("--out", str(home / "reports"), *flags),
        )


def row(table: str, label: str) -> list[str]:
    """The cells of one table row, after the metric name."""
    line = next(line for line in table.splitlines() if line.startswith(f"│ {label} "))
    return [cell.strip() for cell in line.strip("│").split("│")[1:]]


def test_token_totals_that_miss_unreported_calls_read_as_lower_bounds(
    cli: Invoke, home: Path
) -> None:
    table = compare(cli, home, [REPORTED, NO_USAGE] * 2)
    document = compare(cli, home, [REPORTED, NO_USAGE] * 4, "--json", "--repeat", "2")

    assert table.exit_code == 0, table.stderr
    assert row(table.stdout, "tokens / session") == ["≥ 110 / ≥ 110 (1 call not reported)"] * 2
    assert row(table.stdout, "cached tokens / session") == ["≥ 0 / ≥ 0 (1 call not reported)"] * 2
    assert row(table.stdout, "model calls / session") == ["2 / 2"] * 2
    assert document.exit_code == 0, document.stderr
    for mode in MODES:
        stats = json.loads(document.stdout)["stats"][mode]
        assert stats["tokens / session"] == {
            "median": 110.0,
            "p90": 110.0,
            "count": 0,  # no session's total is exact
            "unknown": 2,
            "lower_bound": True,
            "unreported_calls": 2,
        }
        assert stats["cached tokens / session"]["lower_bound"] is True
        assert stats["model calls / session"]["unknown"] == 0
        assert "lower_bound" not in stats["model calls / session"]


def test_token_totals_read_as_exact_when_every_call_reported_usage(cli: Invoke, home: Path) -> None:
    table = compare(cli, home, [REPORTED] * 4)
    document = compare(cli, home, [REPORTED] * 4, "--json")

    assert row(table.stdout, "tokens / session") == ["220 / 220"] * 2
    for mode in MODES:
        tokens = json.loads(document.stdout)["stats"][mode]["tokens / session"]
        assert tokens == {
            "median": 220.0,
            "p90": 220.0,
            "count": 1,
            "unknown": 0,
            "lower_bound": False,
            "unreported_calls": 0,
        }


def test_token_totals_of_sessions_that_reported_nothing_read_not_reported(
    cli: Invoke, home: Path
) -> None:
    table = compare(cli, home, [NO_USAGE] * 4)
    document = compare(cli, home, [NO_USAGE] * 4, "--json")

    assert row(table.stdout, "tokens / session") == ["not reported"] * 2
    tokens = json.loads(document.stdout)["stats"]["dual_agent"]["tokens / session"]
    assert tokens["median"] is None and tokens["unknown"] == 1
    assert tokens["unreported_calls"] == 2


def test_cost_per_turn_is_unknown_in_the_json_when_the_table_says_unknown(
    cli: Invoke, home: Path
) -> None:
    table = compare(cli, home, [REPORTED, NO_USAGE] * 2)
    document = compare(cli, home, [REPORTED, NO_USAGE] * 2, "--json")
    priced = compare(cli, home, [REPORTED] * 4, "--json")

    assert row(table.stdout, "cost / turn (USD)") == ["unknown", "unknown"]
    parsed = json.loads(document.stdout)
    for mode in MODES:
        cost = parsed["stats"][mode]["cost / turn (USD)"]
        assert cost == {"median": None, "p90": None, "count": 1, "unknown": 1}
    assert [s["cost_usd_per_turn"] for s in parsed["sessions"]] == [[0.00014, None]] * 2
    markdown = Path(parsed["report"]["markdown"]).read_text(encoding="utf-8")
    assert "| cost / turn (USD) | unknown | unknown |" in markdown
    for mode in MODES:  # every turn priced: a dollar median, as the table shows
        cost = json.loads(priced.stdout)["stats"][mode]["cost / turn (USD)"]
        assert cost == {"median": 0.00014, "p90": 0.00014, "count": 2, "unknown": 0}


def test_failed_turns_that_showed_text_count_in_visible_ttft(
    cli: Invoke, home: Path, tmp_path: Path
) -> None:
    answers = [REPORTED, CUT, REJECTED] * 2
    result = compare(cli, home, answers, "--json", turns=3)

    assert result.exit_code == 1, result.stderr
    document = json.loads(result.stdout)
    for mode in MODES:
        ttft = document["stats"][mode]["visible TTFT (ms)"]
        # turn 2 showed text before it failed; turn 3 failed before any text
        assert (ttft["count"], ttft["unknown"]) == (2, 1)
        assert document["stats"][mode]["turn wall time (ms)"]["count"] == 3
    markdown = Path(document["report"]["markdown"]).read_text(encoding="utf-8")
    assert "| failed turns | 2 of 3 | 2 of 3 |" in markdown
    for session in document["sessions"]:  # the record has the same turns with text
        out = tmp_path / f"{session['session_id']}.json"
        exported = cli("sessions", "export", session["session_id"], "--out", str(out))
        assert exported.exit_code == 0, exported.stderr
        records = json.loads(out.read_text(encoding="utf-8"))["records"]
        shown = [any(r["visible_ttft_ms"] is not None for r in t["rounds"]) for t in records]
        assert [t["status"] for t in records] == ["completed", "failed", "failed"]
        assert shown == [True, True, False]


def test_cold_left_out_rows_leave_out_the_same_scenario_turn_in_every_mode(
    cli: Invoke, home: Path
) -> None:
    table = compare(cli, home, [REPORTED] * 8, "--repeat", "2")
    result = compare(cli, home, [REPORTED] * 8, "--repeat", "2", "--json")

    document = json.loads(result.stdout)
    assert document["sessions"][0]["cold_turns"] == [1]  # dual_agent's first session only
    for mode in MODES:  # 2 repetitions x 2 turns, less turn 1 of repetition 1 in both
        stats = document["stats"][mode]
        assert stats["visible TTFT (ms)"]["count"] == 4
        for label in ("visible TTFT, cold left out (ms)", "provider TTFT, cold left out (ms)"):
            assert stats[label]["count"] == 3, (mode, label)
    assert document["cold_left_out"] == [{"repetition": 1, "turn_index": 1}]
    note = 'The "cold left out" rows leave out turn 1 of repetition #1, in every mode.'
    assert table.exit_code == 0, table.stderr
    assert note in table.stdout
    markdown = Path(document["report"]["markdown"]).read_text(encoding="utf-8")
    page = Path(document["report"]["html"]).read_text(encoding="utf-8")
    assert note in markdown
    assert "leave out turn 1 of repetition #1, in every mode." in page
