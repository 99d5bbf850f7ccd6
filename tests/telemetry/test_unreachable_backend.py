"""A trace backend that cannot be reached costs a run one ``error:`` line, not its time.

The CLI runs as a real subprocess pointed at a closed port on 127.0.0.1; the sink is
the real OTLP one, over real HTTP, in the other checks (a scripted HTTP server stands in
for a backend that answers but refuses).
"""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path

import pytest

from agent_lab.infrastructure.telemetry.otlp import OtlpSink
from agent_lab.infrastructure.telemetry.reachability import (
    RETRY_AFTER_S,
    BackendUnreachable,
    Reachability,
)
from agent_lab.infrastructure.telemetry.spans import SpanData
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.telemetry.test_cli_otel import agent_lab


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _unreachable_line(port: int) -> str:
    return (
        f"error: the trace backend at http://127.0.0.1:{port}/v1/traces is unreachable "
        "(connection refused); spans and metrics are not sent "
        "(check OTEL_EXPORTER_OTLP_ENDPOINT)"
    )


def _span(name: str = "turn 1") -> SpanData:
    return SpanData(
        trace_id=1, span_id=2, parent_id=None, name=name, start_ns=1, end_ns=2, attributes={}
    )


def test_run_with_no_collector_prints_one_error_line_and_keeps_its_exit_code(
    tmp_path: Path,
) -> None:
    port = _closed_port()
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}

    ran = agent_lab(tmp_path, "run", "Set the volume to 30", "--json", "--otel", **endpoint)

    assert ran.returncode == 0
    assert ran.stderr.splitlines() == [_unreachable_line(port)]
    outputs = [json.loads(line) for line in ran.stdout.splitlines()]
    assert outputs[-1] == {"type": "done"}


def test_a_failing_run_keeps_its_own_exit_code_with_no_collector(tmp_path: Path) -> None:
    port, model_port = _closed_port(), _closed_port()
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "OTEL_METRICS_EXPORTER": "none",
    }
    args = ("run", "hello", "--base-url", f"http://127.0.0.1:{model_port}/v1", "--model", "m")

    ran = agent_lab(tmp_path / "otel", *args, "--otel", **env)
    plain = agent_lab(tmp_path / "plain", *args)

    assert ran.returncode == plain.returncode == 2
    assert plain.stderr.startswith("error: ") and plain.stderr.count("\n") == 1
    assert sorted(ran.stderr.splitlines()) == sorted(
        [*plain.stderr.splitlines(), _unreachable_line(port)]
    )


def test_sessions_export_to_no_collector_names_the_unreachable_backend(tmp_path: Path) -> None:
    ran = agent_lab(tmp_path, "run", "Set the volume to 30", "--json")
    session_id = next(
        json.loads(line)["session_id"] for line in ran.stdout.splitlines() if "session_id" in line
    )
    port = _closed_port()
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}

    exported = agent_lab(tmp_path, "sessions", "export", session_id, "--format", "otlp", **endpoint)

    assert exported.returncode != 0
    assert exported.stderr.splitlines() == [_unreachable_line(port)]


def test_the_sink_reports_an_unreachable_backend_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_lab.infrastructure import telemetry

    port = _closed_port()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    caplog.set_level(logging.DEBUG)
    live = telemetry.live_telemetry(None)

    live.send([_span()])
    live.send([_span("session")])
    live.sink.shutdown()

    shown = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert shown == [_unreachable_line(port)]


def test_a_backend_that_answers_but_refuses_is_named_with_its_status(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    refusal = ScriptedResponse.error(401, {"error": "no token"})
    with SSETranscriptServer(refusal, fallback=refusal) as backend:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{backend.port}")
        monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
        sink = OtlpSink()
        accepted = sink.export([_span()])
        sink.shutdown()
        paths = [request.path for request in backend.requests]

    assert not accepted
    assert paths == ["/v1/traces"]
    assert sink.failure == (
        f"the trace backend at http://127.0.0.1:{backend.port}/v1/traces "
        "answered HTTP 401 Unauthorized"
    )


def test_an_unreachable_backend_is_tried_again_after_a_while() -> None:
    now = [0.0]
    reachability = Reachability(clock=lambda: now[0])
    traces = "http://127.0.0.1:9/v1/traces"
    reachability.unreachable(traces, ConnectionRefusedError())

    with pytest.raises(BackendUnreachable, match="unreachable"):
        reachability.check("http://127.0.0.1:9/v1/metrics")
    reachability.check("http://127.0.0.1:4318/v1/traces")  # another backend is tried
    now[0] = RETRY_AFTER_S + 1
    reachability.check(traces)  # the next export may try the network again
    reachability.answered(traces, 200, "OK")
    assert reachability.failure is None
