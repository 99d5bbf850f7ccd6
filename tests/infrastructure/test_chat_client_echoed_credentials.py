"""What the client really sends as credentials is masked when a provider echoes it back.

Credentials in a base URL (``user:pass@``) go out as ``Authorization: Basic
base64(user:pass)``; a query (``?api-key=…``) goes after the endpoint's path; custom
credential headers go as given. A real provider on 127.0.0.1 (``echo_provider``)
repeats all of it in a streamed chunk and in an error body, over both transports, and
none of it may reach the runtime's outputs or the SQLite files (WAL included).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import socket
import traceback
from pathlib import Path

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest
from agent_lab.application.protocol import OutputMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.domain.errors import ConfigError, ProviderConnectionError, ProviderHTTPError
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.openai_transport import TRANSPORTS, Transport
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from tests.infrastructure.echo_provider import EchoProvider

USER = "lab-user"
PASSWORD = "URLpass-7Q2w"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
"""What ``Authorization: Basic`` carries for ``lab-user:URLpass-7Q2w@``."""
URL_SECRETS = (TOKEN.rstrip("="), f"{USER}:{PASSWORD}", PASSWORD)
MODES = ("stream", "error")


def _leaked(text: str, secrets: tuple[str, ...]) -> list[str]:
    lowered = text.lower()
    return [secret for secret in secrets if secret.lower() in lowered]


async def _run_session(
    client: OpenAICompatibleChatClient, tmp_path: Path
) -> tuple[list[OutputMessage], dict[str, bytes]]:
    """One turn through the runtime into a SQLite store: its outputs and the store's files."""
    store = SQLiteSessionStore(tmp_path / "lab.sqlite3")
    runtime = DebugRuntime(client, session_store=store)
    request = DebugRunRequest(user_message="hi", chat_agent=AgentParams(model="m"))
    outputs = [output async for output in runtime.run(request)]
    await runtime.aclose()
    store.close()
    files = await asyncio.to_thread(lambda: {p.name: p.read_bytes() for p in tmp_path.iterdir()})
    return outputs, files


