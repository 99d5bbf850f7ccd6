"""Checking a tool call's arguments: JSON-schema validators compiled once per distinct
schema, and the reason a provider's argument text gave no arguments at all."""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator

from agent_lab.domain.events import CutOffToolCall, ToolCallEvent

__all__ = ["compiled_validator", "unreadable_arguments"]


@functools.lru_cache(maxsize=1024)
def _validator_for(schema_json: str) -> Draft202012Validator:
    schema = json.loads(schema_json)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def compiled_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for ``schema``; each distinct schema is checked against the meta-schema once.

    Raises:
        jsonschema.exceptions.SchemaError: ``schema`` is not a valid JSON schema.
    """
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not plain JSON: check it on its own
        Draft202012Validator.check_schema(schema)
        return Draft202012Validator(schema)
    return _validator_for(key)


def unreadable_arguments(event: ToolCallEvent) -> str | None:
    """Why the provider's argument text gave no arguments at all: it is not a JSON
    object, or the provider stopped writing it (a ``CutOffToolCall``). ``None`` when
    there is nothing to read or it read fine."""
    raw = event.raw_arguments
    if isinstance(event, CutOffToolCall):
        written = raw if len(raw) <= 80 else raw[:80] + "…"
        return f"{event.cut_off_reason}: {written!r}"
    if event.arguments or raw.strip() in ("", "{}"):
        return None
    excerpt = raw if len(raw) <= 80 else raw[:80] + "…"
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        return f"not valid JSON: {excerpt!r}"
    return None if isinstance(value, dict) else f"not a JSON object: {excerpt!r}"
