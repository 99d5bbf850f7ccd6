"""The figures of ``agent-lab compare``: metric labels, medians and percentiles.

A figure the lab could not know never reads as an exact number: a cost per turn with an
unpriced turn among its samples is unknown as a whole (an unpriced turn is not free),
and a token total that leaves out calls whose provider sent no usage is a lower bound
(``≥``), never an exact-looking count.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "COST_METRIC",
    "SESSION_METRICS",
    "TOKEN_METRICS",
    "TURN_METRICS",
    "WARM_METRICS",
    "MetricStats",
    "TokenTotal",
    "percentile",
]

COST_METRIC = "cost / turn (USD)"
TURN_METRICS: tuple[tuple[str, str], ...] = (
    ("visible TTFT (ms)", "visible_ttft_ms"),
    ("provider TTFT (ms)", "provider_ttft_ms"),
    ("turn wall time (ms)", "wall_time_ms"),
    (COST_METRIC, "cost_usd"),
)
"""Per-turn latencies and cost: label and ``TurnSample`` field."""

WARM_METRICS: tuple[tuple[str, str], ...] = (
    ("visible TTFT, cold left out (ms)", "visible_ttft_ms"),
    ("provider TTFT, cold left out (ms)", "provider_ttft_ms"),
)
"""The latencies again, without the scenario turns that were cold in any mode."""

SESSION_METRICS: tuple[tuple[str, str], ...] = (
    ("tokens / session", "total_tokens"),
    ("cached tokens / session", "cached_tokens"),
    ("model calls / session", "model_calls"),
    ("fallbacks / session", "fallback_count"),
    ("tools / session", "tool_count"),
)
"""Per-session counts: label and ``usage_summary()["session"]`` key."""

TOKEN_METRICS = frozenset({"tokens / session", "cached tokens / session"})
"""The session rows whose figures miss the calls a provider sent no usage for."""


@dataclass(frozen=True)
class TokenTotal:
    """One session's token figure and how much of it the provider reported."""

    tokens: int
    """The tokens of the calls that reported usage."""
    unreported_calls: int
    """Model calls whose provider sent no usage (their tokens are not in ``tokens``)."""
    model_calls: int


@dataclass(frozen=True)
class MetricStats:
    """Median and 90th percentile of one metric's samples."""

    median: float | None
    p90: float | None
    count: int
    """Samples with a known value."""
    unknown: int = 0
    """Samples without a known value (an unpriced turn, a turn without text, a token
    total that leaves out calls the provider reported no usage for)."""
    lower_bound: bool = False
    """``median`` and ``p90`` are at least these figures: they count the ``unknown``
    token totals as far as they were reported (token rows only)."""
    unreported_calls: int = 0
    """Model calls whose provider sent no usage (token rows only)."""

    @classmethod
    def of(cls, values: Iterable[float | int | None]) -> MetricStats:
        """Statistics over the values that are not ``None``."""
        given = list(values)
        present = sorted(float(value) for value in given if value is not None)
        unknown = len(given) - len(present)
        if not present:
            return cls(None, None, 0, unknown)
        return cls(statistics.median(present), percentile(present, 90), len(present), unknown)

    @classmethod
    def whole(cls, values: Iterable[float | int | None]) -> MetricStats:
        """Like ``of``, but no median or p90 once any sample is unknown: a cost per
        turn, where the unpriced turns are not free, so a median over the priced ones
        would understate it."""
        stats = cls.of(values)
        return cls(None, None, stats.count, stats.unknown) if stats.unknown else stats

    @classmethod
    def at_least(cls, totals: Iterable[TokenTotal]) -> MetricStats:
        """Token totals per session. A session with unreported calls is ``unknown`` and
        its reported tokens a lower bound, so then the median and p90 (over every
        session) are lower bounds too. When no call reported usage at all, there is no
        figure."""
        given = list(totals)
        unreported = sum(total.unreported_calls for total in given)
        exact = sum(1 for total in given if not total.unreported_calls)
        reported = any(total.unreported_calls < total.model_calls for total in given)
        if not given or (unreported and not reported):
            return cls(None, None, exact, len(given) - exact, unreported_calls=unreported)
        figures = sorted(float(total.tokens) for total in given)
        return cls(
            statistics.median(figures),
            percentile(figures, 90),
            exact,
            len(given) - exact,
            lower_bound=unreported > 0,
            unreported_calls=unreported,
        )

    def as_json(self, label: str) -> dict[str, Any]:
        """The ``compare --json`` form: ``lower_bound`` and ``unreported_calls`` only in
        the token rows (always there)."""
        document = asdict(self)
        if label not in TOKEN_METRICS:
            del document["lower_bound"], document["unreported_calls"]
        return document


def percentile(sorted_values: Sequence[float], rank: float) -> float:
    """The nearest-rank percentile of already sorted values (``rank`` in 0..100)."""
    if not sorted_values:
        raise ValueError("no values")
    index = max(0, math.ceil(rank / 100 * len(sorted_values)) - 1)
    return sorted_values[min(index, len(sorted_values) - 1)]