def _assert_masked_everywhere(
    outputs: list[OutputMessage],
    files: dict[str, bytes],
    secrets: tuple[str, ...],
    echoed: str = "auth=***",
) -> None:
    shown = json.dumps(outputs)
    assert echoed in shown, shown  # the provider's echo came back, masked
    assert not _leaked(shown, secrets), shown
    assert any(echoed.encode() in data for data in files.values())  # and was stored
    for name, data in files.items():
        assert not _leaked(data.decode("latin-1"), secrets), name


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_url_credentials_sent_as_basic_auth_are_masked_when_echoed(
    tmp_path: Path, transport: Transport, mode: str
) -> None:
    with EchoProvider() as provider:
        url = provider.root.replace("http://", f"http://{USER}:{PASSWORD}@") + f"/{mode}/v1"
        async with OpenAICompatibleChatClient(url, transport=transport, max_retries=0) as client:
            outputs, files = await _run_session(client, tmp_path)
        received = provider.requests

    assert [(r.method, r.target) for r in received] == [("POST", f"/{mode}/v1/chat/completions")]
    assert received[0].headers["authorization"] == f"Basic {TOKEN}"
    _assert_masked_everywhere(outputs, files, URL_SECRETS)
    assert "basic-user=***" in json.dumps(outputs)  # ``user:pass`` itself is masked too


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_percent_encoded_password_is_sent_decoded_and_masked_in_every_form(
    transport: Transport,
) -> None:
    token = base64.b64encode(b"me@corp:p/ss+word=1").decode()
    with EchoProvider() as provider:
        url = provider.root.replace("http://", "http://me%40corp:p%2Fss%2Bword%3D1@")
        async with OpenAICompatibleChatClient(
            url + "/error/v1", transport=transport, max_retries=0
        ) as client:
            stream = client.stream_chat(
                [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
            )
            with pytest.raises(ProviderHTTPError) as info:
                _ = [item async for item in stream]
        received = provider.requests

    assert received[0].headers["authorization"] == f"Basic {token}"
    text = "".join(traceback.format_exception(info.value)) + repr(info.value.__cause__)
    assert "denied: auth=*** basic-user=***" in info.value.provider_message
    secrets = (token.rstrip("="), "p/ss+word=1", "p%2Fss%2Bword%3D1", "me@corp")
    assert not _leaked(text, secrets), text


@pytest.mark.parametrize(
    ("api_key", "headers", "given"),
    [
        ("sk-KEY-hidden-1", {}, "an API key"),
        (None, {"Authorization": "Bearer HEADER-hidden-2"}, "an Authorization header"),
    ],
)
def test_url_credentials_next_to_a_key_are_refused_without_showing_either(
    api_key: str | None, headers: dict[str, str], given: str
) -> None:
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:9/v1"
    with pytest.raises(ConfigError) as refused:
        OpenAICompatibleChatClient(url, api_key=api_key, default_headers=headers)
    message = str(refused.value)
    assert f"carries credentials (user:pass@) and {given} is given too" in message
    assert "http://***@127.0.0.1:9/v1" in message
    assert not _leaked(message, (*URL_SECRETS, USER, "hidden")), message
    assert refused.value.failure_reason == "config_error"


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_base_urls_query_goes_after_the_endpoint_path(
    tmp_path: Path, transport: Transport
) -> None:
    query = "api-key=QRYsecret-41&region=eu"
    with EchoProvider() as provider:
        url = f"{provider.root}/stream/v1?{query}"
        async with OpenAICompatibleChatClient(url, transport=transport) as client:
            assert await client.warm_up(connect=True)
            outputs, files = await _run_session(client, tmp_path)
        targets = [(r.method, r.target) for r in provider.requests]

    assert targets == [
        ("GET", f"/stream/v1/models?{query}"),
        ("POST", f"/stream/v1/chat/completions?{query}"),
    ]
    shown = json.dumps(outputs)
    assert "request=POST /stream/v1/chat/completions?api-key=***&region=eu" in shown, shown
    for name, data in files.items():
        assert b"QRYsecret-41" not in data, name


@pytest.mark.asyncio
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_http_libraries_log_request_urls_without_the_query_secret(
    transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with EchoProvider() as provider:
        url = f"{provider.root}/stream/v1?api-key=QRYsecret-41&region=eu"
        async with OpenAICompatibleChatClient(url, transport=transport) as client:
            stream = client.stream_chat(
                [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
            )
            _ = [item async for item in stream]

    logged = [record.getMessage() for record in caplog.records]
    assert any(
        "/stream/v1/chat/completions?api-key=***&region=eu" in line and "HTTP/1.1 200" in line
        for line in logged
    ), logged
    assert not [line for line in logged if "QRYsecret-41" in line]


@pytest.mark.asyncio
async def test_an_error_names_the_endpoint_with_its_query_after_the_path() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/?api-key=QRYsecret-41"
    async with OpenAICompatibleChatClient(url, max_retries=0) as client:
        stream = client.stream_chat(
            [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
        )
        with pytest.raises(ProviderConnectionError) as info:
            _ = [item async for item in stream]

    assert f"127.0.0.1:{port}/v1/chat/completions?api-key=***" in str(info.value)
    assert "QRYsecret-41" not in "".join(traceback.format_exception(info.value))


def test_a_base_url_that_repeats_a_query_parameter_is_refused() -> None:
    with pytest.raises(ConfigError, match="repeats the query parameter 'key'"):
        OpenAICompatibleChatClient("http://127.0.0.1:9/v1?key=one-secret&key=two-secret")


CUSTOM_SECRETS = {
    "X-My-Token": "MYtoken-value-1",
    "Ocp-Apim-Subscription-Key": "OCPkey-value-2",
    "X-Goog-Api-Key": "GOOGkey-value-3",
    "X-Client-Secret": "CLIENTsecret-4",
    "Cookie": "session=COOKIEvalue-5",
}
ORDINARY = {"X-Title": "Agent-Lab-Title-6", "User-Agent": "lab-agent/UA-7"}


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_custom_credential_headers_are_masked_and_ordinary_ones_are_not(
    tmp_path: Path, transport: Transport, mode: str
) -> None:
    secrets = tuple(CUSTOM_SECRETS.values())
    with EchoProvider() as provider:
        async with OpenAICompatibleChatClient(
            f"{provider.root}/{mode}/v1",
            api_key="sk-plain-key-8",
            default_headers={**CUSTOM_SECRETS, **ORDINARY},
            transport=transport,
            max_retries=0,
        ) as client:
            outputs, files = await _run_session(client, tmp_path)
        received = provider.requests[0].headers

    assert {name: received[name.lower()] for name in CUSTOM_SECRETS} == CUSTOM_SECRETS
    _assert_masked_everywhere(outputs, files, (*secrets, "sk-plain-key-8"), "auth=Bearer ***")
    shown = json.dumps(outputs)
    assert all(value in shown for value in ORDINARY.values()), shown


@pytest.mark.asyncio
async def test_a_basic_header_given_by_the_caller_is_masked_decoded_too(tmp_path: Path) -> None:
    headers = {"Authorization": f"Basic {TOKEN}"}
    with EchoProvider() as provider:
        async with OpenAICompatibleChatClient(
            f"{provider.root}/stream/v1", default_headers=headers
        ) as client:
            outputs, files = await _run_session(client, tmp_path)

    _assert_masked_everywhere(outputs, files, URL_SECRETS)
    assert "basic-user=***" in json.dumps(outputs)
