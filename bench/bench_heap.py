"""What the collector walks in a full pass: the heap a process holds once it runs.

Run from the project root::

    .venv/bin/python -m bench --only heap
    .venv/bin/python -m bench.bench_heap [--quick]

A full collection visits every object the collector tracks, so its pause grows with
everything a process has imported and built, not only with its live sessions. Each
case runs in a fresh interpreter; after a ``gc.collect()`` it reports the modules
loaded, the objects the collector tracks and the shortest of five full collections:

* ``runtime``: ``agent_lab.application.runtime`` imported, one ``DebugRuntime`` built
  (what the in-process sessions benchmark holds);
* ``openai SDK``: ``import openai`` alone (it imports every one of its type modules);
* ``chat client``: the runtime and one streamed call through
  ``OpenAICompatibleChatClient`` (over an in-memory httpx transport: no network), as a
  process serving a real provider holds it;
* the same, then ``gc.freeze()``, as ``agent-lab serve`` does after start-up: what is
  frozen is left out of every later pass.
"""

from __future__ import annotations

import sys

from bench._common import Check, Report, fresh_process_json, table

TARGET_PAUSE_MS = 20.0
CASES = {
    "runtime": "runtime",
    "openai SDK (import openai)": "sdk",
    "runtime + chat client, one streamed call": "client",
    "same, start-up heap frozen (gc.freeze, as agent-lab serve does)": "client+freeze",
}
_SCRIPT = """
import asyncio, gc, json, sys, time
case = sys.argv[1]
if case == "sdk":
    import openai
else:
    from agent_lab.application.runtime import DebugRuntime
    from bench._common import ListClient
    DebugRuntime(ListClient([]))
if case.startswith("client"):
    import httpx
    from agent_lab.application.contracts import AgentParams
    from agent_lab.domain.messages import ChatMessage
    from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient

    body = (
        b'data: {"id":"c","object":"chat.completion.chunk","created":0,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\\n\\n'
        b"data: [DONE]\\n\\n"
    )

    def answer(request):
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async def one_call():
        http = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        client = OpenAICompatibleChatClient("http://127.0.0.1:9/v1", "sk-bench", http_client=http)
        user = [ChatMessage(role="user", content="hi")]
        async for _ in client.stream_chat(user, [], AgentParams(model="m")):
            pass
        await client.aclose()

    asyncio.run(one_call())
gc.collect()
if case.endswith("+freeze"):
    gc.freeze()
pauses = []
for _ in range(5):
    started = time.perf_counter()
    gc.collect()
    pauses.append((time.perf_counter() - started) * 1000)
print(json.dumps({
    "modules": len(sys.modules),
    "objects": len(gc.get_objects()),
    "frozen": gc.get_freeze_count(),
    "pause_ms": min(pauses),
}))
"""


def measure_case(case: str) -> dict[str, float]:
    figures: dict[str, float] = fresh_process_json(["-c", _SCRIPT, case], timeout=300)
    return figures


def run(quick: bool = False) -> Report:
    runs = 1 if quick else 3
    results: dict[str, dict[str, float]] = {}
    for label, case in CASES.items():
        samples = [measure_case(case) for _ in range(runs)]
        results[label] = min(samples, key=lambda sample: sample["pause_ms"])
    client = results["runtime + chat client, one streamed call"]["pause_ms"]
    frozen = results["same, start-up heap frozen (gc.freeze, as agent-lab serve does)"]["pause_ms"]
    return Report(
        "Heap: what a full collection walks",
        ".venv/bin/python -m bench --only heap",
        _markdown(results, runs),
        [
            Check(
                "heap",
                "full collection, process that streamed through the chat client, default collector",
                f"{client:.1f} ms",
                f"≤ {TARGET_PAUSE_MS:g} ms",
                client <= TARGET_PAUSE_MS,
            ),
            Check("heap", "same, start-up heap frozen", f"{frozen:.1f} ms", "–", None),
        ],
        {
            f"{key}[{case}]": value
            for label, case in CASES.items()
            for key, value in results[label].items()
        },
    )


def _markdown(results: dict[str, dict[str, float]], runs: int) -> str:
    rows = [
        (
            label,
            f"{figures['modules']:.0f}",
            f"{figures['objects']:,.0f}",
            f"{figures['frozen']:,.0f}",
            f"{figures['pause_ms']:.1f}",
        )
        for label, figures in results.items()
    ]
    return "\n".join(
        [
            f"Each case in a fresh interpreter, after a `gc.collect()`; the shortest of five "
            f"full collections, best of {runs} processes.",
            "",
            table(["process", "modules", "objects tracked", "frozen", "full collection ms"], rows),
            "",
            "The sessions benchmark's processes hold the runtime only; a server that streams "
            "from a provider also holds the openai SDK, which imports all its type modules "
            "(`import openai` cannot load less), and every full collection walks them.",
        ]
    )


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv).markdown)
