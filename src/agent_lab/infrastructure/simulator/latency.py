"""How long the simulated model takes to answer: time to first token, then a token rate."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from agent_lab.domain.errors import ConfigError


@dataclass(frozen=True)
class LatencyModel:
    """How long the simulated model takes: time to first token, then a token rate.

    Attributes:
        ttft_ms: Delay before the first chunk, in milliseconds.
        tokens_per_second: Pace of the following pieces; ``0`` (or ``inf``) means
            no pacing at all.
        jitter: Each delay is scaled by a factor drawn uniformly from
            ``[1 - jitter, 1 + jitter]``.
        seed: Seeds the jitter (combined with a digest of each request).
    """

    ttft_ms: float = 300.0
    tokens_per_second: float = 40.0
    jitter: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.ttft_ms >= 0 and self.tokens_per_second >= 0):  # also rejects NaN
            raise ConfigError("latency values must not be negative")
        if not 0 <= self.jitter < 1:
            raise ConfigError("latency jitter must be in [0, 1)")

    @classmethod
    def instant(cls) -> LatencyModel:
        """No delays at all (for tests)."""
        return cls(ttft_ms=0.0, tokens_per_second=0.0, jitter=0.0)

    def delays(self, key: str, tokens: list[int]) -> list[float]:
        """Seconds to wait before each frame; frame ``i`` costs ``tokens[i]`` tokens.

        The first frame waits the time to first token; the rest wait their tokens at
        the token rate. ``key`` makes the jitter differ per request, deterministically.
        """
        rng = random.Random(f"{self.seed}:{key}")
        per_token = _per_token_seconds(self.tokens_per_second)
        out = []
        for index, cost in enumerate(tokens):
            base = self.ttft_ms / 1000 if index == 0 else cost * per_token
            out.append(base * (1 + rng.uniform(-self.jitter, self.jitter)) if base else 0.0)
        return out


def _per_token_seconds(tokens_per_second: float) -> float:
    if tokens_per_second == 0 or math.isinf(tokens_per_second):
        return 0.0
    return 1 / tokens_per_second
