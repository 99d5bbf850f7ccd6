"""ToolRegistry: validation, safe execution, timeouts, schemas, catalog and coalescing."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema.exceptions import SchemaError

from agent_lab.application.events import ResultPolicy
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolRegistry
from agent_lab.domain.events import ToolCallEvent
from agent_lab.domain.messages import ChatMessage

NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1},
        "priority": {"type": "integer", "minimum": 1, "maximum": 3},
    },
    "required": ["message"],
}


def call(name: str, call_id: str = "call-1", **arguments: Any) -> ToolCallEvent:
    return ToolCallEvent(id=call_id, name=name, arguments=arguments)


def echo(event: ToolCallEvent) -> dict[str, Any]:
    return {"tool": event.name, "message": event.arguments.get("message")}


def recorder(ran: list[str]) -> Callable[[ToolCallEvent], dict[str, Any]]:
    def record(event: ToolCallEvent) -> dict[str, Any]:
        ran.append(event.id)
        return {"tool": event.name}

    return record


def tool(name: str = "note", **overrides: Any) -> ToolDefinition:
    fields: dict[str, Any] = {
        "name": name,
        "description": f"The {name} tool.",
        "parameters": NOTE_SCHEMA,
        "handler": echo,
    }
    fields.update(overrides)
    return ToolDefinition(**fields)


@pytest.mark.asyncio
async def test_unknown_tool_is_an_error_payload() -> None:
    registry = ToolRegistry([tool()])

    outcome = await registry.run(call("missing", message="hi"))

    assert outcome.payload == {"tool": "missing", "error": "unknown tool"}
    assert outcome.ok is False


@pytest.mark.asyncio
async def test_known_but_not_enabled_tool_is_disabled() -> None:
    ran: list[str] = []
    registry = ToolRegistry([tool(handler=recorder(ran))])

    payload = await registry.execute_async(call("note", message="hi"), enabled_names=["other"])

    assert payload == {"tool": "note", "error": "tool disabled"}
    assert ran == []


@pytest.mark.asyncio
async def test_enabled_names_none_allows_every_tool() -> None:
    registry = ToolRegistry([tool()])

    payload = await registry.execute_async(call("note", message="hi"))

    assert payload == {"tool": "note", "message": "hi"}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "'message' is a required property"),
        ({"message": ""}, "message"),
        ({"message": "hi", "priority": 9}, "priority"),
        ({"message": 42}, "message"),
    ],
)
async def test_invalid_arguments_never_reach_the_handler(
    arguments: dict[str, Any], fragment: str
) -> None:
    ran: list[str] = []
    registry = ToolRegistry([tool(handler=recorder(ran))])

    payload = await registry.execute_async(call("note", **arguments), ["note"])

    assert payload["tool"] == "note"
    assert payload["error"].startswith("invalid arguments: ")
    assert fragment in payload["error"]
    assert ran == []


def test_validation_error_is_none_for_valid_arguments() -> None:
    registry = ToolRegistry([tool()])

    assert registry.validation_error("note", {"message": "hi", "priority": 2}) is None


def test_register_rejects_an_invalid_json_schema() -> None:
    with pytest.raises(SchemaError):
        ToolRegistry([tool(parameters={"type": "no-such-type"})])


@pytest.mark.asyncio
async def test_handler_exception_becomes_tool_handler_failed() -> None:
    def boom(event: ToolCallEvent) -> dict[str, Any]:
        raise RuntimeError("boom")

    registry = ToolRegistry([tool(handler=boom)])

    outcome = await registry.run(call("note", message="hi"), ["note"])

    assert outcome.payload == {"tool": "note", "error": "tool handler failed: boom"}
    assert outcome.ok is False


@pytest.mark.asyncio
async def test_sync_handler_runs_in_a_worker_thread() -> None:
    threads: list[int] = []

    def record(event: ToolCallEvent) -> dict[str, Any]:
        threads.append(threading.get_ident())
        return {"tool": event.name, "status": "ok"}

    registry = ToolRegistry([tool(handler=record)])

    payload = await registry.execute_async(call("note", message="hi"))

    assert payload == {"tool": "note", "status": "ok"}
    assert threads and threads[0] != threading.get_ident()


@pytest.mark.asyncio
async def test_async_handler_is_awaited_on_the_event_loop() -> None:
    threads: list[int] = []

    async def record(event: ToolCallEvent) -> dict[str, Any]:
        await asyncio.sleep(0)
        threads.append(threading.get_ident())
        return {"tool": event.name, "status": "async"}

    registry = ToolRegistry([tool(handler=record)])

    payload = await registry.execute_async(call("note", message="hi"))

    assert payload == {"tool": "note", "status": "async"}
    assert threads == [threading.get_ident()]


@pytest.mark.asyncio
async def test_handler_taking_a_context_receives_it() -> None:
    seen: list[ToolExecutionContext] = []

    def with_context(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        seen.append(context)
        return {"tool": event.name, "session": context.session_id}

    registry = ToolRegistry([tool(handler=with_context)])
    context = ToolExecutionContext(session_id="s-1", turn_index=2)

    payload = await registry.execute_async(call("note", message="hi"), context=context)

    assert payload == {"tool": "note", "session": "s-1"}
    assert seen == [context]


@pytest.mark.asyncio
async def test_hung_sync_handler_times_out_as_an_error_payload() -> None:
    release = threading.Event()

    def hang(event: ToolCallEvent) -> dict[str, Any]:
        release.wait(timeout=5)
        return {"tool": event.name}

    registry = ToolRegistry([tool(handler=hang, timeout_seconds=0.05)])
    try:
        outcome = await asyncio.wait_for(registry.run(call("note", message="hi")), timeout=2)
    finally:
        release.set()

    assert outcome.payload == {
        "tool": "note",
        "error": "tool handler failed: timed out after 0.05s",
    }
    assert outcome.ok is False


@pytest.mark.asyncio
async def test_hung_async_handler_times_out_as_an_error_payload() -> None:
    async def hang(event: ToolCallEvent) -> dict[str, Any]:
        await asyncio.sleep(10)
        return {"tool": event.name}

    registry = ToolRegistry([tool(handler=hang, timeout_seconds=0.05)])

    payload = await asyncio.wait_for(registry.execute_async(call("note", message="hi")), timeout=2)

    assert payload == {"tool": "note", "error": "tool handler failed: timed out after 0.05s"}


@pytest.mark.asyncio
async def test_payload_with_an_error_key_is_a_failure_without_confirmation() -> None:
    registry = ToolRegistry(
        [
            tool(
                handler=lambda event: {"tool": event.name, "error": "calendar is full"},
                result_policy=ResultPolicy.TEMPLATE,
                confirmation_template="Done: {message}.",
            )
        ]
    )

    outcome = await registry.run(call("note", message="hi"))

    assert outcome.ok is False
    assert outcome.confirmation is None


@pytest.mark.asyncio
async def test_non_dict_result_is_wrapped() -> None:
    registry = ToolRegistry([tool(handler=lambda event: 42)])

    payload = await registry.execute_async(call("note", message="hi"))

    assert payload == {"tool": "note", "result": 42}


@pytest.mark.asyncio
async def test_template_confirmation_is_formatted_from_the_arguments() -> None:
    registry = ToolRegistry(
        [
            tool(result_policy=ResultPolicy.TEMPLATE, confirmation_template="Noted: {message}."),
            tool("broken", confirmation_template="Noted: {missing}."),
        ]
    )

    ok = await registry.run(call("note", message="hi"))
    broken = await registry.run(call("broken", message="hi"))

    assert ok.confirmation == "Noted: hi."
    assert broken.confirmation == "Noted: {missing}."


def test_provider_schemas_follow_the_enabled_order_and_skip_unknown_names() -> None:
    registry = ToolRegistry([tool("alpha"), tool("beta"), tool("gamma")])

    schemas = registry.provider_tool_schemas(["gamma", "missing", "alpha"])

    assert [schema["function"]["name"] for schema in schemas] == ["gamma", "alpha"]
    assert schemas[0] == {
        "type": "function",
        "function": {
            "name": "gamma",
            "description": "The gamma tool.",
            "parameters": NOTE_SCHEMA,
        },
    }


def test_tool_schema_of_an_unknown_tool_raises_key_error() -> None:
    with pytest.raises(KeyError):
        ToolRegistry([tool()]).tool_schema("missing")


def test_registry_lookup_helpers() -> None:
    registry = ToolRegistry([tool("alpha"), tool("beta")])

    assert registry.names() == ["alpha", "beta"]
    assert "alpha" in registry and "missing" not in registry
    assert registry.get("missing") is None
    assert [definition.name for definition in registry.definitions()] == ["alpha", "beta"]


def test_chat_event_catalog_lists_names_and_descriptions_but_no_parameters() -> None:
    registry = ToolRegistry(
        [
            tool("handoff_note", description="Hand over to a colleague."),
            tool("other", description="Something else."),
        ]
    )

    text = registry.chat_event_system_message(["handoff_note", "missing", "other"])

    lines = text.splitlines()
    assert lines[0] == "Available events:"
    assert lines[1] == "- handoff_note: Hand over to a colleague."
    assert lines[2] == "- other: Something else."
    assert "missing" not in text
    assert "message" not in text
    assert "priority" not in text


def test_coalesce_key_for_terminate_ignores_arguments() -> None:
    registry = ToolRegistry([tool("bye", result_policy=ResultPolicy.TERMINATE)])

    first = registry.coalesce_key(call("bye", "a", message="x"))
    second = registry.coalesce_key(call("bye", "b", message="y"))

    assert first == second == "bye"


def test_coalesce_key_for_coalescing_tools_depends_on_the_arguments() -> None:
    registry = ToolRegistry([tool("once", coalesce=True)])

    same_a = registry.coalesce_key(call("once", "a", message="x", priority=1))
    same_b = registry.coalesce_key(
        ToolCallEvent(id="b", name="once", arguments={"priority": 1, "message": "x"})
    )
    different = registry.coalesce_key(call("once", "c", message="y"))

    assert same_a is not None
    assert same_a == same_b
    assert different != same_a


def test_coalesce_key_is_none_for_ordinary_and_unknown_tools() -> None:
    registry = ToolRegistry([tool()])

    assert registry.coalesce_key(call("note", message="x")) is None
    assert registry.coalesce_key(call("missing")) is None


@pytest.mark.asyncio
async def test_resolve_arguments_uses_sync_and_async_resolvers() -> None:
    async def from_user(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        return {"message": context.history[0].content}

    registry = ToolRegistry(
        [
            tool("sync", argument_resolver=lambda event, context: {"message": "fixed"}),
            tool("async", argument_resolver=from_user),
            tool("none"),
        ]
    )
    context = ToolExecutionContext(history=[ChatMessage(role="user", content="from user")])

    assert await registry.resolve_arguments(call("sync"), context) == {"message": "fixed"}
    assert await registry.resolve_arguments(call("async"), context) == {"message": "from user"}
    assert await registry.resolve_arguments(call("none"), context) is None
    assert await registry.resolve_arguments(call("missing"), context) is None


@pytest.mark.asyncio
async def test_resolver_that_raises_or_returns_a_non_dict_resolves_nothing() -> None:
    def broken(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
        raise ValueError("cannot resolve")

    registry = ToolRegistry(
        [
            tool("broken", argument_resolver=broken),
            tool("odd", argument_resolver=lambda event, context: ["not", "a", "dict"]),
        ]
    )
    context = ToolExecutionContext()

    assert await registry.resolve_arguments(call("broken"), context) is None
    assert await registry.resolve_arguments(call("odd"), context) is None


@pytest.mark.asyncio
async def test_an_unhashable_callable_object_is_a_valid_handler() -> None:
    class Handler:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, event: ToolCallEvent) -> dict[str, Any]:
            return {"tool": event.name, "ok": True}

    registry = ToolRegistry(
        [
            ToolDefinition(
                name="obj", description="d", parameters={"type": "object"}, handler=Handler()
            )
        ]
    )
    payload = await registry.execute_async(ToolCallEvent(id="1", name="obj"))
    assert payload == {"tool": "obj", "ok": True}
