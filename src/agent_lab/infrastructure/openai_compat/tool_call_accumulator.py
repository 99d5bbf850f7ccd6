"""Assembles provider tool calls from streamed ``tool_calls`` deltas (no I/O).

OpenAI-compatible servers disagree on how a call is streamed. The accumulator accepts:

* fragments joined by ``index`` (OpenAI, vLLM, llama.cpp);
* the same ``index`` reused for parallel calls that carry different ids (Ollama);
* the id and name repeated on every delta (older llama.cpp, NIM): names are assigned;
* no ``index`` at all, and continuation fragments with neither index nor id, which
  belong to the call in progress;
* no ids and one ``index`` (or none) for parallel calls of the same tool, each sent
  whole (llama.cpp, Ollama builds): a fragment naming the tool with new arguments after
  the call's arguments are a whole JSON object is the next call, with its own id;
* arguments sent as a JSON object instead of a string, never sent (vLLM, parameterless
  tools) or sent as a ``"{}"`` placeholder before the real fragments;
* missing ids (a fresh one is generated for each call, once, when it is complete, so
  every view of the call has that one id) and non-string ids (stringified);
* the same id at two different indexes: two calls, both kept with that id, so the chat
  round sees the id twice in one batch and ends the turn with a protocol error;
* a legacy ``function_call`` delta, used only when the stream has no ``tool_calls``.

Malformed argument text yields ``arguments={}`` with the text kept in ``raw_arguments``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from agent_lab.domain.events import CutOffToolCall, ToolCallEvent

NameResolver = Callable[[str], str]
"""Maps a provider function name back to the registry name."""

IdFactory = Callable[[], str]
"""Returns a fresh tool-call id for calls the provider sent without one."""


@dataclass(slots=True)
class _PartialCall:
    order: int
    index: int
    indexed: bool = False
    """Whether the provider sent the index (else it is the call's position)."""
    id: str | None = None
    name: str = ""
    fragments: list[str] = field(default_factory=list)
    object_arguments: dict[str, Any] | None = None
    emitted: bool = False


def _identity(name: str) -> str:
    return name


class ToolCallAccumulator:
    """Collects ``tool_calls`` deltas of one stream into complete ``ToolCallEvent``s."""

    __slots__ = (
        "_by_id",
        "_by_index",
        "_calls",
        "_current",
        "_legacy",
        "_new_id",
        "_resolve_name",
    )

    def __init__(self, *, new_id: IdFactory, resolve_name: NameResolver = _identity) -> None:
        """Creates an empty accumulator.

        Args:
            new_id: Supplies ids for calls that arrive without one.
            resolve_name: Maps provider function names back to registry names.
        """
        self._new_id = new_id
        self._resolve_name = resolve_name
        self._calls: list[_PartialCall] = []
        self._by_id: dict[str, _PartialCall] = {}
        self._by_index: dict[int, _PartialCall] = {}
        self._current: _PartialCall | None = None
        self._legacy: _PartialCall | None = None

    def add(self, delta: Mapping[str, Any]) -> None:
        """Merges one entry of a delta's ``tool_calls`` list.

        Args:
            delta: ``{"index"?, "id"?, "type"?, "function": {"name"?, "arguments"?}}``.
        """
        function = delta.get("function")
        if not isinstance(function, Mapping):
            function = {}
        name = function.get("name")
        name = name if isinstance(name, str) and name else None
        arguments = function.get("arguments")
        index, call_id = _as_index(delta.get("index")), _as_id(delta.get("id"))
        call = self._route(index, call_id, name, arguments)
        _merge(call, name, arguments)

    def add_legacy_function_call(self, function: Mapping[str, Any]) -> None:
        """Merges a legacy ``function_call`` delta (ignored once ``tool_calls`` appear).

        Args:
            function: ``{"name"?, "arguments"?}``.
        """
        if self._calls:
            return
        if self._legacy is None:
            self._legacy = _PartialCall(order=0, index=0)
        name = function.get("name")
        _merge(
            self._legacy,
            name if isinstance(name, str) and name else None,
            function.get("arguments"),
        )

    def drain(self, cut_off: str | None = None) -> list[ToolCallEvent]:
        """Returns the calls not returned before, in index order, and marks them returned.

        Args:
            cut_off: The ``finish_reason`` that stopped the answer (``length``,
                ``content_filter``), if one did: the last call, the one being written,
                comes out as a ``CutOffToolCall`` unless its arguments are a whole
                JSON object (the calls before it were finished).

        Returns:
            The complete calls; calls that never received a name are dropped.
        """
        pending = [call for call in self._calls if not call.emitted]
        if not self._calls and self._legacy is not None:
            pending = [self._legacy]
        self._legacy = None
        pending.sort(key=lambda call: (call.index, call.order))
        events: list[ToolCallEvent] = []
        for call in pending:
            call.emitted = True
            if call.name:
                events.append(self._finish(call))
        named = [call for call in pending if call.name]
        if cut_off is not None and named and not _whole_arguments(named[-1]):
            events[-1] = CutOffToolCall.of(events[-1], cut_off)
        return events

    def _route(
        self, index: int | None, call_id: str | None, name: str | None, arguments: object
    ) -> _PartialCall:
        if call_id is not None:
            known = self._by_id.get(call_id)
            if known is not None and (index is None or not known.indexed or known.index == index):
                return known
            at_index = self._by_index.get(index) if index is not None else None
            if at_index is not None and at_index.id == call_id:
                return at_index  # a repeated id at its own index, after a duplicate opened
        candidate = self._by_index.get(index) if index is not None else self._current
        if candidate is not None and _continues(candidate, call_id, name, arguments):
            if call_id is not None and candidate.id is None:
                candidate.id = call_id
                self._by_id[call_id] = candidate
            return candidate
        return self._open(index, call_id)

    def _open(self, index: int | None, call_id: str | None) -> _PartialCall:
        position = len(self._calls)
        call = _PartialCall(
            order=position, index=position if index is None else index, indexed=index is not None
        )
        call.id = call_id
        self._calls.append(call)
        self._by_index[call.index] = call
        if call_id is not None:
            self._by_id[call_id] = call
        self._current = call
        return call

    def _finish(self, call: _PartialCall) -> ToolCallEvent:
        arguments, raw = _final_arguments(call)
        return ToolCallEvent(
            id=call.id if call.id is not None else self._new_id(),
            name=self._resolve_name(call.name),
            arguments=arguments,
            raw_arguments=raw,
        )


def _continues(
    call: _PartialCall, call_id: str | None, name: str | None, arguments: object
) -> bool:
    """Whether a fragment without a known id belongs to ``call`` rather than a new call.

    With neither an id nor an index of its own to tell, a fragment that names the tool
    and brings arguments while ``call``'s arguments are already a whole JSON object
    starts the next call (parallel calls of one tool, each sent whole, by servers that
    give no ids and one index or none); a name repeated on the fragments of one call
    (older llama.cpp) still joins it, since its arguments are not whole until the end.
    """
    if call.emitted:
        return False
    if call_id is not None and call.id is not None:
        # A new id opens a new call, unless the fragment cannot start one (no name).
        return name is None
    if name is None or not call.name:
        return True
    return name == call.name and not (_brings_arguments(arguments) and _complete(call))


def _brings_arguments(arguments: object) -> bool:
    return isinstance(arguments, Mapping) or (isinstance(arguments, str) and bool(arguments))


def _complete(call: _PartialCall) -> bool:
    """The call's arguments are a whole JSON object (the ``"{}"`` placeholder some
    servers send before the real fragments does not count)."""
    if call.fragments == ["{}"]:
        return False
    tail = next((fragment for fragment in reversed(call.fragments) if fragment.strip()), "")
    if tail and not tail.rstrip().endswith("}"):
        return False  # cheap: most fragments of a call in progress end otherwise
    return _whole_arguments(call)


def _merge(call: _PartialCall, name: str | None, arguments: object) -> None:
    if name is not None:
        call.name = name
    if isinstance(arguments, str):
        if arguments:
            if call.fragments == ["{}"] and arguments.lstrip().startswith("{"):
                call.fragments.clear()
            call.fragments.append(arguments)
    elif isinstance(arguments, Mapping):
        call.object_arguments = dict(arguments)


def _final_arguments(call: _PartialCall) -> tuple[dict[str, Any], str]:
    raw = "".join(call.fragments)
    if not raw and call.object_arguments is not None:
        return call.object_arguments, orjson.dumps(call.object_arguments).decode()
    if not raw.strip():
        return {}, "{}"
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        value = _lenient(raw)
    return (value, raw) if isinstance(value, dict) else ({}, raw)


def _whole_arguments(call: _PartialCall) -> bool:
    """Whether the call's arguments so far are a complete JSON object."""
    raw = "".join(call.fragments)
    if not raw.strip():
        return call.object_arguments is not None
    try:
        return isinstance(json.loads(raw, strict=False), dict)
    except ValueError:
        return False


def _lenient(raw: str) -> object:
    """Arguments with raw control characters inside strings (llama.cpp's grammar lets a
    model write a bare newline there) still parse; anything else malformed is ``{}``."""
    try:
        return json.loads(raw, strict=False)
    except ValueError:
        return {}


def _as_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _as_id(value: object) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)
