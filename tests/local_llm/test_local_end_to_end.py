"""Agent Lab end to end on a real small model: llama.cpp's server and SmolLM2-135M.

The tests marked ``local_llm`` need ``agent-lab[local]`` (``make test-local`` or
``pytest -m local_llm``). What runs for real: llama.cpp's OpenAI-compatible server, the
bundled 135M model, HTTP and SSE, `OpenAICompatibleChatClient`, `DebugRuntime`, the
SQLite store, ``agent-lab replay`` and the CLI as subprocesses.

One thing is scripted, and only in the dual-agent tests: the 135M model never writes
an ``<event>name</event>`` block from the catalog prompt (0 of 10 in
docs/local-model.md), so those tests script the chat agent's *first* round. The
scripted round is a llama.cpp-shaped SSE body served through an ``httpx`` mock
transport to a second, real `OpenAICompatibleChatClient`, so it goes through the same
request building, SSE decoding and event-block parsing as a live round. Every other
call (the event agent's forced ``tool_choice`` call, follow-up rounds, later turns)
goes to the real server.

The tests at the bottom (not marked) check the CLI's error path and help without the
extra.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from typer.testing import CliRunner

from agent_lab.application.contracts import (
    AgentParams,
    DebugRunRequest,
    EventAgentParams,
    ToolInvocationMode,
)
from agent_lab.application.events import ResultPolicy
from agent_lab.application.ports import ChatClient
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure import local_llm
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.local_llm import (
    LOCAL_INSTALL_HINT,
    LocalModelServer,
    is_local_extra_installed,
)
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.interfaces.cli import app
from agent_lab.interfaces.cli.common import tool_registry
from agent_lab.interfaces.settings import DEFAULT_SYSTEM_PROMPT

CATALOG_PREFIX = "Available events:"
"""How the dual-agent catalog system message starts (``chat_event_system_message``)."""
MAX_TOKENS = 48
LOOKUP = "notes.lookup"
LOOKUP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "topic": {
            "type": "string",
            "minLength": 1,
            "maxLength": 40,
            "description": "A place, person or thing, e.g. Big Ben.",
        }
    },
    "required": ["topic"],
    "additionalProperties": False,
}
SCRUBBED_ENV = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "AGENT_LAB_MODEL",
    "AGENT_LAB_EVENT_MODEL",
    "AGENT_LAB_DB",
    "AGENT_LAB_CORPUS",
    "AGENT_LAB_SEARCH_URL",
    "AGENT_LAB_SIM_FAST",
)
needs_extra = pytest.mark.skipif(not is_local_extra_installed(), reason=LOCAL_INSTALL_HINT)
_SCRIPT = Path(sys.executable).with_name("agent-lab")
AGENT_LAB = (
    [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "agent_lab.interfaces.cli"]
)


# ----------------------------------------------------------------------- helpers


@dataclass
class SentCall:
    """One call of the ``ChatClient`` port, as the runtime made it."""

    messages: list[ChatMessage]
    tools: list[dict[str, Any]]
    tool_choice: dict[str, Any] | None
    scripted: bool


@dataclass
class RecordingClient:
    """A ``ChatClient`` that notes every call and forwards it to the real server.

    After `script_first_catalog_round`, the next chat-agent call that carries the
    dual-agent catalog (no tools, no ``tool_choice``) is answered by ``scripted``
    instead, once.
    """

    real: ChatClient
    scripted: ChatClient | None = None
    calls: list[SentCall] = field(default_factory=list)
    _armed: bool = False

    def script_first_catalog_round(self) -> None:
        assert self.scripted is not None
        self._armed = True

    def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        catalog_round = (
            tool_choice is None
            and not tools
            and any(m.role == "system" and m.content.startswith(CATALOG_PREFIX) for m in messages)
        )
        use_script = self._armed and catalog_round and self.scripted is not None
        self._armed = self._armed and not use_script
        self.calls.append(SentCall(list(messages), list(tools), tool_choice, use_script))
        target = self.scripted if use_script and self.scripted is not None else self.real
        return target.stream_chat(messages, tools, params, tool_choice)

    def forced_calls(self) -> list[SentCall]:
        return [call for call in self.calls if call.tool_choice is not None]


def llamacpp_sse(model: str, text: str) -> bytes:
    """A streamed answer shaped like llama.cpp's (tests/fixtures/sse/llamacpp_real)."""
    words = text.split(" ")
    deltas: list[dict[str, Any]] = [{"role": "assistant"}]
    deltas += [{"content": word if i == 0 else f" {word}"} for i, word in enumerate(words)]
    deltas.append({})
    body = b""
    for i, delta in enumerate(deltas):
        chunk = {
            "id": "chatcmpl-scripted",
            "model": model,
            "created": 1796014914,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": "stop" if i == len(deltas) - 1 else None,
                }
            ],
        }
        body += b"data: " + json.dumps(chunk).encode() + b"\n\n"
    return body + b"data: [DONE]\n\n"


