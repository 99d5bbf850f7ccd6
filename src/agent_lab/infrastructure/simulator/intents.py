"""Keyword intent detection and argument extraction over English text (pure functions).

A message is split into clauses at sentence ends, commas and ``and``/``then``; a clause
holds at most one intent (its earliest trigger), and a clause without a trigger
continues the one before it ("search for salt and pepper" stays one query). A question
about what was done ("What did I schedule?", "Have you booked it?") asks for no action:
its clause holds no intent and is not continued.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeAlias

from agent_lab.infrastructure.simulator.clock import (
    extract_start,
    extract_timezone,
    format_start,
)


class IntentKind(StrEnum):
    """What the user asked for; the value is the built-in tool that does it."""

    VOLUME = "device.volume.adjust"
    SCHEDULE = "calendar.schedule.create"
    SEARCH = "knowledge.web.search"
    NOTE = "handoff_note"
    GOODBYE = "session.terminate"


@dataclass(frozen=True)
class Intent:
    """One detected request and the arguments read from its clause."""

    kind: IntentKind
    arguments: dict[str, Any]


Extractor: TypeAlias = Callable[[str, str, datetime], dict[str, Any] | None]
"""``extractor(clause, whole_message, now)``: arguments, or ``None`` when too vague."""

_TRIGGER_WORDS: dict[IntentKind, str] = {
    IntentKind.VOLUME: (
        r"volume|louder|quieter|softer|unmute|mute"
        r"|turn\s+(?:it|this|that)\s+(?:up|down)|turn\s+(?:up|down)"
    ),
    IntentKind.SCHEDULE: (
        r"schedule|arrange|book\s+(?:a|an|me|us|time)|set\s+up\s+(?:a|an|the|my|our)"
        r"|(?:add|put)\b(?=.*\bcalendar\b)"
    ),
    IntentKind.SEARCH: (
        r"search|look\s+up|google|research|find|tell\s+me\s+about"
        r"|what(?:'s|\s+is|\s+are|\s+was)|who(?:'s|\s+is|\s+was)"
    ),
    IntentKind.NOTE: (
        r"note\s+(?:that|down|this)|(?:take|make)\s+a\s+note|hand\s*-?\s*off"
        r"|hand\s+(?:this|it)\s+(?:off|over)|remember\s+that|escalate"
    ),
    IntentKind.GOODBYE: (
        r"good\s*-?\s*bye|bye|farewell|see\s+you|that'?s\s+all|that\s+is\s+all"
        r"|end\s+(?:the|this|our)\s+(?:session|chat|conversation|call)|hang\s+up"
        r"|i'?m\s+done|we'?re\s+done"
    ),
}
"""What triggers each intent: alternatives, each matched as whole words in any case."""
_TRIGGERS: dict[IntentKind, re.Pattern[str]] = {
    kind: re.compile(rf"\b(?:{words})\b", re.IGNORECASE) for kind, words in _TRIGGER_WORDS.items()
}

_PAST_QUESTION = re.compile(
    r"^(?:(?:what|which|when|where|who|whom|why|how(?:\s+many|\s+much)?)\s+)?"
    r"(?:did|didn't|have|haven't|has|hasn't|had)\s+(?:i|we|you)\b",
    re.IGNORECASE,
)
"""The start of a question about what was done, as opposed to a request ("can you …")."""

_SEPARATOR = re.compile(
    r"((?:[.!?;]+|\n)(?=\s|$)\s*|,\s*(?:and\s+|then\s+)?|\s+(?:and|then|also|plus)\s+)",
    re.IGNORECASE,
)
_CONNECTOR_TAIL = re.compile(r"[\s,;:.!?]+$|\s+(?:and|then|also|please)$", re.IGNORECASE)


def normalize(text: str) -> str:
    """Straight quotes, ``a.m.``/``p.m.`` without dots, folded whitespace."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"\b([ap])\.m\.", r"\1m", text, flags=re.IGNORECASE)
    return " ".join(text.split())


