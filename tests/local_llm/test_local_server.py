"""LocalModelServer against the real llama.cpp server and the bundled SmolLM2-135M.

Tests marked ``local_llm`` start the real server (about a second each here) and need
``agent-lab[local]``; without it they are skipped with the install hint. The other
tests check the error paths and need nothing beyond the core install.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest

from agent_lab.domain.errors import ConfigError
from agent_lab.infrastructure.local_llm import (
    LOCAL_INSTALL_HINT,
    LocalModelServer,
    find_bundled_model,
    is_local_extra_installed,
)

INSTALL_COMMAND = "pip install 'agent-lab[local]'"
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
    "additionalProperties": False,
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.",
        "parameters": QUERY_SCHEMA,
    },
}

needs_extra = pytest.mark.skipif(not is_local_extra_installed(), reason=LOCAL_INSTALL_HINT)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalModelServer]:
    if not is_local_extra_installed():
        pytest.skip(LOCAL_INSTALL_HINT)
    with LocalModelServer() as running:
        yield running


def stream_chunks(server: LocalModelServer, **body: Any) -> tuple[list[dict[str, Any]], bool]:
    """POST a streamed chat request; return the decoded chunks and whether [DONE] came."""
    request = {"model": server.model, "stream": True, "temperature": 0, **body}
    chunks: list[dict[str, Any]] = []
    done = False
    with (
        httpx.Client(timeout=60.0, trust_env=False) as http,
        http.stream("POST", f"{server.base_url}/chat/completions", json=request) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                chunks.append(json.loads(line.removeprefix("data: ")))
    return chunks, done


def _refuses_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2.0):
            return False
    except OSError:
        return True


@pytest.mark.local_llm
def test_server_serves_the_bundled_model_on_loopback(server: LocalModelServer) -> None:
    assert server.running
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    assert server.model_path == find_bundled_model()
    models = httpx.get(f"{server.base_url}/models", trust_env=False).json()
    assert [entry["id"] for entry in models["data"]] == [server.model]


@pytest.mark.local_llm
def test_streamed_chat_answers_with_real_chunks(server: LocalModelServer) -> None:
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    chunks, done = stream_chunks(server, messages=messages, max_tokens=24)

    assert done
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    pieces = [c["choices"][0]["delta"].get("content") for c in chunks]
    text = "".join(piece for piece in pieces if piece)
    assert len([piece for piece in pieces if piece]) >= 2, "expected several content deltas"
    assert text.strip()
    assert chunks[-1]["choices"][0]["finish_reason"] in {"stop", "length"}


@pytest.mark.local_llm
def test_forced_tool_choice_gives_schema_valid_arguments(server: LocalModelServer) -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Search the web for the weather in Paris today."},
    ]
    forced = {"type": "function", "function": {"name": "web_search"}}
    chunks, done = stream_chunks(
        server, messages=messages, tools=[SEARCH_TOOL], tool_choice=forced, max_tokens=64
    )

    deltas = [call for c in chunks for call in c["choices"][0]["delta"].get("tool_calls") or []]
    arguments = json.loads("".join(call["function"]["arguments"] for call in deltas))
    jsonschema.validate(arguments, QUERY_SCHEMA)
    assert done
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


@pytest.mark.local_llm
def test_wire_quirks_documented_in_local_model_md(server: LocalModelServer) -> None:
    """If llama.cpp changes one of these, docs/local-model.md needs an update."""
    messages = [{"role": "user", "content": "Search the web for cats."}]
    forced = {"type": "function", "function": {"name": "web_search"}}
    chunks, _ = stream_chunks(
        server,
        messages=messages,
        tools=[SEARCH_TOOL],
        tool_choice=forced,
        max_tokens=32,
        stream_options={"include_usage": True},
    )

    argument_chunks = [c for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in argument_chunks]
    assert len(calls) >= 2
    # name and id are repeated on every argument delta, next to a legacy function_call
    assert {(call["id"], call["function"]["name"]) for call in calls} == {
        (calls[0]["id"], "web_search")
    }
    assert all(c["choices"][0]["delta"]["function_call"] for c in argument_chunks)
    # include_usage is ignored: no chunk carries usage
    assert not any("usage" in chunk for chunk in chunks)


@pytest.mark.local_llm
@pytest.mark.asyncio
async def test_async_exit_stops_the_server() -> None:
    if not is_local_extra_installed():
        pytest.skip(LOCAL_INSTALL_HINT)
    async with LocalModelServer(startup_timeout=60.0) as server:
        host, port = server.host, server.port
        assert not _refuses_connections(host, port)

    assert not server.running
    assert _refuses_connections(host, port)


@pytest.mark.local_llm
def test_close_stops_the_server_and_is_idempotent() -> None:
    if not is_local_extra_installed():
        pytest.skip(LOCAL_INSTALL_HINT)
    server = LocalModelServer(startup_timeout=60.0).start()
    log_path = server.log_path
    assert log_path is not None and log_path.is_file()

    server.close()
    server.close()

    assert not server.running
    assert _refuses_connections(server.host, server.port)
    assert not log_path.exists(), "a clean stop removes the temporary log"


def test_missing_package_raises_config_error_with_install_hint() -> None:
    with pytest.raises(ConfigError) as caught:
        find_bundled_model(package="definitely_not_installed_pkg")

    assert INSTALL_COMMAND in str(caught.value)
    assert INSTALL_COMMAND in LOCAL_INSTALL_HINT


def test_missing_parent_package_is_a_config_error_too() -> None:
    with pytest.raises(ConfigError, match="agent-lab\\[local\\]"):
        find_bundled_model(package="definitely_not_installed_pkg.models")


def test_package_without_a_model_file_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="0 .gguf files"):
        find_bundled_model(package="json")


def test_missing_model_file_fails_before_any_process_starts(tmp_path: Path) -> None:
    server = LocalModelServer(tmp_path / "absent.gguf")

    with pytest.raises(ConfigError, match=r"model file not found|agent-lab\[local\]"):
        server.start()

    assert not server.running
    assert server.log_path is None


def test_only_loopback_addresses_are_accepted() -> None:
    with pytest.raises(ConfigError, match="loopback"):
        LocalModelServer(host="0.0.0.0")


@pytest.mark.local_llm
@needs_extra
def test_a_busy_explicit_port_is_refused_before_launch(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"never loaded")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = LocalModelServer(model, port=taken.getsockname()[1])

        with pytest.raises(ConfigError, match="cannot listen on 127.0.0.1"):
            server.start()

    assert not server.running
    assert server.log_path is None


@pytest.mark.local_llm
@needs_extra
def test_a_crashing_server_reports_its_log_tail(tmp_path: Path) -> None:
    not_a_model = tmp_path / "broken.gguf"
    not_a_model.write_bytes(b"this is not a gguf file")
    server = LocalModelServer(not_a_model, startup_timeout=60.0)

    with pytest.raises(ConfigError, match="exited during startup") as caught:
        server.start()

    assert not server.running
    assert server.log_path is not None, "a failed start keeps its log for reading"
    message = str(caught.value)
    assert f"log: {server.log_path}" in message
    assert "last output:" in message and "broken.gguf" in message
    shutil.rmtree(server.log_path.parent)
