"""Where the time of one model call went, as measured by the chat client.

A wire client returns, from ``stream_chat``, a stream object with a ``timing`` attribute
holding a ``CallTiming``; test doubles that yield plain ``StreamItem``s have none (read it
with ``getattr(stream, "timing", None)``). Fields fill in as the call progresses: by the
time the first item is yielded ``warmup_ms``, ``connect_ms`` and ``first_chunk_ms`` are
set; ``total_ms`` is set when the stream ends (or fails). Such a stream may also have a
``usage`` attribute, the provider's last usage report once it ended: the tokens of a
call that broke off after the report, which then yields no ``usage`` item.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class CallTiming:
    """Milliseconds spent in the phases of one call (``None`` until the phase happened)."""

    warmup_ms: float = 0.0
    """Client warm-up this call waited for (SDK import and construction). Never part of
    the provider's latency; non-zero only for a call that found the client still cold."""
    connect_ms: float | None = None
    """Request sent (after warm-up) to response headers: connection setup, retries,
    backoff and the provider's queueing."""
    first_chunk_ms: float | None = None
    """Request sent (after warm-up) to the first provider chunk: the provider's time to
    first chunk, free of client warm-up."""
    total_ms: float | None = None
    """Request sent (after warm-up) to the end of the stream."""
    attempts: int = 1
    """HTTP attempts made (1 plus the retries the SDK took), when known."""

    @property
    def cold(self) -> bool:
        """Whether this call paid client warm-up (compare it apart from warm calls)."""
        return self.warmup_ms > 0.0
