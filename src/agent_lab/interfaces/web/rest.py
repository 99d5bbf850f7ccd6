"""The REST API under ``/api``: sessions, exports, the tool catalog and health."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response

import agent_lab.interfaces.turn_views as turn_views
import agent_lab.interfaces.web.records as records
from agent_lab.application.pricing import PriceTable
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionBusy, SessionNotFound
from agent_lab.interfaces.explain_view import explain_turns
from agent_lab.interfaces.web.limits import MAX_FRAME_BYTES
from agent_lab.interfaces.web.start_checks import REFUSALS, check_start_text, refusal_frame
from agent_lab.interfaces.web.state import WebState, web_state

ExportFormat = Literal["json", "jsonl"]
MAX_ID_CHARS = 200
"""Longest session id (as the store allows); longer ones are simply unknown."""
_NOT_FOUND = "no such session"
_View = TypeVar("_View")

router = APIRouter(prefix="/api")


def _state(request: Request) -> WebState:
    return web_state(request)


@router.get("/health")
async def health(state: WebState = Depends(_state)) -> dict[str, Any]:
    """Liveness and the model endpoint the server uses by default."""
    return {
        "status": "ok",
        "endpoint": state.masker.text(state.lab.endpoint_description),
        "live_sessions": len(state.hub.live_ids()),
    }


@router.get("/defaults")
async def defaults(state: WebState = Depends(_state)) -> dict[str, Any]:
    """The request the server would build from its settings (prefills the page)."""
    request = state.lab.request("").model_dump(mode="json", exclude={"session_id", "user_message"})
    endpoint = state.masker.text(state.lab.endpoint_description)
    return {"request": state.masker.value(request), "endpoint": endpoint}


@router.get("/tools")
async def tools(state: WebState = Depends(_state)) -> dict[str, Any]:
    """The tool catalog: schemas, result policies and which are enabled by default."""
    enabled = list(state.lab.settings.tools)
    return {"tools": records.tool_catalog(state.lab.registry, enabled)}


@router.get("/sessions")
async def list_sessions(state: WebState = Depends(_state)) -> dict[str, Any]:
    """Every stored session, newest first, with usage totals and a ``live`` flag."""
    live = state.hub.live_ids()
    sessions = await asyncio.to_thread(
        records.session_summaries, state.store(), live, state.lab.prices
    )
    return {"sessions": state.masker.value(sessions)}


@router.get("/sessions/{session_id}")
async def get_session(
    session_id: str,
    audit_after: int = Query(default=0, ge=0),
    state: WebState = Depends(_state),
) -> dict[str, Any]:
    """Transcript, per-turn metrics, calls, audit trail (with offsets) and usage."""
    record = await _record(state, session_id, audit_after)
    return {**record, "live": state.hub.is_live(session_id)}


@router.post("/sessions/{session_id}/check")
async def check_start(
    session_id: str, request: Request, state: WebState = Depends(_state)
) -> dict[str, Any]:
    """Whether the body, a ``start`` message as the session's socket takes it, would be
    refused (``{"ok": false, "error": <the socket's error frame>}``) or not; nothing
    starts or stops. The page asks before it ends a live runtime to restart it with
    changed settings."""
    _check_id(session_id)
    text = (await _body(request)).decode("utf-8", "replace")
    try:
        check_start_text(state, text, session_id)
    except REFUSALS as exc:
        return {"ok": False, "error": state.masker_for(session_id).value(refusal_frame(exc))}
    return {"ok": True, "error": None}


async def _body(request: Request) -> bytes:
    """The request body, refused with 413 past the socket's largest message."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FRAME_BYTES:
            raise HTTPException(413, detail=f"larger than {MAX_FRAME_BYTES} bytes")
    return bytes(body)


@router.get("/sessions/{session_id}/audit")
async def turn_audit(
    session_id: str,
    turn_index: int = Query(ge=0),
    state: WebState = Depends(_state),
) -> dict[str, Any]:
    """One turn's audits in full: the requests with the messages they sent, which the
    session's trail leaves out (``deferred``)."""
    _check_id(session_id)
    try:
        audits = await asyncio.to_thread(records.turn_audits, state.store(), session_id, turn_index)
    except SessionNotFound:
        raise HTTPException(404, detail=_NOT_FOUND) from None
    return {"audit": state.masker.value(audits)}


@router.delete("/sessions/{session_id}", status_code=204)
async def delete_session(session_id: str, state: WebState = Depends(_state)) -> Response:
    """Delete a stored session; 409 while it is live, here or in any other process
    (another worker, ``agent-lab chat``: the store refuses while a live runtime holds
    the session's claim, naming it), 404 when unknown.

    Connections that show the session are told (a ``deleted`` frame), so their next
    message does not silently start it again from turn 1.
    """
    _check_id(session_id)
    if state.hub.is_live(session_id):
        raise HTTPException(409, detail="the session is live; close it first")
    try:
        await asyncio.to_thread(state.store().delete_session, session_id)
    except SessionNotFound:
        raise HTTPException(404, detail=_NOT_FOUND) from None
    except SessionBusy as exc:
        raise HTTPException(409, detail=state.masker.text(str(exc))) from None
    state.watchers.deleted(session_id)
    return Response(status_code=204)


@router.get("/sessions/{session_id}/export")
async def export_session(
    session_id: str,
    export_format: ExportFormat = Query(default="json", alias="format"),
    state: WebState = Depends(_state),
) -> Response:
    """The session's export document (the schema ``agent-lab sessions export`` writes),
    as one JSON document or as JSON Lines."""
    document = await _view(state, session_id, turn_views.session_export)
    name = f"agent-lab-{_safe_name(session_id)}.{export_format}"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    if export_format == "jsonl":
        body = turn_views.export_jsonl(document)
        return Response(body, media_type="application/x-ndjson", headers=headers)
    return Response(
        turn_views.export_json(document), media_type="application/json", headers=headers
    )


@router.get("/sessions/{session_id}/records")
async def session_records(session_id: str, state: WebState = Depends(_state)) -> dict[str, Any]:
    """The session's turn records: rounds, tool calls with arguments, failures, cost."""
    document = await _view(state, session_id, turn_views.session_export)
    return {"records": document["records"], "cost": document["cost"]}


@router.get("/sessions/{session_id}/explain")
async def explain_session(session_id: str, state: WebState = Depends(_state)) -> dict[str, Any]:
    """Per turn: what the model saw, what is stored, what was shown, and the differences."""
    turns = await _view(state, session_id, explain_turns)
    return {"turns": turns}


async def _view(
    state: WebState, session_id: str, view: Callable[[SessionStore, str, PriceTable], _View]
) -> _View:
    _check_id(session_id)
    try:
        result = await asyncio.to_thread(view, state.store(), session_id, state.lab.prices)
    except SessionNotFound:
        raise HTTPException(404, detail=_NOT_FOUND) from None
    masked: _View = state.masker.value(result)
    return masked


async def _record(state: WebState, session_id: str, audit_after: int) -> dict[str, Any]:
    _check_id(session_id)
    try:
        record = await asyncio.to_thread(
            records.session_record,
            state.store(),
            session_id,
            audit_after=audit_after,
            prices=state.lab.prices,
        )
    except SessionNotFound:
        raise HTTPException(404, detail=_NOT_FOUND) from None
    masked: dict[str, Any] = state.masker.value(record)
    return masked


def _check_id(session_id: str) -> None:
    """404 (without repeating the id) for ids no session can have."""
    if not session_id.strip() or len(session_id) > MAX_ID_CHARS:
        raise HTTPException(404, detail=_NOT_FOUND)


def _safe_name(session_id: str) -> str:
    return "".join(char if char.isalnum() or char in "-_" else "_" for char in session_id)[:80]
