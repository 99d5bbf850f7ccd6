"""Assembling tool calls from the delta shapes real OpenAI-compatible servers send."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest

from agent_lab.infrastructure.openai_compat.tool_call_accumulator import ToolCallAccumulator


def ids() -> Iterator[str]:
    return (f"gen_{n}" for n in count())


def accumulate(*deltas: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], str]]:
    generated = ids()
    accumulator = ToolCallAccumulator(new_id=lambda: next(generated))
    for delta in deltas:
        accumulator.add(delta)
    return [(c.id, c.name, c.arguments, c.raw_arguments) for c in accumulator.drain()]


def fn(name: str | None = None, arguments: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    return function


def test_fragments_joined_by_index_and_emitted_in_index_order() -> None:
    assert accumulate(
        {"index": 1, "id": "b", "type": "function", "function": fn("second", "")},
        {"index": 0, "id": "a", "type": "function", "function": fn("first", "")},
        {"index": 1, "function": fn(arguments='{"y":')},
        {"index": 0, "function": fn(arguments='{"x": 1}')},
        {"index": 1, "function": fn(arguments=" 2}")},
    ) == [
        ("a", "first", {"x": 1}, '{"x": 1}'),
        ("b", "second", {"y": 2}, '{"y": 2}'),
    ]


def test_same_index_with_different_ids_is_two_calls() -> None:
    # Ollama: parallel calls all carry index 0.
    assert accumulate(
        {"index": 0, "id": "call_1", "function": fn("get_weather", '{"city":"Paris"}')},
        {"index": 0, "id": "call_2", "function": fn("get_weather", '{"city":"Rome"}')},
    ) == [
        ("call_1", "get_weather", {"city": "Paris"}, '{"city":"Paris"}'),
        ("call_2", "get_weather", {"city": "Rome"}, '{"city":"Rome"}'),
    ]


def test_repeated_name_and_id_are_assigned_not_appended() -> None:
    assert accumulate(
        {"index": 0, "id": "x", "function": fn("volume", '{"level":')},
        {"index": 0, "id": "x", "function": fn("volume", " 3")},
        {"index": 0, "function": fn("volume", "}")},
    ) == [("x", "volume", {"level": 3}, '{"level": 3}')]


def test_missing_index_and_continuations_without_index_or_id() -> None:
    assert accumulate(
        {"id": "one", "function": fn("first", '{"a"')},
        {"function": fn(arguments=": 1}")},
        {"id": "two", "function": fn("second", "")},
        {"function": fn(arguments='{"b": 2}')},
    ) == [
        ("one", "first", {"a": 1}, '{"a": 1}'),
        ("two", "second", {"b": 2}, '{"b": 2}'),
    ]


def test_missing_ids_are_generated_and_unique() -> None:
    calls = accumulate(
        {"index": 0, "function": fn("a", "{}")},
        {"index": 1, "function": fn("b", "{}")},
    )
    assert [call[0] for call in calls] == ["gen_0", "gen_1"]


def test_non_string_ids_are_stringified() -> None:
    calls = accumulate({"index": 0, "id": 42, "function": fn("a", "{}")})
    assert calls[0][0] == "42"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (None, ({}, "{}")),
        ("", ({}, "{}")),
        ("  ", ({}, "{}")),
        ("{}", ({}, "{}")),
        ({"level": 3}, ({"level": 3}, '{"level":3}')),
        ({}, ({}, "{}")),
    ],
)
def test_parameterless_and_object_arguments(arguments: Any, expected: tuple[Any, str]) -> None:
    (call,) = accumulate({"index": 0, "id": "c", "function": fn("tool", arguments)})
    assert call[2:] == expected


def test_placeholder_braces_before_real_fragments_are_dropped() -> None:
    (call,) = accumulate(
        {"index": 0, "id": "c", "function": fn("tool", "{}")},
        {"index": 0, "function": fn(arguments='{"q": "x"}')},
    )
    assert call[2:] == ({"q": "x"}, '{"q": "x"}')


@pytest.mark.parametrize("raw", ['{"city": "Par', "[1, 2]", "null", "not json"])
def test_malformed_or_non_object_arguments_keep_raw_text(raw: str) -> None:
    (call,) = accumulate({"index": 0, "id": "c", "function": fn("tool", raw)})
    assert call[2:] == ({}, raw)


def test_legacy_function_call_next_to_tool_calls_is_ignored() -> None:
    accumulator = ToolCallAccumulator(new_id=lambda: "generated")
    accumulator.add({"index": 0, "id": "t", "function": fn("tool", '{"a": 1}')})
    accumulator.add_legacy_function_call(fn("tool", '{"a": 1}'))
    assert [(c.id, c.name) for c in accumulator.drain()] == [("t", "tool")]


def test_legacy_function_call_alone_becomes_one_call() -> None:
    accumulator = ToolCallAccumulator(new_id=lambda: "generated")
    accumulator.add_legacy_function_call(fn("tool", '{"a"'))
    accumulator.add_legacy_function_call(fn(arguments=": 1}"))
    calls = accumulator.drain()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("generated", "tool", {"a": 1})]


def test_legacy_before_tool_calls_in_the_same_stream_is_dropped() -> None:
    accumulator = ToolCallAccumulator(new_id=lambda: "generated")
    accumulator.add_legacy_function_call(fn("tool", "{}"))
    accumulator.add({"index": 0, "id": "t", "function": fn("tool", "{}")})
    assert [c.id for c in accumulator.drain()] == ["t"]


def test_names_are_resolved_back_to_registry_names() -> None:
    aliases = {"a__b": "a.b"}
    accumulator = ToolCallAccumulator(
        new_id=lambda: "generated", resolve_name=lambda name: aliases.get(name, name)
    )
    accumulator.add({"index": 0, "id": "t", "function": fn("a__b", "{}")})
    assert [c.name for c in accumulator.drain()] == ["a.b"]


def test_drain_returns_each_call_once_and_nameless_calls_are_dropped() -> None:
    accumulator = ToolCallAccumulator(new_id=lambda: "generated")
    accumulator.add({"index": 0, "id": "t", "function": fn("tool", "{}")})
    accumulator.add({"index": 1, "id": "u", "function": fn(arguments="{}")})
    assert [c.id for c in accumulator.drain()] == ["t"]
    assert accumulator.drain() == []


def test_a_new_id_without_a_name_continues_the_call_at_its_index() -> None:
    assert accumulate(
        {"index": 0, "id": "first", "function": fn("tool", '{"a":')},
        {"index": 0, "id": "other", "function": fn(arguments=" 1}")},
    ) == [("first", "tool", {"a": 1}, '{"a": 1}')]


def test_string_index_and_junk_entries() -> None:
    assert accumulate(
        {"index": "0", "id": "a", "function": fn("tool", "{")},
        {"index": "0", "function": fn(arguments="}")},
        {"index": 1, "id": "b", "function": "not a mapping"},
    ) == [("a", "tool", {}, "{}")]


def test_a_raw_newline_inside_a_string_argument_still_parses() -> None:
    # llama.cpp's grammar lets a model write a bare newline inside a JSON string
    assert accumulate(
        {"index": 0, "id": "a", "type": "function", "function": fn("search", '{"query": "one')},
        {"index": 0, "function": fn(arguments='\ntwo"}')},
    ) == [("a", "search", {"query": "one\ntwo"}, '{"query": "one\ntwo"}')]


def test_one_id_at_two_indexes_is_two_calls_with_that_id() -> None:
    # Two calls, one id: both are kept, so the chat round can reject the batch.
    assert accumulate(
        {"index": 0, "id": "call_1", "function": fn("note", "")},
        {"index": 1, "id": "call_1", "function": fn("note", "")},
        {"index": 0, "function": fn(arguments='{"message": "first"}')},
        {"index": 1, "id": "call_1", "function": fn(arguments='{"message": "second"}')},
    ) == [
        ("call_1", "note", {"message": "first"}, '{"message": "first"}'),
        ("call_1", "note", {"message": "second"}, '{"message": "second"}'),
    ]


def test_a_repeated_id_at_its_own_index_after_a_duplicate_goes_to_that_index() -> None:
    assert accumulate(
        {"index": 0, "id": "call_1", "function": fn("note", '{"a":')},
        {"index": 1, "id": "call_1", "function": fn("note", '{"b":')},
        {"index": 0, "id": "call_1", "function": fn(arguments=" 1}")},
        {"index": 1, "id": "call_1", "function": fn(arguments=" 2}")},
    ) == [
        ("call_1", "note", {"a": 1}, '{"a": 1}'),
        ("call_1", "note", {"b": 2}, '{"b": 2}'),
    ]


def test_an_id_without_index_then_with_one_stays_one_call() -> None:
    assert accumulate(
        {"id": "call_1", "function": fn("note", '{"a":')},
        {"index": 3, "id": "call_1", "function": fn(arguments=" 1}")},
    ) == [("call_1", "note", {"a": 1}, '{"a": 1}')]


def test_calls_without_ids_at_distinct_indexes_stay_distinct() -> None:
    """Some llama.cpp/Ollama builds send no ids: the index alone tells the calls apart."""
    assert accumulate(
        {"index": 0, "function": fn("get_weather", '{"city": "Paris"}')},
        {"index": 1, "function": fn("get_weather", '{"city": "Rome"}')},
    ) == [
        ("gen_0", "get_weather", {"city": "Paris"}, '{"city": "Paris"}'),
        ("gen_1", "get_weather", {"city": "Rome"}, '{"city": "Rome"}'),
    ]


@pytest.mark.parametrize(
    "where",
    [
        pytest.param({}, id="no-index"),
        pytest.param({"index": 0}, id="one-index"),
    ],
)
def test_whole_calls_of_one_tool_without_ids_or_distinct_indexes_are_separate(
    where: dict[str, Any],
) -> None:
    """Each call sent whole, one after the other, with no id and no index of its own:
    each is its own call with its own generated id (they used to run as one call with
    the two argument texts glued together, ``{"a":1}{"a":2}``)."""
    assert accumulate(
        {**where, "function": fn("get_weather", '{"city": "Paris"}')},
        {**where, "function": fn("get_weather", '{"city": "Rome"}')},
        {**where, "function": fn("get_weather", {"city": "Oslo"})},
        {**where, "function": fn("get_weather", {"city": "Bern"})},
    ) == [
        ("gen_0", "get_weather", {"city": "Paris"}, '{"city": "Paris"}'),
        ("gen_1", "get_weather", {"city": "Rome"}, '{"city": "Rome"}'),
        ("gen_2", "get_weather", {"city": "Oslo"}, '{"city":"Oslo"}'),
        ("gen_3", "get_weather", {"city": "Bern"}, '{"city":"Bern"}'),
    ]


def test_a_name_repeated_on_the_fragments_of_one_call_without_ids_joins_them() -> None:
    """Older llama.cpp repeats the name on every fragment: not whole yet, so one call."""
    assert accumulate(
        {"index": 0, "function": fn("volume", '{"level":')},
        {"index": 0, "function": fn("volume", " 3}")},
        {"index": 0, "function": fn("volume", "")},
    ) == [("gen_0", "volume", {"level": 3}, '{"level": 3}')]
