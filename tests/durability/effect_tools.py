"""The built-in tools with every side effect also logged, for the effect campaign.

Each side-effecting built-in (volume, calendar, handoff note) first appends a row with
its call's idempotency key to an effects database (durable, ``synchronous=FULL``), then
runs the real handler against the tools' own SQLite file. A random pause before and
after the effect puts kills inside running tools.
"""

from __future__ import annotations

import inspect
import random
import sqlite3
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent_lab.application.builtin_tools import builtin_tool_definitions
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.infrastructure.tool_backends.backends import local_backends

EFFECT_TOOLS = ("device.volume.adjust", "calendar.schedule.create", "handoff_note")
TOOLS = [*EFFECT_TOOLS, "knowledge.web.search"]
PROMPT = (
    "Set the volume to 30 and schedule lunch with Sam tomorrow at noon Berlin time, "
    "then take a note that Sam prefers sushi"
)


def prepare_effects(path: Path) -> None:
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(
        "CREATE TABLE IF NOT EXISTS effects(id INTEGER PRIMARY KEY, key TEXT NOT NULL,"
        " session TEXT NOT NULL, turn INTEGER NOT NULL, tool TEXT NOT NULL,"
        " phase TEXT NOT NULL)"
    )
    connection.commit()
    connection.close()


@dataclass(frozen=True)
class Effect:
    key: str
    session: str
    turn: int
    tool: str
    phase: str


def read_effects(path: Path) -> list[Effect]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute(
            "SELECT key, session, turn, tool, phase FROM effects ORDER BY id"
        ).fetchall()
    finally:
        connection.close()
    return [Effect(*row) for row in rows]


def _log_effect(path: Path, key: str, tool: str, phase: str) -> None:
    session, _, rest = key.partition(":turn-")
    turn = int(rest.split(":", 1)[0])
    connection = sqlite3.connect(path, timeout=10)
    try:
        connection.execute("PRAGMA synchronous=FULL")
        with connection:
            connection.execute(
                "INSERT INTO effects(key, session, turn, tool, phase) VALUES (?, ?, ?, ?, ?)",
                (key, session, turn, tool, phase),
            )
    finally:
        connection.close()


def _logged(
    tool: ToolDefinition, effects: Path, phase: str, rng: random.Random, pause: float
) -> ToolDefinition:
    original = tool.handler
    takes_context = len(inspect.signature(original).parameters) >= 2

    def handler(event: ToolCallEvent, context: ToolExecutionContext) -> Any:
        assert context.idempotency_key, "every dispatched call carries its key"
        time.sleep(rng.uniform(0.0, pause))
        _log_effect(effects, context.idempotency_key, event.name, phase)
        result = original(event, context) if takes_context else original(event)
        time.sleep(rng.uniform(0.0, pause))
        return result

    return replace(tool, handler=handler)


def effect_registry(
    home: Path, effects: Path, phase: str, rng: random.Random, pause: float = 0.03
) -> ToolRegistry:
    """The built-ins on files under ``home``, side effects logged to ``effects``."""
    tools = [
        _logged(tool, effects, phase, rng, pause) if tool.name in EFFECT_TOOLS else tool
        for tool in builtin_tool_definitions(local_backends(home))
    ]
    return ToolRegistry(tools)
