"""Audits (with their shared request lists) and usage summaries on every store."""

from __future__ import annotations

from typing import Any

from tests.store_conformance.conformance_support import Backend, chat_metric, tool_metric

TOOLS = [{"type": "function", "function": {"name": f"tool_{i}", "description": "d" * 300}}
         for i in range(3)]  # fmt: skip


def _requests(turns: int) -> list[dict[str, Any]]:
    """Growing request audits, as a chat session writes them."""
    history: list[dict[str, Any]] = [{"role": "system", "content": "be brief " * 40}]
    requests = []
    for turn in range(1, turns + 1):
        history = [*history, {"role": "user", "content": f"question {turn} " * 30}]
        requests.append({"messages": list(history), "tools": TOOLS, "params": {"model": "m"}})
        history = [*history, {"role": "assistant", "content": f"answer {turn}"}]
    return requests


def test_request_audits_round_trip_exactly_with_lists_shared(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    requests = _requests(6)
    ids = [store.append_audit(session, turn, "chat_request", details)
           for turn, details in enumerate(requests, start=1)]  # fmt: skip
    store.append_audits(session, [(None, "note", {"text": "plain", "n": 1})])

    logs = store.list_audit_logs(session)
    assert [log["details"] for log in logs] == [*requests, {"text": "plain", "n": 1}]
    assert [log["event"] for log in logs] == ["chat_request"] * 6 + ["note"]
    assert ids == sorted(ids) and len(set(ids)) == 6
    tail = store.list_audit_logs(session, after_id=ids[3])
    assert [log["details"] for log in tail] == [*requests[4:], {"text": "plain", "n": 1}]
    third = store.list_audit_logs(session, turn_index=3)
    assert [log["details"] for log in third] == [requests[2]]


def test_audits_read_back_through_another_store(backend: Backend) -> None:
    writer, reader = backend.open(), backend.open()
    session = writer.create_session("t", {})
    requests = _requests(3)
    for details in requests:
        writer.append_audit(session, 1, "chat_request", details)
    assert [log["details"] for log in reader.list_audit_logs(session)] == requests


def test_a_huge_audit_string_is_capped_but_the_rest_is_kept(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.append_audit(session, 1, "tool_result", {"result": "x" * (2 << 20), "ok": True})
    details = store.list_audit_logs(session)[0]["details"]
    capped = details["result"]["$agent_lab_capped"]
    assert capped["original_chars"] == 2 << 20
    assert capped["head"] == "x" * 2048
    assert details["ok"] is True


def test_usage_is_upserted_by_key_and_summed_per_turn_and_session(backend: Backend) -> None:
    store = backend.open()
    session = store.create_session("t", {})
    store.start_turn(session, 1, "hi")
    store.complete_turn(session, 1, wall_time_ms=300, round_count=2)
    store.append_usages(
        session,
        [
            chat_metric(1, 1, prompt_tokens=10, completion_tokens=5, total_tokens=15, ttft_ms=40),
            tool_metric(1, 1, "c1", tool_latency_ms=7, status="succeeded"),
            chat_metric(1, 2, usage_reported=False),
        ],
    )
    store.append_usage(session, chat_metric(1, 2, prompt_tokens=20, total_tokens=20))

    summary = store.usage_summary(session)
    keys = [call["metric_key"] for call in summary["calls"]]
    assert keys == ["chat:1:1", "tool:1:1:c1", "chat:1:2"]
    assert summary["calls"][2]["prompt_tokens"] == 20
    assert summary["calls"][2]["usage_reported"] is True
    turn = summary["turns"][0]
    assert (turn["status"], turn["turn_wall_time_ms"], turn["round_count"]) == ("completed", 300, 2)
    assert (turn["model_calls"], turn["tool_count"], turn["total_tokens"]) == (2, 1, 35)
    totals = summary["session"]
    assert (totals["turn_count"], totals["prompt_tokens"]) == (1, 30)
    assert totals["turn_wall_time_ms"] == 300
    assert totals["unreported_usage_calls"] == 0
