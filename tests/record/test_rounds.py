"""The record's rounds come from the audits, not from grouping stored messages: a
4-round dual_agent turn whose template confirmations were spoken by the runtime reads
back as 4 rounds, each with its own confirmation, and no phantom fifth round."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from record_support import answer, assert_same_records, reopened, request, run_once, with_events

from agent_lab.application.events import ResultPolicy
from agent_lab.application.tools import ToolDefinition, ToolRegistry
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing.sse_server import SSETranscriptServer

SCHEMA = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}


def _registry() -> ToolRegistry:
    def note(event: Any) -> dict[str, Any]:
        return {"tool": "note_add", "item": event.arguments["item"]}

    def lookup(event: Any) -> dict[str, Any]:
        return {"tool": "lookup", "found": event.arguments["item"]}

    return ToolRegistry(
        [
            ToolDefinition(
                name="note_add",
                description="Keep a note.",
                parameters=SCHEMA,
                handler=note,
                argument_resolver=lambda event, context: {"item": "milk"},
                result_policy=ResultPolicy.TEMPLATE,
                confirmation_template="Noted {item}.",
            ),
            ToolDefinition(
                name="lookup",
                description="Look something up.",
                parameters=SCHEMA,
                handler=lookup,
                argument_resolver=lambda event, context: {"item": "bread"},
            ),
        ]
    )


@pytest.mark.asyncio
async def test_a_four_round_dual_turn_has_four_rounds_with_their_confirmations(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    for round_index in (1, 2, 3):
        sse_server.add(with_events(f"Round {round_index}.", "note_add", "lookup"))
    sse_server.add(answer("All done."))
    database = tmp_path / "sessions.sqlite3"
    outputs, live, session_id = await run_once(
        sse_server.base_url,
        database,
        request("dual_agent", ["note_add", "lookup"], "note milk, look up bread"),
        _registry(),
    )

    assert outputs[-1] == {"type": "done"}
    [record] = live.records()
    stored = reopened(database, session_id)
    assert_same_records([record], stored)
    [back] = stored
    assert [r.round_index for r in back.rounds] == [1, 2, 3, 4]
    assert back.round_count == 4
    assert [r.spoken for r in back.rounds] == [["Noted milk."]] * 3 + [[]]
    assert [r.text.strip() for r in back.rounds] == [
        "Round 1.",
        "Round 2.",
        "Round 3.",
        "All done.",
    ]
    assert [c.role for c in back.model_calls] == ["chat", "follow_up", "follow_up", "follow_up"]
    with SQLiteSessionStore(database) as store:
        assistant = [m for m in store.list_messages(session_id) if m["role"] == "assistant"]
    # The stored transcript holds more assistant messages than rounds (each
    # confirmation is its own message): grouping messages would invent rounds.
    assert len(assistant) > len(back.rounds)
