"""The simulated provider over real HTTP: wire format, behaviour, usage, latency, load."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator
from openai import AsyncOpenAI

from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.domain.events import EVENT_BLOCK_END, EVENT_BLOCK_START
from agent_lab.infrastructure.simulator import provider as simulator_provider
from agent_lab.infrastructure.simulator.intents import IntentKind, detect_intents
from agent_lab.infrastructure.simulator.phrasing import plain_answer
from agent_lab.infrastructure.simulator.provider import (
    MODEL_ID,
    LatencyModel,
    SimulatedProvider,
    SimulatedProviderServer,
)

VOLUME_SCHEMA = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["absolute", "relative"]},
        "value": {"type": "integer", "minimum": -100, "maximum": 100},
    },
    "required": ["mode", "value"],
}
SCHEDULE_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "start_at": {"type": "string", "minLength": 1},
        "timezone": {"type": "string", "minLength": 1},
    },
    "required": ["title", "start_at", "timezone"],
}
SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string", "minLength": 1}},
    "required": ["query"],
}
NOTE_SCHEMA = {
    "type": "object",
    "properties": {"message": {"type": "string", "minLength": 1}},
    "required": ["message"],
}
TERMINATE_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}

BUILTINS: dict[str, tuple[str, dict[str, Any]]] = {
    "device.volume.adjust": ("Change the speaker volume.", VOLUME_SCHEMA),
    "calendar.schedule.create": ("Add an entry to the user's calendar.", SCHEDULE_SCHEMA),
    "knowledge.web.search": ("Look up documents that can ground an answer.", SEARCH_SCHEMA),
    "handoff_note": ("Hand the conversation over to a human colleague.", NOTE_SCHEMA),
    "session.terminate": ("End the conversation and close the session.", TERMINATE_SCHEMA),
}


def catalog(names: list[str] | None = None) -> str:
    """The real dual-mode catalog prompt, built by the registry."""
    registry = ToolRegistry(
        ToolDefinition(name, description, schema, handler=lambda event: {})
        for name, (description, schema) in BUILTINS.items()
    )
    return registry.chat_event_system_message(names or list(BUILTINS))


def tool(name: str, registry_name: str, description: str | None = None) -> dict[str, Any]:
    default_description, schema = BUILTINS[registry_name]
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": default_description if description is None else description,
            "parameters": schema,
        },
    }


def dual_body(user: str, *, names: list[str] | None = None) -> dict[str, Any]:
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": "You are a helpful voice assistant."},
            {"role": "system", "content": catalog(names)},
            {"role": "user", "content": user},
        ],
    }


@dataclass
class Streamed:
    """A parsed SSE response."""

    chunks: list[dict[str, Any]]
    done: bool
    elapsed_to_first: float
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    @property
    def choice_chunks(self) -> list[dict[str, Any]]:
        return [chunk for chunk in self.chunks if chunk["choices"]]

    @property
    def content(self) -> str:
        return "".join(
            chunk["choices"][0]["delta"].get("content") or "" for chunk in self.choice_chunks
        )

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        calls: dict[int, dict[str, Any]] = {}
        for chunk in self.choice_chunks:
            for fragment in chunk["choices"][0]["delta"].get("tool_calls", []):
                call = calls.setdefault(fragment["index"], {"arguments": ""})
                call.update({k: fragment[k] for k in ("id", "type") if k in fragment})
                function = fragment.get("function", {})
                call.setdefault("name", function.get("name"))
                call["arguments"] += function.get("arguments", "")
        return [calls[index] for index in sorted(calls)]

    @property
    def finish_reason(self) -> str | None:
        reason: str | None = self.choice_chunks[-1]["choices"][0]["finish_reason"]
        return reason

    @property
    def usage(self) -> dict[str, Any]:
        usage: dict[str, Any] = self.chunks[-1]["usage"]
        return usage


async def stream(
    http: httpx.AsyncClient, body: dict[str, Any], first_chunk: asyncio.Barrier | None = None
) -> Streamed:
    """Stream one completion; with ``first_chunk``, meet there after the first chunk."""
    payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
    started = time.perf_counter()
    first: float | None = None
    lines: list[str] = []
    async with http.stream("POST", "/chat/completions", json=payload) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line:
                if first is None:
                    first = time.perf_counter() - started
                    if first_chunk is not None:
                        await first_chunk.wait()
                lines.append(line)
    assert all(line.startswith("data: ") for line in lines)
    done = lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1] if done] or [
        json.loads(line[6:]) for line in lines
    ]
    return Streamed(chunks=chunks, done=done, elapsed_to_first=first or 0.0)


def event_names(content: str) -> list[str]:
    start = content.index(EVENT_BLOCK_START) + len(EVENT_BLOCK_START)
    return [name.strip() for name in content[start : content.index(EVENT_BLOCK_END)].split(",")]


# --- endpoints and errors -----------------------------------------------------------


@pytest.mark.asyncio
async def test_models_lists_the_simulated_model(http: httpx.AsyncClient) -> None:
    response = await http.get("/models")
    assert response.status_code == 200
    assert [model["id"] for model in response.json()["data"]] == [MODEL_ID]
    assert (await http.get(f"/models/{MODEL_ID}")).json()["id"] == MODEL_ID


@pytest.mark.asyncio
async def test_unknown_path_is_404_with_openai_error(http: httpx.AsyncClient) -> None:
    response = await http.post("/completions/nope", json={})
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "/v1/completions/nope" in error["message"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[1, 2]",
        b'{"model": "m", "messages": []}',
        b'{"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": "maybe"}',
        b'{"model": "m", "messages": [{"role": "user", "content": "hi"}],'
        b' "tool_choice": {"type": "function", "function": {"name": "missing"}}}',
    ],
)
async def test_malformed_body_is_400(http: httpx.AsyncClient, body: bytes) -> None:
    response = await http.post(
        "/chat/completions", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"]


@pytest.mark.asyncio
async def test_path_without_v1_and_authorization_header_are_accepted(
    server: SimulatedProviderServer, provider: SimulatedProvider
) -> None:
    root = server.base_url.removesuffix("/v1")
    async with httpx.AsyncClient(base_url=root) as client:
        response = await client.post(
            "/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "hello"}]},
            headers={"Authorization": "Bearer sk-secret-value"},
        )
    assert response.status_code == 200
    assert response.json()["object"] == "chat.completion"
    assert "sk-secret-value" not in repr(list(provider.requests))


@pytest.mark.asyncio
async def test_requests_are_recorded_in_a_bounded_deque(
    http: httpx.AsyncClient, provider: SimulatedProvider
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    await http.post("/chat/completions", json=body)
    assert list(provider.requests) == [body]
    assert provider.requests.maxlen == 200


# --- dual_agent mode: inline event blocks -------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("user", "event"),
    [
        ("Set the volume to 30", "device.volume.adjust"),
        ("It's too loud, turn it down please.", "device.volume.adjust"),
        ("Schedule a design review tomorrow at 3pm", "calendar.schedule.create"),
        ("Search for event batch safety", "knowledge.web.search"),
        ("Note that the customer wants a refund", "handoff_note"),
        ("Thanks, that's all. Goodbye!", "session.terminate"),
    ],
)
async def test_dual_mode_writes_an_event_block_per_intent(
    http: httpx.AsyncClient, user: str, event: str
) -> None:
    result = await stream(http, dual_body(user))
    assert result.done
    assert event_names(result.content) == [event]
    assert result.content.index(EVENT_BLOCK_START) > 0, "the model talks before the block"
    assert result.tool_calls == []
    assert result.finish_reason == "stop"


@pytest.mark.asyncio
async def test_dual_mode_names_several_events_in_one_block_in_order(
    http: httpx.AsyncClient,
) -> None:
    user = "Search for the launch checklist, then turn the volume down and schedule a sync at 4pm"
    result = await stream(http, dual_body(user))
    assert event_names(result.content) == [
        "knowledge.web.search",
        "device.volume.adjust",
        "calendar.schedule.create",
    ]
    assert result.content.count(EVENT_BLOCK_START) == 1


@pytest.mark.asyncio
async def test_dual_mode_never_names_an_event_that_is_not_offered(
    http: httpx.AsyncClient,
) -> None:
    result = await stream(http, dual_body("Set the volume to 30", names=["knowledge.web.search"]))
    assert EVENT_BLOCK_START not in result.content
    assert "volume" in result.content


@pytest.mark.asyncio
async def test_plain_answer_without_intent_echoes_the_topic(http: httpx.AsyncClient) -> None:
    result = await stream(http, dual_body("Can we chat about my favourite rainy day hobbies?"))
    assert EVENT_BLOCK_START not in result.content
    assert "your favourite rainy day hobbies" in result.content
    assert 1 <= result.content.count(".") <= 3


@pytest.mark.asyncio
async def test_max_tokens_cuts_a_plain_answer_with_finish_reason_length(
    http: httpx.AsyncClient,
) -> None:
    body = {
        "model": "m",
        "max_tokens": 3,
        "messages": [{"role": "user", "content": "Can we chat about the history of tea?"}],
    }
    result = await stream(http, body)
    assert result.finish_reason == "length"
    assert result.usage["completion_tokens"] == 3
    assert len(result.content.split()) <= 3


# --- chat_agent_tools mode: provider tool calls -------------------------------------


@pytest.mark.asyncio
async def test_tools_mode_parallel_calls_with_aliased_names(http: httpx.AsyncClient) -> None:
    tools = [
        tool("calendar_2e_schedule_2e_create", "calendar.schedule.create"),
        tool("device__volume__adjust", "device.volume.adjust"),
        tool("lookup", "knowledge.web.search", "Search the web for documents."),
    ]
    user = (
        "Set the volume to 30 and schedule a design review at 2026-07-14T09:30 in "
        "Asia/Shanghai, then look up event batch safety"
    )
    body = {"model": "m", "messages": [{"role": "user", "content": user}], "tools": tools}
    result = await stream(http, body)
    calls = result.tool_calls
    assert [call["name"] for call in calls] == [
        "device__volume__adjust",
        "calendar_2e_schedule_2e_create",
        "lookup",
    ]
    assert [json.loads(call["arguments"]) for call in calls] == [
        {"mode": "absolute", "value": 30},
        {
            "title": "Design review",
            "start_at": "2026-07-14T09:30:00+08:00",
            "timezone": "Asia/Shanghai",
        },
        {"query": "event batch safety"},
    ]
    assert len({call["id"] for call in calls}) == 3
    assert all(call["type"] == "function" for call in calls)
    assert result.finish_reason == "tool_calls"


@pytest.mark.asyncio
async def test_tool_call_fragments_follow_the_openai_shape(http: httpx.AsyncClient) -> None:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Search for event batch safety"}],
        "tools": [tool("knowledge__web__search", "knowledge.web.search")],
    }
    result = await stream(http, body)
    first = result.choice_chunks[0]
    assert first["object"] == "chat.completion.chunk"
    assert first["id"].startswith("chatcmpl-")
    assert first["choices"][0]["delta"]["role"] == "assistant"
    fragments = [
        fragment
        for chunk in result.choice_chunks
        for fragment in chunk["choices"][0]["delta"].get("tool_calls", [])
    ]
    head, *rest = fragments
    assert head["index"] == 0 and head["type"] == "function" and head["id"].startswith("call_")
    assert head["function"] == {"name": "knowledge__web__search", "arguments": ""}
    assert rest and all(set(f) == {"index", "function"} for f in rest)
    assert all(set(f["function"]) == {"arguments"} for f in rest)
    assert all(chunk["choices"][0]["finish_reason"] is None for chunk in result.choice_chunks[:-1])
    assert result.chunks[-1]["choices"] == []
    assert set(result.usage) >= {"prompt_tokens", "completion_tokens", "total_tokens"}


@pytest.mark.asyncio
async def test_forced_tool_choice_answers_only_that_call_with_valid_arguments(
    http: httpx.AsyncClient,
) -> None:
    name = "calendar_2e_schedule_2e_create"
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "Turn it up and book a design review tomorrow at 3pm"},
            {"role": "assistant", "content": f"On it. {EVENT_BLOCK_START}x{EVENT_BLOCK_END}"},
        ],
        "tools": [tool(name, "calendar.schedule.create", "")],
        "tool_choice": {"type": "function", "function": {"name": name}},
    }
    result = await stream(http, body)
    assert result.content == ""
    assert result.finish_reason == "tool_calls"
    [call] = result.tool_calls
    assert call["name"] == name
    arguments = json.loads(call["arguments"])
    Draft202012Validator(SCHEDULE_SCHEMA).validate(arguments)
    assert arguments == {
        "title": "Design review",
        "start_at": "2026-07-14T15:00:00+00:00",
        "timezone": "UTC",
    }


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("registry_name", "user", "expected"),
    [
        ("device.volume.adjust", "make it a bit louder", {"mode": "relative", "value": 10}),
        ("knowledge.web.search", "What is the refund policy?", {"query": "the refund policy"}),
        ("handoff_note", "I want a human to call me back", None),
        ("session.terminate", "ok thanks", {}),
    ],
)
async def test_forced_tool_choice_for_each_builtin(
    http: httpx.AsyncClient, registry_name: str, user: str, expected: dict[str, Any] | None
) -> None:
    alias = registry_name.replace(".", "__")
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": user}],
        "tools": [tool(alias, registry_name)],
        "tool_choice": {"type": "function", "function": {"name": alias}},
    }
    [call] = (await stream(http, body)).tool_calls
    arguments = json.loads(call["arguments"])
    Draft202012Validator(BUILTINS[registry_name][1]).validate(arguments)
    assert arguments == (expected if expected is not None else {"message": user})


@pytest.mark.asyncio
async def test_forced_custom_tool_gets_schema_shaped_arguments(http: httpx.AsyncClient) -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "unit": {"type": "string", "enum": ["c", "f"]},
        },
        "required": ["city", "days", "unit"],
    }
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": "Forecast for Lisbon, 3 days"}],
        "tools": [{"type": "function", "function": {"name": "forecast", "parameters": schema}}],
        "tool_choice": {"type": "function", "function": {"name": "forecast"}},
    }
    [call] = (await stream(http, body)).tool_calls
    arguments = json.loads(call["arguments"])
    Draft202012Validator(schema).validate(arguments)
    assert arguments["days"] == 3


# --- follow-ups after tool results ---------------------------------------------------


SEARCH_PAYLOAD = {
    "tool": "knowledge.web.search",
    "query": "event batch safety",
    "results": [
        {
            "title": "Batch safety in event agents",
            "snippet": "Batches are durable before tools run.",
            "source": "https://docs.example.org/batches",
        }
    ],
    "sources": ["https://docs.example.org/batches"],
}


@pytest.mark.asyncio
async def test_tools_mode_follow_up_summarises_the_search_result(
    http: httpx.AsyncClient,
) -> None:
    alias = "knowledge__web__search"
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "Search for event batch safety"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": alias, "arguments": '{"query":"x"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "name": alias,
                "content": json.dumps(SEARCH_PAYLOAD),
            },
        ],
        "tools": [tool(alias, "knowledge.web.search")],
    }
    result = await stream(http, body)
    assert result.tool_calls == []
    assert result.finish_reason == "stop"
    assert "Batch safety in event agents" in result.content
    assert "docs.example.org" in result.content


@pytest.mark.asyncio
async def test_dual_mode_follow_up_is_grounded_and_apologises_for_failures(
    http: httpx.AsyncClient,
) -> None:
    results = "EventAgent results:\n" + "\n".join(
        [
            json.dumps(SEARCH_PAYLOAD),
            json.dumps(
                {"tool": "device.volume.adjust", "error": "tool handler failed: no speaker"}
            ),
        ]
    )
    body = dual_body("Search for event batch safety and turn it up")
    body["messages"] += [
        {"role": "assistant", "content": "Checking."},
        {"role": "user", "name": "event_agent", "content": results},
    ]
    result = await stream(http, body)
    assert EVENT_BLOCK_START not in result.content
    assert "Batch safety in event agents" in result.content
    assert "Sorry" in result.content and "no speaker" in result.content


# --- usage and the prefix cache ------------------------------------------------------


@pytest.mark.asyncio
async def test_usage_reports_cached_tokens_for_a_repeated_prefix(http: httpx.AsyncClient) -> None:
    system = {"role": "system", "content": "You are a meticulous assistant. " * 40}
    first = {"model": "m", "messages": [system, {"role": "user", "content": "hello"}]}
    cold = (await stream(http, first)).usage
    second = {
        "model": "m",
        "messages": [
            *first["messages"],
            {"role": "assistant", "content": "Hello! How can I help you today?"},
            {"role": "user", "content": "Tell me about tides."},
        ],
    }
    warm = (await stream(http, second)).usage
    assert cold["prompt_tokens_details"]["cached_tokens"] == 0
    cached = warm["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and cached % 64 == 0
    assert cached <= warm["prompt_tokens"]
    assert cached >= cold["prompt_tokens"] - 64
    for usage in (cold, warm):
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert usage["completion_tokens"] > 0


# --- latency --------------------------------------------------------------------------


class _RecordedSleeps:
    """Stands in for ``asyncio`` in the provider module, noting each wait it asks for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float) -> None:
        self.delays.append(delay)
        await asyncio.sleep(delay)


