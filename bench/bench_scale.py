"""Scale: compare campaigns on Ray by worker count, and web-lab streams by worker count.

Run from the project root (needs the ``postgres`` and ``ray`` extras and Debian's
``postgresql``)::

    .venv/bin/python -m bench.bench_scale [--quick]

Not part of ``python -m bench`` (it needs the extras); its section of
``bench/RESULTS.md`` is pasted from this script's output.

* **Campaign wall time vs workers.** ``agent-lab compare``'s code path on the ``demo``
  scenario at its realistic simulated latency (4 turns, about 300 ms to the first
  token, 40 tokens/s), ``REPEAT`` sessions per mode: the local executor (one session
  at a time) and ``--executor ray`` on a local Ray instance with 1, 2 and 4 worker CPUs
  (tasks share the driver's simulated provider). Ray's start-up is reported apart.
* **Sustained streams vs workers.** ``agent-lab serve --workers N`` on PostgreSQL,
  the simulated model in its own process (``agent-lab simulate``); ``SESSIONS``
  browser-like WebSocket clients start over one second and each runs ``TURNS`` turns
  back to back. Reported: turns completed, time to the first streamed token and turn
  time (p50 / p99), and the CPU of the worker processes. The load generator and the
  provider run on the same two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Report, percentile, table  # noqa: E402

REPEAT = 4
SESSIONS = (100, 300)
TURNS = 3
PROMPT = "Turn {t}: tell me about the old town bridges and their history, please."


# ------------------------------------------------------------------ campaigns


@dataclass
class CampaignRow:
    executor: str
    workers: int
    sessions: int
    wall_s: float
    startup_s: float
    driver_cpu_s: float


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def campaign(executor: str, workers: int, repeat: int) -> CampaignRow:
    from agent_lab.interfaces.cli.common import open_lab
    from agent_lab.interfaces.cli.compare import run_scenario, scenario_settings
    from agent_lab.interfaces.cli.compare_ray import campaign_jobs, run_on_ray, task_settings
    from agent_lab.interfaces.settings import load_settings
    from agent_lab.scenarios import load_scenario

    scenario = load_scenario("demo")
    home = tempfile.mkdtemp(prefix="bench-scale-")
    settings = scenario_settings(
        load_settings(environ={"AGENT_LAB_HOME": home}), scenario, fast=False
    )
    startup = 0.0
    if executor == "ray":
        import ray

        began = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        startup = time.perf_counter() - began

    async def main() -> int:
        async with open_lab(settings) as lab:
            if executor == "ray":
                shared = task_settings(settings, lab.base_url, lab.model)
                runs = await run_on_ray(shared, scenario, repeat, merge_into=lab.store)
            else:
                runs = [await run_scenario(lab, scenario, job.mode)
                        for job in campaign_jobs(scenario, repeat)]  # fmt: skip
        assert not any(run.errors for run in runs), [run.errors for run in runs]
        return len(runs)

    cpu, began = _cpu(), time.perf_counter()
    sessions = asyncio.run(main())
    wall, cpu = time.perf_counter() - began, _cpu() - cpu
    if executor == "ray":
        import ray

        ray.shutdown()
    return CampaignRow(executor, workers, sessions, wall, startup, cpu)


def campaign_section(repeat: int) -> tuple[str, dict[str, float]]:
    rows = [campaign("local", 1, repeat)]
    rows += [campaign("ray", workers, repeat) for workers in (1, 2, 4)]
    base = rows[0].wall_s
    lines = [
        (r.executor, r.workers, r.sessions, f"{r.wall_s:.1f}", f"{base / r.wall_s:.2f}",
         f"{r.wall_s / r.sessions:.2f}", f"{r.startup_s:.1f}" if r.executor == "ray" else "-")
        for r in rows
    ]  # fmt: skip
    figures = {f"campaign_{r.executor}_{r.workers}_s": r.wall_s for r in rows}
    figures["local_driver_cpu_per_session_s"] = rows[0].driver_cpu_s / rows[0].sessions
    text = table(
        ["executor", "workers", "sessions", "wall s", "speed-up", "s / session", "Ray start s"],
        lines,
        left=1,
    )
    return text, figures


# ------------------------------------------------------------------ streams


@dataclass
class StreamRow:
    workers: int
    sessions: int
    turns_done: int
    failed: int
    first_token_ms: list[float]
    turn_ms: list[float]
    wall_s: float
    worker_cpu_percent: float
    generator_cpu_percent: float = 0.0
    load_average: float = 0.0


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(part) for part in text.split()]


def _process_cpu(pids: list[int]) -> float:
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def _session(base: str, request: dict[str, Any], delay: float, row: StreamRow) -> None:
    from websockets.asyncio.client import connect

    await asyncio.sleep(delay)
    session_id = os.urandom(16).hex()
    ws_url = base.replace("http://", "ws://") + f"/ws/sessions/{session_id}"
    try:
        async with connect(ws_url, open_timeout=60, max_size=None) as ws:
            for turn in range(1, TURNS + 1):
                content = PROMPT.format(t=turn)
                sent = time.perf_counter()
                if turn == 1:
                    frame = {"type": "start", "request": {**request, "user_message": content}}
                else:
                    frame = {"type": "user", "content": content}
                await ws.send(json.dumps(frame))
                first = None
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), 120))
                    message = message.get("message", message)
                    kind = message.get("type")
                    if kind == "message_delta" and first is None:
                        first = time.perf_counter()
                    if kind == "error":
                        raise RuntimeError(message.get("message"))
                    if kind == "turn_completed":
                        break
                done = time.perf_counter()
                row.turns_done += 1
                row.first_token_ms.append(((first or done) - sent) * 1000)
                row.turn_ms.append((done - sent) * 1000)
    except Exception:  # a failed session is counted, the others go on
        row.failed += 1


def streams(workers: int, sessions: int, database_url: str, simulator: str) -> StreamRow:
    import httpx

    home = tempfile.mkdtemp(prefix="bench-serve-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(AGENT_LAB_DATABASE_URL=database_url, AGENT_LAB_HOME=home)
    command = [sys.executable, "-m", "agent_lab.interfaces.cli", "serve", "--port", "0",
               "--workers", str(workers), "--base-url", simulator,
               "--model", "agent-lab-sim"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert process.stdout is not None
        base = ""
        while not base:
            line = process.stdout.readline()
            if not line:
                raise RuntimeError("serve did not start")
            if "web lab on " in line:
                base = line.split("web lab on ")[1].split()[0].rstrip("/")
        for _ in range(600):
            try:
                request = httpx.get(f"{base}/api/defaults", timeout=5, trust_env=False).json()
                break
            except httpx.TransportError:
                time.sleep(0.1)
        time.sleep(2.0)  # every worker up (each opens its lab)
        pids = _children(process.pid) or [process.pid]  # one worker: the process itself
        row = StreamRow(workers, sessions, 0, 0, [], [], 0.0, 0.0)
        cpu, began, own = _process_cpu(pids), time.perf_counter(), _cpu()

        async def load() -> None:
            await asyncio.gather(*(
                _session(base, request["request"], index / sessions, row)
                for index in range(sessions)
            ))  # fmt: skip

        asyncio.run(load())
        row.wall_s = time.perf_counter() - began
        row.worker_cpu_percent = (_process_cpu(pids) - cpu) / row.wall_s * 100
        row.generator_cpu_percent = (_cpu() - own) / row.wall_s * 100
        row.load_average = os.getloadavg()[0]
        return row
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def streams_section(quick: bool) -> tuple[str, dict[str, float]]:
    from agent_lab.testing.postgres_server import PostgresServer

    counts = (20,) if quick else SESSIONS
    rows: list[StreamRow] = []
    sim = subprocess.Popen(
        [sys.executable, "-m", "agent_lab.interfaces.cli", "simulate", "--port", "0"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert sim.stdout is not None
        simulator = sim.stdout.readline().split("listening on ")[1].strip()
        with PostgresServer(max_connections=100) as server:
            for index, (workers, sessions) in enumerate((w, s) for s in counts for w in (1, 2)):
                url = server.create_database(f"bench_{index}")
                rows.append(streams(workers, sessions, url, simulator))
    finally:
        sim.send_signal(signal.SIGINT)
        sim.wait(30)
    lines = [
        (r.workers, f"{r.sessions} × {TURNS}", r.turns_done, r.failed,
         f"{percentile(r.first_token_ms, 0.5):.0f} / {percentile(r.first_token_ms, 0.99):.0f}",
         f"{percentile(r.turn_ms, 0.5):.0f} / {percentile(r.turn_ms, 0.99):.0f}",
         f"{r.wall_s:.1f}", f"{r.worker_cpu_percent:.0f}", f"{r.generator_cpu_percent:.0f}",
         f"{r.load_average:.1f}")
        for r in rows if r.turn_ms
    ]  # fmt: skip
    figures = {f"streams_{r.workers}w_{r.sessions}_p99_first_ms":
               percentile(r.first_token_ms, 0.99) for r in rows if r.first_token_ms}  # fmt: skip
    text = table(
        ["workers", "sessions × turns", "turns done", "failed sessions",
         "first token ms p50 / p99", "turn ms p50 / p99", "wall s", "workers' CPU %",
         "load generator CPU %", "1-min load after"],
        lines,
        left=1,
    )  # fmt: skip
    return text, figures


def run(quick: bool = False) -> Report:
    campaign_text, figures = campaign_section(1 if quick else REPEAT)
    stream_text, stream_figures = streams_section(quick)
    figures.update(stream_figures)
    markdown = "\n\n".join(
        [
            "### Campaign wall time vs Ray workers (`compare --executor ray`)",
            campaign_text,
            "### Sustained streams vs web workers (`serve --workers N`, PostgreSQL)",
            stream_text,
        ]
    )
    return Report("Scale: Ray campaigns and web workers", "python -m bench.bench_scale",
                  markdown, [], figures)  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("campaigns", "streams"), default=None)
    args = parser.parse_args()
    if args.only == "streams":
        text, figures = streams_section(args.quick)
        print(text)
        print(json.dumps(figures, indent=1))
        return 0
    if args.only == "campaigns":
        text, figures = campaign_section(1 if args.quick else REPEAT)
        print(text)
        print(json.dumps(figures, indent=1))
        return 0
    report = run(args.quick)
    print(report.markdown)
    print(json.dumps(report.figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
