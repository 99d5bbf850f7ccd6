"""Builders of the JSON Schemas the built-in tools declare for their arguments.

Each gives the same dict, key for key and in the same order, as writing it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Schema = dict[str, Any]


def object_schema(properties: dict[str, Schema], required: Sequence[str] = ()) -> Schema:
    """An object of ``properties``; ``required`` names those it must have."""
    schema: Schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


def text(description: str, *, blank_allowed: bool = False) -> Schema:
    """A string (not empty, unless ``blank_allowed``)."""
    if blank_allowed:
        return {"type": "string", "description": description}
    return {"type": "string", "minLength": 1, "description": description}


def choice(values: Sequence[str], description: str) -> Schema:
    """One of ``values``."""
    return {"type": "string", "enum": list(values), "description": description}


def whole_number(minimum: int, maximum: int, description: str) -> Schema:
    """An integer from ``minimum`` to ``maximum``."""
    return {"type": "integer", "minimum": minimum, "maximum": maximum, "description": description}