@pytest.fixture
def provider_sleeps(monkeypatch: pytest.MonkeyPatch) -> _RecordedSleeps:
    recorded = _RecordedSleeps()
    monkeypatch.setattr(simulator_provider, "asyncio", recorded)
    return recorded


@pytest.mark.asyncio
async def test_latency_model_respects_time_to_first_token(
    provider_sleeps: _RecordedSleeps,
) -> None:
    provider = SimulatedProvider(LatencyModel(ttft_ms=200, tokens_per_second=0, jitter=0.0))
    body = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
    async with (
        SimulatedProviderServer(provider) as server,
        httpx.AsyncClient(base_url=server.base_url) as http,
    ):
        await stream(http, body)  # warm the connection
        provider_sleeps.delays.clear()
        result = await stream(http, body)
    # One wait before the first chunk, of the time to first token; nothing after it.
    assert len(provider_sleeps.delays) == 1
    assert 0 < provider_sleeps.delays[0] <= 0.2
    assert result.elapsed_to_first >= 0.18
    assert len(result.choice_chunks) > 2


@pytest.mark.asyncio
async def test_latency_model_paces_tokens_and_zero_latency_never_waits(
    http: httpx.AsyncClient, provider_sleeps: _RecordedSleeps
) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "Tell me about tides."}]}
    fast = await stream(http, body)
    assert provider_sleeps.delays == []
    tokens = fast.usage["completion_tokens"]
    provider = SimulatedProvider(LatencyModel(ttft_ms=0, tokens_per_second=100, jitter=0.0))
    async with (
        SimulatedProviderServer(provider) as server,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        provider_sleeps.delays.clear()
        started = time.perf_counter()
        paced = await stream(client, body)
        took = time.perf_counter() - started
    assert paced.content == fast.content
    # The waits add up to the token schedule (deadlines are absolute, so a late wake-up
    # shortens the next wait instead of adding to it), and the stream took at least that.
    assert len(provider_sleeps.delays) > 1
    assert sum(provider_sleeps.delays) <= (tokens - 1) / 100 + 1e-6
    assert took >= (tokens - 1) / 100 * 0.9


def test_latency_jitter_is_seeded_and_bounded() -> None:
    model = LatencyModel(ttft_ms=300, tokens_per_second=40, jitter=0.1, seed=7)
    delays = model.delays("request", [0, 1, 1, 2])
    assert delays == model.delays("request", [0, 1, 1, 2])
    assert delays != LatencyModel(jitter=0.1, seed=8).delays("request", [0, 1, 1, 2])
    assert 0.27 <= delays[0] <= 0.33
    assert all(0.9 / 40 <= delay <= 1.1 / 40 for delay in delays[1:3])
    assert LatencyModel.instant().delays("request", [0, 1, 5]) == [0.0, 0.0, 0.0]


# --- determinism and concurrency ----------------------------------------------------


async def _raw_stream(provider: SimulatedProvider, body: dict[str, Any]) -> bytes:
    async with (
        SimulatedProviderServer(provider) as server,
        httpx.AsyncClient(base_url=server.base_url) as client,
    ):
        response = await client.post("/chat/completions", json=body)
        return response.content


@pytest.mark.asyncio
async def test_same_seed_gives_identical_streams(clock: Callable[[], datetime]) -> None:
    body = {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": "Search for tides and turn it down"}],
        "tools": [tool("search", "knowledge.web.search"), tool("vol", "device.volume.adjust")],
    }
    runs = [
        await _raw_stream(SimulatedProvider(LatencyModel.instant(), seed=s, clock=clock), body)
        for s in (3, 3, 4)
    ]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]
    assert runs[0].endswith(b"data: [DONE]\n\n")


