"""The ``device.volume.adjust`` built-in tool and its plain-language volume parser."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from agent_lab.application._tool_schemas import choice, object_schema, whole_number
from agent_lab.application.builtin_backends import DeviceState
from agent_lab.application.events import ResultPolicy
from agent_lab.application.tools import ToolDefinition, ToolExecutionContext, ToolPayload
from agent_lab.domain.events import ToolCallEvent

VOLUME_ADJUST = "device.volume.adjust"
VOLUME_STEP = 10
"""What "louder" or "quieter" without a number changes the volume by."""

VolumeMode = Literal["absolute", "relative"]

# --- device.volume.adjust -----------------------------------------------------------


def volume_tool(device: DeviceState) -> ToolDefinition:
    """``device.volume.adjust`` (SILENT_SUCCESS) bound to ``device``."""

    def handle(event: ToolCallEvent) -> ToolPayload:
        mode: VolumeMode = event.arguments["mode"]
        value = int(event.arguments["value"])
        change = device.update_volume(lambda previous: next_volume(previous, mode, value))
        return {"tool": VOLUME_ADJUST, "previous": change.previous, "volume": change.volume}

    return ToolDefinition(
        name=VOLUME_ADJUST,
        description="Change the speaker volume: set a level, or step it up or down.",
        parameters=object_schema(
            {
                "mode": choice(
                    ["absolute", "relative"], "absolute sets the level; relative changes it."
                ),
                "value": whole_number(
                    -100, 100, "The level (0-100) or the change (negative is quieter)."
                ),
            },
            required=["mode", "value"],
        ),
        handler=handle,
        argument_resolver=_resolve_volume,
        result_policy=ResultPolicy.SILENT_SUCCESS,
    )


def next_volume(previous: int, mode: VolumeMode, value: int) -> int:
    """The volume after one adjustment, clamped to 0–100."""
    target = value if mode == "absolute" else previous + value
    return max(0, min(100, target))


_NUMBER = r"(\d{1,3})\s*(?:%|percent\b)?"
_TARGET = r"(?:it|the\s+volume|volume|the\s+sound|the\s+music)"
_UP_OR_DOWN = r"(up|down)"
_VERB_UP = {"raise": 1, "increase": 1, "lower": -1, "decrease": -1, "reduce": -1}
_NEGATION = re.compile(r"\b(?:don'?t|do\s+not|not|never|no)\b")

_VolumeRule: TypeAlias = tuple[re.Pattern[str], Callable[[re.Match[str]], tuple[str, int]]]

_EXPLICIT_PATTERNS: tuple[_VolumeRule, ...] = (
    (
        re.compile(rf"\b(?:volume|sound)\b[^.!?\d]*?\b(?:to|at)\s+{_NUMBER}"),
        lambda m: ("absolute", int(m[1])),
    ),
    (
        re.compile(rf"\b(?:turn|crank|bring|set)\s+{_TARGET}\s+(?:up|down)\s+to\s+{_NUMBER}"),
        lambda m: ("absolute", int(m[1])),
    ),
    (
        re.compile(rf"\b(?:turn|crank|bring)\s+{_TARGET}\s+{_UP_OR_DOWN}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", int(m[2]) if m[1] == "up" else -int(m[2])),
    ),
    (
        re.compile(rf"\bvolume\s+{_UP_OR_DOWN}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", int(m[2]) if m[1] == "up" else -int(m[2])),
    ),
    (
        re.compile(rf"\b(raise|increase|lower|decrease|reduce)\s+{_TARGET}\s+by\s+{_NUMBER}"),
        lambda m: ("relative", _VERB_UP[m[1]] * int(m[2])),
    ),
)

_STEP_PATTERNS: tuple[_VolumeRule, ...] = (
    (re.compile(r"\blouder\b"), lambda m: ("relative", VOLUME_STEP)),
    (re.compile(r"\b(?:quieter|softer)\b"), lambda m: ("relative", -VOLUME_STEP)),
    (
        re.compile(rf"\b(?:turn|crank|bring)\s+{_TARGET}\s+{_UP_OR_DOWN}\b"),
        lambda m: ("relative", VOLUME_STEP if m[1] == "up" else -VOLUME_STEP),
    ),
    (
        re.compile(rf"\bvolume\s+{_UP_OR_DOWN}\b"),
        lambda m: ("relative", VOLUME_STEP if m[1] == "up" else -VOLUME_STEP),
    ),
    (
        re.compile(rf"\b(raise|increase|lower|decrease|reduce)\s+{_TARGET}\b"),
        lambda m: ("relative", _VERB_UP[m[1]] * VOLUME_STEP),
    ),
    (
        re.compile(r"\bmute\s+(?:it|the\s+(?:sound|volume|speaker|audio|music))\b"),
        lambda m: ("absolute", 0),
    ),
    (re.compile(r"^\W*(?:please\s+)?mute(?:\s+please)?\W*$"), lambda m: ("absolute", 0)),
)


def _resolve_volume(event: ToolCallEvent, context: ToolExecutionContext) -> dict[str, Any]:
    text = context.latest_text("user")
    return parse_volume_request(text) if text else {}


def parse_volume_request(text: str) -> dict[str, Any]:
    """Volume arguments stated plainly in ``text``, or ``{}`` when unsure.

    Numbers win over bare steps ("turn the volume up to 80" is absolute 80); a
    negation, conflicting requests or a number above 100 give ``{}``.

    For example::

        parse_volume_request("Set the volume to 30")  # {"mode": "absolute", "value": 30}
        parse_volume_request("a bit louder please")   # {"mode": "relative", "value": 10}
    """
    lowered = text.lower()
    if _NEGATION.search(lowered):
        return {}
    for patterns in (_EXPLICIT_PATTERNS, _STEP_PATTERNS):
        found = {build(match) for pattern, build in patterns for match in pattern.finditer(lowered)}
        if len(found) > 1:
            return {}
        if found:
            mode, value = found.pop()
            return {"mode": mode, "value": value} if -100 <= value <= 100 else {}
    return {}
