"""Help texts, ``agent-lab simulate`` and ``agent-lab serve``."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from agent_lab.interfaces.cli import serve as cli_serve
from agent_lab.interfaces.cli.serve import is_loopback
from tests.cli.cli_helpers import Invoke, process_env, wait_for_lab_url

COMMANDS = [
    ("demo",),
    ("run",),
    ("chat",),
    ("compare",),
    ("replay",),
    ("simulate",),
    ("serve",),
    ("sessions", "list"),
    ("sessions", "show"),
    ("sessions", "export"),
    ("sessions", "delete"),
    ("sessions", "prune"),
    ("config",),
]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help_with_examples(cli: Invoke, command: tuple[str, ...]) -> None:
    result = cli(*command, "--help")

    assert result.exit_code == 0
    assert "Examples" in result.stdout
    assert f"agent-lab {' '.join(command)}" in result.stdout


def test_local_help_shows_the_whole_install_command(cli: Invoke) -> None:
    result = cli("local", "--help")

    assert result.exit_code == 0
    assert "pip install 'agent-lab[local]'" in result.stdout


def test_chat_help_does_not_mention_a_json_flag_chat_lacks(cli: Invoke) -> None:
    result = cli("chat", "--help")

    assert result.exit_code == 0
    assert "--json" not in result.stdout
    assert "--audit" in result.stdout


def test_no_arguments_prints_the_help(cli: Invoke) -> None:
    result = cli()

    assert result.exit_code == 2
    assert "demo" in result.stdout and "replay" in result.stdout
    assert result.error_lines == ["error: missing command (see `agent-lab --help`)"]


@pytest.mark.parametrize(("group", "command"), [("sessions", "list"), ("local", "serve")])
def test_a_command_group_without_its_command_prints_its_help_and_one_error_line(
    cli: Invoke, group: str, command: str
) -> None:
    result = cli(group)

    assert result.exit_code == 2
    assert command in result.stdout
    assert result.error_lines == [f"error: missing command (see `agent-lab {group} --help`)"]


def test_unknown_command_is_one_usage_line(cli: Invoke) -> None:
    result = cli("frobnicate")

    assert result.exit_code == 2
    assert result.error_lines == ["error: No such command 'frobnicate'. (see `agent-lab --help`)"]


def test_simulate_serves_an_openai_compatible_endpoint_until_ctrl_c(home: Path) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_lab.interfaces.cli",
            "simulate",
            "--port",
            "0",
            "--ttft-ms",
            "0",
            "--tps",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        base_url = first.split("listening on ")[1].strip()
        models = httpx.get(f"{base_url}/models", trust_env=False, timeout=10).json()
        assert models["data"][0]["id"] == "agent-lab-sim"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
        process.communicate()


def test_simulate_on_a_busy_port_is_one_usage_line(cli: Invoke) -> None:
    with _listening_socket() as port:
        result = cli("simulate", "--port", str(port))

    assert result.exit_code == 2
    assert len(result.error_lines) == 1 and str(port) in result.stderr


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("lab.example.com", False),
    ],
)
def test_is_loopback(host: str, expected: bool) -> None:
    assert is_loopback(host) is expected


class FakeWeb:
    """Stands in for ``create_app``: records its arguments, stops the server at once."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, lab: object, *, token: str | None = None, options: Any = None) -> Starlette:
        self.calls.append({"lab": lab, "token": token, "options": options})

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            signal.raise_signal(signal.SIGINT)  # like Ctrl-C right after startup
            yield

        return Starlette(routes=[Route("/", lambda _: PlainTextResponse("ok"))], lifespan=lifespan)


def test_serve_on_a_public_host_generates_a_token_and_prints_it_once(
    cli: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeWeb()
    monkeypatch.setattr(cli_serve, "_web_app_factory", lambda: fake)

    result = cli("serve", "--host", "0.0.0.0", "--port", "0")

    assert result.exit_code == 0, result.stderr
    [call] = fake.calls
    token = call["token"]
    assert token and len(token) >= 24
    assert result.stdout.count(token) == 2  # the token line and the URL fragment
    assert f"#token={token}" in result.stdout


def test_serve_on_loopback_needs_no_token(cli: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeWeb()
    monkeypatch.setattr(cli_serve, "_web_app_factory", lambda: fake)

    result = cli("serve", "--port", "0")

    assert result.exit_code == 0, result.stderr
    assert fake.calls[0]["token"] is None
    assert "web lab on http://127.0.0.1:" in result.stdout


def test_serve_keeps_a_given_token_secret(cli: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeWeb()
    monkeypatch.setattr(cli_serve, "_web_app_factory", lambda: fake)

    own = "my-own-token-0123456789"  # off loopback a token needs 16 characters or more
    result = cli("serve", "--host", "0.0.0.0", "--port", "0", "--token", own)

    assert result.exit_code == 0, result.stderr
    assert fake.calls[0]["token"] == own
    assert own not in result.stdout


class _listening_socket:
    def __enter__(self) -> int:
        import socket

        self.sock = socket.create_server(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc_info: object) -> None:
        self.sock.close()


def test_the_web_lab_really_serves(cli_process: Invoke, home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=process_env(home),
    )
    try:
        url = wait_for_lab_url(process, timeout=30)
        answer = httpx.get(f"{url}/api/sessions", trust_env=False, timeout=10)
        assert answer.status_code == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        process.kill()
        process.communicate()
