"""Benchmark: the largest event-loop stall around the first model call of a process.

Run from the project root::

    .venv/bin/python -m bench --only first_call
    .venv/bin/python -m bench.bench_first_call [--quick]

Every sample is a fresh interpreter (the SDK's request modules not loaded yet) that
imports its modules at the top, as an application does, then starts an event loop with
a heartbeat task (a 1 ms sleep in a loop; lag = how late each wake-up comes). Inside the
loop it builds a client and makes one streamed call against a real SSE server on
127.0.0.1 (run by this process). Variants:

- ``floor``: the heartbeat alone, for the machine's own scheduling jitter;
- ``openai SDK, built on the loop``: ``AsyncOpenAI`` built and first used inside the loop,
  which is what the chat client did before it warmed up off the loop;
- ``agent_lab client, built on the loop``: the first call follows construction at once;
- ``agent_lab client + await warm_up(connect=True)``: the session-start path.

The chat client module imports the SDK's request modules itself (at the top, before the
loop), and a client built inside a running loop builds its SDK client in a worker
thread. Reported: the largest heartbeat lag from construction to the end of the call, the wall
time of construction + first call, and the call's ``CallTiming``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer  # noqa: E402
from bench._common import Check, Report, fresh_process_json, median, table  # noqa: E402

TARGET_MS = 20.0
VARIANTS = {
    "floor": "floor: heartbeat alone for 0.3 s (the machine's own jitter)",
    "sdk": "openai SDK, built on the loop (the client before)",
    "client": "agent_lab client, built on the loop",
    "warm_up": "agent_lab client + await warm_up(connect=True)",
}

CHILD = r"""
import asyncio, json, sys, time
import openai

VARIANT, URL = sys.argv[1], sys.argv[2]
if VARIANT != "sdk":  # the SDK variant imports only what an SDK user would
    from agent_lab.application.contracts import AgentParams
    from agent_lab.domain.messages import ChatMessage
    from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient


async def sdk_call():
    client = openai.AsyncOpenAI(base_url=URL, api_key="unused")
    create = client.chat.completions.with_streaming_response.create
    async with create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True) as r:
        async for _ in r.iter_bytes():
            pass
    await client.close()
    return {}


async def client_call(warm_up):
    client = OpenAICompatibleChatClient(URL)
    if warm_up:
        await client.warm_up(connect=True)
    messages = [ChatMessage(role="user", content="hi")]
    stream = client.stream_chat(messages, [], AgentParams(model="m"))
    async for _ in stream:
        pass
    await client.aclose()
    t = stream.timing
    return {"warmup_ms": t.warmup_ms, "first_chunk_ms": t.first_chunk_ms}


async def main():
    loop = asyncio.get_running_loop()
    state = {"lag": 0.0, "stop": False}

    async def heartbeat():
        while not state["stop"]:
            before = loop.time()
            await asyncio.sleep(0.001)
            state["lag"] = max(state["lag"], loop.time() - before - 0.001)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.05)
    state["lag"] = 0.0
    started = time.perf_counter()
    if VARIANT == "floor":
        await asyncio.sleep(0.3)
        timing = {}
    else:
        timing = await (sdk_call() if VARIANT == "sdk" else client_call(VARIANT == "warm_up"))
    wall = time.perf_counter() - started
    state["stop"] = True
    await beat
    print(json.dumps({"max_lag_ms": state["lag"] * 1000, "wall_ms": wall * 1000, **timing}))


asyncio.run(main())
"""


def sample(variant: str, base_url: str) -> dict[str, float]:
    result: dict[str, float] = fresh_process_json(["-c", CHILD, variant, base_url], timeout=120)
    return result


def _ok() -> ScriptedResponse:
    return ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    )


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def run(quick: bool = False) -> Report:
    runs = 1 if quick else 8
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    with SSETranscriptServer(fallback=_ok()) as server:
        for _ in range(runs):  # interleaved, so all variants share the machine's moods
            for name in VARIANTS:
                samples[name].append(sample(name, server.base_url))
    rows = []
    for name, label in VARIANTS.items():
        got = samples[name]
        lags = [s["max_lag_ms"] for s in got]
        rows.append(
            (
                label,
                _fmt(median(lags)),
                _fmt(max(lags)),
                _fmt(median([s["wall_ms"] for s in got])),
                _fmt(median([s["warmup_ms"] for s in got]) if "warmup_ms" in got[0] else None),
                _fmt(median([s["first_chunk_ms"] for s in got]) if "warmup_ms" in got[0] else None),
            )
        )
    worst = max(max(s["max_lag_ms"] for s in samples[name]) for name in ("client", "warm_up"))
    header = [
        "variant",
        "largest stall ms (median)",
        "largest stall ms (max)",
        "construct + first call ms",
        "CallTiming.warmup_ms",
        "CallTiming.first_chunk_ms",
    ]
    markdown = (
        f"{runs} fresh interpreter(s) per variant, interleaved; heartbeat every 1 ms.\n\n"
        + table(header, rows)
    )
    floor = max(s["max_lag_ms"] for s in samples["floor"])
    markdown += (
        f"\n\nThe floor's worst stall ({floor:.1f} ms) is what this machine's load alone costs "
        "a heartbeat; the verdict compares the client's worst sample with 20 ms as is."
    )
    figures = {
        f"{name}_max_lag_ms": max(s["max_lag_ms"] for s in samples[name]) for name in VARIANTS
    }
    return Report(
        "First model call of a process: event-loop stall",
        ".venv/bin/python -m bench --only first_call",
        markdown,
        [
            Check(
                "first call",
                "largest event-loop stall, agent_lab client (worst sample)",
                f"{worst:.1f} ms",
                "≤ 20 ms",
                worst <= TARGET_MS,
            )
        ],
        figures,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    report = run(parser.parse_args().quick)
    print(report.markdown)
    for check in report.checks:
        print(check)


if __name__ == "__main__":
    main()
