"""The tool-journal statements other roles run inside their own transactions.

Taking a session over cancels the batches the previous runtime left pending (claims);
``list_messages(include_pending=True)`` renders the uncommitted ones (transcript);
abandoning a batch settles its unfinished calls (ledger). Written once with ``?``
parameters, run through the store's ``_sql``.
"""

from __future__ import annotations

from typing import Any

from agent_lab.infrastructure.store_common.hooks import StoreHooks
from agent_lab.infrastructure.store_common.journal import rendered_batch


class BatchStatements(StoreHooks):
    """Cancelling, abandoning and rendering batches on the store's connection."""

    def _cancel_pending(self, conn: Any, session_id: str, now: str) -> None:
        """Abandon the session's pending batches as ``cancelled``."""
        rows = conn.execute(
            self._sql("SELECT id FROM tool_batches WHERE session_id = ? AND state = 'pending'"),
            (session_id,),
        ).fetchall()
        self._abandon(conn, [str(row[0]) for row in rows], "cancelled", now)

    def _abandon(self, conn: Any, batch_ids: list[str], state: str, now: str) -> None:
        """Finish the batches as ``state``: dispatched calls without an outcome become
        ``unknown``, pending ones ``cancelled``."""
        for batch_id in batch_ids:
            conn.execute(
                self._sql("UPDATE tool_batches SET state = ?, finished_at = ? WHERE id = ?"),
                (state, now, batch_id),
            )
            conn.execute(
                self._sql(
                    "UPDATE tool_calls SET landed_at = ?,"
                    " state = CASE state WHEN 'dispatched' THEN 'unknown' ELSE 'cancelled' END"
                    " WHERE batch_id = ? AND result IS NULL"
                    " AND state IN ('pending', 'dispatched')"
                ),
                (now, batch_id),
            )

    def _uncommitted_messages(self, conn: Any, session_id: str) -> list[dict[str, Any]]:
        """The uncommitted batches rendered as messages (``list_messages(include_pending)``)."""
        rendered: list[dict[str, Any]] = []
        batches = conn.execute(
            self._sql(
                "SELECT id, turn_index, state, assistant, created_at FROM tool_batches"
                " WHERE session_id = ? AND state != 'committed' ORDER BY seq"
            ),
            (session_id,),
        ).fetchall()
        for batch_id, turn_index, state, assistant, created_at in batches:
            results = conn.execute(
                self._sql(
                    "SELECT result, landed_at FROM tool_calls"
                    " WHERE batch_id = ? AND result IS NOT NULL ORDER BY position"
                ),
                (batch_id,),
            ).fetchall()
            rendered.extend(rendered_batch(turn_index, state, assistant, created_at, results))
        return rendered