def scripted_transport(model: str, text: str) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream; charset=utf-8"},
            content=llamacpp_sse(model, text),
        )

    return httpx.MockTransport(answer)


def make_request(
    server: LocalModelServer,
    text: str,
    *,
    mode: ToolInvocationMode,
    tools: list[str],
    session_id: str | None = None,
) -> DebugRunRequest:
    """A deterministic request (temperature 0) with short answers."""
    return DebugRunRequest(
        session_id=session_id,
        user_message=text,
        system_prompts=[DEFAULT_SYSTEM_PROMPT],
        chat_agent=AgentParams(model=server.model, temperature=0.0, max_tokens=MAX_TOKENS),
        event_agent=EventAgentParams(enabled_tools=tools, max_tokens=128),
        tool_invocation_mode=mode,
    )


async def run_one_turn(runtime: DebugRuntime, request: DebugRunRequest) -> list[Mapping[str, Any]]:
    """``run()`` one turn; fail on an error output."""
    outputs: list[Mapping[str, Any]] = [message async for message in runtime.run(request)]
    errors = [message for message in outputs if message["type"] == "error"]
    assert not errors, errors
    assert outputs[-1] == {"type": "done"}
    return outputs


async def reconnect(runtime: DebugRuntime, request: DebugRunRequest) -> list[dict[str, Any]]:
    """Continue a persisted session with ``start_session``: one turn, then close."""
    queues = runtime.start_session(request)
    outputs: list[dict[str, Any]] = []
    closed = False
    while not outputs or outputs[-1]["type"] != "done":
        message = await queues.output.get()
        outputs.append(message)
        assert message["type"] != "error", message
        if message["type"] == "turn_completed" and not closed:
            closed = True
            await queues.input.put(None)
    await runtime.aclose()
    return outputs


def audits(store: SQLiteSessionStore, session_id: str, event: str) -> list[dict[str, Any]]:
    return [
        record["details"]
        for record in store.list_audit_logs(session_id)
        if record["event"] == event
    ]


def session_id_of(outputs: Sequence[Mapping[str, Any]]) -> str:
    started = [message for message in outputs if message["type"] == "session_started"]
    return str(started[0]["session_id"])


def assert_usage_not_reported(call: dict[str, Any]) -> None:
    """A model call against this server: zeros, flagged as not reported."""
    assert call["usage_reported"] is False, call
    tokens = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")
    assert [call[key] for key in tokens] == [0, 0, 0, 0], call


def lookup_tool(received: list[dict[str, Any]]) -> ToolDefinition:
    """A tool whose resolver never finds arguments, so the event agent must call the model."""

    def handle(event: ToolCallEvent) -> dict[str, Any]:
        received.append(dict(event.arguments))
        return {"tool": LOOKUP, "topic": event.arguments["topic"], "notes": []}

    def resolve(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        return {}

    return ToolDefinition(
        name=LOOKUP,
        description="Look up a topic in the user's notes.",
        parameters=LOOKUP_SCHEMA,
        handler=handle,
        argument_resolver=resolve,
        result_policy=ResultPolicy.FOLLOW_UP,
    )


def cli_env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in SCRUBBED_ENV}
    env.update(AGENT_LAB_HOME=str(home), COLUMNS="160")
    return env


