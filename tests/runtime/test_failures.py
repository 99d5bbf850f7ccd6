"""Failures name their own reason: errors carry ``failure_reason`` and ``exit_class``,
the client's transcript check is reported as such, unexpected exceptions are logged
with their traceback, and argument-resolution failures are audited with their cause."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_lab.application.contracts import AgentParams, DebugRunRequest, EventAgentParams
from agent_lab.application.protocol import ErrorMessage
from agent_lab.application.runtime import DebugRuntime
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain import errors
from agent_lab.domain.errors import ExitClass
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage, StreamItem
from agent_lab.infrastructure.chat_client import OpenAICompatibleChatClient
from agent_lab.interfaces.cli.common import run_failure
from agent_lab.testing import ScriptedChatClient, text, text_event
from agent_lab.testing.sse_server import ScriptedResponse, SSETranscriptServer
from tests.runtime.runtime_helpers import audits, collect


@pytest.mark.parametrize(
    ("error", "reason", "exit_class"),
    [
        (errors.ProviderHTTPError(503, "busy"), "provider_error:http_503", "run_failed"),
        (errors.ProviderHTTPError(401, "no"), "provider_error:http_401", "usage"),
        (errors.ProviderConnectionError("down"), "provider_error:unreachable", "usage"),
        (errors.ProviderTimeout("slow"), "provider_error:timeout", "run_failed"),
        (errors.ProviderProtocolError("bad"), "provider_error:protocol", "run_failed"),
        (errors.ModelBehaviorError("dup"), "protocol_error", "run_failed"),
        (errors.PersistenceFailed("locked"), "session_persistence_failed:locked", "run_failed"),
        (errors.SessionBusy("s", "h"), "session_busy", "usage"),
        (errors.InvalidTranscript("orphan"), "invalid_transcript", "run_failed"),
        (errors.RunCancelled(), "cancelled", "interrupted"),
        (errors.InternalError("bug"), "internal_error", "run_failed"),
    ],
)
def test_every_error_carries_its_failure_reason_and_exit_class(
    error: errors.AgentLabError, reason: str, exit_class: str
) -> None:
    assert error.failure_reason == reason
    assert error.exit_class == exit_class


def test_the_transcript_error_is_a_project_error_and_a_value_error() -> None:
    assert issubclass(errors.InvalidTranscript, errors.AgentLabError)
    assert issubclass(errors.InvalidTranscript, ValueError)


def test_the_cli_takes_the_exit_code_from_the_error_output_without_parsing_the_reason() -> None:
    # A status the CLI has no wording for: the code still follows the error's class.
    def teapot(exit_class: ExitClass) -> ErrorMessage:
        return {
            "type": "error",
            "message": "teapot",
            "failure_reason": "provider_error:http_418",
            "exit_class": exit_class,
        }

    assert run_failure(teapot("usage")) == (2, "teapot")
    assert run_failure(teapot("run_failed")) == (1, "teapot")
    assert run_failure(teapot("interrupted"))[0] == 130


def _direct_request(pre_messages: list[ChatMessage]) -> DebugRunRequest:
    return DebugRunRequest(
        user_message="hello",
        pre_messages=pre_messages,
        chat_agent=AgentParams(model="m"),
        tool_invocation_mode="chat_agent_tools",
    )


@pytest.mark.asyncio
async def test_a_transcript_the_provider_would_reject_is_reported_as_invalid_transcript() -> None:
    orphan = ChatMessage(role="tool", content="{}", tool_call_id="nobody-asked", name="x")
    with SSETranscriptServer() as server:
        async with OpenAICompatibleChatClient(server.base_url, "k") as client:
            outputs = await collect(DebugRuntime(client).run(_direct_request([orphan])))
        sent = server.request_count

    error = outputs[-1]
    assert error["type"] == "error"
    assert error["failure_reason"] == "invalid_transcript"
    assert error["exit_class"] == "run_failed"
    assert "nobody-asked" in error["message"]
    assert sent == 0


class _BrokenClient:
    async def stream_chat(
        self,
        messages: list[ChatMessage],
        tools: list[dict[str, Any]],
        params: AgentParams,
        tool_choice: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamItem]:
        raise RuntimeError("client bug")
        yield  # pragma: no cover - makes this an async generator


@pytest.mark.asyncio
async def test_an_unexpected_exception_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR, logger="agent_lab.application.runtime")
    request = DebugRunRequest(user_message="hi", chat_agent=AgentParams(model="m"))
    outputs = await collect(DebugRuntime(_BrokenClient()).run(request))

    assert outputs[-1]["failure_reason"] == "internal_error"
    logged = [r for r in caplog.records if r.exc_info is not None]
    assert logged, "the catch-all logs the exception with its traceback"
    exc_info = logged[0].exc_info
    assert exc_info is not None
    assert "client bug" in str(exc_info[1])


def _record(ran: list[dict[str, Any]], event: ToolCallEvent) -> dict[str, Any]:
    ran.append(dict(event.arguments))
    return {"ok": True}


def _note_tool(resolver: Any, ran: list[dict[str, Any]]) -> ToolRegistry:
    return ToolRegistry(
        [
            ToolDefinition(
                name="notes.add",
                description="Keep a note.",
                parameters={
                    "type": "object",
                    "properties": {"note": {"type": "string"}},
                    "required": ["note"],
                },
                handler=lambda event: _record(ran, event),
                argument_resolver=resolver,
            )
        ]
    )


def _dual_request() -> DebugRunRequest:
    return DebugRunRequest(
        user_message="note it",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["notes.add"], max_event_loops=1),
    )


@pytest.mark.asyncio
async def test_a_crashing_resolver_is_audited_with_its_cause_and_the_model_fills_in() -> None:
    def resolver(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        raise KeyError("history is empty")

    ran: list[dict[str, Any]] = []
    forced = ToolCallEvent(id="gen", name="notes.add", arguments={"note": "milk"}, raw_arguments="")
    client = ScriptedChatClient(
        [
            [StreamItem.message_delta("ok"), text_event("evt-1", "notes.add")],
            [StreamItem.provider_tool_call(forced)],
            text("noted"),
        ]
    )
    outputs = await collect(
        DebugRuntime(client, registry=_note_tool(resolver, ran)).run(_dual_request())
    )

    assert ran == [{"note": "milk"}]
    response = audits(outputs, "event_agent_response")[0]["details"]
    assert response["argument_failures"] == [
        {
            "event_id": "evt-1",
            "event_name": "notes.add",
            "stage": "resolver",
            "cause": "KeyError: 'history is empty'",
        }
    ]
    assert outputs[-1]["type"] == "done"


@pytest.mark.asyncio
async def test_a_failed_argument_call_fails_the_event_with_its_cause() -> None:
    ran: list[dict[str, Any]] = []
    client = ScriptedChatClient(
        [
            [StreamItem.message_delta("ok"), text_event("evt-1", "notes.add")],
            errors.ProviderHTTPError(503, "overloaded"),
            text("sorry"),
        ]
    )
    outputs = await collect(
        DebugRuntime(client, registry=_note_tool(None, ran)).run(_dual_request())
    )

    assert ran == [], "the tool does not run without its arguments"
    [result] = [m for m in outputs if m["type"] == "tool_result"]
    payload = json.loads(result["message"]["content"])
    assert payload["error"].startswith("argument generation failed: provider returned HTTP 503")
    assert "invalid arguments" not in payload["error"]
    [failure] = audits(outputs, "event_agent_response")[0]["details"]["argument_failures"]
    assert failure["stage"] == "generation"
    assert "provider_error:http_503" in failure["cause"]
    assert outputs[-1]["type"] == "done"


def _broken_call_stream(arguments: str) -> ScriptedResponse:
    call = {"index": 0, "id": "call_1", "type": "function"}
    call["function"] = {"name": "notes__add", "arguments": arguments}
    return ScriptedResponse.sse(
        {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "why"),
    [('{"note": "abs', 'not valid JSON: \'{"note": "abs\''), ('["abs"]', "not a JSON object")],
)
async def test_tool_arguments_that_are_not_a_json_object_are_reported_as_such(
    arguments: str, why: str
) -> None:
    ran: list[dict[str, Any]] = []
    answer = ScriptedResponse.sse({"choices": [{"index": 0, "delta": {"content": "Sorry."}}]})
    request = DebugRunRequest(
        user_message="note it",
        chat_agent=AgentParams(model="m"),
        event_agent=EventAgentParams(enabled_tools=["notes.add"]),
        tool_invocation_mode="chat_agent_tools",
    )
    with SSETranscriptServer(_broken_call_stream(arguments), answer) as server:
        async with OpenAICompatibleChatClient(server.base_url, "k") as client:
            runtime = DebugRuntime(client, registry=_note_tool(None, ran))
            outputs = await collect(runtime.run(request))

    assert ran == [], "a call without readable arguments does not run"
    [result] = [m for m in outputs if m["type"] == "tool_result"]
    error = json.loads(result["message"]["content"])["error"]
    assert error.startswith(f"invalid arguments: {why}"), error
    assert "required property" not in error
    assert outputs[-1]["type"] == "done"
