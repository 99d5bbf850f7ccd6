"""The wall-time limits of a loop's turns, behind one timer: each turn expires at its own
deadline, a finished turn never does, and no timer is left once no turn runs."""

from __future__ import annotations

import asyncio

import pytest

from agent_lab.application._deadlines import TurnDeadlines, deadlines_for


class _Turn:
    def __init__(self, name: str, expired: list[str], done: asyncio.Event | None = None) -> None:
        self.name, self.expired, self.done = name, expired, done

    def expire_turn(self) -> None:
        self.expired.append(self.name)
        if self.done is not None:
            self.done.set()


@pytest.mark.asyncio
async def test_turns_expire_in_the_order_of_their_deadlines_not_of_their_start() -> None:
    deadlines = TurnDeadlines(asyncio.get_running_loop())
    expired: list[str] = []
    last = asyncio.Event()
    deadlines.add(_Turn("late", expired, last), 0.06)
    deadlines.add(_Turn("early", expired), 0.02)  # earlier than the timer already due
    deadlines.add(_Turn("middle", expired), 0.04)

    await asyncio.wait_for(last.wait(), 5)  # a hang guard, not a timing check

    assert expired == ["early", "middle", "late"]
    assert deadlines._handle is None and not deadlines._due


@pytest.mark.asyncio
async def test_a_removed_turn_never_expires_and_the_others_still_do() -> None:
    deadlines = TurnDeadlines(asyncio.get_running_loop())
    expired: list[str] = []
    last = asyncio.Event()
    finished = _Turn("finished", expired)
    deadlines.add(finished, 0.02)  # the timer is due at its deadline ...
    deadlines.add(_Turn("running", expired, last), 0.04)
    deadlines.remove(finished)  # ... and it ends first

    await asyncio.wait_for(last.wait(), 5)

    assert expired == ["running"]


@pytest.mark.asyncio
async def test_no_timer_is_left_once_no_turn_runs() -> None:
    deadlines = TurnDeadlines(asyncio.get_running_loop())
    first, second = _Turn("a", []), _Turn("b", [])
    deadlines.add(first, 600)
    deadlines.add(second, 600)
    assert deadlines._handle is not None
    deadlines.remove(first)
    assert deadlines._handle is not None  # ``second`` still runs
    deadlines.remove(second)
    assert deadlines._handle is None


@pytest.mark.asyncio
async def test_each_loop_has_its_own_deadlines() -> None:
    loop = asyncio.get_running_loop()
    assert deadlines_for(loop) is deadlines_for(loop)
    other = asyncio.new_event_loop()
    try:
        assert deadlines_for(other) is not deadlines_for(loop)
    finally:
        other.close()
