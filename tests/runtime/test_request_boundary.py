"""Caller mistakes are validation errors at the request boundary, before anything is
written: a blank session id, text that is not valid Unicode, misspelt tool names."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.session_handle import RuntimeSession
from agent_lab.domain.errors import InvalidRequest, UnknownTools
from agent_lab.domain.messages import ChatMessage
from agent_lab.infrastructure.sqlite_store import SQLiteSessionStore
from agent_lab.testing import ScriptedChatClient, text
from tests.runtime.runtime_helpers import collect

LONE = "\ud800"


def _request(**fields: Any) -> DebugRunRequest:
    fields.setdefault("chat_agent", AgentParams(model="m"))
    return DebugRunRequest(**fields)


@pytest.mark.parametrize("blank", ["", " ", "\t\n  "])
def test_a_blank_session_id_is_a_validation_error(blank: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _request(session_id=blank, user_message="hi")
    [error] = raised.value.errors()
    assert error["loc"] == ("session_id",)


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"user_message": f"hello {LONE} there"}, "user_message"),
        ({"system_prompts": ["fine", f"bad{LONE}"]}, "system_prompts.1"),
        (
            {"pre_messages": [ChatMessage(role="user", content=f"x{LONE}")]},
            "pre_messages.0.content",
        ),
        (
            {"chat_agent": AgentParams(model="m", extra_body={"note": LONE})},
            "chat_agent.extra_body.note",
        ),
    ],
)
def test_a_lone_surrogate_anywhere_in_the_request_is_a_validation_error(
    fields: dict[str, Any], where: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        _request(**fields)
    message = str(raised.value)
    assert f"{where}: not valid Unicode (a lone surrogate U+D800" in message
    message.encode("utf-8")  # the error itself prints


def test_a_lone_surrogate_in_the_session_id_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as raised:
        _request(session_id=f"id-{LONE}")
    [error] = raised.value.errors()
    assert error["loc"] == ("session_id",) and error["type"] == "string_unicode"


@pytest.mark.asyncio
async def test_misspelt_tools_fail_at_start_with_close_matches_and_nothing_written(
    tmp_path: Path,
) -> None:
    request = _request(
        session_id="typo",
        user_message="turn it down",
        event_agent=EventAgentParams(enabled_tools=["device.volume.adjst", "no_such_tool"]),
    )
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(ScriptedChatClient([text("ok")]), session_store=store)
        with pytest.raises(UnknownTools) as raised:
            await collect(runtime.run(request))
        assert store.list_sessions() == []
        assert not runtime.running
        # The session id is still free: a corrected request runs under it.
        fixed = request.model_copy(
            update={"event_agent": EventAgentParams(enabled_tools=["device.volume.adjust"])}
        )
        outputs = await collect(runtime.run(fixed))
    error = raised.value
    assert isinstance(error, ValueError) and error.failure_reason == "invalid_request"
    assert error.unknown == ("device.volume.adjst", "no_such_tool")
    assert error.close_matches["device.volume.adjst"] == ("device.volume.adjust",)
    assert "'device.volume.adjst' (did you mean 'device.volume.adjust'?)" in str(error)
    assert "'no_such_tool'" in str(error) and "known: " in str(error)
    assert outputs[-1]["type"] == "done"


@pytest.mark.asyncio
async def test_every_entry_point_checks_the_request(tmp_path: Path) -> None:
    request = _request(event_agent=EventAgentParams(enabled_tools=["handof_note"]))
    runtime = DebugRuntime(ScriptedChatClient([text("ok")]))
    with pytest.raises(UnknownTools, match="did you mean 'handoff_note'"):
        runtime.start(request)
    with pytest.raises(UnknownTools):
        runtime.start_session(request)
    with pytest.raises(UnknownTools):
        async with runtime.session(request):
            pass
    assert not runtime.running


@pytest.mark.asyncio
async def test_a_copied_request_with_broken_text_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    # model_copy(update=...) skips validation; the runtime checks again at the start.
    broken = _request(session_id="s").model_copy(update={"user_message": f"hi{LONE}"})
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(ScriptedChatClient([text("ok")]), session_store=store)
        with pytest.raises(InvalidRequest, match="user_message: not valid Unicode"):
            runtime.start(broken)
        assert store.list_sessions() == []


async def _the_good_turn_alone_runs(session: RuntimeSession, store: SQLiteSessionStore) -> None:
    """After refused sends, a good one runs: the only turn completed and stored."""
    await session.send("good")
    await session.close()
    outputs = await asyncio.wait_for(collect(aiter(session)), timeout=30)
    assert [m["type"] for m in outputs if m["type"] in {"turn_completed", "error"}] == [
        "turn_completed"
    ]
    assert [turn["user_message"] for turn in store.list_turns("s")] == ["good"]


@pytest.mark.asyncio
async def test_a_session_refuses_a_broken_message_and_goes_on(tmp_path: Path) -> None:
    client = ScriptedChatClient([text("fine")])
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(client, session_store=store)
        async with runtime.session(_request(session_id="s")) as session:
            with pytest.raises(InvalidRequest, match="message: not valid Unicode"):
                await session.send(f"bad {LONE}")
            await _the_good_turn_alone_runs(session, store)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("", "empty or whitespace only"),
        (" \t\n ", "empty or whitespace only"),
        (ChatMessage(role="user", content="  "), "empty or whitespace only"),
        (123, r"not a str or ChatMessage \(int\)"),
        (None, r"not a str or ChatMessage \(NoneType\)"),
    ],
)
async def test_a_session_refuses_a_blank_or_foreign_message_before_queueing_it(
    tmp_path: Path, message: Any, problem: str
) -> None:
    client = ScriptedChatClient([text("fine")])
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(client, session_store=store)
        async with runtime.session(_request(session_id="s")) as session:
            with pytest.raises(InvalidRequest, match=f"message: {problem}") as raised:
                await session.send(message)
            assert raised.value.field == "message"
            assert isinstance(raised.value, ValueError)
            with pytest.raises(InvalidRequest, match=f"message: {problem}"):
                session.send_nowait(message)
            await _the_good_turn_alone_runs(session, store)


def test_a_value_json_cannot_hold_in_extra_body_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as raised:
        _request(event_agent=EventAgentParams(extra_body={"hint": {"when": object()}}))
    assert "event_agent.extra_body.hint.when: not a JSON value (object)" in str(raised.value)


@pytest.mark.asyncio
async def test_a_copied_request_with_a_value_json_cannot_hold_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    agent = AgentParams(model="m").model_copy(update={"extra_body": {"x": object()}})
    broken = _request(session_id="s", user_message="hi").model_copy(update={"chat_agent": agent})
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(ScriptedChatClient([text("ok")]), session_store=store)
        with pytest.raises(InvalidRequest, match=r"chat_agent\.extra_body\.x: not a JSON value"):
            await collect(runtime.run(broken))
        assert store.list_sessions() == []
        assert not runtime.running


@pytest.mark.parametrize("params", [AgentParams, EventAgentParams])
@pytest.mark.parametrize("blank", [" ", "\t\n "])
def test_a_blank_model_name_is_a_validation_error(params: type[Any], blank: str) -> None:
    with pytest.raises(ValidationError) as raised:
        params(model=blank)
    [error] = raised.value.errors()
    assert error["loc"] == ("model",) and "must not be blank" in error["msg"]


def test_a_tool_enabled_twice_is_a_validation_error() -> None:
    with pytest.raises(ValidationError) as raised:
        EventAgentParams(enabled_tools=["notes.save", "device.volume.adjust", "notes.save"])
    [error] = raised.value.errors()
    assert error["loc"] == ("enabled_tools",)
    assert "lists 'notes.save' more than once" in error["msg"]


@pytest.mark.asyncio
@pytest.mark.parametrize("blank", ["", "  \n\t"])
async def test_a_one_shot_run_without_a_message_is_refused_before_anything_is_written(
    tmp_path: Path, blank: str
) -> None:
    client = ScriptedChatClient([text("ok")])
    with SQLiteSessionStore(tmp_path / "s.sqlite3") as store:
        runtime = DebugRuntime(client, session_store=store)
        with pytest.raises(InvalidRequest, match="user_message: is empty") as raised:
            await collect(runtime.run(_request(session_id="s", user_message=blank)))
        with pytest.raises(InvalidRequest, match="user_message: is empty"):
            runtime.start(_request(user_message=blank))
        assert store.list_sessions() == [] and client.calls == []
        # A session with no first message waits for one instead.
        async with runtime.session(_request(session_id="s")) as session:
            await session.send("hello")
            await session.close()
            outputs = await asyncio.wait_for(collect(aiter(session)), timeout=30)
        assert [turn["user_message"] for turn in store.list_turns("s")] == ["hello"]
    assert raised.value.field == "user_message" and isinstance(raised.value, ValueError)
    assert outputs[-1]["type"] == "done"
