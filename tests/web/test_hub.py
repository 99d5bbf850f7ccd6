"""The live-session hub: bounded fan-out, dropping slow consumers, idle sessions."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_lab.interfaces.lab import Lab
from agent_lab.interfaces.settings import LabSettings
from agent_lab.interfaces.web import WebOptions
from agent_lab.interfaces.web.hub import LiveSession, Outbox, SessionHub
from tests.web.web_support import lab_settings


def test_outbox_drops_instead_of_blocking() -> None:
    outbox = Outbox(2)
    assert outbox.offer("a") and outbox.offer("b")
    assert not outbox.offer("c")
    assert outbox.dropped.is_set()
    assert not outbox.offer("d")


@pytest.mark.asyncio
async def test_frames_queued_while_the_server_replays_do_not_drop_the_client() -> None:
    outbox = Outbox(2)
    with outbox.held():  # the server sends a replay past the outbox: live frames wait
        assert all(outbox.offer(f"live {n}") for n in range(5))
    assert not outbox.dropped.is_set()
    # The backlog the replay left is not the client's: on top of it, its own limit.
    assert outbox.offer("own 1") and outbox.offer("own 2")
    assert [await outbox.get() for _ in range(4)] == ["live 0", "live 1", "live 2", "live 3"]
    # What is left of that backlog shrinks as frames go: three wait, one beyond the limit.
    assert not outbox.offer("too many") and outbox.dropped.is_set()


@pytest.mark.asyncio
async def test_a_client_that_takes_no_replay_is_still_dropped() -> None:
    outbox = Outbox(2)
    with outbox.held():
        accepted = [outbox.offer(str(n)) for n in range(2 * Outbox.HELD_BUFFERS + 1)]
    assert accepted.count(True) == 2 * Outbox.HELD_BUFFERS and outbox.dropped.is_set()


async def drain_until_turn_completed(outbox: Outbox) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []
    while True:
        frame = json.loads(await outbox.get())
        frames.append(frame)
        if frame.get("message", {}).get("type") == "turn_completed":
            return frames


@pytest.mark.asyncio
async def test_a_stalled_subscriber_is_dropped_and_the_session_goes_on(
    settings: LabSettings,
) -> None:
    async with Lab(settings) as lab:
        hub = SessionHub(lab, WebOptions())
        fast = Outbox(100_000)
        stalled = Outbox(4)  # never read, like a browser that stopped reading its socket
        request = lab.request("Search for sqlite wal and set the volume to 20", session_id="bp")
        live = await hub.start(request, fast)
        live.subscribe(stalled, None, None)
        frames = await asyncio.wait_for(drain_until_turn_completed(fast), timeout=20)
        assert stalled.dropped.is_set()
        assert live.subscriber_count == 1
        offsets = [frame["offset"] for frame in frames]
        assert offsets == list(range(len(offsets)))
        await hub.aclose()
    assert not hub.live_ids()


@pytest.mark.asyncio
async def test_many_sessions_run_concurrently_in_one_hub(settings: LabSettings) -> None:
    async with Lab(settings) as lab:
        hub = SessionHub(lab, WebOptions())
        outboxes = [Outbox(100_000) for _ in range(8)]
        for index, outbox in enumerate(outboxes):
            request = lab.request("Set the volume to 30", session_id=f"many-{index}")
            await hub.start(request, outbox)
        assert len(hub.live_ids()) == 8
        results = await asyncio.wait_for(
            asyncio.gather(*(drain_until_turn_completed(o) for o in outboxes)), timeout=30
        )
        await hub.aclose()
    assert all(frames[-1]["message"]["turn_index"] == 1 for frames in results)


@pytest.mark.asyncio
async def test_an_idle_session_without_clients_is_closed(settings: LabSettings) -> None:
    async with Lab(settings) as lab:
        hub = SessionHub(lab, WebOptions(idle_seconds=0.2))
        outbox = Outbox(100_000)
        live: LiveSession = await hub.start(lab.request("hello", session_id="idle"), outbox)
        await asyncio.wait_for(drain_until_turn_completed(outbox), timeout=20)
        live.unsubscribe(outbox)
        await asyncio.wait_for(live.wait_closed(), timeout=10)
    assert not hub.live_ids()


@pytest.mark.asyncio
async def test_start_on_a_live_session_refers_to_it(settings: LabSettings) -> None:
    from agent_lab.interfaces.web.hub import SessionLive

    async with Lab(settings) as lab:
        hub = SessionHub(lab, WebOptions())
        live = await hub.start(lab.request("hello", session_id="dup"), Outbox(1000))
        with pytest.raises(SessionLive) as found:
            await hub.start(lab.request("again", session_id="dup"), Outbox(1000))
        assert found.value.live is live
        await hub.aclose()


async def _until_type(outbox: Outbox, kind: str) -> None:
    while json.loads(await outbox.get()).get("message", {}).get("type") != kind:
        pass


@pytest.mark.asyncio
async def test_stopping_the_hub_mid_turn_cancels_it_and_releases_the_session(
    lab_home: Path,
) -> None:
    from agent_lab.application.runtime import DebugRuntime
    from agent_lab.testing import ScriptedChatClient, text

    slow = lab_settings(lab_home, simulated_ttft_ms=3_000)  # slower than the test
    async with Lab(slow) as lab:
        hub = SessionHub(lab, WebOptions())
        outbox = Outbox(100_000)
        live = await hub.start(lab.request("hello", session_id="stopped"), outbox)
        await asyncio.wait_for(_until_type(outbox, "turn_started"), timeout=10)
        await asyncio.wait_for(hub.aclose(), timeout=10)
        assert live.ending and not hub.live_ids()
        assert lab.store is not None
        turns = lab.store.usage_summary("stopped")["turns"]
        assert [turn["status"] for turn in turns] == ["cancelled"]
        again = DebugRuntime(ScriptedChatClient([text("back")]), session_store=lab.store)
        async with again.session(lab.request("again", session_id="stopped")) as session:
            async for message in session:
                if message["type"] in ("turn_completed", "error"):
                    break
        assert message == {"type": "turn_completed", "turn_index": 2, "round_count": 1}


@pytest.mark.asyncio
async def test_a_start_the_runtime_refuses_closes_the_sessions_own_client(
    settings: LabSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_lab.domain.errors import InvalidRequest
    from agent_lab.interfaces.web import hub as hub_module
    from agent_lab.interfaces.web.clients import own_client as original
    from agent_lab.interfaces.web.protocol import ConnectionOverride

    made: list[Any] = []

    def recording_own_client(lab: Lab, connection: ConnectionOverride | None) -> Any:
        made.append(original(lab, connection))
        return made[-1]

    monkeypatch.setattr(hub_module, "own_client", recording_own_client)
    async with Lab(settings) as lab:
        hub = SessionHub(lab, WebOptions())
        own = ConnectionOverride(base_url=lab.base_url, api_key="sk-page-key")
        # a request built with model_copy skips validation; the runtime's own check refuses it
        request = lab.request("hello", session_id="refused").model_copy(
            update={"user_message": "half a pair \ud800"}
        )
        with pytest.raises(InvalidRequest):
            await hub.start(request, Outbox(1000), own)
        assert not hub.live_ids()
        assert len(made) == 1 and made[0].is_closed
        again = await hub.start(lab.request("hello", session_id="refused"), Outbox(1000))
        await hub.aclose()
    assert again.ending
