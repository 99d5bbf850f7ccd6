"""Credentials in a base URL are never printed: every command masks them as ``***``.

``user:pass@`` and secret query values (``api-key=`` …) are shown the way errors, the
web lab and ``/api/health`` show them (``http://***@host/v1?api-key=***``). Real CLI
processes against a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke, Result

PASSWORD = "PWSECRET456"
QUERY_KEY = "QSECRET789"
_ANSWER = ScriptedResponse.sse({"choices": [{"index": 0, "delta": {"content": "Hello."}}]})


@pytest.fixture
def secret_url() -> Iterator[str]:
    """The scripted server's base URL with a user, a password and an ``api-key`` query."""
    with SSETranscriptServer(fallback=_ANSWER) as server:
        host = server.base_url.removeprefix("http://")
        yield f"http://alice:{PASSWORD}@{host}?api-key={QUERY_KEY}"


def _masked(result: Result, url: str) -> str:
    """The output, after checking it holds neither secret; ``url`` as it must be shown."""
    output = result.stdout + result.stderr
    assert PASSWORD not in output and QUERY_KEY not in output, output
    host = url.split("@", 1)[1].split("?", 1)[0]
    assert f"http://***@{host}?api-key=***" in output, output
    return output


def test_run_and_chat_name_the_endpoint_without_its_credentials(
    cli_process: Invoke, secret_url: str
) -> None:
    run = cli_process("run", "hi", "--base-url", secret_url, "--model", "m")
    chat = cli_process("chat", "--base-url", secret_url, "--model", "m", input="hi\n")

    assert run.exit_code == 0, run.stderr
    assert chat.exit_code == 0, chat.stderr
    assert "model m at http://***@" in _masked(run, secret_url)
    assert "model m at http://***@" in _masked(chat, secret_url)


def test_config_masks_the_url_in_the_table_and_in_json(
    cli_process: Invoke, secret_url: str
) -> None:
    table = cli_process("config", "--base-url", secret_url)
    from_env = cli_process("config", OPENAI_BASE_URL=secret_url)
    as_json = cli_process("config", "--json", "--base-url", secret_url)

    assert table.exit_code == from_env.exit_code == as_json.exit_code == 0
    _masked(table, secret_url)
    assert "env OPENAI_BASE_URL" in _masked(from_env, secret_url)
    _masked(as_json, secret_url)
    shown = json.loads(as_json.stdout)["settings"]["base_url"]["value"]
    assert shown.startswith("http://***@") and shown.endswith("?api-key=***")


def test_compare_masks_the_endpoint_in_its_output_and_its_report(
    cli_process: Invoke, secret_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    result = cli_process(
        "compare", "demo", "--repeat", "1", "--json", "--out", str(out),
        "--base-url", secret_url, "--model", "m",
    )  # fmt: skip

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["endpoint"].startswith("model m at http://***@")
    _masked(result, secret_url)
    for report in out.iterdir():
        if report.suffix in (".md", ".html"):
            text = report.read_text(encoding="utf-8")
            assert PASSWORD not in text and QUERY_KEY not in text, report


def test_the_lab_describes_its_endpoint_without_the_urls_credentials(
    secret_url: str, tmp_path: Path
) -> None:
    settings = LabSettings(base_url=secret_url, home=tmp_path)
    described = Lab(settings).endpoint_description

    assert PASSWORD not in described and QUERY_KEY not in described, described
    assert " at http://***@127.0.0.1:" in described and described.endswith("?api-key=***")


def test_a_key_http_cannot_carry_is_a_usage_error_before_any_request(
    cli_process: Invoke,
) -> None:
    with SSETranscriptServer(fallback=_ANSWER) as server:
        result = cli_process(
            "run", "hi", "--base-url", server.base_url, "--model", "m", OPENAI_API_KEY="sk-…"
        )
        assert server.requests == []
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "error: api_key cannot be sent in an HTTP header: character 4 is U+2026, and only"
        " printable ASCII is allowed (a placeholder such as 'sk-…'?)"
    ]
