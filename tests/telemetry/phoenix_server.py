"""A real Arize Phoenix server on 127.0.0.1, started from its own environment.

``make test-otel`` builds that environment in ``.venv-phoenix``; ``AGENT_LAB_PHOENIX``
may name another ``phoenix`` executable.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
_START_SECONDS = 180.0


def phoenix_executable() -> Path:
    given = os.environ.get("AGENT_LAB_PHOENIX")
    path = Path(given) if given else ROOT / ".venv-phoenix" / "bin" / "phoenix"
    if not path.exists():
        raise RuntimeError(f"no Phoenix server at {path}: run `make test-otel`")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def phoenix_server(workdir: Path) -> Iterator[str]:
    """Serve Phoenix with its data under ``workdir``; yields its base URL."""
    port = _free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(workdir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (workdir / "phoenix.log").open("wb")
    process = subprocess.Popen(
        [str(phoenix_executable()), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, workdir)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_until_up(url: str, process: subprocess.Popen[bytes], workdir: Path) -> None:
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            tail = (workdir / "phoenix.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"phoenix serve exited with {process.returncode}: {tail}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"Phoenix did not answer at {url} within {_START_SECONDS:.0f} s")


def trace_spans(url: str, trace_id: str, expected: int) -> list[dict[str, Any]]:
    """The trace's spans through Phoenix's REST API, once all ``expected`` arrived."""
    deadline = time.monotonic() + 60
    spans: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        reply = httpx.get(
            f"{url}/v1/projects/default/spans",
            params={"trace_id": trace_id, "limit": 1000},
            timeout=10,
        )
        reply.raise_for_status()
        spans = reply.json()["data"]
        if len(spans) >= expected:
            return spans
        time.sleep(0.5)
    return spans
