"""Builders and subprocess helpers for the session store tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_lab.application.session_store import CallMetric, SessionStore
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

StoreFactory = Callable[[], SessionStore]
"""Opens a handle on the test's store (see the ``store_factory`` fixture)."""


def user(text: str) -> ChatMessage:
    return ChatMessage(role="user", content=text)


def assistant(text: str, *calls: ToolCallEvent) -> ChatMessage:
    return ChatMessage(role="assistant", content=text, tool_calls=list(calls))


def call(call_id: str, name: str = "safe_tool", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments, raw_arguments="{}")


def tool_reply(event: ToolCallEvent, content: str = '{"ok": true}') -> ChatMessage:
    return ChatMessage(role="tool", content=content, name=event.name, tool_call_id=event.id)


def metric(key: str, **fields: Any) -> CallMetric:
    kind, turn, round_index, *_ = key.split(":")
    call_kind = {
        "chat": "chat",
        "fallback": "argument_fallback",
        "generation": "argument_generation",
        "tool": "tool_execution",
    }[kind]
    agent = {"chat": "chat_agent", "tool": "tool"}.get(kind, "event_agent")
    values: dict[str, Any] = {
        "metric_key": key,
        "turn_index": int(turn),
        "round_index": int(round_index),
        "call_kind": call_kind,
        "agent": agent,
        "mode": "dual_agent",
    }
    values.update(fields)
    return CallMetric(**values)


def run_python(code: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this venv."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _can_use_private_mounts() -> bool:
    if sys.platform != "linux" or os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs", "t", "/mnt"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


PRIVATE_MOUNTS = _can_use_private_mounts()
"""Whether tests can mount file systems in a private mount namespace (root, Linux)."""


def run_in_private_mount(
    shell: str, code: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``shell`` (mount commands) then ``code`` in a private mount namespace.

    The mounts vanish with the namespace, so nothing is left behind on the host.
    """
    script = f'{shell} && exec "$0" -c "$@"'
    return subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            sys.executable,
            textwrap.dedent(code),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ledger_batch(store: SessionStore, *ids: str, turn: int = 1) -> str:
    """A direct-mode batch of ``ids`` in session ``s`` (made, with its turn, if missing)."""
    if store.get_session("s") is None:
        store.create_session("ledger", {}, session_id="s")
    if turn not in [t["turn_index"] for t in store.list_turns("s")]:
        store.start_turn("s", turn, "go", messages=[user("go")])
    events = [call(call_id) for call_id in ids]
    return store.begin_batch(
        "s",
        turn,
        1,
        scope=f"s:turn-{turn}:round-1",
        mode="chat_agent_tools",
        events=events,
        assistant=assistant("", *events),
    )


def journal_calls(store: SessionStore) -> list[dict[str, Any]]:
    """Every journaled call of session ``s``, in order."""
    return [c for batch in store.list_batches("s") for c in batch["calls"]]


def _lock_down(target: Path) -> None:
    if os.geteuid() != 0:
        target.chmod(0o555 if target.is_dir() else 0o444)
        return
    if shutil.which("chattr") is None:
        pytest.skip("root ignores permission bits and chattr is not installed")
    done = subprocess.run(["chattr", "+i", str(target)], capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot make {target} immutable: {done.stderr.decode().strip()}")


def _open_up(target: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(target)], capture_output=True, check=False)
    target.chmod(0o755 if target.is_dir() else 0o644)


@contextmanager
def unwritable(target: Path) -> Iterator[None]:
    """``target`` (a file or a folder) unwritable for this user, root included
    (``chattr +i``), inside the block; skips the test where that cannot be done."""
    _lock_down(target)
    try:
        yield
    finally:
        _open_up(target)
