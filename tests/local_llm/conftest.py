"""Shared fixtures of the tests that run llama.cpp's server on the bundled SmolLM2-135M.

``local_server`` starts one real server for the whole test session (about a second
here, plus the first prompt's evaluation) and stops it at the end. Without the
``local`` extra it skips with the install hint.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_lab.infrastructure.local_llm import (
    LOCAL_INSTALL_HINT,
    LocalModelServer,
    is_local_extra_installed,
)


@pytest.fixture(scope="session")
def local_server() -> Iterator[LocalModelServer]:
    """The real llama.cpp server on the bundled model, shared by the marked tests."""
    if not is_local_extra_installed():
        pytest.skip(LOCAL_INSTALL_HINT)
    with LocalModelServer(startup_timeout=90.0) as server:
        yield server
