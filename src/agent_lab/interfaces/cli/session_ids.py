"""Session ids on the command line: a unique prefix stands for the whole id, as in git."""

from __future__ import annotations

from typing import Any, Protocol

from agent_lab.domain.errors import UsageError

_SHOWN_CANDIDATES = 5


class _Sessions(Protocol):
    def get_session(self, session_id: str) -> dict[str, Any] | None: ...
    def list_sessions(self) -> list[dict[str, Any]]: ...


def find_session(store: _Sessions, given: str) -> dict[str, Any]:
    """The session whose id is ``given``, or the only one whose id starts with it.

    Raises:
        UsageError: no session matches, or the prefix matches several (they are listed).
    """
    text = given.strip()
    exact = store.get_session(text) if text else None
    if exact is not None:
        return exact
    matches = [s for s in store.list_sessions() if text and str(s["id"]).startswith(text)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UsageError(f"unknown session id: {given!r} (see `agent-lab sessions list`)")
    shown = ", ".join(f"{s['id']} ({s['title']!r})" for s in matches[:_SHOWN_CANDIDATES])
    more = len(matches) - _SHOWN_CANDIDATES
    shown += f" and {more} more" if more > 0 else ""
    raise UsageError(
        f"session id prefix {given!r} is ambiguous: {len(matches)} sessions match: {shown}"
        " (give more characters)"
    )