@pytest.mark.asyncio
@pytest.mark.timeout(180)
async def test_two_hundred_concurrent_streams_complete() -> None:
    provider = SimulatedProvider(LatencyModel(ttft_ms=100, tokens_per_second=200, jitter=0.1))
    limits = httpx.Limits(max_connections=250, max_keepalive_connections=250)
    all_open = asyncio.Barrier(200)

    async def concurrently(http: httpx.AsyncClient, n: int) -> Streamed:
        # No stream may go past its first chunk until every stream has one: a provider
        # that served them one after another would never let this barrier open.
        return await stream(http, dual_body(f"Set the volume to {n % 100}"), all_open)

    async with (
        SimulatedProviderServer(provider) as server,
        httpx.AsyncClient(base_url=server.base_url, limits=limits, timeout=120) as http,
    ):
        results = await asyncio.wait_for(
            asyncio.gather(*(concurrently(http, n) for n in range(200))), timeout=150
        )
    assert all(result.done for result in results)
    assert [event_names(r.content) for r in results] == [["device.volume.adjust"]] * 200


# --- the official SDK ---------------------------------------------------------------


@pytest.mark.asyncio
async def test_openai_sdk_streams_content_tool_calls_and_usage(
    server: SimulatedProviderServer,
) -> None:
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    tools: Any = [tool("device__volume__adjust", "device.volume.adjust")]
    stream_ = await client.chat.completions.create(
        model="agent-lab-sim",
        messages=[{"role": "user", "content": "Please mute it"}],
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    content, arguments, names, finish, usage = "", "", [], None, None
    async for chunk in stream_:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            content += choice.delta.content or ""
            finish = choice.finish_reason or finish
            for call in choice.delta.tool_calls or []:
                names += [call.function.name] if call.function and call.function.name else []
                arguments += call.function.arguments or "" if call.function else ""
    await client.close()
    assert content == "Muting it now."
    assert names == ["device__volume__adjust"]
    assert json.loads(arguments) == {"mode": "absolute", "value": 0}
    assert finish == "tool_calls"
    assert usage is not None and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens_details.cached_tokens == 0


@pytest.mark.asyncio
async def test_openai_sdk_non_streamed_completion(server: SimulatedProviderServer) -> None:
    client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
    tools: Any = [tool("lookup", "knowledge.web.search")]
    completion = await client.chat.completions.create(
        model="agent-lab-sim",
        messages=[{"role": "user", "content": "Look up the tide tables"}],
        tools=tools,
    )
    models = await client.models.list()
    await client.close()
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "lookup",
        {"query": "the tide tables"},
    )
    assert completion.usage is not None and completion.usage.completion_tokens > 0
    assert [model.id for model in models.data] == [MODEL_ID]