def detect_intents(message: str, now: datetime) -> list[Intent]:
    """Every intent in ``message``, in the order they appear."""
    message = normalize(message)
    intents: list[Intent] = []
    for kind, clause in split_clauses(message):
        arguments = EXTRACTORS[kind](clause, message, now)
        intent = Intent(kind, arguments) if arguments is not None else None
        if intent is not None and intent not in intents:
            intents.append(intent)
    return intents


def split_clauses(message: str) -> list[tuple[IntentKind, str]]:
    """``(kind, clause)`` pairs; the clause starts at the kind's trigger."""
    pieces = _SEPARATOR.split(message)
    found: list[tuple[IntentKind | None, str]] = []
    for index in range(0, len(pieces), 2):
        piece = pieces[index]
        trigger = earliest_trigger(piece)
        if _PAST_QUESTION.match(piece.strip()):
            found.append((None, ""))  # no intent, and nothing after it continues one
        elif trigger is not None:
            found.append((trigger[0], piece[trigger[1] :]))
        elif found:
            kind, clause = found[-1]
            found[-1] = (kind, clause + pieces[index - 1] + piece)
    return [(kind, _trim(clause)) for kind, clause in found if kind is not None]


def earliest_trigger(text: str) -> tuple[IntentKind, int] | None:
    """The kind whose trigger starts first in ``text``, and where it starts."""
    best: tuple[IntentKind, int] | None = None
    for kind, pattern in _TRIGGERS.items():
        match = pattern.search(text)
        if match is not None and (best is None or match.start() < best[1]):
            best = (kind, match.start())
    return best


