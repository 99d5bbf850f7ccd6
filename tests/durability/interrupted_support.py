"""Killing a process in the middle of a turn (``interrupted_child``) and restoring the
session afterwards in this process."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_lab.application.runtime import DebugRuntime
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import FunctionChatClient, RecordedCall, text
from tests.durability.interrupted_child import child_registry, child_request

CHILD = "tests.durability.interrupted_child"
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def hung_child(
    db: Path, mode: str, session_id: str, point: str, turns: int = 1
) -> Iterator[subprocess.Popen[str]]:
    """A child hung at ``point`` of its last turn while the block runs; then SIGKILLed."""
    command = [sys.executable, "-m", CHILD, str(db), mode, session_id, point, str(turns)]
    child = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    try:
        line = child.stdout.readline()
        if not line.strip() or json.loads(line).get("hung") != point:
            child.kill()
            raise AssertionError(f"the child did not hang: {line!r} {child.communicate()[1]}")
        yield child
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL


def kill_mid_turn(db: Path, mode: str, session_id: str, point: str, turns: int = 1) -> None:
    """Run the child until it hangs at ``point``, then SIGKILL it."""
    with hung_child(db, mode, session_id, point, turns):
        pass


def _after_restore(call: RecordedCall) -> list[Any]:
    return text("It went through.")


async def restore(
    db: Path, mode: str, session_id: str, message: str | None
) -> list[dict[str, Any]]:
    """Reopen the session in a new runtime: run one turn saying ``message``, or (``None``)
    none at all; returns the outputs."""
    outputs: list[dict[str, Any]] = []
    with SQLiteSessionStore(db) as store:
        runtime = DebugRuntime(
            FunctionChatClient(_after_restore),
            registry=child_registry("never"),
            session_store=store,
        )
        request = child_request(mode, session_id, message or "")
        async with runtime.session(request) as session:
            async for output in session:
                outputs.append(dict(output))
                kind = output["type"]
                if kind in ("turn_completed", "error") or (
                    message is None and kind == "session_started"
                ):
                    await session.close()
    return outputs
