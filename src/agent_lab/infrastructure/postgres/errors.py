"""Translate ``psycopg`` exceptions into Agent Lab store errors, once, at the boundary.

Every call into ``psycopg`` made by the PostgreSQL store runs inside
``map_pg_errors()``, so no ``psycopg`` exception leaves ``agent_lab.infrastructure``.
Classification reads the server's SQLSTATE first (https://www.postgresql.org/docs/
current/errcodes-appendix.html) and the kind of client error second:

* ``locked``: a lock not granted within ``lock_timeout`` (``55P03``), a deadlock
  (``40P01``), a serialization failure (``40001``), a statement timeout (``57014``);
* ``disk_full``: ``53100`` (and the rest of class ``53``, insufficient resources);
* ``read_only``: ``25006`` (a read-only transaction, e.g. a standby or
  ``default_transaction_read_only``) and ``42501`` (no privilege to write);
* ``corrupt``: ``XX001`` / ``XX002`` (data or index corrupted);
* ``connection_lost``: class ``08`` (connection exceptions), ``57P01``-``57P03``
  (server shutting down or restarting), and any client-side ``OperationalError``
  without a SQLSTATE (the socket closed under the connection);
* ``unknown``: anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

import psycopg

from agent_lab.domain.errors import PersistenceFailed, PersistenceFailure

_STATE_REASONS: Final[dict[str, PersistenceFailure]] = {
    "55P03": "locked",
    "40P01": "locked",
    "40001": "locked",
    "57014": "locked",
    "25006": "read_only",
    "42501": "read_only",
    "XX001": "corrupt",
    "XX002": "corrupt",
    "57P01": "connection_lost",
    "57P02": "connection_lost",
    "57P03": "connection_lost",
}
_CLASS_REASONS: Final[dict[str, PersistenceFailure]] = {
    "08": "connection_lost",
    "53": "disk_full",
}


def classify_pg_error(exc: psycopg.Error) -> PersistenceFailure:
    """Return the ``PersistenceFailed`` reason that describes ``exc``."""
    state = exc.sqlstate
    if state:
        if state in _STATE_REASONS:
            return _STATE_REASONS[state]
        return _CLASS_REASONS.get(state[:2], "unknown")
    if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return "connection_lost"
    return "unknown"


def persistence_failed(exc: psycopg.Error) -> PersistenceFailed:
    """Build the classified ``PersistenceFailed`` for ``exc`` (not raised)."""
    reason = classify_pg_error(exc)
    text = str(exc).strip() or type(exc).__name__
    if reason == "locked" and exc.sqlstate == "55P03":
        text = f"the row lock was not granted within the lock timeout ({text})"
    return PersistenceFailed(reason, text)


@contextmanager
def map_pg_errors() -> Iterator[None]:
    """Re-raise any ``psycopg.Error`` raised in the block as ``PersistenceFailed``.

    Raises:
        PersistenceFailed: classified (see the module docstring); the ``psycopg``
            error is chained as ``__cause__``.
    """
    try:
        yield
    except psycopg.Error as exc:
        raise persistence_failed(exc) from exc
