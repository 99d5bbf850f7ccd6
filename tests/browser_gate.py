"""The gate of the browser tests (``@pytest.mark.browser``), a pytest plugin that
``tests/conftest.py`` loads for the whole suite.

They drive Debian's Chromium at ``/usr/bin/chromium`` (``AGENT_LAB_CHROMIUM`` names
another path to check). Without it they are skipped, with one summary line saying how
to enable them; with ``AGENT_LAB_REQUIRE_BROWSER=1`` (CI sets it) a missing browser
fails them instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REQUIRE_ENV = "AGENT_LAB_REQUIRE_BROWSER"
CHROMIUM_ENV = "AGENT_LAB_CHROMIUM"
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> Path:
    """The browser the browser tests need."""
    return Path(os.environ.get(CHROMIUM_ENV) or DEFAULT_CHROMIUM)


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or ``None`` when they can."""
    path = chromium_path()
    if not (path.is_file() and os.access(path, os.X_OK)):
        return f"no Chromium at {path}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser") is None:
        return
    missing = browser_missing()
    if missing is None:
        return
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"browser tests required ({REQUIRE_ENV}=1) but {missing}", pytrace=False)
    pytest.skip(
        f"browser tests skipped: {missing}; to run them install Chromium there "
        "(Debian: `sudo apt-get install chromium`, or `sudo make browser`)"
    )
