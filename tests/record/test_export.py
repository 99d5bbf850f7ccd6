"""The one export schema: session, turns, transcript and records, versioned; its
records are the live records, and failures keep their reasons."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from record_support import BUILTIN_TOOLS, answer, request, run_once

from agent_lab.application.export import (
    EXPORT_VERSION,
    SessionExport,
    export_session,
    read_turn_record,
)
from agent_lab.application.pricing import OverriddenPrices, Price
from agent_lab.application.record import RECORD_VERSION
from agent_lab.application.tools import ToolRegistry, build_default_tool_registry
from agent_lab.domain.errors import SessionNotFound
from agent_lab.infrastructure.simulator.provider import SimulatedProviderServer
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.infrastructure.tool_backends.backends import local_backends
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer


@pytest.mark.asyncio
async def test_the_export_holds_the_session_its_turns_messages_and_live_records(
    simulator: SimulatedProviderServer, tmp_path: Path
) -> None:
    prices = OverriddenPrices({"agent-lab-sim": Price(input_per_mtok=1, output_per_mtok=4)})
    database = tmp_path / "sessions.sqlite3"
    registry = build_default_tool_registry(local_backends(tmp_path))
    _, live, session_id = await run_once(
        simulator.base_url,
        database,
        request("chat_agent_tools", BUILTIN_TOOLS),
        registry,
        prices=prices,
    )

    with SQLiteSessionStore(database) as store:
        exported = export_session(store, session_id, prices=prices)
        stored_messages = store.list_messages(session_id)
    document = json.loads(json.dumps(exported.model_dump(mode="json")))

    assert document["export_version"] == EXPORT_VERSION == 1
    assert document["record_version"] == RECORD_VERSION == 1
    assert set(document) == {
        "export_version",
        "record_version",
        "session",
        "turns",
        "messages",
        "records",
        "cost",
    }
    assert document["session"]["session_id"] == session_id
    assert document["session"]["mode"] == "chat_agent_tools"
    assert [t["status"] for t in document["turns"]] == ["completed"]
    assert [m["content"] for m in document["messages"]] == [m["content"] for m in stored_messages]
    assert exported.records == live.records()
    again = SessionExport.model_validate(document)
    assert again == exported
    total = exported.records[0].cost.total_usd
    assert total is not None and total > 0
    assert exported.cost.total_usd == total
    assert document["cost"]["total_usd"] == str(total)
    assert Decimal(document["records"][0]["model_calls"][0]["cost"]["amount_usd"]) > 0


@pytest.mark.asyncio
async def test_a_failed_turn_is_exported_with_its_reason(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    sse_server.add(ScriptedResponse.error(503, {"error": {"message": "overloaded"}}))
    database = tmp_path / "sessions.sqlite3"
    outputs, _, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", []), ToolRegistry()
    )

    with SQLiteSessionStore(database) as store:
        document = export_session(store, session_id).model_dump(mode="json")
        with pytest.raises(SessionNotFound):
            export_session(store, "no-such-session")
    [turn] = document["turns"]
    assert turn["failure_reason"] == "provider_error:http_503"
    assert turn["failure_message"] == outputs[-1]["message"]
    [record] = document["records"]
    assert record["failure"]["reason"] == "provider_error:http_503"
    assert document["cost"]["total_usd"] is None


@pytest.mark.asyncio
async def test_one_turn_is_read_back_alone_as_it_was_recorded(
    sse_server: SSETranscriptServer, tmp_path: Path
) -> None:
    database = tmp_path / "sessions.sqlite3"
    sse_server.add(answer("First."), answer("Second."))
    _, live_one, session_id = await run_once(
        sse_server.base_url, database, request("dual_agent", [], "one"), ToolRegistry()
    )
    _, live_two, _ = await run_once(
        sse_server.base_url,
        database,
        request("dual_agent", [], "two", session_id=session_id),
        ToolRegistry(),
    )

    with SQLiteSessionStore(database) as store:
        first = read_turn_record(store, session_id, 1)
        second = read_turn_record(store, session_id, 2)
        missing = read_turn_record(store, session_id, 3)
        only_two = store.list_audit_logs(session_id, turn_index=2)
    assert first == live_one.record(1)
    assert second == live_two.record(2)
    assert missing is None
    assert {row["turn_index"] for row in only_two} == {2}
