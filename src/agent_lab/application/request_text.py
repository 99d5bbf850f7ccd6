"""What a user's request says, for the built-in tools' argument resolvers (pure functions).

A ``dual_agent`` resolver fills a tool's arguments from the conversation without a model
call, so it must write what a model would: the search clause of "Search for SQLite WAL
and set the volume to 20" is ``SQLite WAL``, and the note of "Take a note that the
customer wants a refund" is what the colleague needs to know, not the assistant's
acknowledgement. A request is cut where the next one starts: a sentence end, or
``and``/``then`` before a verb that asks for something else.
"""

from __future__ import annotations

import re

_ACTION_VERBS = (
    r"set|turn|change|make|mute|unmute|raise|lower|increase|decrease|put|schedule|book"
    r"|create|add|arrange|plan|take|note|hand|remember|escalate|search|look|find|google"
    r"|tell|show|give|summari[sz]e|explain|end|stop|say|send|call|remind"
)
_NEXT_REQUEST = re.compile(
    r"(?<=[.!?;])\s+"
    rf"|,?\s+(?:and\s+then|and\s+also|and|then|also)\s+(?=(?:please\s+)?(?:{_ACTION_VERBS})\b)",
    re.IGNORECASE,
)
"""Where the next request starts: after a sentence end, or at ``and``/``then`` before
a verb that asks for something."""

_POLITE = r"(?:(?:please|can\s+you|could\s+you|would\s+you|now|also)[,\s]+)*"
_ASK_TO_SEARCH = re.compile(
    rf"{_POLITE}(?:search|look\s+up|look\s+for|find|google)\b"
    r"(?:\s+(?:the|my|our))?(?:\s+(?:local\s+)?(?:corpus|web|internet|docs|documents|index))?"
    r"(?:\s+(?:for|about|on))?\s*",
    re.IGNORECASE,
)
"""A request to search, up to where its query starts."""
_ASK_TO_NOTE = re.compile(
    rf"{_POLITE}(?:note(?:\s+(?:that|down|this))?|(?:take|make)\s+a\s+note(?:\s+that)?"
    r"|hand\s*-?\s*off|hand\s+(?:this|it)\s+(?:off|over)|remember\s+that|escalate)"
    r"(?:\s+(?:this|it))?(?:\s+to\s+(?:a|an|the)\s+\w+)?\s*(?:that|saying|with|:|-)?\s*",
    re.IGNORECASE,
)
"""A request to hand something over, up to where the note starts."""
_CLOSING = re.compile(r"[\s.!,;:]*$")
"""Closing punctuation (a question keeps its question mark)."""


def search_query(message: str) -> str:
    """What to search for in a user's request: the search request's words without the
    asking around them (``"Search the local corpus for SQLite WAL and tell me about
    it."`` → ``"SQLite WAL"``; ``"Set the volume to 20 and look up BM25"`` → ``"BM25"``);
    the whole message when it asks for no search or nothing is left."""
    text = " ".join(message.split())
    return _request_after(_ASK_TO_SEARCH, text) or text


def note_text(message: str) -> str:
    """What a colleague needs to know from a user's request to hand something over
    (``"Take a note that the customer wants a refund."`` → ``"The customer wants a
    refund"``); the whole message as written when it asks for no note or nothing is left."""
    text = " ".join(message.split())
    note = _request_after(_ASK_TO_NOTE, text)
    return note[:1].upper() + note[1:] if note else text


def _request_after(ask: re.Pattern[str], text: str) -> str:
    """The rest of the first request that starts with ``ask``, without its closing
    punctuation; empty when no request does."""
    for request in _NEXT_REQUEST.split(text):
        match = ask.match(request)
        if match is not None:
            return _CLOSING.sub("", request[match.end() :])
    return ""
