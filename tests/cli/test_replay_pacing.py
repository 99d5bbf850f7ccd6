"""Replay keeps the recorded gaps between chunks."""

from __future__ import annotations

import pytest

from agent_lab.interfaces.cli.replay import RecordedCall, pacing


def _call(offsets: list[float] | None) -> RecordedCall:
    chunks = [{"n": 1}, {"n": 2}, {"n": 3}]
    return RecordedCall("chat", 1, 1, chunks, None, ttft_ms=30, latency_ms=90, offsets_ms=offsets)


def test_recorded_arrival_offsets_give_the_exact_gaps() -> None:
    assert pacing(_call([10.0, 15.0, 40.0]), 1.0) == pytest.approx([0.010, 0.005, 0.025])
    assert pacing(_call([10.0, 15.0, 40.0]), 2.0) == pytest.approx([0.005, 0.0025, 0.0125])


def test_older_recordings_fall_back_to_ttft_and_even_spread() -> None:
    assert pacing(_call(None), 1.0) == pytest.approx([0.030, 0.030, 0.030])


def test_speed_zero_replays_without_waiting() -> None:
    assert pacing(_call([10.0, 15.0, 40.0]), 0) == [0.0, 0.0, 0.0]
