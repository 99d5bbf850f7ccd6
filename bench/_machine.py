"""What the suite ran on: CPU, cores, load, OS, Python and package versions, date."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

PACKAGES = (
    "agent-lab",
    "openai",
    "openai-agents",
    "pydantic-ai-slim",
    "pydantic",
    "httpx",
    "httpcore",
    "anyio",
    "orjson",
    "uvicorn",
    "starlette",
)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load() -> str:
    try:
        return " / ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found) + f", SQLite {sqlite3.sqlite_version}"


def describe(*, load_only: bool = False) -> list[str]:
    """Markdown bullet lines; ``load_only`` gives just the load average (for the end)."""
    if load_only:
        return [f"- Load average (1/5/15 min) at the end: {load()}"]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"- Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        f"- CPU: {cpu_model()}, {os.cpu_count()} logical CPUs ({usable} usable by this process)",
        f"- OS: {platform.system()} {platform.release()} {platform.machine()}",
        f"- Python: {platform.python_implementation()} {platform.python_version()}",
        f"- Packages: {versions()}",
        f"- Load average (1/5/15 min) at the start: {load()}",
    ]
