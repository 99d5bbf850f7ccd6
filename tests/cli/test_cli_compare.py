"""``agent-lab compare``: both modes, N times, a table and a written report."""

from __future__ import annotations

import json
from datetime import datetime, tzinfo
from pathlib import Path

import pytest

from agent_lab.interfaces.cli import compare_command
from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke

SCENARIO = """
name = "mini"
description = "Two turns."
turns = ["Turn the volume down to 10.", { user = "Take a note that the tests passed." }]
tools = ["device.volume.adjust", "handoff_note", "session.terminate"]

[overrides.chat_agent_tools]
max_event_loops = 2
system_prompts = ["You are terse."]

[simulated]
ttft_ms = 1000
tokens_per_second = 5
"""


def test_compare_bundled_demo_writes_markdown_and_html_with_a_plot(
    cli: Invoke, tmp_path: Path
) -> None:
    out = tmp_path / "reports"

    result = cli("compare", "demo", "--repeat", "2", "--out", str(out))

    assert result.exit_code == 0, result.stderr
    for label in ("visible TTFT", "provider TTFT", "turn wall time", "fallbacks", "tools"):
        assert label in result.stdout
    [markdown] = out.glob("compare-demo-*.md")
    [page] = out.glob("compare-demo-*.html")
    assert "| visible TTFT (ms) |" in markdown.read_text()
    assert "-latency.svg)" in markdown.read_text()
    html = page.read_text()
    assert "<svg" in html and "<table>" in html
    assert html.count("<li><code>") == 4  # 2 repetitions x 2 modes


def test_compare_a_scenario_file_with_overrides_writes_next_to_the_database(
    cli: Invoke, tmp_path: Path, home: Path
) -> None:
    scenario = tmp_path / "mini.toml"
    scenario.write_text(SCENARIO, encoding="utf-8")

    result = cli("compare", str(scenario), "--fast")

    assert result.exit_code == 0, result.stderr
    assert list((home / "reports").glob("compare-mini-*.html"))


def test_compare_with_bad_toml_is_one_usage_line(cli: Invoke, tmp_path: Path) -> None:
    scenario = tmp_path / "broken.toml"
    scenario.write_text("turns = [\n", encoding="utf-8")

    result = cli("compare", str(scenario))

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "not valid TOML" in result.stderr


def test_compare_with_an_unknown_scenario_lists_the_bundled_ones(cli: Invoke) -> None:
    result = cli("compare", "no-such-scenario")

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "demo" in result.stderr


def test_compare_with_an_unknown_tool_is_a_usage_error(cli: Invoke, tmp_path: Path) -> None:
    scenario = tmp_path / "tools.toml"
    scenario.write_text('turns = ["hi"]\ntools = ["no.such.tool"]\n', encoding="utf-8")

    result = cli("compare", str(scenario))

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "no.such.tool" in result.stderr


def test_compare_with_invalid_fields_is_a_usage_error(cli: Invoke, tmp_path: Path) -> None:
    scenario = tmp_path / "fields.toml"
    scenario.write_text('turns = []\nmodes = ["triple"]\n', encoding="utf-8")

    result = cli("compare", str(scenario))

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and "turns" in result.stderr


def test_compare_in_a_real_process(cli_process: Invoke, tmp_path: Path) -> None:
    result = cli_process("compare", "multi-tool", "--out", str(tmp_path))

    assert result.exit_code == 0, result.stderr
    assert list(tmp_path.glob("*.html")) and list(tmp_path.glob("*.svg"))


def test_compare_json_and_tagged_session_titles(cli: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "reports"

    result = cli("compare", "demo", "--repeat", "2", "--out", str(out), "--json")

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)  # nothing but the JSON document on stdout
    assert document["scenario"] == "demo" and document["repeat"] == 2
    for mode in ("dual_agent", "chat_agent_tools"):
        ttft = document["stats"][mode]["visible TTFT (ms)"]
        assert set(ttft) == {"median", "p90", "count", "unknown"} and ttft["count"] == 8
    assert len(document["sessions"]) == 4
    assert Path(document["report"]["markdown"]).is_file()
    listed = cli("sessions", "list", "--jsonl")
    titles = sorted(json.loads(line)["title"] for line in listed.stdout.splitlines())
    assert [title.split("]")[0] + "]" for title in titles] == [
        "[compare demo #1]",
        "[compare demo #1]",
        "[compare demo #2]",
        "[compare demo #2]",
    ]
    table = cli("sessions", "list")
    assert table.stdout.count("[compare demo #2]") == 2  # shown as text, not as markup
    ids = {session["session_id"] for session in document["sessions"]}
    assert ids == {json.loads(line)["id"] for line in listed.stdout.splitlines()}
    replayed = cli("replay", next(iter(ids)), "--speed", "0", "--quiet")
    assert replayed.exit_code == 0, replayed.stdout


