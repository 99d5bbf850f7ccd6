"""What a request offers the model (tool schemas or an event catalog) and name matching.

Clients may alias tool names (``calendar.schedule.create`` sent as
``calendar_2e_schedule_2e_create``), so an intent is matched to an offered tool by the
exact name, then by the name with escapes decoded and punctuation folded to ``_``,
then by keywords in the name and finally in the description. Calls always use the
name exactly as offered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from agent_lab.infrastructure.simulator.intents import IntentKind
from agent_lab.infrastructure.simulator.request import ChatRequest

CATALOG_HEADER = "Available events:"
_CATALOG_LINE = re.compile(r"^\s*-\s*([^\s:]+)\s*:\s*(.*?)\s*$")
_HEX_ESCAPE = re.compile(r"(?:_([0-9a-fA-F]{2})(?=_|$))|%([0-9a-fA-F]{2})")

_KEYWORDS: dict[IntentKind, re.Pattern[str]] = {
    IntentKind.VOLUME: re.compile(r"\b(?:volume|loudness|sound|audio)\b", re.IGNORECASE),
    IntentKind.SCHEDULE: re.compile(
        r"\b(?:calendar|schedule|meeting|appointment)s?\b", re.IGNORECASE
    ),
    IntentKind.SEARCH: re.compile(r"\b(?:search|look\s*up|web|google)\b", re.IGNORECASE),
    IntentKind.NOTE: re.compile(
        r"\b(?:note|notes|memo|hand\s*-?\s*off|handoff|escalat\w*)\b", re.IGNORECASE
    ),
    IntentKind.GOODBYE: re.compile(
        r"\b(?:terminate|goodbye|hang\s*up|end\s+(?:the\s+)?(?:session|call|conversation)"
        r"|end_session|end_call)\b",
        re.IGNORECASE,
    ),
}


@dataclass(frozen=True)
class OfferedTool:
    """A tool or event the model may use, named exactly as the request names it."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


@dataclass(frozen=True)
class Offer:
    """How the model may act: provider ``tools``, inline ``events``, or ``none``."""

    mode: Literal["tools", "events", "none"]
    tools: tuple[OfferedTool, ...] = ()

    def find(self, kind: IntentKind) -> OfferedTool | None:
        """The offered tool that does ``kind``, if any."""
        return match_tool(kind, self.tools)

    def named(self, name: str) -> OfferedTool | None:
        return next((tool for tool in self.tools if tool.name == name), None)


NO_OFFER = Offer("none")


def offer_from(request: ChatRequest) -> Offer:
    """Tools mode when ``tools`` is non-empty, events mode when a catalog is present."""
    if request.tool_choice == "none":
        return NO_OFFER
    if request.tools:
        return Offer("tools", tuple(_from_spec(tool.function) for tool in request.tools))
    for message in request.messages:
        if message.role in ("system", "developer") and CATALOG_HEADER in message.text:
            return Offer("events", tuple(parse_catalog(message.text)))
    return NO_OFFER


def _from_spec(function: Any) -> OfferedTool:
    return OfferedTool(function.name, function.description or "", function.parameters)


def parse_catalog(text: str) -> list[OfferedTool]:
    """The ``- name: description`` lines that follow ``Available events:``."""
    lines = text.split(CATALOG_HEADER, 1)[1].splitlines()
    tools: list[OfferedTool] = []
    for line in lines[1:] if lines and not lines[0].strip() else lines:
        match = _CATALOG_LINE.match(line)
        if match is None:
            break
        tools.append(OfferedTool(match.group(1), match.group(2)))
    return tools


def fold_name(name: str) -> str:
    """``calendar_2e_schedule_2e_create`` and ``Calendar.Schedule.Create`` both give
    ``calendar_schedule_create``."""
    decoded = _HEX_ESCAPE.sub(lambda m: _unescape(m.group(0), m.group(1) or m.group(2)), name)
    return re.sub(r"[^a-z0-9]+", "_", decoded.lower()).strip("_")


def _unescape(original: str, hex_code: str) -> str:
    char = chr(int(hex_code, 16))
    return char if not char.isalnum() and char.isprintable() else original


def match_score(kind: IntentKind, tool: OfferedTool) -> int:
    """How surely ``tool`` does ``kind``: 5 exact name … 1 description keyword, 0 no."""
    folded, target = fold_name(tool.name), fold_name(kind.value)
    if tool.name == kind.value:
        return 5
    if folded == target:
        return 4
    if f"_{target}_" in f"_{folded}_":
        return 3
    if _KEYWORDS[kind].search(folded.replace("_", " ")):
        return 2
    return 1 if _KEYWORDS[kind].search(tool.description) else 0


def match_tool(kind: IntentKind, tools: tuple[OfferedTool, ...]) -> OfferedTool | None:
    """The best offered match for ``kind`` (first one on ties), or ``None``."""
    best: tuple[int, OfferedTool | None] = (0, None)
    for tool in tools:
        score = match_score(kind, tool)
        if score > best[0]:
            best = (score, tool)
    return best[1]


def kind_of(tool: OfferedTool) -> IntentKind | None:
    """Which built-in intent an offered tool does, if it looks like one."""
    scores = [(match_score(kind, tool), kind) for kind in IntentKind]
    score, kind = max(scores, key=lambda pair: pair[0])
    return kind if score > 0 else None


def fit_arguments(
    arguments: dict[str, Any], schema: dict[str, Any] | None, message: str
) -> dict[str, Any]:
    """Keep the arguments the schema knows and fill its missing required ones."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, dict) or not properties:
        return arguments
    fitted = {key: value for key, value in arguments.items() if key in properties}
    for key in (schema or {}).get("required", []):
        if key not in fitted and isinstance(properties.get(key), dict):
            fitted[key] = _filler(properties[key], message, arguments)
    return fitted


def _filler(prop: dict[str, Any], message: str, arguments: dict[str, Any]) -> Any:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = prop.get("type")
    if kind in ("integer", "number"):
        number = re.search(r"-?\d+", message)
        return int(number.group(0)) if number else int(prop.get("minimum", 0))
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    texts = [value for value in arguments.values() if isinstance(value, str) and value]
    return texts[0] if texts else message
