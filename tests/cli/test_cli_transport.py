"""``--transport`` picks how the lab's requests reach the endpoint, in a real process."""

from __future__ import annotations

import json

import pytest

from agent_lab.testing import ScriptedResponse, SSETranscriptServer
from tests.cli.cli_helpers import Invoke

SECRET = "sk-transport-3c1d9e8f7a6b5"


def answer(text: str) -> ScriptedResponse:
    return ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    )


@pytest.mark.parametrize("transport", ["httpx", "aiohttp"])
def test_run_answers_over_either_transport(cli_process: Invoke, transport: str) -> None:
    with SSETranscriptServer(fallback=answer("Hello from the endpoint")) as server:
        result = cli_process(
            "run",
            "hi",
            "--base-url",
            server.base_url,
            "--model",
            "m",
            "--transport",
            transport,
            OPENAI_API_KEY=SECRET,
        )
        sent = server.requests[0].headers["authorization"]

    assert result.exit_code == 0, result.stderr
    assert "Hello from the endpoint" in result.stdout
    assert sent == f"Bearer {SECRET}"
    assert SECRET not in result.stdout + result.stderr


def test_config_shows_the_transport_and_where_it_came_from(cli: Invoke) -> None:
    from_flag = cli("config", "--json", "--transport", "httpx")
    from_env = cli("config", "--json", AGENT_LAB_TRANSPORT="httpx")
    default = cli("config", "--json")

    assert from_flag.exit_code == from_env.exit_code == default.exit_code == 0
    shown = [json.loads(r.stdout) for r in (from_flag, from_env, default)]
    assert [s["settings"]["transport"] for s in shown] == [
        {"value": "httpx", "source": "flag"},
        {"value": "httpx", "source": "env AGENT_LAB_TRANSPORT"},
        {"value": "aiohttp", "source": "default"},
    ]


def test_an_unknown_transport_is_a_usage_error(cli: Invoke) -> None:
    result = cli("run", "hi", "--transport", "curl")

    assert result.exit_code == 2
    assert "curl" in result.stderr
