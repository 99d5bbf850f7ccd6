"""Credentials in a base URL are never printed: every command masks them as ``***``.

``user:pass@`` and secret query values (``api-key=`` …) are shown the way errors, the
web lab and ``/api/health`` show them (``http://***@host/v1?api-key=***``). Real CLI
processes against a scripted OpenAI-compatible server on 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke, Result
from tests.infrastructure.echo_provider import EchoProvider

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


USER = "alice"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
"""What ``Authorization: Basic`` carries for ``alice:PWSECRET456@``."""
URL_SECRETS = (TOKEN.rstrip("="), f"{USER}:{PASSWORD}", PASSWORD)


def _leaked(text: str, secrets: tuple[str, ...] = URL_SECRETS) -> list[str]:
    return [secret for secret in secrets if secret.lower() in text.lower()]


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_url_credentials_echoed_back_reach_no_output_database_or_export(
    cli_process: Invoke, home: Path, tmp_path: Path, transport: str
) -> None:
    with EchoProvider() as provider:
        url = provider.root.replace("http://", f"http://{USER}:{PASSWORD}@") + "/stream/v1"
        run = cli_process(
            "run", "hi", "--json", "--base-url", url, "--model", "m", "--transport", transport
        )
        received = provider.requests
    assert run.exit_code == 0, run.stderr
    assert [(r.method, r.target) for r in received] == [("POST", "/stream/v1/chat/completions")]
    assert received[0].headers["authorization"] == f"Basic {TOKEN}"
    session_id = str(json.loads(run.stdout.splitlines()[0])["session_id"])
    shown = cli_process("sessions", "show", session_id)
    as_json = cli_process("sessions", "export", session_id)
    out = tmp_path / "session.jsonl"
    as_jsonl = cli_process("sessions", "export", session_id, "--format", "jsonl", "--out", str(out))

    for result in (run, shown, as_json, as_jsonl):
        assert result.exit_code == 0, result.stderr
        assert not _leaked(result.stdout + result.stderr), result.stdout
    assert "auth=***" in run.stdout and "auth=***" in shown.stdout  # echoed, masked
    assert "auth=***" in as_json.stdout and not _leaked(out.read_text(encoding="utf-8"))
    stored = {p.name: p.read_bytes() for p in home.iterdir() if p.name.startswith("agent-lab")}
    assert "agent-lab.sqlite3" in stored
    for name, data in stored.items():  # the database, its WAL and shared memory
        assert not _leaked(data.decode("latin-1")), name


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_an_api_key_next_to_url_credentials_is_a_usage_error_showing_neither(
    cli_process: Invoke, how: str
) -> None:
    key = "sk-FLAGKEY-hidden"
    with EchoProvider() as provider:
        url = provider.root.replace("http://", f"http://{USER}:{PASSWORD}@") + "/stream/v1"
        args = ("run", "hi", "--base-url", url, "--model", "m")
        if how == "flag":
            result = cli_process(*args, "--api-key", key)
        else:
            result = cli_process(*args, OPENAI_API_KEY=key)
        assert provider.requests == []
    assert result.exit_code == 2
    assert len(result.error_lines) == 1, result.stderr
    assert "carries credentials (user:pass@) and an API key is given too" in result.stderr
    assert not _leaked(result.stdout + result.stderr, (*URL_SECRETS, key)), result.stderr


def test_a_base_urls_query_is_sent_after_the_endpoint_path(cli_process: Invoke) -> None:
    with EchoProvider() as provider:
        url = f"{provider.root}/stream/v1?api-key={QUERY_KEY}"
        run = cli_process("run", "hi", "--base-url", url, "--model", "m")
        received = provider.requests
    assert run.exit_code == 0, run.stderr
    assert [r.target for r in received] == [f"/stream/v1/chat/completions?api-key={QUERY_KEY}"]
    assert "request=POST /stream/v1/chat/completions?api-key=*** " in run.stdout, run.stdout
    assert QUERY_KEY not in run.stdout + run.stderr