def agent_lab(home: Path, *args: str, timeout: float = 100.0) -> subprocess.CompletedProcess[str]:
    """Run the ``agent-lab`` console script as a real subprocess."""
    return subprocess.run(
        [*AGENT_LAB, *args],
        capture_output=True,
        text=True,
        env=cli_env(home),
        timeout=timeout,
        check=False,
    )


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def refuses_connections(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return False
    except OSError:
        return True


@dataclass
class LineReader:
    """Reads a subprocess's stdout lines on a thread, so waiting can time out."""

    process: subprocess.Popen[str]
    lines: queue.Queue[str | None] = field(default_factory=queue.Queue)
    seen: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, text: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"exited before {text!r}: {self.seen}")
            self.seen.append(line)
            if text in line:
                return line

    def rest(self, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            if line is None:
                break
            self.seen.append(line)
        return "".join(self.seen)


@pytest.fixture
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab-home"
    monkeypatch.setenv("AGENT_LAB_HOME", str(home))
    return home


# --------------------------------------------------------- runtime against the server


@pytest.mark.local_llm
@pytest.mark.asyncio
async def test_chat_agent_tools_turn_completes_persists_and_restores(
    local_server: LocalModelServer, tmp_path: Path, lab_home: Path
) -> None:
    """A ``chat_agent_tools`` turn on the real model, then a reconnect that continues it.

    The tools go out without ``tool_choice``; llama.cpp's ``chatml-function-calling``
    then answers in plain text (docs/local-model.md), so the turn is one text round.
    """
    registry = tool_registry(tmp_path / "tools")
    names = registry.names()
    question = "What is the capital of France?"
    async with OpenAICompatibleChatClient(local_server.base_url) as real:
        client = RecordingClient(real)
        with SQLiteSessionStore(tmp_path / "lab.sqlite3") as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            request = make_request(local_server, question, mode="chat_agent_tools", tools=names)
            outputs = await run_one_turn(runtime, request)
            session_id = session_id_of(outputs)

            answer = "".join(m["content"] for m in outputs if m["type"] == "message_delta")
            assert answer.strip(), "the model answered with text"
            assert not [m for m in outputs if m["type"] == "usage"], "the server sends no usage"
            # the tools were offered, without tool_choice, to the real server
            assert client.calls[0].tools and client.calls[0].tool_choice is None

            messages = store.list_messages(session_id)
            assert [(m["role"], m["content"]) for m in messages] == [
                ("user", question),
                ("assistant", answer),
            ]
            summary = store.usage_summary(session_id)
            assert summary["turns"][0]["status"] == "completed"
            chat_calls = [c for c in summary["calls"] if c["call_kind"] == "chat"]
            assert len(chat_calls) == 1
            assert_usage_not_reported(chat_calls[0])
            assert chat_calls[0]["ttft_ms"] is not None
            (response,) = audits(store, session_id, "chat_agent_response")
            assert response["usage"] is None and response["usage_reported"] is False
            assert response["raw_chunks"], "the real chunks are recorded for replay"

            # a new runtime on the same session id restores the history
            follow_up = "And what is the capital of Germany?"
            again = DebugRuntime(client, registry=registry, session_store=store)
            second = await reconnect(
                again,
                make_request(
                    local_server,
                    follow_up,
                    mode="chat_agent_tools",
                    tools=names,
                    session_id=session_id,
                ),
            )
            assert [m["type"] for m in second].count("turn_completed") == 1
            sent = [(m.role, m.content) for m in client.calls[-1].messages]
            assert sent[-3:] == [("user", question), ("assistant", answer), ("user", follow_up)]
            started = audits(store, session_id, "session_started")
            assert started[-1]["restored_message_count"] == 2
            requests = audits(store, session_id, "chat_agent_request")
            assert requests[-1]["messages"][-1]["content"] == follow_up
            roles = [m["role"] for m in store.list_messages(session_id)]
            assert roles[:3] == ["user", "assistant", "user"]
            turns = store.usage_summary(session_id)["turns"]
            assert [t["status"] for t in turns] == ["completed", "completed"]


@pytest.mark.local_llm
@pytest.mark.asyncio
async def test_dual_agent_forced_fallback_runs_for_real_persists_and_restores(
    local_server: LocalModelServer, tmp_path: Path, lab_home: Path
) -> None:
    """The event agent's fallback call on the real model fills in valid arguments.

    Scripted: only the chat agent's first round, which says
    ``<event>notes.lookup</event>`` (the 135M model never writes event blocks itself).
    Real: the ``notes.lookup`` resolver returns ``{}``, which fails the tool's schema,
    so the event agent makes one forced ``tool_choice`` call to the real server.
    llama.cpp constrains that call with a grammar built from the schema, so the tool
    runs with valid arguments. The follow-up round and the reconnect turn are real
    too.
    """
    received: list[dict[str, Any]] = []
    registry: ToolRegistry = tool_registry(tmp_path / "tools")
    registry.register(lookup_tool(received))
    names = registry.names()
    question = "Do my notes say anything about the Eiffel Tower?"
    reply = f"Let me check your notes. <event>{LOOKUP}</event>"
    transport = scripted_transport(local_server.model, reply)
    async with (
        httpx.AsyncClient(transport=transport) as scripted_http,
        OpenAICompatibleChatClient(local_server.base_url) as real,
        OpenAICompatibleChatClient(
            "http://scripted.invalid/v1", http_client=scripted_http
        ) as scripted,
    ):
        client = RecordingClient(real, scripted)
        client.script_first_catalog_round()
        with SQLiteSessionStore(tmp_path / "lab.sqlite3") as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            request = make_request(local_server, question, mode="dual_agent", tools=names)
            outputs = await run_one_turn(runtime, request)
            session_id = session_id_of(outputs)

            assert [call.scripted for call in client.calls][:2] == [True, False]
            events = [m["event"] for m in outputs if m["type"] == "event"]
            assert [event["name"] for event in events] == [LOOKUP]
            (forced,) = client.forced_calls()
            assert forced.tool_choice == {"type": "function", "function": {"name": LOOKUP}}
            assert [tool["function"]["name"] for tool in forced.tools] == [LOOKUP]

            # the grammar-constrained call gave arguments that fit the schema
            assert len(received) == 1, "the tool ran once"
            jsonschema.validate(received[0], LOOKUP_SCHEMA)
            (result,) = [m["message"] for m in outputs if m["type"] == "tool_result"]
            assert "error" not in json.loads(result["content"])

            summary = store.usage_summary(session_id)
            assert summary["turns"][0]["status"] == "completed"
            fallbacks = [c for c in summary["calls"] if c["call_kind"] == "argument_fallback"]
            assert len(fallbacks) == 1
            (fallback,) = fallbacks
            assert fallback["agent"] == "event_agent"
            assert fallback["event_name"] == LOOKUP
            assert fallback["ttft_ms"] is not None
            assert_usage_not_reported(fallback)
            for call in summary["calls"]:
                if call["call_kind"] == "chat":
                    assert_usage_not_reported(call)
            (tool_run,) = [c for c in summary["calls"] if c["call_kind"] == "tool_execution"]
            assert tool_run["status"] == "success"

            # what llama.cpp really sent for the forced call was recorded and parsed
            (response,) = audits(store, session_id, "event_agent_response")
            (recorded,) = response["raw_model_chunks"]
            deltas = [c["choices"][0]["delta"] for c in recorded["chunks"] if c.get("choices")]
            argument_deltas = [d for d in deltas if d.get("tool_calls")]
            assert len(argument_deltas) >= 2
            assert all(d.get("function_call") for d in argument_deltas), "legacy function_call"
            names_sent = {d["tool_calls"][0]["function"]["name"] for d in argument_deltas}
            assert len(names_sent) == 1, "the name is repeated on every argument delta"

            messages = [(m["role"], m["content"].strip()) for m in store.list_messages(session_id)]
            assert messages[:2] == [("user", question), ("assistant", "Let me check your notes.")]

            # reconnect: the restored visible history goes to the real model
            follow_up = "Thanks!"
            again = DebugRuntime(client, registry=registry, session_store=store)
            second = await reconnect(
                again,
                make_request(
                    local_server, follow_up, mode="dual_agent", tools=names, session_id=session_id
                ),
            )
            assert [m["type"] for m in second].count("turn_completed") == 1
            last_chat = [call for call in client.calls if call.tool_choice is None][-1]
            assert not last_chat.scripted
            sent = [(m.role, m.content.strip()) for m in last_chat.messages]
            assert ("user", question) in sent
            assert ("assistant", "Let me check your notes.") in sent
            assert sent[-1] == ("user", follow_up)
            started = audits(store, session_id, "session_started")
            assert started[-1]["restored_message_count"] >= 2
            turns = store.usage_summary(session_id)["turns"]
            assert [t["status"] for t in turns] == ["completed", "completed"]


# ----------------------------------------------------------------- replay and CLI


@pytest.mark.local_llm
@needs_extra
def test_cli_recorded_local_session_replays_identically(tmp_path: Path) -> None:
    """``agent-lab run --local`` records a session that ``agent-lab replay`` reproduces."""
    home, db = tmp_path / "home", tmp_path / "lab.sqlite3"
    run = agent_lab(
        home,
        "run",
        "--local",
        "--json",
        "--db",
        str(db),
        "--mode",
        "chat_agent_tools",
        "What is the capital of France?",
    )
    assert run.returncode == 0, run.stderr
    lines = json_lines(run.stdout)
    assert lines[-1] == {"type": "done"}
    session_id = session_id_of(lines)
    with SQLiteSessionStore(db) as store:
        calls = store.usage_summary(session_id)["calls"]
    assert [call["call_kind"] for call in calls] == ["chat"]
    assert_usage_not_reported(calls[0])

    replay = agent_lab(home, "replay", session_id, "--db", str(db))  # recorded pacing

    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "identical" in replay.stdout


@pytest.mark.local_llm
@pytest.mark.asyncio
async def test_dual_agent_session_with_a_real_fallback_replays_identically(
    local_server: LocalModelServer, tmp_path: Path, lab_home: Path
) -> None:
    """A dual-agent session whose built-in resolver finds nothing replays identically.

    Scripted: only the chat agent's first round (``<event>device.volume.adjust</event>``).
    "Could you adjust the volume for me?" names no level, so the built-in volume
    resolver returns ``{}`` and the event agent asks the real model. Replay runs the
    built-in tools, so it reproduces the same fallback from the recorded chunks.
    """
    db = tmp_path / "lab.sqlite3"
    registry = tool_registry(tmp_path / "tools")
    reply = "Sure, adjusting the volume. <event>device.volume.adjust</event>"
    transport = scripted_transport(local_server.model, reply)
    async with (
        httpx.AsyncClient(transport=transport) as scripted_http,
        OpenAICompatibleChatClient(local_server.base_url) as real,
        OpenAICompatibleChatClient(
            "http://scripted.invalid/v1", http_client=scripted_http
        ) as scripted,
    ):
        client = RecordingClient(real, scripted)
        client.script_first_catalog_round()
        with SQLiteSessionStore(db) as store:
            runtime = DebugRuntime(client, registry=registry, session_store=store)
            request = make_request(
                local_server,
                "Could you adjust the volume for me?",
                mode="dual_agent",
                tools=registry.names(),
            )
            session_id = session_id_of(await run_one_turn(runtime, request))
            calls = store.usage_summary(session_id)["calls"]
    kinds = sorted(call["call_kind"] for call in calls)
    assert kinds == ["argument_fallback", "chat", "tool_execution"]

    replay = agent_lab(
        tmp_path / "replay-home", "replay", session_id, "--db", str(db), "--speed", "0"
    )

    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "identical" in replay.stdout


@pytest.mark.local_llm
@needs_extra
def test_run_local_json_ends_with_done(tmp_path: Path) -> None:
    run = agent_lab(tmp_path / "home", "run", "--local", "--json", "Say hello")

    assert run.returncode == 0, run.stderr
    lines = json_lines(run.stdout)
    assert lines[0]["type"] == "session_started"
    assert lines[-1] == {"type": "done"}
    stats = [line for line in lines if line["type"] == "round_stats"]
    assert stats and stats[0]["total_tokens"] == 0, "llama.cpp streams no usage"
    assert not [line for line in lines if line["type"] in ("usage", "error")]


@pytest.mark.local_llm
@needs_extra
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_local_serve_answers_and_stops_on_a_signal(tmp_path: Path, stop: signal.Signals) -> None:
    port = free_port()
    process = subprocess.Popen(
        [*AGENT_LAB, "local", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(tmp_path / "home"),
        start_new_session=True,
    )
    try:
        reader = LineReader(process)
        line = reader.wait_for("listening on", timeout=90)
        base_url = line.split("listening on ")[1].strip()
        assert base_url == f"http://127.0.0.1:{port}/v1"
        models = httpx.get(f"{base_url}/models", trust_env=False, timeout=10).json()
        assert [entry["id"] for entry in models["data"]] == ["SmolLM2-135M-Instruct.Q4_1"]

        process.send_signal(stop)

        assert process.wait(timeout=30) == 0
        assert "stopping" in reader.rest()
        assert refuses_connections(port)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # its own group: the server too
        process.wait()
        assert process.stderr is not None
        stderr = process.stderr.read()
        process.stderr.close()
        assert process.stdout is not None
        process.stdout.close()
    assert stderr == ""


# ------------------------------------------------------------- without the extra


def test_local_serve_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(local_llm, "is_local_extra_installed", lambda: False)

    result = CliRunner().invoke(app, ["local", "serve", "--port", "0"], env=_runner_env(tmp_path))

    assert result.exit_code == 2
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1
    assert errors[0].startswith("error: ") and "pip install 'agent-lab[local]'" in errors[0]


@pytest.mark.local_llm
@needs_extra
def test_local_serve_refuses_a_non_loopback_host(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["local", "serve", "--host", "0.0.0.0"], env=_runner_env(tmp_path)
    )

    assert result.exit_code == 2
    assert "loopback" in result.stderr


def test_local_help_has_examples(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["local", "serve", "--help"], env=_runner_env(tmp_path))

    assert result.exit_code == 0
    assert "Examples" in result.stdout and "agent-lab local serve --port" in result.stdout


def _runner_env(tmp_path: Path) -> dict[str, str | None]:
    env: dict[str, str | None] = dict.fromkeys(SCRUBBED_ENV)
    env.update(AGENT_LAB_HOME=str(tmp_path / "home"), COLUMNS="160")
    return env
