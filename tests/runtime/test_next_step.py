"""The decision after a batch is typed data: ``RunAgain(reason)``, ``Finish`` or
``Terminate(event_ids)``."""

from __future__ import annotations

from agent_lab.application._policies import (
    Finish,
    RunAgain,
    Terminate,
    decide,
    next_step,
)
from agent_lab.application.events import (
    EventBatchResult,
    EventResult,
    EventSource,
    EventStatus,
    ResultPolicy,
)
from agent_lab.application.tools import ToolRegistry


def _result(event_id: str, policy: ResultPolicy, *, ok: bool = True) -> EventResult:
    return EventResult(
        event_id=event_id,
        event_name="t",
        status=EventStatus.SUCCESS if ok else EventStatus.FAILED,
        source=EventSource.TEXT_EVENT,
        policy=policy,
    )


def _step(*results: EventResult, user_spoke: bool = False) -> object:
    decision = decide(EventBatchResult(results=results), chat_spoke=True, registry=ToolRegistry())
    return next_step(decision, user_spoke=user_spoke)


def test_follow_up_results_run_again_to_follow_up() -> None:
    assert _step(_result("a", ResultPolicy.FOLLOW_UP)) == RunAgain("follow_up")


def test_a_failed_silent_or_template_tool_runs_again_to_correct() -> None:
    assert _step(_result("a", ResultPolicy.SILENT_SUCCESS, ok=False)) == RunAgain("corrective")
    assert _step(_result("a", ResultPolicy.TEMPLATE, ok=False)) == RunAgain("corrective")
    mixed = (_result("a", ResultPolicy.TEMPLATE, ok=False), _result("b", ResultPolicy.FOLLOW_UP))
    assert _step(*mixed) == RunAgain("follow_up")


def test_a_terminal_result_terminates_with_its_event_ids() -> None:
    steps = _step(_result("a", ResultPolicy.TERMINATE), _result("b", ResultPolicy.FOLLOW_UP))
    assert steps == Terminate(("a",))


def test_silent_success_finishes_unless_the_user_spoke_meanwhile() -> None:
    assert _step(_result("a", ResultPolicy.SILENT_SUCCESS)) == Finish()
    assert _step(_result("a", ResultPolicy.SILENT_SUCCESS), user_spoke=True) == RunAgain(
        "user_spoke"
    )