def test_compare_reports_median_cost_per_turn_and_flags_the_cold_first_call(
    cli_process: Invoke, home: Path, tmp_path: Path
) -> None:
    config = home / "prices.toml"
    config.write_text('[prices."agent-lab-sim"]\ninput_per_mtok = 1\noutput_per_mtok = 4\n')

    priced = cli_process(
        "compare",
        "demo",
        "--fast",
        "--json",
        "--repeat",
        "2",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "priced"),
    )
    unpriced = cli_process(
        "compare", "demo", "--fast", "--json", "--out", str(tmp_path / "unpriced")
    )

    assert priced.exit_code == 0, priced.stderr
    document = json.loads(priced.stdout)
    for mode in ("dual_agent", "chat_agent_tools"):
        cost = document["stats"][mode]["cost / turn (USD)"]
        assert cost["median"] > 0 and cost["unknown"] == 0
        assert "provider TTFT, cold left out (ms)" in document["stats"][mode]
    sessions = document["sessions"]
    assert sessions[0]["cold_turns"] == [1]  # the process's first model call
    assert all(s["cold_turns"] == [] for s in sessions[1:])
    assert all(c is not None and c > 0 for s in sessions for c in s["cost_usd_per_turn"])
    markdown = Path(document["report"]["markdown"]).read_text()
    assert "cold: turn 1 made the process's first model call" in markdown
    assert "| cost / turn (USD) | $" in markdown

    assert unpriced.exit_code == 0, unpriced.stderr
    stats = json.loads(unpriced.stdout)["stats"]["dual_agent"]["cost / turn (USD)"]
    assert stats["median"] is None and stats["unknown"] > 0  # unknown, never $0
    report = Path(json.loads(unpriced.stdout)["report"]["markdown"]).read_text()
    assert "| cost / turn (USD) | unknown | unknown |" in report


def test_campaigns_started_in_the_same_second_keep_their_own_reports(
    cli: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two campaigns into one folder within one second (``--out`` shared, names by the
    second): each gets its own three files, and each report lists its own sessions."""

    class SameSecond(datetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> SameSecond:
            return cls(2026, 7, 14, 9, 30, 0)

    monkeypatch.setattr(compare_command, "datetime", SameSecond)
    out = tmp_path / "reports"
    documents = []
    for _ in range(2):
        result = cli("compare", "demo", "--fast", "--out", str(out), "--json")
        assert result.exit_code == 0, result.stderr
        documents.append(json.loads(result.stdout))

    reports = [document["report"] for document in documents]
    assert len({report["markdown"] for report in reports}) == 2
    assert len({report["html"] for report in reports}) == 2
    assert len(list(out.iterdir())) == 6
    for document in documents:
        markdown = Path(document["report"]["markdown"]).read_text(encoding="utf-8")
        for session in document["sessions"]:
            assert session["session_id"] in markdown
        others = [d for d in documents if d is not document][0]["sessions"]
        assert not any(session["session_id"] in markdown for session in others)


@pytest.mark.parametrize(
    ("status", "code", "line"),
    [
        (500, 1, "internal boom"),
        (401, 2, "the provider rejected the request (HTTP 401); check your API key"),
    ],
)
def test_a_campaign_whose_turns_fail_says_why_on_stderr_and_in_the_table(
    cli: Invoke, tmp_path: Path, status: int, code: int, line: str
) -> None:
    body = b'{"error": {"message": "internal boom"}}'
    failing = ScriptedResponse(status=status, body=body, content_type="application/json")
    config = tmp_path / "lab.toml"
    config.write_text("max_retries = 0\n", encoding="utf-8")
    with SSETranscriptServer(fallback=failing) as server:
        result = cli(
            "compare", "demo", "--fast", "--base-url", server.base_url, "--model", "m",
            "--api-key", "sk-test", "--config", str(config),
        )  # fmt: skip

    assert result.exit_code == code, result.stderr
    [error] = result.error_lines  # one reason, said once for the whole campaign
    assert error.startswith("error: 8 of 8 turns failed: ") and line in error
    assert "failed turns" in result.stdout and result.stdout.count("4 of 4") == 2


def test_both_modes_of_the_demo_run_the_same_tool_calls_with_the_same_arguments(
    cli: Invoke, tmp_path: Path
) -> None:
    """The side by side compares the modes, not different work: the dual-mode resolvers
    give the arguments the tools-mode model wrote (the search query included)."""
    result = cli("compare", "demo", "--fast", "--out", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr

    calls: dict[str, list[dict[str, object]]] = {}
    for session in json.loads(result.stdout)["sessions"]:
        exported = json.loads(cli("sessions", "export", session["session_id"]).stdout)
        events = [event for record in exported["records"] for event in record["events"]]
        calls[session["mode"]] = [event["arguments"] for event in events]
    assert {"query": "SQLite WAL"} in calls["dual_agent"]
    assert calls["dual_agent"] == calls["chat_agent_tools"]
