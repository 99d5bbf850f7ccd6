"""The simulated model's sentences: what it says before acting, and plain answers.

Variants are picked with the request's seeded ``random.Random``, so the same seed and
request always give the same words.
"""

from __future__ import annotations

import random
import re

from agent_lab.infrastructure.simulator.intents import Intent, IntentKind, normalize

_CANNOT = {
    IntentKind.VOLUME: "I can't change the volume from here.",
    IntentKind.SCHEDULE: "I can't add calendar entries from here.",
    IntentKind.SEARCH: "I can't search the web from here.",
    IntentKind.NOTE: "I can't pass notes along from here.",
    IntentKind.GOODBYE: "Goodbye!",
}
_LEADING_FILLER = re.compile(
    r"^(?:hi|hello|hey|ok(?:ay)?|so|well|please|thanks|thank\s+you|can\s+you|could\s+you"
    r"|would\s+you|will\s+you|tell\s+me|explain|describe|talk\s+about|i\s+want\s+to"
    r"|i'?d\s+like\s+to|i\s+would\s+like\s+to|let'?s|about|some|me)\b[\s,!.]*",
    re.IGNORECASE,
)
_PRONOUNS = {
    "i": "you",
    "me": "you",
    "my": "your",
    "mine": "yours",
    "i'm": "you're",
    "am": "are",
    "myself": "yourself",
}
_GREETING = re.compile(r"^(?:hi|hello|hey|good\s+(?:morning|afternoon|evening))\b", re.I)
_QUESTION = re.compile(
    r"^(?:how|why|what|when|where|which|who|whose|is|are|was|were|do|does|did|can|could"
    r"|should|would|will)\b",
    re.IGNORECASE,
)
_THANKS = re.compile(r"^(?:thanks|thank\s+you|cheers)\b", re.IGNORECASE)
_CLOSERS = (
    "I'm the offline simulated model, so my answers stay short.",
    "Tell me more and I'll help where I can.",
    "Ask me to look something up or schedule something if that helps.",
)
_TOPIC_WORDS = 12
_TOPIC_WORD_CHARS = 40
"""A longer word of the topic is echoed cut to this many characters (and an ellipsis)."""


def preamble(intent: Intent, rng: random.Random) -> str:
    """What the model says as it acts on ``intent``."""
    arguments = intent.arguments
    match intent.kind:
        case IntentKind.VOLUME:
            return _volume_preamble(arguments.get("mode"), int(arguments.get("value", 0)), rng)
        case IntentKind.SCHEDULE:
            title = arguments.get("title", "the meeting")
            return rng.choice((f"I'll add {title} to your calendar.", f"Sure, scheduling {title}."))
        case IntentKind.SEARCH:
            query = arguments.get("query", "that")
            return rng.choice((f"Let me look up {query}.", f"I'll search for {query}."))
        case IntentKind.NOTE:
            return rng.choice(("I'll pass that note along.", "Noted, I'll hand that off."))
        case IntentKind.GOODBYE:
            return rng.choice(("Goodbye! Thanks for chatting.", "Goodbye, talk soon!"))


def _volume_preamble(mode: object, value: int, rng: random.Random) -> str:
    if mode == "absolute":
        return "Muting it now." if value == 0 else f"Setting the volume to {value}."
    direction = "up" if value >= 0 else "down"
    return rng.choice((f"Sure, I'll turn it {direction}.", f"Turning it {direction} now."))


def cannot(kind: IntentKind) -> str:
    """What the model says when the tool for ``kind`` is not offered."""
    return _CANNOT[kind]


def plain_answer(message: str, rng: random.Random) -> str:
    """A friendly 1–3 sentence answer that echoes the topic of ``message``."""
    text = normalize(message)
    if _THANKS.match(text) and len(text.split()) <= 4:
        return "You're welcome! Is there anything else I can do?"
    topic = topic_of(text)
    if not topic:
        if _GREETING.match(text):
            return "Hello! How can I help you today?"
        return "I'm here. What would you like to do?"
    return f"{_echo(topic, rng)} {rng.choice(_CLOSERS)}"


def _echo(topic: str, rng: random.Random) -> str:
    if _QUESTION.match(topic):
        question = topic[0].lower() + topic[1:]
        return rng.choice((f'Good question: "{question}?"', f'You asked "{question}?"'))
    return rng.choice((f"Happy to talk about {topic}.", f"You asked about {topic}."))


def topic_of(message: str) -> str:
    """The gist of the first sentence, seen from the assistant's side (``my`` → ``your``)."""
    first = re.split(r"(?<=[.!?])\s+", normalize(message), maxsplit=1)[0]
    about = re.search(r"\babout\s+(.+)", first, re.IGNORECASE)
    first = about.group(1) if about else first
    previous = None
    while previous != first:
        previous, first = first, _LEADING_FILLER.sub("", first).strip()
    words = [_PRONOUNS.get(word.lower(), word) for word in first.rstrip(".!?,;: ").split()]
    return " ".join(_cut(word) for word in words[:_TOPIC_WORDS])


def _cut(word: str) -> str:
    return word if len(word) <= _TOPIC_WORD_CHARS else word[:_TOPIC_WORD_CHARS] + "…"