# --- intent extraction (pure) ---------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("louder!", [(IntentKind.VOLUME, {"mode": "relative", "value": 10})]),
        ("quieter by 20 please", [(IntentKind.VOLUME, {"mode": "relative", "value": -20})]),
        ("what's up?", []),
        ("search for salt and pepper", [(IntentKind.SEARCH, {"query": "salt and pepper"})]),
        (
            "Hand off to a human: the customer wants a refund",
            [(IntentKind.NOTE, {"message": "The customer wants a refund"})],
        ),
        ("Bye. Goodbye!", [(IntentKind.GOODBYE, {})]),
        (
            "Set up a meeting with Ana on Friday at 10:30 am in Europe/Lisbon",
            [
                (
                    IntentKind.SCHEDULE,
                    {
                        "title": "Meeting with Ana",
                        "start_at": "2026-07-17T10:30:00+01:00",
                        "timezone": "Europe/Lisbon",
                    },
                )
            ],
        ),
    ],
)
def test_intent_extraction(
    message: str, expected: list[tuple[IntentKind, Any]], clock: Callable[[], datetime]
) -> None:
    found = [(intent.kind, intent.arguments) for intent in detect_intents(message, clock())]
    assert found == expected


def test_server_reports_its_real_port_and_stops(provider: SimulatedProvider) -> None:
    server = SimulatedProviderServer(provider, port=0)
    with server:
        assert server.port > 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        assert httpx.get(f"{server.base_url}/models").status_code == 200
        url = server.base_url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/models")


def test_a_long_word_of_the_topic_is_echoed_cut_short() -> None:
    word = "z" * 5000
    answer = plain_answer(f"Tell me about {word} please", random.Random(0))
    assert "z" * 40 + "…" in answer and "z" * 41 not in answer
