"""Another runtime, in its own process, driving a session of the web lab's store.

Run as ``python -m tests.web.busy_holder DB BASE_URL SESSION_ID``: the child opens the
session on the SQLite file ``DB`` (so it holds the session's writer claim) and runs one
turn, "Lock the front door", on the scripted model at ``BASE_URL`` (``holder_answers``).
Its one tool, ``door.lock``, prints ``running`` and waits for a line on stdin; then the
turn completes, the child prints ``completed``, closes the session (releasing the
claim) and exits 0. ``Holder`` runs it from a test.
"""

from __future__ import annotations

import asyncio
import select
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import ScriptedResponse
from tests.record.record_support import answer, with_events

HOLDER_MESSAGE = "Lock the front door"
TOOL = "door.lock"
REPO = Path(__file__).resolve().parents[2]
_WAIT_SECONDS = 60.0


def holder_answers() -> list[ScriptedResponse]:
    """What the scripted model answers the holder: the tool call, then its follow-up."""
    return [with_events("Locking the front door.", TOOL), answer("The front door is locked.")]


class Holder:
    """The child process; ``with Holder(...)`` starts it and waits until its tool runs."""

    def __init__(self, database: Path, base_url: str, session_id: str) -> None:
        self._args = [str(database), base_url, session_id]
        self._process: subprocess.Popen[str] | None = None

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def __enter__(self) -> Self:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.web.busy_holder", *self._args],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.expect("running")  # its turn runs: the claim is held
        return self

    def expect(self, line: str) -> None:
        """Wait for the child to print ``line``."""
        process = self._process
        assert process is not None and process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], _WAIT_SECONDS)
        said = process.stdout.readline().strip() if ready else "(nothing)"
        assert said == line, f"the holder said {said!r}, not {line!r}: {self._stderr()}"

    def release(self) -> None:
        """Let the tool finish; wait until the turn completed and the child left."""
        process = self._process
        assert process is not None and process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
        self.expect("completed")
        assert process.wait(_WAIT_SECONDS) == 0, self._stderr()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(_WAIT_SECONDS)

    def _stderr(self) -> str:
        process = self._process
        if process is None or process.stderr is None or process.poll() is None:
            return "(still running)"
        return process.stderr.read()[-2000:]


def _registry() -> ToolRegistry:
    async def lock(event: Any) -> dict[str, Any]:
        print("running", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        return {"locked": True}

    return ToolRegistry(
        [
            ToolDefinition(
                name=TOOL,
                description="Lock a door.",
                parameters={"type": "object", "properties": {"where": {"type": "string"}}},
                handler=lock,
                argument_resolver=lambda event, context: {"where": "front"},
                timeout_seconds=None,
            )
        ]
    )


async def _hold(database: Path, base_url: str, session_id: str) -> None:
    request = DebugRunRequest(
        session_id=session_id,
        user_message=HOLDER_MESSAGE,
        chat_agent=AgentParams(model="scripted"),
        event_agent=EventAgentParams(enabled_tools=[TOOL]),
        tool_invocation_mode="dual_agent",
    )
    with SQLiteSessionStore(database) as store:
        async with OpenAICompatibleChatClient(base_url, max_retries=0) as client:
            runtime = DebugRuntime(client, registry=_registry(), session_store=store)
            async with runtime.session(request) as session:
                async for output in session:
                    if output["type"] == "error":
                        raise SystemExit(f"the holder's turn failed: {output['message']}")
                    if output["type"] == "turn_completed":
                        break
                await session.close()
                async for _ in session:
                    pass
    print("completed", flush=True)


if __name__ == "__main__":
    db, url, session = sys.argv[1:4]
    asyncio.run(_hold(Path(db), url, session))
