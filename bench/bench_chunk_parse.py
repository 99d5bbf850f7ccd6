"""CPU cost per chunk of the chat client's parsing path, from raw bytes to ``StreamItem``s.

Run from the project root::

    .venv/bin/python bench/bench_chunk_parse.py             # print the figures
    .venv/bin/python bench/bench_chunk_parse.py --write     # also record them in bench/RESULTS.md

Each scenario feeds a realistic body (OpenAI-format chunks) through ``ChunkStream`` (SSE
decoding, orjson parsing, text-event or tool-call assembly, item construction) and reports
the process CPU time per provider chunk: the best and the median of several rounds. For
comparison, the last line times what the SDK's typed path does per chunk
(``json.loads`` + ``ChatCompletionChunk.model_validate``), which the client avoids.
The target is at most 10 µs per chunk.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from itertools import count
from pathlib import Path
from typing import Any

import orjson
from openai.types.chat import ChatCompletionChunk

from agent_lab.infrastructure.openai_compat.chunk_parser import ChunkStream

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION_START = "<!-- bench_chunk_parse:start -->"
SECTION_END = "<!-- bench_chunk_parse:end -->"
TARGET_US = 10.0
ROUNDS = 7


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-AbX7kQ2m9TzWcRvN4pLs",
        "object": "chat.completion.chunk",
        "created": 1733312000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }


def _event(chunk: dict[str, object]) -> bytes:
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def text_body(tokens: int) -> list[dict[str, object]]:
    words = ["The", " weather", " in", " Zürich", " is", " mild", " today", ","]
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": words[n % len(words)]}) for n in range(tokens)]
    return [*chunks, _chunk({}, "stop")]


def event_text_body(tokens: int) -> list[dict[str, object]]:
    chunks = text_body(tokens)
    for n in range(1, len(chunks) - 1, 50):
        chunks[n] = _chunk({"content": " <event>handoff_note</event>"})
    return chunks


def tool_body(fragments: int) -> list[dict[str, object]]:
    first = {"index": 0, "id": "call_Wq3L", "type": "function"}
    chunks = [
        _chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**first, "function": {"name": "get_weather", "arguments": ""}}],
            }
        ),
        _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"notes": "'}}]}),
    ]
    fragment: dict[str, object] = {"tool_calls": [{"index": 0, "function": {"arguments": "abc "}}]}
    chunks += [_chunk(fragment) for _ in range(fragments)]
    chunks.append(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"}'}}]}))
    return [*chunks, _chunk({}, "tool_calls")]


@dataclass(frozen=True)
class Scenario:
    name: str
    reads: list[bytes]
    chunks: int
    text_events: bool


def scenario(
    name: str, chunks: list[dict[str, object]], *, read_size: int | None, text_events: bool
) -> Scenario:
    body = b"".join(_event(chunk) for chunk in chunks) + b"data: [DONE]\n\n"
    if read_size is None:
        reads = [_event(chunk) for chunk in chunks] + [b"data: [DONE]\n\n"]
    else:
        reads = [body[i : i + read_size] for i in range(0, len(body), read_size)]
    return Scenario(name, reads, len(chunks), text_events)


def run_stream(case: Scenario) -> int:
    ids = count()
    stream = ChunkStream(text_events=case.text_events, new_call_id=lambda: f"call_{next(ids)}")
    produced = 0
    for read in case.reads:
        produced += len(stream.feed(read))
    return produced + len(stream.finish())


def per_chunk_us(work: Callable[[], object], chunks: int) -> tuple[float, float]:
    """Best and median process CPU time per chunk over ``ROUNDS`` rounds, in µs."""
    work()  # warm up
    samples = []
    for _ in range(ROUNDS):
        started = time.process_time_ns()
        work()
        samples.append((time.process_time_ns() - started) / chunks / 1000)
    return min(samples), statistics.median(samples)


def sdk_typed_path(chunks: list[dict[str, object]]) -> Callable[[], object]:
    payloads = [orjson.dumps(chunk) for chunk in chunks]

    def work() -> object:
        return [ChatCompletionChunk.model_validate(json.loads(data)) for data in payloads]

    return work


def machine() -> str:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{model}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
        f"CPython {platform.python_version()}, orjson {orjson.__version__}"
    )


def measure() -> list[tuple[str, int, float, float]]:
    cases = [
        scenario("text, one event per read", text_body(2000), read_size=None, text_events=False),
        scenario("text, 4 KiB reads", text_body(2000), read_size=4096, text_events=False),
        scenario(
            "text + inline events (dual mode)",
            event_text_body(2000),
            read_size=None,
            text_events=True,
        ),
        scenario(
            "tool-call argument fragments", tool_body(2000), read_size=None, text_events=False
        ),
        scenario("text, 1-byte reads (worst case)", text_body(200), read_size=1, text_events=False),
    ]
    rows = []
    for case in cases:
        best, median = per_chunk_us(partial(run_stream, case), case.chunks)
        rows.append((case.name, case.chunks, best, median))
    typed = text_body(2000)
    best, median = per_chunk_us(sdk_typed_path(typed), len(typed))
    rows.append(("for comparison: SDK typed chunk (json + pydantic)", len(typed), best, median))
    return rows


def report(rows: list[tuple[str, int, float, float]]) -> str:
    lines = [
        SECTION_START,
        "## Chat client: CPU per stream chunk (bytes → StreamItem)",
        "",
        "Command: `.venv/bin/python bench/bench_chunk_parse.py --write`",
        "",
        f"Machine: {machine()}",
        "",
        f"Target: ≤ {TARGET_US:g} µs per chunk. "
        f"Process CPU time, best / median of {ROUNDS} rounds.",
        "",
        "| scenario | chunks | best µs/chunk | median µs/chunk |",
        "|---|---:|---:|---:|",
    ]
    lines += [f"| {name} | {n} | {best:.2f} | {median:.2f} |" for name, n, best, median in rows]
    lines += [
        "",
        "The 1-byte row feeds every byte separately (about 280 `feed()` calls per chunk), a "
        "stress case for the decoder rather than a real read pattern; servers and httpx "
        "deliver whole events or larger reads.",
        "",
        SECTION_END,
    ]
    return "\n".join(lines)


def write(section: str) -> None:
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else "# Benchmark results\n"
    if SECTION_START in text and SECTION_END in text:
        head, rest = text.split(SECTION_START, 1)
        text = head + section + rest.split(SECTION_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    RESULTS.write_text(text, encoding="utf-8")


def suite_run(quick: bool = False) -> Any:
    """The suite's entry point (``python -m bench --only chunk_parse``); same sizes in quick."""
    from bench._common import Check, Report

    rows = measure()
    skipped = (SECTION_START, SECTION_END, "## ", "Command:", "Machine:")
    body = [line for line in report(rows).split("\n") if not line.startswith(skipped)]
    realistic = [row for row in rows if "1-byte" not in row[0] and "comparison" not in row[0]]
    worst = max(realistic, key=lambda row: row[3])
    check = Check(
        "chunk parse",
        f"parser µs per chunk, worst realistic case ({worst[0]})",
        f"{worst[3]:.2f}",
        f"≤ {TARGET_US:g}",
        worst[3] <= TARGET_US,
    )
    figures = {f"median_us[{name}]": median for name, _, _, median in rows}
    return Report(
        "Chat client parser: CPU per chunk (bytes → StreamItem)",
        ".venv/bin/python -m bench --only chunk_parse",
        "\n".join(body).strip(),
        [check],
        figures,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the figures in RESULTS.md")
    args = parser.parse_args()
    section = report(measure())
    print(section)
    if args.write:
        write(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
