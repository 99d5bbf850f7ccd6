"""Reads tool results back out of a conversation and words a short grounded summary.

Results arrive as trailing ``tool`` messages (``chat_agent_tools``) or as one
``EventAgent results:`` user message with a JSON line per result (``dual_agent``).
The payload shapes belong to the tools, so the reader looks for common keys
(``error``, ``status``, ``results``/``sources`` with ``title`` and ``source``/``url``)
instead of assuming one schema.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import orjson

from agent_lab.infrastructure.simulator.catalog import Offer, OfferedTool, kind_of
from agent_lab.infrastructure.simulator.intents import IntentKind
from agent_lab.infrastructure.simulator.request import Message

_FAILED_STATUSES = {"error", "failed", "failure", "timeout", "timed_out", "cancelled"}
_UNCERTAIN_STATUSES = {"unknown", "outcome_unknown", "uncertain"}
_NAME_KEYS = ("event_name", "name", "tool", "event")
_PAYLOAD_KEYS = ("result", "payload", "content", "output", "data")
_LIST_KEYS = ("results", "sources", "items", "hits", "documents", "organic")
_SOURCE_KEYS = ("source", "site", "domain", "publisher")
_URL_KEYS = ("url", "link", "href")
_ACTIONS = {
    IntentKind.VOLUME: "adjusting the volume",
    IntentKind.SCHEDULE: "scheduling that",
    IntentKind.SEARCH: "the web search",
    IntentKind.NOTE: "saving the note",
    IntentKind.GOODBYE: "ending the session",
}
_SUBJECTS = {
    IntentKind.VOLUME: "the volume change",
    IntentKind.SCHEDULE: "the calendar entry",
    IntentKind.SEARCH: "the web search",
    IntentKind.NOTE: "the note",
    IntentKind.GOODBYE: "ending the session",
}
_MAX_SENTENCES = 3
_UNNAMED = "event"


@dataclass(frozen=True)
class Outcome:
    """One tool result as the simulator understands it."""

    name: str
    ok: bool
    payload: Any
    error: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def uncertain(self) -> bool:
        """The tool may or may not have acted (e.g. a call restored after a crash)."""
        flat = _flatten(self.payload)
        return str(flat.get("status", "")).lower() in _UNCERTAIN_STATUSES


def outcome_kind(outcome: Outcome, offer: Offer) -> IntentKind | None:
    """What the result's tool does: by its name, else by the shape of its payload."""
    kind = kind_of(offer.named(outcome.name) or OfferedTool(outcome.name))
    if kind is not None:
        return kind
    flat = _flatten(outcome.payload)
    if result_list(outcome.payload):
        return IntentKind.SEARCH
    if "start_at" in flat:
        return IntentKind.SCHEDULE
    if "volume" in flat:
        return IntentKind.VOLUME
    return None


def outcomes_before(messages: list[Message], end: int) -> list[Outcome]:
    """The results that directly precede ``messages[end]`` (in conversation order)."""
    calls = _calls_by_id(messages[:end])
    found: list[Outcome] = []
    index = end - 1
    while index >= 0 and (messages[index].role == "tool" or messages[index].is_results):
        message = messages[index]
        if message.role == "tool":
            found[:0] = [_from_tool_message(message, calls)]
        else:
            found[:0] = outcomes_from_results_text(message.text)
        index -= 1
    return found


def outcomes_in(messages: list[Message], start: int) -> list[Outcome]:
    """Every result in ``messages[start:]``, in conversation order."""
    calls = _calls_by_id(messages)
    found: list[Outcome] = []
    for message in messages[start:]:
        if message.role == "tool":
            found.append(_from_tool_message(message, calls))
        elif message.is_results:
            found.extend(outcomes_from_results_text(message.text))
    return found


def _calls_by_id(messages: list[Message]) -> dict[str, tuple[str, str]]:
    calls: dict[str, tuple[str, str]] = {}
    for message in messages:
        for call in message.tool_calls or []:
            calls[call.id] = (call.function.name, call.function.arguments)
    return calls


def _from_tool_message(message: Message, calls: dict[str, tuple[str, str]]) -> Outcome:
    name, raw_arguments = calls.get(message.tool_call_id or "", ("", "{}"))
    payload = _maybe_json(message.text)
    arguments = _maybe_json(raw_arguments)
    error = _find_error(payload)
    return Outcome(
        name=message.name or name or "tool",
        ok=error is None,
        payload=payload,
        error=error,
        arguments=arguments if isinstance(arguments, dict) else {},
    )


def outcomes_from_results_text(text: str) -> list[Outcome]:
    """One outcome per JSON line of an ``EventAgent results:`` message."""
    outcomes = []
    for line in text.splitlines()[1:]:
        record = _maybe_json(line.strip())
        if isinstance(record, dict):
            outcomes.append(_from_record(record))
    return outcomes


def _from_record(record: dict[str, Any]) -> Outcome:
    name = next((str(record[key]) for key in _NAME_KEYS if record.get(key)), _UNNAMED)
    payload = next((record[key] for key in _PAYLOAD_KEYS if key in record), record)
    payload = _maybe_json(payload) if isinstance(payload, str) else payload
    error = _find_error(record)
    arguments = record.get("arguments")
    return Outcome(
        name=name,
        ok=error is None,
        payload=payload,
        error=error,
        arguments=arguments if isinstance(arguments, dict) else {},
    )


