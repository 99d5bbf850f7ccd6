"""The CLI: ``--otel`` sends each turn over OTLP/HTTP, ``sessions export --format otlp``
sends the same spans later, and without the extra nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.telemetry.otlp_receiver import otlp_receiver

PROMPT = "Set the volume to 30 and look up SQLite WAL"


def agent_lab(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "OPENAI_", "AGENT_LAB_"))
    }
    environ.update(AGENT_LAB_HOME=str(home), AGENT_LAB_SIM_FAST="1", NO_COLOR="1")
    environ.update(XDG_CONFIG_HOME=str(home / "xdg"), **env)
    return subprocess.run(
        [sys.executable, "-m", "agent_lab", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )


def _session_id(stdout: str) -> str:
    return next(
        str(json.loads(line)["session_id"]) for line in stdout.splitlines() if "session_id" in line
    )


def _attributes(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


@pytest.mark.parametrize("mode", ["dual_agent", "chat_agent_tools"])
def test_run_with_otel_sends_the_turn_and_export_sends_the_same_spans(
    tmp_path: Path, mode: str
) -> None:
    with otlp_receiver() as received:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": received.url, "OTEL_SERVICE_NAME": "lab-under-test"}
        ran = agent_lab(tmp_path, "run", PROMPT, "--mode", mode, "--json", "--otel", **env)
        assert ran.returncode == 0, ran.stderr
        assert ran.stderr == ""
        live = received.take_spans()
        session_id = _session_id(ran.stdout)

        exported = agent_lab(
            tmp_path, "sessions", "export", session_id[:8], "--format", "otlp", **env
        )

        assert exported.returncode == 0, exported.stderr
        assert f"sent {len(live)} spans of session {session_id}" in exported.stdout
        assert received.take_spans() == live
    names = [span["name"] for span in live]
    assert names.count("session") == 1 and names.count("turn 1") == 1
    assert sum(name.startswith("execute_tool") for name in names) == 2
    chats = [_attributes(s) for s in live if s["name"] == "chat agent-lab-sim"]
    assert {c["gen_ai.conversation.id"] for c in chats} == {session_id}
    assert all(c["gen_ai.operation.name"] == "chat" for c in chats)
    services = {
        next(_attributes(r)[k] for k in _attributes(r) if k == "service.name")
        for r in received.resources
    }
    assert services == {"lab-under-test"}
    assert "gen_ai.client.operation.time_to_first_chunk" in received.metric_names


def test_the_otel_setting_in_the_config_file_switches_export_on(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text("[agent_lab]\notel = true\n", encoding="utf-8")
    with otlp_receiver() as received:
        ran = agent_lab(
            tmp_path,
            "run",
            "Set the volume to 20",
            "--config",
            str(config),
            OTEL_EXPORTER_OTLP_ENDPOINT=received.url,
            OTEL_EXPORTER_OTLP_HEADERS="x-team=lab",
            OTEL_METRICS_EXPORTER="none",
        )
        assert ran.returncode == 0, ran.stderr
        spans = received.take_spans()
    assert [span["name"] for span in spans].count("turn 1") == 1
    assert received.metric_names == set()
    assert all(headers.get("x-team") == "lab" for headers in received.headers)


def _without_otel(tmp_path: Path) -> dict[str, str]:
    """A ``PYTHONPATH`` where ``opentelemetry`` has none of the extra's packages."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("", encoding="utf-8")
    return {"PYTHONPATH": str(shadow.parent)}


def test_otel_without_the_extra_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    env = _without_otel(tmp_path)

    ran = agent_lab(tmp_path, "run", PROMPT, "--otel", **env)
    plain = agent_lab(tmp_path, "run", PROMPT, **env)
    export = agent_lab(tmp_path, "sessions", "export", "x", "--format", "otlp", **env)

    assert ran.returncode == 2
    assert ran.stderr.strip() == (
        "error: OpenTelemetry export needs the optional extra: pip install 'agent-lab[otel]'"
    )
    assert plain.returncode == 0, plain.stderr
    assert export.returncode == 2 and "pip install 'agent-lab[otel]'" in export.stderr


def test_importing_the_product_loads_no_opentelemetry(tmp_path: Path) -> None:
    code = (
        "import sys, agent_lab, agent_lab.interfaces.cli, agent_lab.interfaces.lab,"
        " agent_lab.infrastructure.telemetry;"
        " print([m for m in sys.modules if m.startswith('opentelemetry')])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_spans_are_priced_with_the_config_prices_live_and_exported(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(
        '[prices."agent-lab-sim"]\ninput_per_mtok = 1000\noutput_per_mtok = 4000\n',
        encoding="utf-8",
    )
    with otlp_receiver() as received:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": received.url, "OTEL_METRICS_EXPORTER": "none"}
        ran = agent_lab(
            tmp_path, "run", "Set the volume to 20", "--config", str(config), "--otel", **env
        )
        assert ran.returncode == 0, ran.stderr
        live = received.take_spans()
        exported = agent_lab(
            tmp_path,
            "sessions",
            "export",
            "--config",
            str(config),
            _last_session(tmp_path),
            "--format",
            "otlp",
            **env,
        )
        assert exported.returncode == 0, exported.stderr
        again = received.take_spans()
    for spans in (live, again):
        chats = [_attributes(s) for s in spans if s["name"] == "chat agent-lab-sim"]
        assert chats
        for chat in chats:
            tokens_in = int(chat["gen_ai.usage.input_tokens"])
            tokens_out = int(chat["gen_ai.usage.output_tokens"])
            assert chat["agent_lab.cost.price_source"] == "config"
            expected = (tokens_in * 1000 + tokens_out * 4000) / 1_000_000
            assert float(chat["agent_lab.cost.usd"]) == pytest.approx(expected)
    assert again == live


def _last_session(home: Path) -> str:
    listed = agent_lab(home, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return str(json.loads(listed.stdout)[0]["id"])
