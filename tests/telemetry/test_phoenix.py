"""Proof in a real trace viewer: turns exported live to Arize Phoenix read back through
Phoenix's own REST API, with the tree, the GenAI attributes and the stored tokens."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.telemetry.export import session_spans
from agent_lab.infrastructure.telemetry.spans import SpanData
from tests.telemetry.phoenix_server import trace_spans
from tests.telemetry.telemetry_support import PROMPT

pytestmark = [pytest.mark.phoenix, pytest.mark.timeout(600)]  # Phoenix starts in ~30 s


def _run(home: Path, mode: str, phoenix: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin",
        "AGENT_LAB_HOME": str(home),
        "AGENT_LAB_SIM_FAST": "1",
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "OTEL_EXPORTER_OTLP_ENDPOINT": phoenix,
        "OTEL_METRICS_EXPORTER": "none",
    }
    done = subprocess.run(
        [sys.executable, "-m", "agent_lab", "run", PROMPT, "--mode", mode, "--json", "--otel"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first = json.loads(done.stdout.splitlines()[0])
    return str(first["session_id"])


def _ns(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 1_000_000) * 1_000


def _hex(value: int | None, width: int) -> str | None:
    return None if value is None else f"{value:0{width}x}"


def _tree(spans: list[SpanData]) -> set[tuple[str, str | None, str, int, int]]:
    return {
        (_hex(s.span_id, 16) or "", _hex(s.parent_id, 16), s.name, s.start_ns, s.end_ns)
        for s in spans
    }


def _phoenix_tree(spans: list[dict[str, Any]]) -> set[tuple[str, str | None, str, int, int]]:
    return {
        (
            s["context"]["span_id"],
            s["parent_id"],
            s["name"],
            _ns(s["start_time"]),
            _ns(s["end_time"]),
        )
        for s in spans
    }


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_phoenix_shows_the_turn_with_its_tree_genai_attributes_and_tokens(
    phoenix: str, tmp_path: Path, mode: str
) -> None:
    session_id = _run(tmp_path, mode, phoenix)
    with SQLiteSessionStore(tmp_path / "agent-lab.sqlite3") as store:
        expected = session_spans(store, session_id)
        calls = store.usage_summary(session_id)["calls"]

    shown = trace_spans(phoenix, f"{expected[0].trace_id:032x}", len(expected))

    assert _phoenix_tree(shown) == _tree(expected)
    by_name: dict[str, list[dict[str, Any]]] = {}
    for span in shown:
        by_name.setdefault(span["name"], []).append(span)
    assert by_name["turn 1"][0]["span_kind"] == "AGENT"
    assert by_name["turn 1"][0]["attributes"]["session.id"] == session_id
    models = {
        s["attributes"]["agent_lab.call.metric_key"]: s for s in by_name["chat agent-lab-sim"]
    }
    stored = {c["metric_key"]: c for c in calls if c["call_kind"] != "tool_execution"}
    assert set(models) == set(stored)
    for key, call in stored.items():
        span = models[key]
        attrs = span["attributes"]
        assert span["span_kind"] == "LLM"
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.provider.name"] == "openai"
        assert attrs["gen_ai.request.model"] == attrs["gen_ai.response.model"] == "agent-lab-sim"
        assert attrs["gen_ai.usage.input_tokens"] == call["prompt_tokens"]
        assert attrs["gen_ai.usage.output_tokens"] == call["completion_tokens"]
        assert attrs["llm.token_count.prompt"] == call["prompt_tokens"]
        assert attrs["llm.token_count.completion"] == call["completion_tokens"]
        assert attrs["gen_ai.response.time_to_first_chunk"] == call["ttft_ms"] / 1000
        assert attrs["gen_ai.response.finish_reasons"]
        assert attrs["agent_lab.mode"] == mode
    tools = [s for s in shown if s["name"].startswith("execute_tool")]
    tool_calls = {c["event_id"]: c for c in calls if c["call_kind"] == "tool_execution"}
    assert {s["attributes"]["gen_ai.tool.call.id"] for s in tools} == set(tool_calls)
    for span in tools:
        assert span["span_kind"] == "TOOL"
        call = tool_calls[span["attributes"]["gen_ai.tool.call.id"]]
        assert span["attributes"]["gen_ai.tool.name"] == call["event_name"]
        assert (
            _ns(span["end_time"]) - _ns(span["start_time"]) == call["tool_latency_ms"] * 1_000_000
        )
    if mode == "dual_agent":
        assert by_name["invoke_agent event_agent"][0]["span_kind"] == "AGENT"
        roles = {models[k]["attributes"]["agent_lab.call.role"] for k in models}
        assert roles >= {"chat", "follow_up"} and roles & {
            "argument_fallback",
            "argument_generation",
        }