def _maybe_json(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _find_error(value: Any, depth: int = 0) -> str | None:
    if not isinstance(value, dict) or depth > 3:
        return None
    error = value.get("error")
    if error:
        return error if isinstance(error, str) else orjson.dumps(error).decode()
    status = str(value.get("status", "")).lower()
    if status in _FAILED_STATUSES:
        return str(value.get("message") or status)
    for key in _PAYLOAD_KEYS:
        nested = _find_error(value.get(key), depth + 1)
        if nested is not None:
            return nested
    return None


def summarize(outcomes: list[Outcome], offer: Offer) -> str:
    """One or two sentences per result, at most three in all."""
    if not outcomes:
        return "All done."
    sentences = [_sentence(outcome, offer) for outcome in outcomes]
    if len(sentences) > _MAX_SENTENCES:
        rest = len(sentences) - (_MAX_SENTENCES - 1)
        sentences = [*sentences[: _MAX_SENTENCES - 1], f"{rest} more actions finished too."]
    return " ".join(sentences)


def already_said(outcome: Outcome, offer: Offer, text: str) -> bool:
    """True when ``text`` already states this result (a tool's own confirmation, say)."""
    kind = outcome_kind(outcome, offer)
    if not outcome.ok or kind not in (IntentKind.SCHEDULE, IntentKind.SEARCH):
        return False
    if kind is IntentKind.SCHEDULE:
        fields = {**outcome.arguments, **_flatten(outcome.payload)}
        facts = [fields.get("title"), fields.get("start_at")]
    else:
        hits = result_list(outcome.payload)
        facts = [hits[0].get("title")] if hits else [None]
    return all(isinstance(fact, str) and fact and fact in text for fact in facts)


def _sentence(outcome: Outcome, offer: Offer) -> str:
    kind = outcome_kind(outcome, offer)
    action = _ACTIONS.get(kind, outcome.name) if kind else outcome.name
    if not outcome.ok:
        return f"Sorry, {action} failed: {_clip(outcome.error or 'unknown error')}."
    if outcome.uncertain:
        subject = _SUBJECTS.get(kind, outcome.name) if kind else outcome.name
        return f"I couldn't confirm whether {subject} went through; please check before I retry."
    if kind is IntentKind.SEARCH:
        return search_sentence(outcome)
    if kind is IntentKind.SCHEDULE:
        return _schedule_sentence(outcome)
    if kind is IntentKind.VOLUME:
        level = _lookup(outcome.payload, ("volume", "level", "current_volume"))
        return f"Volume set to {level}." if level is not None else "The volume is adjusted."
    if kind is IntentKind.NOTE:
        return "I've passed that note along."
    if kind is IntentKind.GOODBYE:
        return "Goodbye!"
    return "That's done." if outcome.name == _UNNAMED else f"{outcome.name} finished."


def search_sentence(outcome: Outcome) -> str:
    """Grounds the answer in the first search result's title and source."""
    hits = result_list(outcome.payload)
    if not hits:
        return "I searched but found nothing relevant."
    first = hits[0]
    title = _clip(str(first.get("title") or first.get("name") or "an untitled page"))
    source = result_source(first)
    lead = f"I found {len(hits)} results; the top one is" if len(hits) > 1 else "The top result is"
    sentence = f'{lead} "{title}"' + (f" from {source}." if source else ".")
    snippet = first.get("snippet") or first.get("summary") or first.get("content")
    if isinstance(snippet, str) and snippet.strip(" .…"):
        sentence += f" It says: {_clip(snippet.strip(' …'), 120)}"
        sentence += "" if sentence.endswith((".", "!", "?", "…")) else "."
    return sentence


def result_list(payload: Any, depth: int = 0) -> list[dict[str, Any]]:
    """The dicts with a ``title`` in the first results-like list, a few levels deep."""
    if isinstance(payload, list):
        return [item for item in payload if isinstance(item, dict) and "title" in item]
    if not isinstance(payload, dict) or depth > 3:
        return []
    for key in (*_LIST_KEYS, *_PAYLOAD_KEYS):
        found = result_list(payload.get(key), depth + 1)
        if found:
            return found
    return []


def result_source(result: dict[str, Any]) -> str | None:
    """The result's source (a URL shortened to its host), or the host of its URL."""
    for key in (*_SOURCE_KEYS, *_URL_KEYS):
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            host = urlparse(value).netloc
            return host.removeprefix("www.") if host else value.strip()
    return None


def _schedule_sentence(outcome: Outcome) -> str:
    """The entry as the tool reported it (its fields win over the call's arguments)."""
    fields = {**outcome.arguments, **_flatten(outcome.payload)}
    title, start, zone = fields.get("title"), fields.get("start_at"), fields.get("timezone")
    if not (title and start):
        return "It's on your calendar."
    return f"{title} is on your calendar for {start}" + (f" ({zone})." if zone else ".")


def _flatten(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, dict):
        return {}
    merged: dict[str, Any] = {}
    for value in payload.values():
        merged.update(_flatten(value))
    return {**merged, **payload}


def _lookup(payload: Any, keys: tuple[str, ...]) -> Any:
    flat = _flatten(payload)
    return next((flat[key] for key in keys if flat.get(key) is not None), None)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).rstrip(".")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
