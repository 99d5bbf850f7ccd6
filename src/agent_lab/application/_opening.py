"""Opening a stored session: create it if new, claim it, read it back; and waiting for
a session another runtime drives, in a way a cancellation can stop.

The store's own wait (``claim_session(wait_seconds=…)``) sleeps in a worker thread,
where neither ``aclose()`` nor a cancelled task can reach it: it would go on and claim
the session for a runtime that is gone. Here each try runs in a worker thread and the
pauses between tries run on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any, Final, TypeVar

from agent_lab.application._interrupted import recover_interrupted
from agent_lab.application._modes import mode_for
from agent_lab.application._recording import NULL_RECORDER, Recorder
from agent_lab.application._restore import StoredSession, read_stored_history
from agent_lab.application._session_state import SessionState
from agent_lab.application._store_access import Resumed
from agent_lab.application._transcript import History, persisted_call_ids
from agent_lab.application.contracts import DebugRunRequest
from agent_lab.application.session_store import SessionStore
from agent_lab.domain.errors import SessionBusy

T = TypeVar("T")
logger = logging.getLogger("agent_lab.application.runtime")

LEASE_SECONDS: Final = 30.0
"""A writer claim's lease; the recorder renews it every third of that."""

CLAIM_POLL_SECONDS: Final = 0.05
"""How often a session waiting for another runtime's claim tries again."""


async def claim_waiting(
    attempt: Callable[[bool], T],
    wait_seconds: float,
    *,
    kept: Callable[[T], None],
) -> T:
    """``attempt(first)`` (one try at the claim; ``first`` for the first one) until it
    does not raise ``SessionBusy`` or ``wait_seconds`` have passed.

    When the caller is cancelled, the try in flight finishes first; what it won goes to
    ``kept`` (so the claim can be released), and the cancellation goes on.

    Raises:
        SessionBusy: still held by another runtime once the wait ran out.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(wait_seconds, 0.0)
    first = True
    while True:
        thread = asyncio.ensure_future(asyncio.to_thread(attempt, first))
        try:
            return await asyncio.shield(thread)
        except asyncio.CancelledError:
            await asyncio.wait([thread])
            if not thread.cancelled() and thread.exception() is None:
                kept(thread.result())
            raise
        except SessionBusy:
            if loop.time() >= deadline:
                raise
        first = False
        await asyncio.sleep(CLAIM_POLL_SECONDS)


def open_stored(
    store: SessionStore,
    session_id: str,
    title: str,
    snapshot: dict[str, Any],
    owner: str,
    *,
    grouped: bool,
    now: bool,
) -> tuple[StoredSession, str]:
    """Create the session if new, claim it (no waiting) and read it back, with the
    claim's token. ``grouped``: in the transaction that claims it, so a session with
    nothing recorded yet needs no read; ``now`` (on the loop): a session with history
    raises ``Resumed`` before anything is claimed, to be read in a worker thread.

    Raises:
        SessionBusy: another live runtime holds the session.
    """
    session = store.ensure_session(session_id, title, snapshot)
    empty = grouped and session.get("turn_count") == session.get("message_count") == 0
    if now and not empty:
        raise Resumed  # its history may be long: read it in the worker thread
    token = store.claim_session(session_id, owner, lease_seconds=LEASE_SECONDS)
    if empty:
        return StoredSession(session_id, [], 1), token
    records = store.list_messages(session_id)
    recovery = recover_interrupted(store, session_id)  # the claim is ours now
    turn = store.next_turn_index(session_id)
    return StoredSession(session_id, records, turn, recovery), token


def restored_state(
    request: DebugRunRequest, stored: StoredSession, recorder: Recorder, *, one_shot: bool
) -> SessionState:
    """The state of an opened stored session: its history as the request's mode reads
    it, with any repairs of stored rows (logged) and the recovery to report."""
    session_id = stored.session_id
    restored = read_stored_history(stored.records, session_id)
    for repair in restored.repairs:
        logger.warning("session %s: stored message #%s %s", session_id, repair.seq, repair)
    return SessionState(
        request=request,
        session_id=session_id,
        scope_prefix=session_id,
        history=History(mode_for(request.tool_invocation_mode).restore(restored.messages)),
        seen_call_ids=persisted_call_ids(stored.records),
        next_turn_index=stored.next_turn_index,
        recorder=recorder,
        one_shot=one_shot,
        repairs=restored.repairs,
        recovery=stored.recovery,
    )


def unstored_state(request: DebugRunRequest, *, one_shot: bool) -> SessionState:
    """The state of a session no store keeps: empty, its scopes named ``run-…``."""
    return SessionState(
        request=request,
        session_id=None,
        scope_prefix=f"run-{uuid.uuid4().hex[:12]}",
        history=History(),
        next_turn_index=1,
        recorder=NULL_RECORDER,
        one_shot=one_shot,
    )
