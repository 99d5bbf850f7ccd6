"""The effect ledger across workers: a call a killed worker had dispatched reaches the
model as ``unknown`` through whichever worker resumes the session, once."""

from __future__ import annotations

import json
import os
import signal
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from agent_lab.infrastructure.postgres.store import PostgresSessionStore
from tests.scale.scale_support import WorkerLab, messages_until, start

pytestmark = pytest.mark.scale

CONFIG = """
[agent_lab]
mode = "chat_agent_tools"
simulated_ttft_ms = 0.0
simulated_tokens_per_second = 0.0
"""


class _HangingSearch:
    """A search endpoint on loopback that holds every request until released."""

    def __init__(self) -> None:
        self.asked = threading.Event()
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.asked.set()
                outer.release.wait(60)
                body = json.dumps({"results": []}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/search"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join()


@pytest.fixture
def hanging_search() -> Iterator[_HangingSearch]:
    search = _HangingSearch()
    yield search
    search.close()


def _claim_pid(url: str, session_id: str) -> int | None:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT pid FROM session_claims WHERE session_id = %s", (session_id,)
        ).fetchone()
    return None if row is None else int(row[0])


def test_a_call_a_killed_worker_dispatched_is_reported_unknown_by_the_next_worker(
    tmp_path: Path, database_url: str, hanging_search: _HangingSearch
) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(CONFIG)
    env = {"AGENT_LAB_DATABASE_URL": database_url, "AGENT_LAB_SEARCH_URL": hanging_search.url}
    lab = WorkerLab(tmp_path, 2, env, "--config", str(config))
    store = PostgresSessionStore(database_url)
    try:
        request = lab.defaults()
        session_id = uuid.uuid4().hex
        with lab.socket(session_id) as first:
            start(first, request, "Search the web for the history of lighthouses.")
            assert hanging_search.asked.wait(120), "the search tool never ran"
            victim = _claim_pid(database_url, session_id)
            assert victim is not None
            os.kill(victim, signal.SIGKILL)  # while its handler waits for the answer

        (batch,) = store.list_batches(session_id)
        (dispatched,) = batch["calls"]
        assert (batch["state"], dispatched["state"]) == ("pending", "dispatched")
        assert dispatched["event"]["name"] == "knowledge.web.search"
        hanging_search.release.set()

        with lab.socket(session_id) as second:  # whichever worker the kernel picks
            start(second, request, "Did you find anything?")
            frames = messages_until(second, "turn_completed", "error")
        assert frames[-1]["type"] == "turn_completed", frames[-1]

        (abandoned,) = store.list_batches(session_id)[:1]
        assert (abandoned["state"], abandoned["calls"][0]["state"]) == ("cancelled", "unknown")
        started = [a for a in store.list_audit_logs(session_id) if a["event"] == "session_started"]
        recovered = started[-1]["details"]["recovered_calls"]
        assert [(c["batch_id"], c["status"], c["idempotency_key"]) for c in recovered] == [
            (batch["id"], "unknown", dispatched["idempotency_key"])
        ]
        assert abandoned["reported_turn"] == 2  # told once, in the resumed turn
        assert store.list_unreported_batches(session_id) == []
        assert _claim_pid(database_url, session_id) not in (None, victim)
    finally:
        store.close()
        lab.stop()
