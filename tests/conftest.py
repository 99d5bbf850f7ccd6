"""Suite-wide hooks: the browser tests' gate (see ``browser_gate``) and the offline
guard (see ``offline_site/sitecustomize.py``): a test that tries to reach any host but
this machine fails."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from agent_lab.testing.postgres_server import PostgresServer, postgres_available
from tests.browser_gate import pytest_runtest_setup
from tests.offline_site import sitecustomize as offline

__all__ = ["pytest_configure", "pytest_runtest_setup"]

# Property tests check behaviour, not speed: on a loaded machine an example may take
# longer than hypothesis' default 200 ms deadline, and drawing inputs may be slow.
settings.register_profile("agent-lab", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("agent-lab")


def pytest_configure(config: pytest.Config) -> None:
    offline.install()
    offline.export_to_subprocesses()


@pytest.fixture(autouse=True)
def _stays_offline() -> Iterator[None]:
    """Fails the test when it tried the network, even if the code swallowed the error."""
    before = len(offline.violations)
    yield
    blocked = offline.violations[before:]
    if blocked:
        pytest.fail("\n".join(blocked), pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server for the session (the conformance and scale tests);
    without the server binaries the tests skip, unless AGENT_LAB_REQUIRE_POSTGRES=1."""
    if not postgres_available():
        hint = "PostgreSQL is not installed: sudo apt-get install postgresql"
        if os.environ.get("AGENT_LAB_REQUIRE_POSTGRES") == "1":
            pytest.fail(hint)
        pytest.skip(hint)
    with PostgresServer() as server:
        yield server
