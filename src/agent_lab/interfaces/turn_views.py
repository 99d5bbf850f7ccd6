"""What the CLI and the web lab show of a stored turn: the turn records, as JSON values.

Every view of a stored session (``sessions show``, the exports, the web lab's reopened
history, its explain view) reads its turns through ``turn_records`` and its export
through ``session_export``. Both are the turn record of ``agent_lab.application.record``
(``TurnRecord``, ``record_version`` 1) built by its fold from the stored audits, the very
fold the web lab runs live on a session's output; nothing here folds rows itself, so
the live, reopened and exported views of a turn cannot disagree. Synchronous: call from
a worker thread on a loop.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from agent_lab.application.export import EXPORT_VERSION, export_session
from agent_lab.application.pricing import PriceTable
from agent_lab.application.record import RECORD_VERSION
from agent_lab.application.session_store import SessionStore

Row = dict[str, Any]

__all__ = [
    "EXPORT_VERSION",
    "RECORD_VERSION",
    "export_json",
    "export_jsonl",
    "export_lines",
    "session_export",
    "turn_records",
]


def session_export(store: SessionStore, session_id: str, prices: PriceTable) -> Row:
    """The one export document of a session (``export_version`` 1), as JSON values.

    Raises:
        SessionNotFound: no such session.
    """
    document: Row = export_session(store, session_id, prices=prices).model_dump(mode="json")
    return document


def turn_records(store: SessionStore, session_id: str, prices: PriceTable) -> list[Row]:
    """Every turn of a session as its turn record (JSON values), in turn order.

    Raises:
        SessionNotFound: no such session.
    """
    records: list[Row] = session_export(store, session_id, prices)["records"]
    return records


def export_lines(document: Mapping[str, Any]) -> Iterator[Row]:
    """The export as JSON Lines objects, each tagged with its ``kind``."""
    header = {key: document[key] for key in ("export_version", "record_version")}
    yield {"kind": "session", **header, **document["session"]}
    for kind, key in (("turn", "turns"), ("message", "messages"), ("record", "records")):
        for item in document[key]:
            yield {"kind": kind, **item}
    yield {"kind": "cost", **document["cost"]}


def export_json(document: Mapping[str, Any]) -> str:
    """The export document as the JSON text both the CLI and the web lab write."""
    return orjson.dumps(document, option=_JSON_OPTIONS).decode() + "\n"


def export_jsonl(document: Mapping[str, Any]) -> str:
    """The export as JSON Lines text, the same from the CLI and the web lab."""
    return "".join(
        orjson.dumps(line, option=orjson.OPT_SORT_KEYS).decode() + "\n"
        for line in export_lines(document)
    )


_JSON_OPTIONS = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
