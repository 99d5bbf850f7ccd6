"""Plain JSON text of the values tools and stores hand around.

The conversions match what the SQLite session store writes
(``agent_lab.infrastructure.sqlite.records`` uses these): pydantic models and dataclasses become
objects, enums their values, sets, frozensets and tuples lists, dates and datetimes
ISO-8601 text, paths strings. Anything else JSON cannot hold (bytes, tuple keys,
arbitrary objects) is a ``UsageError``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_lab.domain.errors import UsageError


class JsonTextList(list[Any]):
    """A list of values decoded from JSON texts, with the texts kept (``texts``).

    It is an ordinary list to its readers; a writer that can splice JSON text (the
    session stores) writes ``texts`` as they came instead of encoding the items
    again. Provider chunks travel this way: the bytes the provider sent reach the
    store once, unchanged. The items must equal the decoded texts: do not change them.
    """

    __slots__ = ("texts",)

    def __init__(self, items: Iterable[Any], texts: Sequence[bytes]) -> None:
        super().__init__(items)
        self.texts = texts


def json_default(value: object) -> object:
    """``json.dumps(default=...)``: a JSON-compatible stand-in for ``value``.

    Raises:
        TypeError: no conversion fits.
    """
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def json_text(value: object, what: str) -> str:
    """JSON text of ``value``; ``what`` names it in the error.

    Raises:
        UsageError: ``value`` holds something JSON cannot (``"<what> cannot be stored as
            JSON: <why>"``).
    """
    try:
        return json.dumps(value, ensure_ascii=False, default=json_default)
    except (TypeError, ValueError) as exc:
        raise UsageError(f"{what} cannot be stored as JSON: {exc}") from exc
