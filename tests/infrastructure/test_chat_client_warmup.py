"""Warm-up never runs on the event loop, and each call's timing tells warm-up apart.

The import checks run in a fresh interpreter (a real subprocess), where the SDK's request
modules are not loaded yet: an audit hook records which thread imports them. How long
the loop stalls is measured in ``bench/bench_first_call.py``, not here.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams
from agent_lab.domain.call_timing import CallTiming
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.chat_client import ChatStream, OpenAICompatibleChatClient
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

PRELUDE = """
import asyncio, json, sys, threading
TARGET = "openai.resources.chat.completions.completions"
WATCHED = ("openai", "httpx", "httpcore", "anyio", "h11", "ssl", "certifi")
importers = set()
on_loop = []  # watched modules first imported by the loop thread while it runs
state = {"loop_thread": None}

def hook(event, args):
    if event != "import" or args[0] in sys.modules:
        return
    if args[0] == TARGET:
        importers.add(threading.get_ident())
    if threading.get_ident() == state["loop_thread"] and args[0].startswith(WATCHED):
        on_loop.append(args[0])

sys.addaudithook(hook)
from agent_lab.application.contracts import AgentParams
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer

OK = ScriptedResponse.sse(
    {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
)

async def call(client):
    stream = client.stream_chat(
        [ChatMessage(role="user", content="hi")], [], AgentParams(model="m")
    )
    items = [item.kind async for item in stream]
    return {"items": items, "warmup_ms": stream.timing.warmup_ms, "cold": stream.timing.cold}
"""


def _run(body: str) -> dict[str, Any]:
    script = PRELUDE + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_first_call_inside_a_running_loop_imports_nothing_on_the_loop() -> None:
    result = _run(
        """
        async def main():
            async with SSETranscriptServer(OK, OK) as server:
                state["loop_thread"] = threading.get_ident()
                client = OpenAICompatibleChatClient(server.base_url)
                first = await call(client)
                second = await call(client)
                await client.aclose()
                state["loop_thread"] = None
            return {
                "typed_resources_loaded": TARGET in sys.modules,
                "on_loop": on_loop,
                "first": first,
                "second": second,
            }

        print(json.dumps(asyncio.run(main())))
        """
    )
    # Requests go through the SDK's generic request path: its ~500 typed resource
    # modules are never needed, on the loop or off it.
    assert result["typed_resources_loaded"] is False
    assert result["on_loop"] == []
    assert result["first"]["items"][-1] == "message_delta"
    assert result["second"]["warmup_ms"] == 0.0
    assert result["second"]["cold"] is False


def test_awaited_warm_up_leaves_nothing_for_the_first_call() -> None:
    result = _run(
        """
        async def main():
            async with SSETranscriptServer(OK, OK) as server:
                state["loop_thread"] = threading.get_ident()
                client = OpenAICompatibleChatClient(server.base_url)
                connected = await client.warm_up(connect=True)
                ready = client.warm
                first = await call(client)
                await client.aclose()
                state["loop_thread"] = None
                requests = [r.path for r in server.requests]
            return {
                "on_loop": on_loop,
                "connected": connected,
                "ready": ready,
                "first": first,
                "requests": requests,
            }

        print(json.dumps(asyncio.run(main())))
        """
    )
    assert result["ready"] is True
    assert result["on_loop"] == []
    assert result["first"]["warmup_ms"] == 0.0 and result["first"]["cold"] is False
    assert result["connected"] is True
    assert result["requests"] == ["/v1/models", "/v1/chat/completions"]


def test_client_built_outside_a_loop_is_warm_at_once() -> None:
    result = _run(
        """
        client = OpenAICompatibleChatClient("http://127.0.0.1:9/v1")
        print(json.dumps({"warm": client.warm, "imported": TARGET in sys.modules}))
        """
    )
    assert result == {"warm": True, "imported": False}  # the typed resources stay unloaded


@pytest.mark.asyncio
async def test_a_call_that_waits_for_warm_up_reports_it_apart_from_provider_time() -> None:
    ok = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    )
    async with SSETranscriptServer(ok, ok) as server:
        client = OpenAICompatibleChatClient(server.base_url)
        await client.warm_up()
        assert client._sdk is not None
        await client._sdk.close()
        client._post = client._sdk = client._warming = None  # cold again, deterministically
        messages = [ChatMessage(role="user", content="hi")]
        cold = client.stream_chat(messages, [], AgentParams(model="m"))
        assert isinstance(cold, ChatStream)
        kinds = [item.kind async for item in cold]
        warm = client.stream_chat(messages, [], AgentParams(model="m"))
        _ = [item async for item in warm]
        await client.aclose()
    assert kinds[0] == "raw_chunk"
    assert cold.timing.cold and cold.timing.warmup_ms > 0
    assert not warm.timing.cold and warm.timing.warmup_ms == 0
    for timing in (cold.timing, warm.timing):
        assert isinstance(timing, CallTiming)
        assert timing.connect_ms is not None and timing.first_chunk_ms is not None
        assert timing.total_ms is not None
        assert 0 <= timing.connect_ms <= timing.first_chunk_ms <= timing.total_ms
        assert timing.attempts == 1


@pytest.mark.asyncio
async def test_concurrent_first_calls_share_one_warm_up() -> None:
    ok = ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    )
    async with SSETranscriptServer(ok, ok, ok) as server:
        client = OpenAICompatibleChatClient(server.base_url)
        messages = [ChatMessage(role="user", content="hi")]

        async def one() -> list[str]:
            stream = client.stream_chat(messages, [], AgentParams(model="m"))
            return [item.content async for item in stream if item.kind == "message_delta"]

        results = await asyncio.gather(one(), one(), one())
        await client.aclose()
    assert list(results) == [["ok"]] * 3
    assert server.request_count == 3
