"""The tool mode each stored turn ran in, read from its call metrics.

A session's saved request keeps the mode it was created with; a runtime restarted in
the other mode runs later turns in that one. Each model call's metric records the mode
of its turn, so the metrics are where a turn's mode is read from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def modes_by_turn(calls: Iterable[Mapping[str, Any]]) -> dict[int, str]:
    """``{turn_index: mode}`` for every turn with a metric that names its mode (a turn
    that made no model call is absent)."""
    by_turn: dict[int, str] = {}
    for call in calls:
        turn, mode = call.get("turn_index"), call.get("mode")
        if isinstance(turn, int) and isinstance(mode, str) and mode:
            by_turn.setdefault(turn, mode)
    return by_turn