def _trim(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, _CONNECTOR_TAIL.sub("", text).strip()
    return text


def arguments_for(kind: IntentKind, message: str, now: datetime) -> dict[str, Any]:
    """Arguments for ``kind`` from a whole message, with defaults when it is vague."""
    message = normalize(message)
    for intent in detect_intents(message, now):
        if intent.kind is kind:
            return intent.arguments
    return EXTRACTORS[kind](message, message, now) or _DEFAULTS[kind](message)


def volume_arguments(clause: str, message: str, now: datetime) -> dict[str, Any] | None:
    """``{"mode": "absolute"|"relative", "value": int}`` for a volume request."""
    lowered = clause.lower()
    if re.search(r"\bunmute\b", lowered):
        return {"mode": "absolute", "value": 50}
    if re.search(r"\b(?:mute|silence)\b", lowered):
        return {"mode": "absolute", "value": 0}
    target = re.search(r"\b(?:to|at|volume)\s+(\d{1,3})\s*(?:%|percent)?", lowered)
    if target is not None:
        return {"mode": "absolute", "value": min(int(target.group(1)), 100)}
    if re.search(r"\b(?:max|maximum|full)\b", lowered):
        return {"mode": "absolute", "value": 100}
    direction = _volume_direction(lowered)
    if direction == 0:
        return None
    step = re.search(r"\bby\s+(\d{1,3})\b", lowered)
    return {"mode": "relative", "value": direction * (int(step.group(1)) if step else 10)}


def _volume_direction(lowered: str) -> int:
    if re.search(r"\b(?:up|louder|increase|raise|higher|boost)\b", lowered):
        return 1
    if re.search(r"\b(?:down|quieter|softer|lower|decrease|reduce)\b", lowered):
        return -1
    return 0


_TITLE_LEAD = re.compile(
    r"\b(?:schedule|arrange|book|set\s+up|add|put)(?:\s+|$)(?:me\s+|us\s+)?"
    r"(?:(?:a|an|the|my|our)\s+)?(?:new\s+)?",
    re.IGNORECASE,
)
_TITLE_STOP = re.compile(
    r"\s+(?:at|on|for|tomorrow|today|tonight|next|this|in|from|by|starting|around|between"
    r"|to\s+(?:my|the)\s+calendar)\b|\s+\d|[,.;!?]",
    re.IGNORECASE,
)
_VAGUE_TITLES = {"", "it", "that", "this", "something", "one", "time"}


def schedule_arguments(clause: str, message: str, now: datetime) -> dict[str, Any]:
    """``{"title", "start_at", "timezone"}``; time and zone may come from elsewhere."""
    timezone = extract_timezone(clause)
    if timezone == "UTC":
        timezone = extract_timezone(message)
    start = extract_start(clause, timezone, now)
    if start == extract_start("", timezone, now):
        start = extract_start(message, timezone, now)
    return {"title": schedule_title(clause), "start_at": format_start(start), "timezone": timezone}


def schedule_title(clause: str) -> str:
    """``"schedule a design review at 9"`` → ``"Design review"`` (``"Meeting"`` if vague)."""
    lead = _TITLE_LEAD.search(clause)
    rest = clause[lead.end() :] if lead else clause
    stop = _TITLE_STOP.search(rest)
    title = " ".join((rest[: stop.start()] if stop else rest).split()[:8])
    if title.lower() in _VAGUE_TITLES:
        return "Meeting"
    return title[0].upper() + title[1:]


_QUERY_LEAD = re.compile(
    r"^(?:search(?:\s+(?:online|(?:the\s+|my\s+)?(?:local\s+)?(?:web|internet|corpus"
    r"|docs|documentation|knowledge\s+base|notes)))?|look\s+up|google|research"
    r"|find(?:\s+out)?|tell\s+me\s+about|what(?:'s|\s+is|\s+are|\s+was)"
    r"|who(?:'s|\s+is|\s+was))\s*(?:(?:for|about|on|me)\s+)*",
    re.IGNORECASE,
)
_NOT_A_QUERY = {"you", "your", "yours", "up", "it", "that", "this", "there", "the", "a"}


def search_arguments(clause: str, message: str, now: datetime) -> dict[str, Any] | None:
    """``{"query": ...}``; ``None`` when nothing worth searching follows the trigger."""
    lead = _QUERY_LEAD.match(clause)
    query = _trim(clause[lead.end() :] if lead else clause)
    words = query.lower().split()
    if not words or words[0] in _NOT_A_QUERY and len(words) <= 2:
        return None
    return {"query": query}


_NOTE_LEAD = re.compile(
    r"^(?:note(?:\s+(?:that|down|this))?|(?:take|make)\s+a\s+note(?:\s+that)?"
    r"|hand\s*-?\s*off|hand\s+(?:this|it)\s+(?:off|over)|remember\s+that|escalate)"
    r"(?:\s+(?:this|it))?(?:\s+to\s+(?:a|an|the)\s+\w+)?\s*(?:that|saying|with|:|-)?\s*",
    re.IGNORECASE,
)


def note_arguments(clause: str, message: str, now: datetime) -> dict[str, Any]:
    """``{"message": ...}``: the text after the trigger, else the whole message."""
    lead = _NOTE_LEAD.match(clause)
    text = _trim(clause[lead.end() :] if lead else clause) or _trim(message)
    return {"message": text[0].upper() + text[1:] if text else message}


def goodbye_arguments(clause: str, message: str, now: datetime) -> dict[str, Any]:
    """``session.terminate`` takes no arguments."""
    return {}


EXTRACTORS: dict[IntentKind, Extractor] = {
    IntentKind.VOLUME: volume_arguments,
    IntentKind.SCHEDULE: schedule_arguments,
    IntentKind.SEARCH: search_arguments,
    IntentKind.NOTE: note_arguments,
    IntentKind.GOODBYE: goodbye_arguments,
}

_DEFAULTS: dict[IntentKind, Callable[[str], dict[str, Any]]] = {
    IntentKind.VOLUME: lambda message: {"mode": "relative", "value": 10},
    IntentKind.SCHEDULE: lambda message: {},
    IntentKind.SEARCH: lambda message: {"query": _trim(message) or "news"},
    IntentKind.NOTE: lambda message: {"message": message},
    IntentKind.GOODBYE: lambda message: {},
}
